// The V8 heap setting has two homes a user sees, the image and the Deployment, and the bench runs JoinGuard
// with the Deployment's by default: the three must say the same, or the benchmark measures another process.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { deployedNodeOptions } from './controller-process.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');

describe("bench: JoinGuard's Node flags as deployed", () => {
  it("the Deployment's NODE_OPTIONS is the image's, and the bench's default", () => {
    const dockerfile = fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    const image = /^ENV NODE_OPTIONS=(.+)$/m.exec(dockerfile)?.[1]?.trim();
    expect(image, 'Dockerfile sets ENV NODE_OPTIONS').to.be.a('string').and.not.equal('');
    expect(deployedNodeOptions()).to.equal(image);
  });
});
