// substitute.ts against clusterctl's rules, and against clusterctl itself when one is at hand.
import { expect } from 'chai';
import { parse } from 'yaml';
import { clusterctlSubstitute, findClusterctl } from './clusterctl.js';
import { listVariables, MissingVariablesError, substitute } from './substitute.js';

interface Case {
  name: string;
  text: string;
  vars: Record<string, string>;
  want: Record<string, unknown> | { missing: string[] };
}

const cases: Case[] = [
  { name: '${VAR} set', text: 'a: ${A}\n', vars: { A: 'x' }, want: { a: 'x' } },
  { name: '${VAR} unset is refused, naming it', text: 'a: ${A}\n', vars: {}, want: { missing: ['A'] } },
  { name: '${VAR} set but empty is used (empty)', text: 'a: "${A}"\n', vars: { A: '' }, want: { a: '' } },
  { name: '${VAR:=default} unset takes the default', text: 'a: ${A:=dflt}\n', vars: {}, want: { a: 'dflt' } },
  { name: '${VAR:=default} empty takes the default', text: 'a: ${A:=dflt}\n', vars: { A: '' }, want: { a: 'dflt' } },
  { name: '${VAR:=default} set wins', text: 'a: ${A:=dflt}\n', vars: { A: 'v' }, want: { a: 'v' } },
  {
    name: 'default with : and / (an image)',
    text: 'a: ${IMG:=ghcr.io/x/y:v0.1.0}\n',
    vars: {},
    want: { a: 'ghcr.io/x/y:v0.1.0' },
  },
  { name: 'inside a longer value', text: 'a: pre-${A:=mid}-post\n', vars: {}, want: { a: 'pre-mid-post' } },
  { name: 'legacy whitespace ${ VAR }', text: 'a: ${ A }\n', vars: { A: 'x' }, want: { a: 'x' } },
  {
    name: 'every missing variable is named, sorted',
    text: 'a: ${B}\nb: ${A}\nc: ${C:=1}\n',
    vars: {},
    want: { missing: ['A', 'B'] },
  },
  { name: '$$ escapes a dollar', text: 'a: "$${A}"\n', vars: { A: 'x' }, want: { a: '${A}' } },
  { name: 'a lone $ is text', text: 'a: "x$y"\n', vars: {}, want: { a: 'x$y' } },
  { name: 'two uses, one default each', text: 'a: ${A:=1}\nb: ${A:=1}\n', vars: { A: '2' }, want: { a: 2, b: 2 } },
];

function ours(c: Case): Record<string, unknown> | { missing: string[] } {
  try {
    return parse(substitute(c.text, c.vars)) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof MissingVariablesError) return { missing: [...e.missing].sort() };
    throw e;
  }
}

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

  describe('agrees with clusterctl generate yaml', function () {
    let clusterctl: string | undefined;
    before(async function () {
      clusterctl = await findClusterctl();
      if (!clusterctl) this.skip(); // hack/testenv/build.sh builds it; without it only the table above runs
    });
    for (const c of cases) {
      it(c.name, async () => {
        let theirs: unknown;
        try {
          theirs = parse(await clusterctlSubstitute(clusterctl!, c.text, c.vars));
        } catch (e) {
          const m = /value for variables \[([^\]]*)\] is not set/.exec((e as Error).message);
          if (!m) throw e;
          theirs = { missing: m[1]!.split(', ') };
        }
        expect(ours(c)).to.deep.equal(theirs);
      });
    }
  });
});
