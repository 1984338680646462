// The executor against a FAKE apiserver of several Machines (unit test; the real apiserver with a real admission
// webhook is e2e/faults/refused-write.test.ts): each Machine converges on its own. A write refused for one Machine
// (403, a policy webhook's 422, the conditions list at maxItems, any error but 404/409) is reported and retried
// with back-off, and never holds back another Machine's mark or withdrawal; withdrawals go first; a lost
// leadership still stops everything at once.
import { expect } from 'chai';
import { clusterV1beta2, ms, T3 } from '../../../api/capi/testdata/fixtures.js';
import { ApiError, type Json, type RestClient } from '../../../runtime/client/rest.js';
import { execute } from './executor.js';
import type { ExecutorDeps } from './deps.js';
import { Refusals } from './refusals.js';
import type { SnapshotSource } from '../types.js';
import {
  cachedOf,
  fakeCheck,
  fakeDeps,
  openRequest,
  putStatus,
  snapshotSource,
  worker,
} from '../testing/executor-fakes.js';

const NS = '/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines';
const CHECK = '/apis/joinguard.io/v1alpha1/namespaces/default/machinejoinchecks/workers';
const NOW = ms(T3) + 30 * 60_000; // every worker's join clock started at T3: 10 minutes past its deadline
const DENIED = 'admission webhook "machines.policy.example.com" denied the request: Machine md-0-a is frozen by policy';

/** A worker; joined and carrying JoinGuard's mark (deferred by maxInFlight, generation 2) when asked. */
function machine(name: string, o: { joinedWithMark?: boolean } = {}): Json {
  return worker(
    name,
    o.joinedWithMark
      ? { ownerReason: 'RemediationDeferred', ownerMessage: 'maxInFlight', observedGeneration: 2 }
      : undefined,
  );
}

class FakeApi {
  readonly machines = new Map<string, Json>();
  check: Json;
  readonly calls: string[] = [];
  /** Decides a Machine write: an error to throw, or undefined to apply it. */
  refuse: (name: string, path: string) => Error | undefined = () => undefined;
  /** The check's status writes are refused with this, for good (RBAC on /status, an admission policy, a size limit). */
  statusRefused: Error | undefined;
  /** The Cluster as a live GET returns it: paused from when this is set. */
  clusterPaused = false;

  constructor(ms: Json[], requests: Json[] = []) {
    for (const m of ms) this.machines.set(m.metadata.name, m);
    this.check = fakeCheck(
      { maxInFlight: 5, suspicion: { consecutiveJoinFailures: 0 } },
      { annotations: { 'clusterctl.cluster.x-k8s.io/block-move': 'joinguard.io' } },
      requests.length > 0 ? { requests } : {},
    );
  }

  machineWrites(): string[] {
    return this.calls.filter((c) => c.startsWith(`PATCH ${NS}/`)).map((c) => c.slice(`PATCH ${NS}/`.length));
  }

