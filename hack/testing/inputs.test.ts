// The missing-input rule: skipped outside CI, failed in CI. The mocha context is a FAKE (a skip() that records).
import { expect } from 'chai';
import { goModuleDir, inCI, skipOrFail } from './inputs.js';

class Skipped extends Error {}
const fakeContext = () =>
  ({
    skip: () => {
      throw new Skipped();
    },
  }) as unknown as Mocha.Context;

describe('hack/testing/inputs: a missing input', () => {
  it('skips outside CI (CI unset, empty, 0 or false)', () => {
    for (const CI of [undefined, '', '0', 'false', 'FALSE']) {
      expect(inCI({ CI }), String(CI)).to.equal(false);
      expect(() => skipOrFail(fakeContext(), 'no CRDs', { CI })).to.throw(Skipped);
    }
  });

  it('fails in CI, naming what is missing', () => {
    for (const CI of ['true', '1', 'yes']) {
      expect(inCI({ CI }), CI).to.equal(true);
      expect(() => skipOrFail(fakeContext(), 'no CRDs at /x', { CI }))
        .to.throw(/missing test input in CI.*no CRDs at \/x/)
        .and.not.be.instanceOf(Skipped);
    }
  });

  it("module folders are escaped as Go's module cache names them", () => {
    expect(goModuleDir('sigs.k8s.io/cluster-api', 'v1.14.2')).to.match(/\/sigs\.k8s\.io\/cluster-api@v1\.14\.2$/);
    expect(goModuleDir('github.com/Azure/go-x', 'v1.0.0-RC1')).to.match(/\/github\.com\/!azure\/go-x@v1\.0\.0-!r!c1$/);
  });
});
