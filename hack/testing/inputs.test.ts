// The missing-input rule: skipped outside CI, failed in CI (the mocha context is a FAKE whose skip() throws a
// marker), and no unit test skips any other way.
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tsFiles } from '../layers.js';
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

describe('hack/testing/inputs: every skip of a unit test goes through skipOrFail', () => {
  it('no this.skip(), it.skip or describe.skip in the unit folders (the ones the unit job runs)', () => {
    const root = dirname(dirname(dirname(fileURLToPath(import.meta.url))));
    const unit = ['api', 'runtime', 'cmd', 'controllers', 'webhooks', 'manifests', 'hack'];
    const found = tsFiles(root)
      .filter((f) => unit.includes(f.split('/')[0]!) && f.endsWith('.test.ts') && f !== 'hack/testing/inputs.test.ts')
      .flatMap((f) =>
        readFileSync(join(root, f), 'utf8')
          .split('\n')
          .map((line, i) => [f, i + 1, line] as const)
          .filter(([, , line]) => /\b(this|it|describe|context)\.skip\(/.test(line))
          .map(([file, n]) => `${file}:${n}`),
      );
    expect(found, 'use skipOrFail(this, why) from hack/testing/inputs.ts').to.deep.equal([]);
  });
});
