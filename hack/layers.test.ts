// The floors of the house: no import cycle between top-level folders in product code; runtime/ (the Kubernetes
// client, informers, queue, servers, TLS reloader) stands below both controllers/ and webhooks/, which never import
// each other; product code never reaches test tooling (e2e/, bench/, hack/).
// Tests too (issue 36), the allowed directions:
//   product tests (*.test.ts and */testing/ in api/, runtime/, controllers/, webhooks/, cmd/, manifests/)
//       -> product folders, testing/                         never bench/ or e2e/
//   testing/ (the shared fakes: the in-memory apiserver, its CAPI fleet, its TLS)
//       -> api/, runtime/                                    never bench/, e2e/, hack/ or a product test folder
//   bench/ -> testing/ (the in-memory apiserver), product folders, hack/, e2e/support, controllers/joincheck/testing
//   e2e/, hack/ -> product folders (and each other: e2e/ -> hack/testenv)
// and, tests included, no cycle runs through bench/, e2e/ or testing/.
// Inside controllers/joincheck/ and runtime/ (issue 36 item 3), the rooms by the way data flows; a room imports only
// rooms on lower floors (none on its own), top floor first:
//   controllers/joincheck/   controller.ts (the wiring)
//                            world/ (caches, snapshot, machine index, workload access) | act/ (executor, live reads,
//                              Machine writes, refusals, events) — neither imports the other
//                            plan/ (the planner and its stages)
//                            report/ (conditions, counts, timed, metrics)
//                            guards/ (stops, suspicion, failures, budgets)
//                            requests/ (paths, marks, deletion)
//                            rules/ (per-Machine judge, first control plane, rollout suspect, connection) | memory/
//                            types.ts | time.ts | words.ts (shared by all; import no room)
//     its tests: any room but controller.ts, and testing/; testing/ (the property world): any room but controller.ts.
//   runtime/                 leader.ts | informers/ (informer, watch stream, queue, back-off)
//                            client/ (REST, kubeconfig, discovery) | serving/ (servers, TLS) | metrics.ts | logger.ts
//     its tests: any room, and runtime/testing/; runtime/testing/: client/ alone.
import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { dirname } from 'node:path';
import { cycles, folderArrows, isTest, PRODUCT, roomOf, tsFiles, upArrows } from './layers.js';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const product = (f: string) => !isTest(f);

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
    for (const folder of PRODUCT) {
      const to = [...(arrows.get(folder) ?? [])];
      for (const tooling of ['e2e', 'bench', 'hack', 'testing']) expect(to, folder).to.not.include(tooling);
    }
  });

  it('isTest: test files and testing/ folders at any depth, nothing else', () => {
    expect(['a/b.test.ts', 'testing/world.ts', 'controllers/joincheck/testing/oracle.ts'].map(isTest)).to.deep.equal([
      true,
      true,
      true,
    ]);
    expect(['controllers/testing-gate.ts', 'runtime/client/rest.ts', 'bench/micro/micro.ts'].map(isTest)).to.deep.equal(
      [false, false, false],
    );
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

describe('hack/layers: tests too (issue 36)', () => {
  const files = tsFiles(root);
  const productTests = files.filter((f) => isTest(f) && (PRODUCT as readonly string[]).includes(f.split('/')[0]!));
  const testsOf = folderArrows(root, productTests);
  const all = folderArrows(root, files);

  it('no product test imports bench/ or e2e/ (the in-memory apiserver comes from testing/)', () => {
    expect(productTests.length).to.be.greaterThan(50);
    const offending = PRODUCT.flatMap((folder) =>
      [...(testsOf.get(folder) ?? [])].filter((to) => to === 'bench' || to === 'e2e').map((to) => `${folder} -> ${to}`),
    );
    expect(offending).to.deep.equal([]);
    // Not vacuous: product tests do use the shared home.
    expect(testsOf.get('controllers')).to.include('testing');
  });

  it('testing/ stands on api/ and runtime/ alone', () => {
    expect([...(all.get('testing') ?? [])].filter((to) => to !== 'api' && to !== 'runtime')).to.deep.equal([]);
    expect(all.get('bench')).to.include('testing');
  });

  it('tests included, no cycle runs through bench/, e2e/ or testing/', () => {
    const tooling = new Set(['bench', 'e2e', 'testing']);
    expect(cycles(all).filter((c) => c.some((f) => tooling.has(f)))).to.deep.equal([]);
  });
});

describe('hack/layers: rooms inside controllers/joincheck/ and runtime/ (issue 36)', () => {
  const files = tsFiles(root);
  const inside = (r: string) => r.endsWith('/') || r.endsWith('.ts');
  const JOINCHECK = 'controllers/joincheck';
  const JOINCHECK_FLOORS = [
    ['controller.ts'],
    ['world/', 'act/'],
    ['plan/'],
    ['report/'],
    ['guards/'],
    ['requests/'],
    ['rules/', 'memory/'],
    ['types.ts', 'time.ts', 'words.ts'],
  ];
  const RUNTIME_FLOORS = [
    ['leader.ts', 'informers/'],
    ['client/', 'serving/', 'metrics.ts', 'logger.ts'],
  ];
  const under = (base: string) => files.filter((f) => f.startsWith(base + '/'));
  const roomsOf = (base: string, test: boolean) =>
    folderArrows(
      root,
      under(base).filter((f) => isTest(f) === test && !f.startsWith(`${base}/testing/`)),
      roomOf(base),
    );

  it('controllers/joincheck/: product code imports only rooms on lower floors', () => {
    const arrows = roomsOf(JOINCHECK, false);
    expect(upArrows(arrows, JOINCHECK_FLOORS, inside)).to.deep.equal([]);
    // Not vacuous: the floors are used.
    expect(arrows.get('plan/')).to.include.members(['report/', 'guards/', 'requests/', 'rules/', 'memory/']);
    expect(arrows.get('act/')).to.include('plan/');
  });

  it('runtime/: product code imports only rooms on lower floors', () => {
    const arrows = roomsOf('runtime', false);
    expect(upArrows(arrows, RUNTIME_FLOORS, inside)).to.deep.equal([]);
    expect(arrows.get('informers/')).to.include('client/');
  });

  it('no room holds more than 12 source files', () => {
    const count = new Map<string, number>();
    for (const base of [JOINCHECK, 'runtime']) {
      for (const f of under(base).filter((f) => !isTest(f))) {
        const r = `${base}/${roomOf(base)(f)}`;
        if (r.endsWith('/')) count.set(r, (count.get(r) ?? 0) + 1);
      }
    }
    expect([...count].filter(([, n]) => n > 12)).to.deep.equal([]);
    expect(count.size).to.be.greaterThan(8);
  });

  it('tests: joincheck tests and testing/ never import controller.ts (the wiring); runtime/testing/ stands on client/', () => {
    const tests = folderArrows(root, under(JOINCHECK).filter(isTest), roomOf(JOINCHECK));
    const wiring = [...tests].filter(([, to]) => to.has('controller.ts')).map(([from]) => from);
    expect(wiring).to.deep.equal([]);
    expect(tests.get('testing/')).to.include('plan/');
    const runtimeTests = folderArrows(root, under('runtime').filter(isTest), roomOf('runtime'));
    expect([...(runtimeTests.get('testing/') ?? [])].filter(inside)).to.deep.equal(['client/']);
  });

  it('upArrows finds an arrow up, one along a floor and a room on no floor (a proof that can fail)', () => {
    const g = new Map([
      ['a/', new Set(['b/', 'api'])],
      ['b/', new Set(['a/', 'c/'])],
      ['c/', new Set(['b/'])],
      ['d.ts', new Set<string>()],
    ]);
    expect(upArrows(g, [['a/'], ['b/', 'c/']], inside)).to.deep.equal([
      'b/ -> a/',
      'b/ -> c/',
      'c/ -> b/',
      'd.ts: on no floor',
    ]);
  });
});
