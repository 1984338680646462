// The planner and the executor together, over random histories of a small fleet in an in-memory world (a FAKE of
// the apiserver and CAPI's owners: testing/world.ts): creations, provisioning, joins (also just before and after
// deadlines), timeouts, owner deferrals, deletions, MHC marks, condition flickers, connection loss, resumes and
// skip annotations; writes that fail (5xx, 409), are lost (applied, the answer lost) or crash the controller
// between any two writes, with restarts from persisted status and caches that lag. After every step:
//   1. no Machine carries more JoinGuard marks than maxInFlight allows;
//   2. per owner, no more requests than maxPerOwner within the window (exact, from status, above any list bound);
//   3. no Machine uid asked twice (never marked again once withdrawn; uids unique in status.requests);
//   4. every mark is written after the request that causes it is in status (write-ahead);
//   5. while suspected, only canaries (join timeouts), at the cadence;
//   6. planning twice changes nothing; a restarted controller decides the same;
//   7. once the executor converges, no mark JoinGuard caused remains on a joined Machine.
// Seeded and reproducible: PROPERTY_SEED=<seed> (printed) replays a run, PROPERTY_REPLAY=<counterexample JSON>
// replays one history; PROPERTY_RUNS sets the count.
import { AssertionError, expect } from 'chai';
import fc from 'fast-check';
import type { RemediationStrategy } from '../../api/v1alpha1/types.js';
import { silentLogger } from '../runtime/logger.js';
import { execute } from './executor.js';
import { readMachine } from '../../api/capi/readers.js';
import { anyMark, causedMarks } from './marks.js';
import { plan } from './planner.js';
import { HOUR, MINUTE, SECOND, T0, mhcFacts } from './testing/builders.js';
import { Cache, Crash, World, type Fault } from './testing/world.js';
import { ms } from './time.js';
import type { Plan } from './types.js';

type Step =
  | { k: 'advance'; ms: number }
  | { k: 'reconcile'; faults: Fault[] }
  | { k: 'create'; owner: 'ms-a' | 'ms-b' }
  | { k: 'provision'; i: number; lag: number }
  | { k: 'join'; i: number }
  | { k: 'owner' }
  | { k: 'gone'; i: number }
  | { k: 'mhc'; healthy: boolean }
  | { k: 'flicker'; i: number }
  | { k: 'connection'; up: boolean }
  | { k: 'resume'; value: string }
  | { k: 'unannotate' }
  | { k: 'withdrawAll'; on: boolean }
  | { k: 'skip'; i: number }
  | { k: 'defer'; on: boolean }
  | { k: 'sync' }
  | { k: 'restart' };

interface Setup {
  strategy: RemediationStrategy;
  mhc: boolean;
  maxInFlight: number;
  maxPerOwner: number;
  consecutiveJoinFailures: number;
  neverJoinedLimit: number;
  dryRun: boolean;
  initial: number;
}

const WINDOW = HOUR;

const setupArb: fc.Arbitrary<Setup> = fc.record({
  strategy: fc.constantFrom<RemediationStrategy>('Auto', 'OwnerRemediated', 'MachineCondition', 'Delete'),
  mhc: fc.boolean(),
  maxInFlight: fc.integer({ min: 1, max: 3 }),
  maxPerOwner: fc.integer({ min: 1, max: 3 }),
  consecutiveJoinFailures: fc.constantFrom(0, 2, 3),
  neverJoinedLimit: fc.constantFrom(0, 3),
  dryRun: fc.constantFrom(false, false, false, true),
  initial: fc.integer({ min: 1, max: 5 }),
});

const idx = fc.nat({ max: 20 });
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: SECOND, max: MINUTE }), fc.integer({ min: MINUTE, max: 15 * MINUTE })) }) },
  { weight: 8, arbitrary: fc.record({ k: fc.constant('reconcile' as const), faults: fc.array(fc.constantFrom<Fault>('ok', 'ok', 'ok', 'fail', 'conflict', 'lost', 'crash'), { maxLength: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('create' as const), owner: fc.constantFrom<'ms-a' | 'ms-b'>('ms-a', 'ms-b') }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('provision' as const), i: idx, lag: fc.integer({ min: 0, max: 5 * MINUTE }) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('join' as const), i: idx }) },
  { weight: 3, arbitrary: fc.constant({ k: 'owner' as const }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('gone' as const), i: idx }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('mhc' as const), healthy: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('flicker' as const), i: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('connection' as const), up: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('resume' as const), value: fc.constantFrom('a', 'b') }) },
  { weight: 1, arbitrary: fc.constant({ k: 'unannotate' as const }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('withdrawAll' as const), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('skip' as const), i: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('defer' as const), on: fc.boolean() }) },
  { weight: 2, arbitrary: fc.constant({ k: 'sync' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'restart' as const }) },
);

