// substitute.ts against clusterctl's rules (the table); against clusterctl itself in substitute-clusterctl.test.ts,
// which needs a built clusterctl (hack/run-tests.sh runs it once v1.14's build is there).
import { expect } from 'chai';
import { listVariables, substitute } from './substitute.js';
import { cases, ours } from './testing/substitute-cases.js';

describe('manifests/substitute: clusterctl variable rules', () => {
  for (const c of cases) {
    it(c.name, () => {
      expect(ours(c)).to.deep.equal(c.want);
    });
  }

  it('lists variables with the default of their first use', () => {
    expect(listVariables('${A:=1} ${B} ${A:=2} ${C:=}')).to.deep.equal([
      { name: 'A', default: '1' },
      { name: 'B' },
      { name: 'C' },
    ]);
  });

  it('refuses operators the manifests do not use instead of guessing', () => {
    expect(() => substitute('${A:-x}', {})).to.throw(/only \$\{VAR\} and \$\{VAR:=default\}/);
  });
});