  rest(): RestClient {
    const nameOf = (path: string) => path.slice(NS.length + 1).split('/')[0]!;
    return {
      get: async (path: string) => {
        this.calls.push(`GET ${path}`);
        if (path.endsWith('/clusters/c1')) {
          const c = clusterV1beta2();
          if (this.clusterPaused) c.spec.paused = true;
          return c;
        }
        if (path === CHECK) return structuredClone(this.check);
        const m = this.machines.get(nameOf(path));
        if (path.startsWith(NS) && m) return structuredClone(m);
        throw new ApiError(404, 'GET', path, 'not found');
      },
      put: async (path: string, body: Json) => {
        this.calls.push(`PUT ${path}`);
        if (this.statusRefused !== undefined) throw this.statusRefused;
        this.check = putStatus(this.check, path, body);
        return structuredClone(this.check);
      },
      mergePatch: async (path: string, body: Json) => {
        if (path === CHECK) {
          this.calls.push(`PATCH ${path}`);
          this.check = {
            ...this.check,
            metadata: {
              ...this.check.metadata,
              ...body.metadata,
              annotations: this.check.metadata.annotations,
              resourceVersion: String(Number(this.check.metadata.resourceVersion) + 1),
            },
          };
          return structuredClone(this.check);
        }
        const name = nameOf(path);
        const refused = this.refuse(name, path);
        if (refused) throw refused;
        this.calls.push(`PATCH ${path}`);
        const m = this.machines.get(name)!;
        if (body.metadata?.resourceVersion !== m.metadata.resourceVersion)
          throw new ApiError(409, 'PATCH', path, 'modified');
        if (path.endsWith('/status')) m.status = { ...m.status, conditions: body.status.conditions };
        if (body.metadata?.annotations) {
          const a = { ...(m.metadata.annotations ?? {}), ...body.metadata.annotations };
          for (const [k, v] of Object.entries(a)) if (v === null) delete a[k];
          m.metadata.annotations = a;
        }
        m.metadata.resourceVersion = String(Number(m.metadata.resourceVersion) + 1);
        return structuredClone(m);
      },
    } as unknown as RestClient;
  }
}

/** A SnapshotSource like the controller's, the writes refused so far in its snapshots. */
function source(api: FakeApi, refusals: Refusals, now: number, cached = cachedOf(api)): SnapshotSource {
  return snapshotSource(cached, now, () => refusals.list());
}

function run(api: FakeApi, refusals: Refusals, now = NOW, o: Partial<ExecutorDeps> = {}, cached = cachedOf(api)) {
  const { events, deps } = fakeDeps(api.rest(), refusals, now, o);
  return { events, result: execute(deps, source(api, refusals, now, cached)) };
}

const healthCheck = (m: Json | undefined) =>
  (m?.status.conditions as Json[]).find((c) => c.type === 'HealthCheckSucceeded');