const SEED = process.env['PROPERTY_SEED'] !== undefined ? Number(process.env['PROPERTY_SEED']) : Math.floor(Math.random() * 2 ** 31);
const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 2000);
let histories = 0;
let steps = 0;
/** What the histories exercised (so a green run can be told from an idle one). */
const seen = { marks: 0, withdrawals: 0, crashes: 0, faults: 0, suspicions: 0, resumes: 0, budgetStops: 0, withdrawAlls: 0, plansWithSettledOut: 0, partitionChecks: 0 };

/** One controller process: its caches and in-process view, gone with a crash or a restart. */
class Controller {
  cache: Cache;
  constructor(private readonly w: World) {
    this.cache = new Cache(w);
  }

  /** One reconcile; returns the plan it acted on (undefined when it failed or crashed). */
  async reconcile(): Promise<Plan | undefined> {
    const r = await execute(
      {
        rest: this.w.rest(),
        apiVersion: 'v1beta2',
        log: silentLogger(),
        emit: () => undefined,
        writeMetric: () => undefined,
        remember: (kind, raw) => this.cache.remember(kind, raw),
        ...(this.cache.lastStatusWrite !== undefined ? { lastStatusWrite: this.cache.lastStatusWrite } : {}),
        now: () => this.w.t,
      },
      {
        // Every snapshot the executor plans on: the settled partition changes nothing against a plan over every Machine.
        build: (live) => {
          const s = this.cache.build(live);
          const all = this.cache.build(live, false);
          if (s !== undefined && all !== undefined) samePlan(plan(s), plan(all));
          return s;
        },
      },
    );
    if (r.statusWrittenAt !== undefined) this.cache.lastStatusWrite = r.statusWrittenAt;
    if (r.plan) {
      this.cache.previous = r.plan.view;
      this.cache.consumed();
      if (r.plan.settledInScope > 0) seen.plansWithSettledOut++;
    }
    return r.plan;
  }
}

async function run(setup: Setup, history: Step[]): Promise<void> {
  histories++;
  const spec = {
    clusterName: 'c1',
    selector: { matchLabels: { pool: 'a' } },
    joinTimeout: '10m',
    provisionTimeout: '30m',
    maxInFlight: setup.maxInFlight,
    remediation: { strategy: setup.strategy, maxPerOwner: setup.maxPerOwner, window: '1h' },
    suspicion: { consecutiveJoinFailures: setup.consecutiveJoinFailures, probeInterval: '5m', maxProbeInterval: '20m' },
    neverJoinedLimit: setup.neverJoinedLimit,
    dryRun: setup.dryRun,
  };
  const mhc = setup.mhc || setup.strategy === 'MachineCondition' ? mhcFacts('mhc', { selector: { matchLabels: { pool: 'a' } }, watchesJoinGuardCondition: setup.strategy === 'MachineCondition' }) : undefined;
  const w = new World(T0, spec, mhc ? { mhc } : {});
  const valid = new Cache(w).build({ machines: new Map() });
  if (valid?.settings === undefined) throw new Error(`the property's spec is invalid: ${valid?.settingsError}`);
  const joinedAtStart = w.create('ms-a');
  w.provision(joinedAtStart, T0);
  w.join(joinedAtStart);
  for (let i = 0; i < setup.initial; i++) w.create(i % 2 === 0 ? 'ms-a' : 'ms-b');
  let c = new Controller(w);
  const requestTimes = new Map<string, { t: number; owner: string }>();
  const pick = (i: number) => {
    const all = w.live();
    return all.length === 0 ? undefined : all[i % all.length];
  };

  for (const step of history) {
    steps++;
    const before = structuredClone(w.check.status ?? {});
    switch (step.k) {
      case 'advance':
        w.t += step.ms;
        break;
      case 'reconcile': {
        w.faults = [...step.faults];
        seen.faults += step.faults.filter((f) => f !== 'ok').length;
        try {
          const p = await c.reconcile();
          if (p !== undefined) checkPlanning(c, w);
          if (p?.status.suspicion !== undefined && before.suspicion === undefined) seen.suspicions++;
          if (p?.status.lastResume?.time !== before.lastResume?.time) seen.resumes++;
          if ((p?.status.conditions ?? []).some((x) => x.reason === 'RemediationBudgetExhausted')) seen.budgetStops++;
        } catch (e) {
          // A failed request is part of the history; a broken invariant (checked inside) is the test failing.
          if (e instanceof AssertionError) throw e;
          if (e instanceof Crash) {
            seen.crashes++;
            c = new Controller(w); // the process died; a new one starts from status
          }
        }
        w.faults = [];
        break;
      }
      case 'create':
        w.create(step.owner);
        break;
      case 'provision': {
        const m = pick(step.i);
        if (m && !m.status.initialization.infrastructureProvisioned) w.provision(m, w.t - step.lag);
        break;
      }
      case 'join': {
        const m = pick(step.i);
        if (m && !m.metadata.deletionTimestamp && m.status.initialization.infrastructureProvisioned) w.join(m);
        break;
      }
      case 'owner':
        w.ownerStep();
        break;
      case 'gone': {
        const m = pick(step.i);
        if (m) w.gone(m);
        break;
      }
      case 'mhc':
        w.mhcStep(step.healthy);
        break;
      case 'flicker': {
        const m = pick(step.i);
        if (m) w.flicker(m);
        break;
      }
      case 'connection':
        w.connection(step.up);
        break;
      case 'resume':
        w.annotateCheck('joinguard.io/resume', step.value);
        break;
      case 'unannotate':
        w.annotateCheck('joinguard.io/resume', undefined);
        break;
      case 'withdrawAll':
        w.annotateCheck('joinguard.io/withdraw-all', step.on ? '' : undefined);
        if (step.on) seen.withdrawAlls++;
        break;
      case 'skip': {
        const m = pick(step.i);
        if (m) w.skip(m);
        break;
      }
      case 'defer':
        w.deferring = step.on;
        break;
      case 'sync':
        c.cache.sync();
        break;
      case 'restart':
        c = new Controller(w);
        break;
    }
    if (process.env['PROPERTY_DEBUG']) console.log(JSON.stringify(step), new Date(w.t).toISOString(), JSON.stringify({ sus: w.check.status?.suspicion, cjf: w.check.status?.consecutiveJoinFailures, req: w.check.status?.requests?.map((r: any) => [r.machine, r.state, r.canary, r.time]), obs: w.check.status?.observations, machines: w.live().map((m) => [m.metadata.name, !!m.status.nodeRef, m.status.initialization.infrastructureProvisioned, !!m.metadata.deletionTimestamp]) }));
    checkWorld(w, setup, before, requestTimes, step);
  }
  // At the end of every history: converged, nothing JoinGuard caused is left on a joined Machine.
  await checkConverged(w, c);
  seen.marks += w.firstMarks.length;
  seen.withdrawals += w.withdrawnUids.size;
}

