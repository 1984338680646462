// The floors of the house: no import cycle between top-level folders in product code; runtime/ (the Kubernetes
// client, informers, queue, servers, TLS reloader) stands below both controllers/ and webhooks/, which never import
// each other; product code never reaches test tooling (e2e/, bench/, hack/).
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { dirname } from 'node:path';
import { cycles, folderArrows, tsFiles } from './layers.js';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const product = (f: string) => !f.endsWith('.test.ts') && !f.includes('/testing/');

describe('hack/layers: top-level folders', () => {
  const arrows = folderArrows(root, tsFiles(root).filter(product));

  it('no import cycle between top-level folders (product code)', () => {
    expect(cycles(arrows)).to.deep.equal([]);
  });

  it('runtime/ imports api/ only: no arrow runs back up to controllers/, webhooks/ or cmd/', () => {
    expect([...(arrows.get('runtime') ?? [])]).to.deep.equal(['api']);
    expect(arrows.get('controllers')).to.include('runtime');
    expect(arrows.get('webhooks')).to.include('runtime');
  });

  it('controllers/ and webhooks/ never import each other (each stands on runtime/ and api/ alone)', () => {
    expect([...(arrows.get('controllers') ?? [])]).to.not.include('webhooks');
    expect([...(arrows.get('webhooks') ?? [])]).to.not.include('controllers');
  });

  it('product code never imports e2e/, bench/ or hack/ (test tooling stays out of what ships)', () => {
    for (const folder of ['api', 'runtime', 'controllers', 'webhooks', 'cmd', 'manifests']) {
      const to = [...(arrows.get(folder) ?? [])];
      for (const tooling of ['e2e', 'bench', 'hack']) expect(to, folder).to.not.include(tooling);
    }
  });

  it('the cycle finder finds a cycle (a proof that can fail)', () => {
    const g = new Map([
      ['a', new Set(['b'])],
      ['b', new Set(['c'])],
      ['c', new Set(['a'])],
      ['d', new Set(['a'])],
    ]);
    expect(cycles(g)).to.deep.equal([['a', 'b', 'c', 'a']]);
    expect(
      cycles(
        new Map([
          ['a', new Set(['b'])],
          ['b', new Set<string>()],
        ]),
      ),
    ).to.deep.equal([]);
  });
});