describe('executor: each Machine converges on its own (fake apiserver)', () => {
  for (const [what, err] of [
    ['a policy webhook answers 422', new ApiError(422, 'PATCH', 'x', DENIED)],
    [
      'RBAC or a webhook answers 403',
      new ApiError(403, 'PATCH', 'x', 'machines.cluster.x-k8s.io "md-0-a" is forbidden: frozen'),
    ],
    [
      'the conditions list is at its maxItems',
      new ApiError(
        422,
        'PATCH',
        'x',
        'Machine.cluster.x-k8s.io "md-0-a" is invalid: status.conditions: Too many: 33: must have at most 32 items',
      ),
    ],
    ['the apiserver answers 500', new ApiError(500, 'PATCH', 'x', 'etcdserver: request timed out')],
  ] as const) {
    it(`${what} for one Machine: a joined Machine of the same check still loses its mark; the refused one is reported`, async () => {
      const api = new FakeApi(
        [machine('md-0-a'), machine('md-0-b', { joinedWithMark: true })],
        [openRequest('md-0-b')],
      );
      api.refuse = (name) => (name === 'md-0-a' ? err : undefined);
      const refusals = new Refusals();
      const { events, result } = run(api, refusals);
      const r = await result;
      expect(healthCheck(api.machines.get('md-0-b'))).to.include({ status: 'True' });
      expect(events.map((e) => `${e.reason} ${e.on === 'Machine' ? e.machine.name : ''}`)).to.include.members([
        'RemediationWithdrawn md-0-b',
        'WriteRefused md-0-a',
      ]);
      expect(events.find((e) => e.reason === 'WriteRefused')?.message).to.contain(err.reason.slice(0, 40));
      expect(refusals.list().map((x) => ({ machine: x.machine, write: x.write, code: x.code }))).to.deep.equal([
        { machine: 'md-0-a', write: 'mark', code: err.code },
      ]);
      expect(r.requeueAfterMs, 'retried after its back-off').to.equal(1000);
    });
  }

  it("the check's own status write refused for good (403 on /status): a joined Machine still loses its mark, pass after pass; nothing is marked without its write-ahead", async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-b', { joinedWithMark: true })], [openRequest('md-0-b')]);
    api.statusRefused = new ApiError(
      403,
      'PUT',
      `${CHECK}/status`,
      'machinejoinchecks.joinguard.io "workers" is forbidden: User cannot update resource "machinejoinchecks/status"',
    );
    const refusals = new Refusals();
    const failed = await run(api, refusals).result.then(
      () => undefined,
      (e: Error) => e,
    );
    expect(failed?.message, "the refusal is the pass's error (retried with back-off)").to.contain('forbidden');
    expect(healthCheck(api.machines.get('md-0-b'))).to.include({ status: 'True' });
    expect(healthCheck(api.machines.get('md-0-a')), 'no mark without its record').to.equal(undefined);
    // The next pass (the status still refused, the stored request still open): nothing is marked again.
    await run(api, refusals, NOW + 60_000).result.catch(() => undefined);
    expect(healthCheck(api.machines.get('md-0-b'))).to.include({ status: 'True' });
    expect(healthCheck(api.machines.get('md-0-a'))).to.equal(undefined);
  });

  // issue 35 item 8: a withdrawal that rests on something undone later (here a skip annotation) waits for its record
  // while the check's status is refused: written unrecorded, a restart would find the request open and mark it again.
  it("the check's status refused: a withdrawal that needs its record (a skip annotation) waits for it", async () => {
    const skipped = machine('md-0-c', { joinedWithMark: true });
    delete skipped.status.nodeRef; // marked, not joined: opted out by the user
    skipped.metadata.annotations = { ...(skipped.metadata.annotations ?? {}), 'joinguard.io/skip': '' };
    const api = new FakeApi([skipped], [openRequest('md-0-c')]);
    api.statusRefused = new ApiError(403, 'PUT', `${CHECK}/status`, 'forbidden');
    await run(api, new Refusals()).result.catch(() => undefined);
    expect(healthCheck(api.machines.get('md-0-c')), 'kept until the withdrawal is recorded').to.include({
      status: 'False',
    });
  });

  it('withdrawals go first, before any mark', async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-z', { joinedWithMark: true })], [openRequest('md-0-z')]);
    await run(api, new Refusals()).result;
    // z's withdrawal before a's mark, each one write (a's marker inside its mark).
    expect(api.machineWrites()).to.deep.equal(['md-0-z/status', 'md-0-a/status']);
  });

  it('a refused Machine is retried with back-off, doubling, and reported in the Progressing message until its write goes through', async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-b')]);
    let refuse = true;
    api.refuse = (name) => (refuse && name === 'md-0-a' ? new ApiError(422, 'PATCH', 'x', DENIED) : undefined);
    const refusals = new Refusals();
    await run(api, refusals).result;
    expect(healthCheck(api.machines.get('md-0-b'))).to.include({ status: 'False', reason: 'JoinTimeout' });
    // Within its back-off the Machine is not written again; the status now says why it carries no mark.
    const before = api.machineWrites().length;
    await run(api, refusals, NOW + 500).result;
    expect(api.machineWrites().length).to.equal(before);
    const progressing = (api.check.status.conditions as Json[]).find((c) => c.type === 'Progressing');
    expect(progressing!.message).to.contain('md-0-a').and.contain('refused').and.contain('machines.policy.example.com');
    // After it: tried again (refused again: the back-off doubles), then it goes through and the report ends.
    const second = await run(api, refusals, NOW + 1000).result;
    expect(refusals.list()[0]).to.include({ attempts: 2 });
    expect(second.requeueAfterMs).to.equal(2000);
    refuse = false;
    await run(api, refusals, NOW + 3000).result;
    expect(healthCheck(api.machines.get('md-0-a'))).to.include({ status: 'False', reason: 'JoinTimeout' });
    expect(refusals.list()).to.deep.equal([]);
    await run(api, refusals, NOW + 9000).result;
    const after = (api.check.status.conditions as Json[]).find((c) => c.type === 'Progressing');
    expect(after!.message).to.not.contain('refused');
  });

  it('a lost leadership still stops everything at once: no other Machine is written', async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-b', { joinedWithMark: true })], [openRequest('md-0-b')]);
    api.refuse = () => Object.assign(new Error('leadership lost'), { name: 'WritesForbiddenError' });
    await run(api, new Refusals()).result.then(
      () => expect.fail('the reconcile fails'),
      (e: Error) => expect(e.name).to.equal('WritesForbiddenError'),
    );
    expect(api.machineWrites()).to.deep.equal([]);
  });

  // issue 35, 3: a request whose mark is refused for good was never made; it must not hold maxInFlight (DESIGN: a
  // refused write never holds back another Machine's mark). It is still reported and retried — and once it stops
  // counting, its retry waits for the budget like any new request (never two in flight with maxInFlight 1).
  it('a mark refused for good does not hold maxInFlight: the next stuck Machine is marked; the refused one, retried, waits for the budget', async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-b')]);
    api.check.spec.maxInFlight = 1;
    let refuse = true;
    api.refuse = (name) =>
      refuse && name === 'md-0-a'
        ? new ApiError(403, 'PATCH', 'x', 'machines "md-0-a" is forbidden: frozen')
        : undefined;
    const refusals = new Refusals();
    await run(api, refusals).result;
    expect(healthCheck(api.machines.get('md-0-a')), 'refused').to.equal(undefined);
    await run(api, refusals, NOW + 70 * 60_000).result;
    expect(healthCheck(api.machines.get('md-0-b')), 'not held by the refused request').to.include({
      status: 'False',
      reason: 'JoinTimeout',
    });
    const progressing = (api.check.status.conditions as Json[]).find((c) => c.type === 'Progressing');
    expect(progressing!.reason).to.not.equal('RemediationBudgetExhausted');
    expect(
      refusals.list().map((x) => x.machine),
      'still reported',
    ).to.deep.equal(['md-0-a']);
    // The refusal ends while md-0-b is in flight: md-0-a's mark waits for the budget.
    refuse = false;
    await run(api, refusals, NOW + 80 * 60_000).result;
    expect(healthCheck(api.machines.get('md-0-a')), 'never two in flight with maxInFlight 1').to.equal(undefined);
  });

  // issue 35, 1, after the 409 loop: a Machine's 409 changes a decision, which is recorded (a status PUT) before the
  // next Machine is written; another Machine that joined while that PUT was in flight, its Node cached meanwhile, is
  // written as the plan judged it — guarded by the resourceVersion judged, so its 409 leaves it alone.
  it('after a 409 re-decision is recorded, a Machine that joined during that status write is not marked', async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-b')]);
    const cached = cachedOf(api);
    const bump = (m: Json) => (m.metadata.resourceVersion = String(Number(m.metadata.resourceVersion) + 1));
    const a = api.machines.get('md-0-a')!;
    a.status.nodeRef = { name: 'node-md-0-a' }; // joined before the cache saw it: its mark meets a 409
    bump(a);
    const rest = api.rest();
    let puts = 0;
    const during: RestClient = {
      ...rest,
      put: async (path: string, body: Json) => {
        const r = await rest.put(path, body);
        if (++puts === 2) {
          // The second status write (a's request withdrawn): b gets its Node and the cache has it before b's mark.
          const b = api.machines.get('md-0-b')!;
          b.status.nodeRef = { name: 'node-md-0-b' };
          bump(b);
          cached.machines = cached.machines.map((m) => (m.metadata.name === 'md-0-b' ? structuredClone(b) : m));
        }
        return r;
      },
    } as unknown as RestClient;
    // One write at a time: b is written after a's re-decision (at once, b goes out beside a, before its join: the
    // concurrent case is in executor-parallel.test.ts).
    const { events, result } = run(api, new Refusals(), NOW, { rest: during, machineWritesAtOnce: 1 }, cached);
    await result;
    expect(puts, 'the re-decision recorded').to.be.at.least(2);
    expect(healthCheck(api.machines.get('md-0-a')), 'a not marked').to.equal(undefined);
    expect(healthCheck(api.machines.get('md-0-b')), 'b not marked').to.equal(undefined);
    expect(events.map((e) => e.reason)).to.not.include('RemediationRequested');
  });

  // The same 409, but its new decision cannot be recorded (the status PUT refused): nothing more is written in the pass.
  // The plan at hand was made on older Machines than the snapshot the re-read rebuilt (seed 191426184: a joined
  // Machine deleted): b, joined while that PUT was in flight and cached so, would be written guarded by its new version.
  it('after a 409 whose re-decision cannot be recorded, no other Machine is written in that pass', async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-b')]);
    const cached = cachedOf(api);
    const bump = (m: Json) => (m.metadata.resourceVersion = String(Number(m.metadata.resourceVersion) + 1));
    const a = api.machines.get('md-0-a')!;
    a.status.nodeRef = { name: 'node-md-0-a' }; // joined before the cache saw it: its mark meets a 409
    bump(a);
    const rest = api.rest();
    let puts = 0;
    const during: RestClient = {
      ...rest,
      put: async (path: string, body: Json) => {
        if (++puts === 2) {
          // The re-decision's record (a's request withdrawn) refused; b joined meanwhile and the cache has it.
          const b = api.machines.get('md-0-b')!;
          b.status.nodeRef = { name: 'node-md-0-b' };
          bump(b);
          cached.machines = cached.machines.map((m) => (m.metadata.name === 'md-0-b' ? structuredClone(b) : m));
          throw new ApiError(500, 'PUT', path, 'etcdserver: request timed out');
        }
        return rest.put(path, body);
      },
    } as unknown as RestClient;
    const { events, result } = run(api, new Refusals(), NOW, { rest: during, machineWritesAtOnce: 1 }, cached);
    await result;
    expect(puts, 'the re-decision tried').to.be.at.least(2);
    expect(
      api.calls.filter((c) => c.includes('md-0-b')),
      'b not written',
    ).to.deep.equal([]);
    expect(events.map((e) => e.reason)).to.not.include('RemediationRequested');
  });

  // The one rule for the Cluster: any write of the check makes the Cluster read before it stale. Here a's 409 changes
  // a decision, recorded by a status PUT while the Cluster is paused: b, next, is written only on a Cluster read after.
  it('after a 409 re-decision is recorded while the Cluster is paused, the next Machine is not marked (the Cluster read again)', async () => {
    const api = new FakeApi([machine('md-0-a'), machine('md-0-b')]);
    const cached = cachedOf(api);
    const a = api.machines.get('md-0-a')!;
    a.status.nodeRef = { name: 'node-md-0-a' }; // joined before the cache saw it: its mark meets a 409
    a.metadata.resourceVersion = String(Number(a.metadata.resourceVersion) + 1);
    const rest = api.rest();
    let puts = 0;
    const during: RestClient = {
      ...rest,
      put: async (path: string, body: Json) => {
        const r = await rest.put(path, body);
        if (++puts === 2) api.clusterPaused = true; // paused while a's withdrawn request was recorded
        return r;
      },
    } as unknown as RestClient;
    // One write at a time (at once, b goes out beside a, on the Cluster read before the pause).
    const { result } = run(api, new Refusals(), NOW, { rest: during, machineWritesAtOnce: 1 }, cached);
    await result;
    expect(puts, 'the re-decision recorded').to.be.at.least(2);
    const second = api.calls.indexOf(`PUT ${CHECK}/status`, api.calls.indexOf(`PUT ${CHECK}/status`) + 1);
    expect(
      api.calls.slice(second).some((c) => c.endsWith('/clusters/c1')),
      'the Cluster read again',
    ).to.equal(true);
    expect(healthCheck(api.machines.get('md-0-b')), 'b not marked').to.equal(undefined);
  });
});