/** Invariants 1-5, on the world after each step. */
function checkWorld(w: World, setup: Setup, before: Record<string, any>, requestTimes: Map<string, { t: number; owner: string }>, step: Step): void {
  const where = `at ${new Date(w.t).toISOString()} after ${JSON.stringify(step)}`;
  expect(w.violations, where).to.deep.equal([]);
  const flying = w.inFlight();
  expect(flying.length, `in flight ${flying.join(', ')} ${where}`).to.be.at.most(setup.maxInFlight);
  const status = w.check.status ?? {};
  const requests: any[] = status.requests ?? [];
  // A resume restarts the per-owner window: requests before it (even in the same second) no longer count.
  if (status.lastResume !== undefined && (status.lastResume.time !== before.lastResume?.time || status.lastResume.value !== before.lastResume?.value)) {
    for (const [uid, x] of requestTimes) requestTimes.set(uid, { ...x, owner: `${x.owner} (before a resume)` });
  }
  expect(new Set(requests.map((r) => r.uid)).size, `uids unique in status.requests ${where}`).to.equal(requests.length);
  for (const r of requests) {
    if (r.state !== 'Open' || requestTimes.has(r.uid)) continue;
    requestTimes.set(r.uid, { t: ms(r.time)!, owner: r.owner?.name ?? '' });
    // While suspected, a new join-timeout request is a canary, made no sooner than the cadence allows.
    // (The same suspicion before and after the step: a join may clear one, and a new one starts with rebuilds.)
    const s = before.suspicion;
    if (s !== undefined && s.since === status.suspicion?.since && r.kind === 'JoinTimeout') {
      expect(r.canary, `only canaries while suspected ${where}`).to.equal(true);
      expect(ms(r.time)!, `canary cadence ${where}`).to.be.at.least(Math.min(ms(s.nextCanaryTime)!, ms(s.since)! + 20 * MINUTE));
    }
  }
  // Per owner, requests inside any window (since the last resume) never exceed maxPerOwner.
  for (const owner of ['ms-a', 'ms-b']) {
    const times = [...requestTimes.values()].filter((x) => x.owner === owner).map((x) => x.t).sort((a, b) => a - b);
    for (let i = 0; i + setup.maxPerOwner < times.length; i++) {
      expect(times[i + setup.maxPerOwner]! - times[i]!, `maxPerOwner ${setup.maxPerOwner} for ${owner} ${where}`).to.be.at.least(WINDOW);
    }
  }
}

