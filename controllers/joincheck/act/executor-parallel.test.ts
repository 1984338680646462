// The executor's Machine writes at once (issue 37 item 4), against a FAKE apiserver of many Machines whose replies
// take a while (unit test): N marks in about one round trip instead of N, never more than the bound at once, one live
// Cluster read for all of them; and the rules under concurrency — every withdrawal settled before the first mark, a
// 409 mid-batch re-read and decided again alone (no write in flight while its decision is made and recorded, the
// Cluster read again before the next write), a lost leadership mid-batch: no write after it.
import { expect } from 'chai';
import { clusterV1beta2, ms, T3 } from '../../../api/capi/testdata/fixtures.js';
import { ApiError, type Json, type RestClient } from '../../../runtime/client/rest.js';
import { execute, MACHINE_WRITES_AT_ONCE } from './executor.js';
import type { ExecutorDeps } from './deps.js';
import { Refusals } from './refusals.js';
import type { SnapshotSource } from '../types.js';
import {
  cachedOf,
  fakeCheck,
  fakeDeps,
  names,
  openRequest,
  putStatus,
  snapshotSource,
  worker,
} from '../testing/executor-fakes.js';

const NS = '/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines';
const CHECK = '/apis/joinguard.io/v1alpha1/namespaces/default/machinejoinchecks/workers';
const CLUSTER = '/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters/c1';
const NOW = ms(T3) + 30 * 60_000; // every worker's join clock started at T3: 10 minutes past its deadline
const RTT = 40; // ms a Machine write takes to be answered

/** A worker; joined and carrying JoinGuard's mark (waiting for remediation) when asked. */
function machine(name: string, o: { joinedWithMark?: boolean } = {}): Json {
  return worker(name, o.joinedWithMark ? { ownerReason: 'WaitingForRemediation', ownerMessage: '' } : undefined);
}

/** Many Machines; every Machine write answered after RTT ms; a log of when each request starts and is answered. */
class SlowApi {
  readonly machines = new Map<string, Json>();
  check: Json;
  /** `> PATCH md-0-01/status` when sent, `< ...` when answered (`! ...` refused); GET and PUT as they are made. */
  readonly log: string[] = [];
  writesAllowed = true;
  inFlight = 0;
  maxInFlight = 0;
  /** Called once a Machine write is answered (its name): a test changes the world there. */
  answered: (name: string) => void = () => undefined;

  constructor(ms: Json[], requests: Json[] = []) {
    for (const m of ms) this.machines.set(m.metadata.name, m);
    this.check = fakeCheck(
      {
        maxInFlight: 100,
        remediation: { maxPerOwner: 100 },
        suspicion: { consecutiveJoinFailures: 0 },
        neverJoinedLimit: 0,
      },
      {
        finalizers: ['joinguard.io/withdraw-marks'],
        annotations: { 'clusterctl.cluster.x-k8s.io/block-move': 'joinguard.io' },
      },
      requests.length > 0 ? { requests } : {},
    );
  }

  private allowed(what: string): void {
    if (!this.writesAllowed) {
      this.log.push(`! ${what}`);
      throw Object.assign(new Error('leadership lost'), { name: 'WritesForbiddenError' });
    }
  }

  rest(): RestClient {
    const nameOf = (path: string) => path.slice(NS.length + 1).split('/')[0]!;
    return {
      get: async (path: string) => {
        this.log.push(`GET ${path.startsWith(NS) ? nameOf(path) : path === CLUSTER ? 'cluster' : 'check'}`);
        if (path === CLUSTER) return clusterV1beta2();
        if (path === CHECK) return structuredClone(this.check);
        const m = this.machines.get(nameOf(path));
        if (m) return structuredClone(m);
        throw new ApiError(404, 'GET', path, 'not found');
      },
      put: async (path: string, body: Json) => {
        this.allowed('PUT status');
        this.log.push('> PUT status');
        this.check = putStatus(this.check, path, body);
        await new Promise((r) => setTimeout(r, RTT));
        this.log.push('< PUT status');
        return structuredClone(this.check);
      },
      mergePatch: async (path: string, body: Json) => {
        if (path === CHECK) {
          this.allowed('PATCH check');
          this.log.push('PATCH check');
          const meta = { ...this.check.metadata, ...body.metadata };
          meta.resourceVersion = String(Number(this.check.metadata.resourceVersion) + 1);
          this.check = { ...this.check, metadata: meta };
          return structuredClone(this.check);
        }
        const what = `PATCH ${path.slice(NS.length + 1)}`;
        this.allowed(what);
        this.log.push(`> ${what}`);
        this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
        try {
          await new Promise((r) => setTimeout(r, RTT));
          const m = this.machines.get(nameOf(path))!;
          if (body.metadata?.resourceVersion !== m.metadata.resourceVersion)
            throw new ApiError(409, 'PATCH', path, 'modified');
          if (path.endsWith('/status')) m.status = { ...m.status, conditions: body.status.conditions };
          m.metadata.resourceVersion = String(Number(m.metadata.resourceVersion) + 1);
          return structuredClone(m);
        } finally {
          this.inFlight--;
          this.log.push(`< ${what}`);
          this.answered(nameOf(path));
        }
      },
    } as unknown as RestClient;
  }

