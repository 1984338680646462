// substitute.ts against clusterctl itself (`clusterctl generate yaml`), case by case (testing/substitute-cases.ts).
// Needs a built clusterctl ($JOINGUARD_CLUSTERCTL, or hack/testenv/build.sh's v1.14 folder): hack/run-tests.sh runs
// this file as a job that waits for v1.14's build, not in the unit job; without clusterctl it is skipped, and fails
// in CI (hack/testing/inputs.ts).
import { expect } from 'chai';
import { parse } from 'yaml';
import { skipOrFail } from '../hack/testing/inputs.js';
import { clusterctlSubstitute, findClusterctl } from './clusterctl.js';
import { cases, ours } from './testing/substitute-cases.js';

describe('manifests/substitute agrees with clusterctl generate yaml', function () {
  let clusterctl: string | undefined;
  before(async function () {
    clusterctl = await findClusterctl();
    if (!clusterctl) skipOrFail(this, 'no clusterctl ($JOINGUARD_CLUSTERCTL, or hack/testenv/build.sh builds it)');
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