/** Invariant 6: planning twice changes nothing; a restart (no in-process view) decides the same. */
function checkPlanning(c: Controller, w: World): void {
  const s = c.cache.build({ machines: new Map(), cluster: w.cluster, check: w.check });
  if (s === undefined) return;
  const p = plan(s);
  const again = plan({ ...s, check: { ...s.check, status: JSON.parse(JSON.stringify(p.status)) }, previous: p.view });
  expect(JSON.parse(JSON.stringify(again.events)), 'planning twice emits nothing').to.deep.equal([]);
  expect(JSON.parse(JSON.stringify(again.status)), 'planning twice changes no status').to.deep.equal(JSON.parse(JSON.stringify(p.status)));
  const { previous: _view, ...fresh } = s;
  const r = plan(fresh);
  const decisions = (x: Plan) => ({ intents: JSON.parse(JSON.stringify(x.intents)), requests: x.status.requests, suspicion: x.status.suspicion, windows: x.status.ownerWindows });
  expect(decisions(r), 'a restart decides the same').to.deep.equal(decisions(p));
}

/** Invariant 8: a plan that counts settled Machines writes, intends and emits what a plan over every Machine does. */
function samePlan(p: Plan, all: Plan): void {
  const json = (x: unknown) => JSON.parse(JSON.stringify(x));
  expect(json(p.status), 'the settled partition changes the status').to.deep.equal(json(all.status));
  expect(json(p.intents), 'the settled partition changes the intents').to.deep.equal(json(all.intents));
  expect(json(p.events), 'the settled partition changes the events').to.deep.equal(json(all.events));
  seen.partitionChecks++;
}

/** Invariant 7: once the executor converges (no faults, caches current), no joined Machine carries JoinGuard's mark. */
async function checkConverged(w: World, _c: Controller): Promise<void> {
  const c = new Controller(w);
  for (let i = 0; i < 4; i++) {
    c.cache.sync();
    const writes = w.writes;
    await c.reconcile();
    if (w.writes === writes) break;
  }
  const requests = new Map<string, string>((w.check.status?.requests ?? []).map((r: any) => [r.uid, r.path]));
  for (const m of w.live()) {
    if (!m.status.nodeRef || m.metadata.deletionTimestamp) continue;
    const f = readMachine(m, 'v1beta2');
    const path = w.annotatedByJoinGuard.has(f.uid) ? 'RemediateAnnotation' : requests.get(f.uid);
    const marks = causedMarks(f, path as never);
    expect(marks, `joined ${f.name} still carries JoinGuard's mark once converged`).to.deep.equal({ healthCheck: false, annotation: false, condition: false });
  }
  // Under joinguard.io/withdraw-all, once converged no Machine at all (but those being deleted) carries one.
  if (w.check.metadata.annotations?.['joinguard.io/withdraw-all'] !== undefined) {
    for (const m of w.live()) {
      if (m.metadata.deletionTimestamp) continue;
      const f = readMachine(m, 'v1beta2');
      const path = w.annotatedByJoinGuard.has(f.uid) ? 'RemediateAnnotation' : requests.get(f.uid);
      expect(anyMark(causedMarks(f, path as never)), `${f.name} still carries JoinGuard's mark under withdraw-all`).to.equal(false);
    }
  }
  expect(w.violations).to.deep.equal([]);
}

describe('planner and executor: properties over random histories (seeded)', function () {
  this.timeout(600_000);

  after(() => {
    console.log(`      property: seed ${SEED}, ${histories} histories, ${steps} steps (replay: PROPERTY_SEED=${SEED}); exercised: ${JSON.stringify(seen)}`);
  });

  // A counterexample printed by a failed run can be replayed alone: PROPERTY_REPLAY='<its JSON>'.
  const replay = process.env['PROPERTY_REPLAY'];
  if (replay !== undefined) {
    it('replays PROPERTY_REPLAY', async () => {
      const [setup, history] = JSON.parse(replay) as [Setup, Step[]];
      await run(setup, history);
    });
  }

  it('keeps every invariant, after every step, whatever fails and whenever it crashes', async () => {
    await fc.assert(
      fc.asyncProperty(setupArb, fc.array(stepArb, { minLength: 20, maxLength: 120, size: 'max' }), (setup, history) => run(setup, history)),
      { seed: SEED, numRuns: RUNS, verbose: 1 },
    );
  });
});