  marked(): string[] {
    return [...this.machines.values()]
      .filter((m) =>
        (m.status.conditions as Json[]).some((c) => c.type === 'HealthCheckSucceeded' && c.status === 'False'),
      )
      .map((m) => m.metadata.name as string);
  }

  /** Index in the log of the first entry that matches. */
  first(f: (e: string) => boolean, from = 0): number {
    const i = this.log.findIndex((e, n) => n >= from && f(e));
    return i;
  }
}

function source(api: SlowApi, cached = cachedOf(api)): SnapshotSource {
  return snapshotSource(cached, NOW);
}

function run(api: SlowApi, o: Partial<ExecutorDeps> = {}, cached = cachedOf(api)) {
  const { events, deps } = fakeDeps(api.rest(), new Refusals(), NOW, o);
  return { events, result: execute(deps, source(api, cached)) };
}

describe('executor: Machine writes at once (fake apiserver that takes its time)', () => {
  it(`${MACHINE_WRITES_AT_ONCE} marks go out together: about one round trip, not ${MACHINE_WRITES_AT_ONCE}; one live Cluster read for all; one event per mark`, async () => {
    const api = new SlowApi(names(MACHINE_WRITES_AT_ONCE).map((n) => machine(n)));
    const { events, result } = run(api);
    await result;
    expect(api.marked()).to.have.length(MACHINE_WRITES_AT_ONCE);
    expect(api.maxInFlight, 'all in flight at once').to.equal(MACHINE_WRITES_AT_ONCE);
    // One round, read from the order of the log (not the wall clock, which a busy machine stretches): every mark was
    // sent before the first one was answered.
    const sent = api.log.flatMap((e, i) => (e.startsWith('> PATCH md-0') ? [i] : []));
    expect(Math.max(...sent), 'every mark sent before the first answer').to.be.below(
      api.first((e) => e.startsWith('< PATCH md-0')),
    );
    expect(
      api.log.filter((e) => e === 'GET cluster'),
      'one live Cluster read for every write',
    ).to.have.length(1);
    const wa = api.first((e) => e === '< PUT status');
    expect(
      api.first((e) => e.startsWith('> PATCH md-0')),
      'the write-ahead answered before any Machine write',
    ).to.be.greaterThan(wa);
    expect(events.filter((e) => e.reason === 'RemediationRequested')).to.have.length(MACHINE_WRITES_AT_ONCE);
  });

  it('never more at once than the bound: 40 marks in rounds of the bound; one at a time when told', async () => {
    const api = new SlowApi(names(40).map((n) => machine(n)));
    await run(api).result;
    expect(api.marked()).to.have.length(40);
    expect(api.maxInFlight).to.equal(MACHINE_WRITES_AT_ONCE);
    const one = new SlowApi(names(4).map((n) => machine(n)));
    await run(one, { machineWritesAtOnce: 1 }).result;
    expect(one.marked()).to.have.length(4);
    expect(one.maxInFlight).to.equal(1);
  });

  it('every withdrawal is answered before the first mark goes out (withdrawals go first)', async () => {
    const joined = names(5, 50);
    const api = new SlowApi(
      [...names(20).map((n) => machine(n)), ...joined.map((n) => machine(n, { joinedWithMark: true }))],
      joined.map(openRequest),
    );
    await run(api).result;
    const firstMark = api.first((e) => e.startsWith('> PATCH md-0-') && !joined.some((j) => e.includes(j)));
    const lastWithdrawal = Math.max(...joined.map((j) => api.log.lastIndexOf(`< PATCH ${j}/status`)));
    expect(lastWithdrawal, 'withdrawals made').to.be.greaterThan(-1);
    expect(firstMark, 'the first mark after the last withdrawal is answered').to.be.greaterThan(lastWithdrawal);
    expect(api.maxInFlight, 'the withdrawals at once too').to.equal(MACHINE_WRITES_AT_ONCE);
    expect(api.marked()).to.have.length(20);
  });

  it('a 409 mid-batch: the Machine is re-read and decided again alone — no write in flight meanwhile — its new decision recorded, and the Cluster read again before the next write, once for all of them', async () => {
    const api = new SlowApi(names(6).map((n) => machine(n)));
    const cached = cachedOf(api);
    // md-0-01 joined before the caches saw it: its mark meets a 409, its re-read shows the join, its request goes.
    const b = api.machines.get('md-0-01')!;
    b.status.nodeRef = { name: 'node-md-0-01' };
    b.metadata.resourceVersion = String(Number(b.metadata.resourceVersion) + 1);
    const { events, result } = run(api, { machineWritesAtOnce: 2 }, cached);
    await result;
    expect(api.marked().sort()).to.deep.equal(['md-0-00', 'md-0-02', 'md-0-03', 'md-0-04', 'md-0-05']);
    const reread = api.first((e) => e === 'GET md-0-01');
    const recorded = api.first(
      (e) => e === '< PUT status',
      api.first((e) => e === '> PUT status', reread),
    );
    expect(reread, 'read again after its 409').to.be.greaterThan(api.first((e) => e === '< PATCH md-0-01/status'));
    expect(recorded, 'its new decision recorded').to.be.greaterThan(reread);
    // Alone: every write sent before the re-read was answered before it, and none went out until it was recorded.
    const during = api.log.slice(0, recorded + 1);
    const sent = during.filter((e) => e.startsWith('> PATCH')).length;
    const answered = api.log.slice(0, reread).filter((e) => e.startsWith('< PATCH')).length;
    expect(sent, 'no write sent while it was decided and recorded').to.equal(answered);
    const next = api.first((e) => e.startsWith('> PATCH'), recorded);
    expect(next, 'writes go on after it').to.be.greaterThan(recorded);
    expect(
      api.first((e) => e === 'GET cluster', recorded),
      'the Cluster read again first',
    ).to.be.within(recorded, next);
    expect(
      api.log.slice(recorded).filter((e) => e === 'GET cluster'),
      'one Cluster read shared by the writes that wait for it',
    ).to.have.length(1);
    const request = (api.check.status.requests as Json[]).find((r) => r.machine === 'md-0-01');
    expect(request?.state ?? 'dropped', 'its request no longer open').to.not.equal('Open');
    expect(events.filter((e) => e.reason === 'RemediationRequested')).to.have.length(5);
  });

  it('leadership lost mid-batch: no write after it; the pass ends with the loss', async () => {
    const api = new SlowApi(names(40).map((n) => machine(n)));
    let lostAt = -1;
    api.answered = () => {
      if (lostAt < 0 && api.log.filter((e) => e.startsWith('< PATCH')).length === 3) {
        api.writesAllowed = false; // the Lease is lost: the REST client refuses every write from now on
        lostAt = api.log.length;
      }
    };
    await run(api).result.then(
      () => expect.fail('the pass fails'),
      (e: Error) => expect(e.name).to.equal('WritesForbiddenError'),
    );
    expect(lostAt).to.be.greaterThan(0);
    expect(
      api.log.slice(lostAt).filter((e) => e.startsWith('> ')),
      'nothing sent after the loss',
    ).to.deep.equal([]);
    expect(api.log.filter((e) => e.startsWith('! ')).length, 'one refused attempt closes the gate').to.equal(1);
    expect(api.marked(), 'only the writes sent before it').to.have.length(
      api.log.slice(0, lostAt).filter((e) => e.startsWith('> PATCH')).length,
    );
  });
});
