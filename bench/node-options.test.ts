// The runtime settings (V8's heap flags in NODE_OPTIONS, glibc's allocator variables) have two homes a user sees,
// the image and the Deployment, and the bench runs JoinGuard with the Deployment's by default: the three must
// say the same, or the benchmark measures another process.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { deployedMallocEnv, deployedNodeOptions, deployedRuntime, runtimeSetting } from './controller-process.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const dockerfile = () => fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');

describe("bench: JoinGuard's Node flags as deployed", () => {
  it("the Deployment's NODE_OPTIONS is the image's, and the bench's default", () => {
    const image = /^ENV NODE_OPTIONS=(.+)$/m.exec(dockerfile())?.[1]?.trim();
    expect(image, 'Dockerfile sets ENV NODE_OPTIONS').to.be.a('string').and.not.equal('');
    expect(deployedNodeOptions()).to.equal(image);
    expect(runtimeSetting(deployedRuntime()).flags.join(' ')).to.equal(image);
  });

  it("the Deployment's allocator variables are the image's, and the bench's default", () => {
    const image = Object.fromEntries(
      [...dockerfile().matchAll(/^ENV ((?:MALLOC_[A-Z_]+|GLIBC_TUNABLES))=(\S+)\s*$/gm)].map((m) => [m[1]!, m[2]!]),
    );
    expect(deployedMallocEnv()).to.deep.equal(image);
    expect(runtimeSetting(deployedRuntime()).env).to.deep.equal(image);
  });

  it('a setting is environment words, then Node flags', () => {
    expect(runtimeSetting('MALLOC_ARENA_MAX=2 MALLOC_TRIM_THRESHOLD_=1048576 --max-semi-space-size=2')).to.deep.equal({
      env: { MALLOC_ARENA_MAX: '2', MALLOC_TRIM_THRESHOLD_: '1048576' },
      flags: ['--max-semi-space-size=2'],
    });
    expect(runtimeSetting('--max-semi-space-size=2')).to.deep.equal({ env: {}, flags: ['--max-semi-space-size=2'] });
    expect(runtimeSetting('')).to.deep.equal({ env: {}, flags: [] });
  });
});
