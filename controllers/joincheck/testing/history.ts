// The histories of the property test (test-only): the setups and steps fast-check draws, one JoinGuard process
// (caches, in-process view, endpoint probe) over the in-memory world, and the run of one history with the oracle's
// verdict after every step. property.test.ts drives it and adds the product's own consistency checks.
import fc from 'fast-check';
import type { RemediationStrategy } from '../../../api/v1alpha1/types.js';
import { silentLogger } from '../../../runtime/logger.js';
import { execute } from '../act/executor.js';
import { Refusals } from '../act/refusals.js';
import { HOUR, MINUTE, SECOND } from '../time.js';
import type { Plan, Snapshot, Live } from '../types.js';
import type { Json } from '../../../runtime/client/rest.js';
import { Cache } from './cache.js';
import { isProvisioned } from './objects.js';
import { kcpStep, machineSetStep, mhcStep } from './owners.js';
import { count, World, type Fault, type WorldSetup } from './world.js';
import { editSpec, move, pause, relabel, SELECTORS } from './world-changes.js';

export type Step =
  | { k: 'advance'; ms: number }
  | { k: 'reconcile'; faults: Fault[]; races: number }
  | { k: 'create'; owner: 'ms-a' | 'ms-b' }
  | { k: 'provision'; i: number; lag: number }
  | { k: 'join'; i: number }
  | { k: 'joinLate'; i: number }
  | { k: 'initialize'; lag: number }
  | { k: 'owner' }
  | { k: 'kcp' }
  | { k: 'gone'; i: number }
  | { k: 'mhc'; healthy: boolean }
  | { k: 'flicker'; i: number }
  | { k: 'connection'; up: boolean }
  | { k: 'endpoint'; answers: boolean }
  | { k: 'resume'; value: string }
  | { k: 'unannotate' }
  | { k: 'withdrawAll'; on: boolean }
  | { k: 'skip'; i: number }
  | { k: 'defer'; on: boolean }
  | { k: 'refuse'; i: number; code: 403 | 422 }
  | { k: 'unrefuse' }
  | { k: 'deliver'; i: number }
  | { k: 'sync' }
  | { k: 'restart' }
  | { k: 'failover' }
  | { k: 'deleteCheck' }
  | { k: 'recreateCheck' }
  | { k: 'refuseStatus' }
  | { k: 'unrefuseStatus' }
  | { k: 'selector'; which: number }
  | { k: 'relabel'; i: number; pool: 'a' | 'b' }
  | { k: 'budget'; maxInFlight: number; maxPerOwner: number; window: '30m' | '1h' | '2h' }
  | { k: 'pause'; what: 'cluster' | 'check' | 'mhc' }
  | { k: 'unpause'; what: 'cluster' | 'check' | 'mhc' }
  | { k: 'move' }
  // Armed for the next reconcile (testing/world.ts): a Machine joins, the Cluster is paused, or the control plane
  // reports initialized right after its write-ahead, and its caches see it before its Machine writes; the object as
  // it was before a write reaches the writer's caches after the write's answer.
  | { k: 'joinMidway'; i: number }
  | { k: 'pauseMidway' }
  | { k: 'initializeMidway' }
  | { k: 'staleAfterWrite'; n: number }
  // The owners' and the MachineHealthCheck's clocks a few seconds behind or ahead of the world's from now on.
  | { k: 'ownerClock'; ms: number };

export interface Setup {
  release: 'v1.14' | 'v1.10';
  strategy: RemediationStrategy;
  /** none; an MHC that only answers the annotation (nodeStartupTimeout 0); one with its own startup timeout. */
  mhc: 'none' | 'annotation' | 'timeout';
  selectsControlPlane: boolean;
  maxInFlight: number;
  maxPerOwner: number;
  consecutiveJoinFailures: number;
  neverJoinedLimit: number;
  dryRun: boolean;
  firstControlPlane: 'Remediate' | 'Report';
  provisionTimeout: boolean;
  initialized: boolean;
  initial: number;
  kcpReplicas: number;
  kcpMaxRetry: number | null;
  kcpRetryPeriodSeconds: number;
  mdMaxInFlight: number | null;
  /**
   * Who can never join once the history starts: nobody; the workers (an expired join credential: the suspicion and
   * its canaries); the Machines of ms-b, the MachineDeployment's newest revision (a broken template: RolloutSuspect).
   */
  neverJoin?: 'none' | 'workers' | 'ms-b';
  /** A calm history: nobody resumes, pauses, moves, deletes the check or edits it (the suspicion runs its course). */
  calm?: boolean;
}

/** The steps a calm history leaves out. */
export const DISRUPTIVE: ReadonlySet<Step['k']> = new Set([
  'resume',
  'withdrawAll',
  'deleteCheck',
  'recreateCheck',
  'refuseStatus',
  'selector',
  'relabel',
  'budget',
  'pause',
  'move',
  'skip',
  'refuse',
  'pauseMidway',
]);

export const WINDOW = HOUR;
export const JOIN_TIMEOUT = 10 * MINUTE;
export const PROVISION_TIMEOUT = 30 * MINUTE;
/** A joined Machine with JoinGuard's mark is clean after this many clean passes that see the join. */
export const PASSES = 2;

export const setupArb: fc.Arbitrary<Setup> = fc.record({
  release: fc.constantFrom<Setup['release']>('v1.14', 'v1.14', 'v1.10'),
  strategy: fc.constantFrom<RemediationStrategy>('Auto', 'OwnerRemediated', 'MachineCondition', 'Delete'),
  mhc: fc.constantFrom<Setup['mhc']>('none', 'annotation', 'annotation', 'timeout'),
  selectsControlPlane: fc.boolean(),
  maxInFlight: fc.integer({ min: 1, max: 3 }),
  maxPerOwner: fc.integer({ min: 1, max: 3 }),
  consecutiveJoinFailures: fc.constantFrom(0, 2, 3),
  neverJoinedLimit: fc.constantFrom(0, 3),
  dryRun: fc.constantFrom(false, false, false, false, false, false, false, true),
  firstControlPlane: fc.constantFrom<Setup['firstControlPlane']>('Remediate', 'Remediate', 'Report'),
  provisionTimeout: fc.boolean(),
  initialized: fc.constantFrom(true, true, false),
  initial: fc.integer({ min: 2, max: 6 }),
  kcpReplicas: fc.constantFrom(1, 3),
  kcpMaxRetry: fc.constantFrom<number | null>(null, 1, 2),
  kcpRetryPeriodSeconds: fc.constantFrom(0, 300),
  mdMaxInFlight: fc.constantFrom<number | null>(null, 1),
  neverJoin: fc.constantFrom<NonNullable<Setup['neverJoin']>>('none', 'none', 'workers', 'ms-b'),
  calm: fc.constantFrom(false, false, false, true),
});

const idx = fc.nat({ max: 20 });
export const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 15,
    arbitrary: fc.record({
      k: fc.constant('advance' as const),
      ms: fc.oneof(fc.integer({ min: SECOND, max: MINUTE }), fc.integer({ min: MINUTE, max: 15 * MINUTE })),
    }),
  },
  {
    weight: 20,
    arbitrary: fc.record({
      k: fc.constant('reconcile' as const),
      faults: fc.oneof(
        fc.constant<Fault[]>([]),
        fc.array(fc.constantFrom<Fault>('ok', 'ok', 'ok', 'fail', 'conflict', 'lost', 'crash'), { maxLength: 5 }),
      ),
      races: fc.constantFrom(0, 0, 0, 1, 2),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('create' as const),
      owner: fc.constantFrom<'ms-a' | 'ms-b'>('ms-a', 'ms-b'),
    }),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      k: fc.constant('provision' as const),
      i: idx,
      lag: fc.oneof(fc.integer({ min: 0, max: 5 * MINUTE }), fc.integer({ min: -90 * SECOND, max: 0 })),
    }),
  },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('join' as const), i: idx }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('joinLate' as const), i: idx }) },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant('initialize' as const), lag: fc.integer({ min: 0, max: 2 * MINUTE }) }),
  },
  { weight: 5, arbitrary: fc.constant({ k: 'owner' as const }) },
  { weight: 3, arbitrary: fc.constant({ k: 'kcp' as const }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('gone' as const), i: idx }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('mhc' as const), healthy: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('flicker' as const), i: idx }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('connection' as const), up: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('endpoint' as const), answers: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('resume' as const), value: fc.constantFrom('a', 'b') }) },
  { weight: 1, arbitrary: fc.constant({ k: 'unannotate' as const }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('withdrawAll' as const), on: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('skip' as const), i: idx }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('defer' as const), on: fc.boolean() }) },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant('refuse' as const), i: idx, code: fc.constantFrom<403 | 422>(403, 422) }),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'unrefuse' as const }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant('deliver' as const), i: idx }) },
  { weight: 3, arbitrary: fc.constant({ k: 'sync' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'restart' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'failover' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'deleteCheck' as const }) },
  { weight: 2, arbitrary: fc.constant({ k: 'recreateCheck' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'refuseStatus' as const }) },
  { weight: 2, arbitrary: fc.constant({ k: 'unrefuseStatus' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant('selector' as const),
      which: fc.integer({ min: 0, max: SELECTORS.length - 1 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('relabel' as const), i: idx, pool: fc.constantFrom<'a' | 'b'>('a', 'b') }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('budget' as const),
      maxInFlight: fc.integer({ min: 1, max: 3 }),
      maxPerOwner: fc.integer({ min: 1, max: 3 }),
      window: fc.constantFrom<'30m' | '1h' | '2h'>('30m', '1h', '2h'),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant('pause' as const),
      what: fc.constantFrom<'cluster' | 'check' | 'mhc'>('cluster', 'check', 'mhc'),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      k: fc.constant('unpause' as const),
      what: fc.constantFrom<'cluster' | 'check' | 'mhc'>('cluster', 'check', 'mhc'),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'move' as const }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('joinMidway' as const), i: idx }) },
  { weight: 1, arbitrary: fc.constant({ k: 'pauseMidway' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'initializeMidway' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({ k: fc.constant('staleAfterWrite' as const), n: fc.integer({ min: 1, max: 3 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant('ownerClock' as const),
      ms: fc.integer({ min: -3 * SECOND, max: 3 * SECOND }),
    }),
  },
);

/** One JoinGuard process: its caches, in-process view and endpoint probe, gone with a crash or a restart. */
export class Controller {
  readonly cache: Cache;
  /** Machines whose writes were refused, retried with back-off (the process's memory, gone with it). */
  private readonly refusals = new Refusals();
  private static serial = 0;
  readonly name = `joinguard-${++Controller.serial}`;
  constructor(
    private readonly w: World,
    private readonly onSnapshot?: (cache: Cache, live: Live, s: Snapshot | undefined) => void,
  ) {
    this.cache = new Cache(w);
  }

  /** One reconcile; returns the plan it acted on (undefined when it failed, crashed or found no check). */
  async reconcile(): Promise<Plan | undefined> {
    const r = await execute(
      {
        rest: this.w.rest(this.name),
        apiVersion: this.w.v,
        log: silentLogger(),
        emit: () => undefined,
        writeMetric: () => undefined,
        remember: (kind, raw) => this.cache.remember(kind, raw),
        ...(this.cache.lastStatusWrite !== undefined ? { lastStatusWrite: this.cache.lastStatusWrite } : {}),
        refusals: this.refusals,
        now: () => this.w.t,
      },
      {
        build: (live) => {
          const s = this.cache.build(live);
          this.onSnapshot?.(this.cache, live, s);
          return s;
        },
      },
    );
    if (r.statusWrittenAt !== undefined) this.cache.lastStatusWrite = r.statusWrittenAt;
    if (r.plan) {
      this.cache.previous = r.plan.view;
      if (this.cache.lastBuiltFor !== undefined) this.cache.previousFor = this.cache.lastBuiltFor;
      this.cache.consumed();
      if (r.plan.probe !== undefined) this.cache.probe = { reachable: this.w.endpointAnswers, at: this.w.t };
    }
    return r.plan;
  }
}

export function worldSetup(s: Setup): WorldSetup {
  const selector = s.selectsControlPlane
    ? { matchExpressions: [{ key: 'pool', operator: 'Exists' as const }] }
    : { matchLabels: { pool: 'a' } };
  const spec = {
    clusterName: 'c1',
    selector,
    joinTimeout: '10m',
    ...(s.provisionTimeout ? { provisionTimeout: '30m' } : {}),
    maxInFlight: s.maxInFlight,
    remediation: { strategy: s.strategy, maxPerOwner: s.maxPerOwner, window: '1h' },
    suspicion: { consecutiveJoinFailures: s.consecutiveJoinFailures, probeInterval: '5m', maxProbeInterval: '20m' },
    neverJoinedLimit: s.neverJoinedLimit,
    firstControlPlane: s.firstControlPlane,
    dryRun: s.dryRun,
  };
  const mhc =
    s.mhc !== 'none' || s.strategy === 'MachineCondition'
      ? {
          watchesJoinGuardCondition: s.strategy === 'MachineCondition',
          selectsControlPlane: s.selectsControlPlane,
          nodeStartupTimeoutSeconds: s.mhc === 'timeout' ? 1200 : 0,
        }
      : undefined;
  return {
    release: s.release,
    spec: spec,
    initialized: s.initialized,
    kcp: {
      replicas: s.kcpReplicas,
      retryPeriodSeconds: s.kcpRetryPeriodSeconds,
      minHealthyPeriodSeconds: 3600,
      ...(s.kcpMaxRetry !== null ? { maxRetry: s.kcpMaxRetry } : {}),
    },
    ...(mhc ? { mhc } : {}),
    ...(s.mdMaxInFlight !== null ? { mdMaxInFlight: s.mdMaxInFlight } : {}),
    oracle: {
      joinTimeoutMs: JOIN_TIMEOUT,
      ...(s.provisionTimeout ? { provisionTimeoutMs: PROVISION_TIMEOUT } : {}),
      consecutiveJoinFailures: s.consecutiveJoinFailures,
      probeIntervalMs: 5 * MINUTE,
      maxProbeIntervalMs: 20 * MINUTE,
      neverJoinedLimit: s.neverJoinedLimit,
      connectionGraceMs: 60_000,
      firstControlPlane: s.firstControlPlane,
      dryRun: s.dryRun,
      unansweredMs: 15 * MINUTE,
      passes: PASSES,
    },
  };
}

/** The fleet at the start: an initialized cluster has its control plane and a joined worker; a new one only KCP's first Machine. */
export function startWorld(t0: number, s: Setup): World {
  const w = new World(t0, worldSetup(s));
  if (s.initialized) {
    // Three replicas: two joined and KCP's third on its way (a scale-up or a rollout); one replica: joined.
    for (let i = 0; i < s.kcpReplicas; i++) {
      const cp = w.create('kcp', { controlPlane: true });
      if (i === 2) continue;
      w.provision(cp, 0);
      w.join(cp);
    }
    const joined = w.create('ms-a');
    w.provision(joined, 0);
    w.join(joined);
  } else kcpStep(w);
  for (let i = 0; i < s.initial; i++) w.create(i % 2 === 0 ? 'ms-a' : 'ms-b');
  const owner = (m: Json): string => m.metadata.ownerReferences[0].name;
  if (s.neverJoin === 'workers') w.neverJoins = (m) => owner(m) !== 'kcp';
  if (s.neverJoin === 'ms-b') w.neverJoins = (m) => owner(m) === 'ms-b';
  return w;
}

/** Applies a world step (everything but reconcile, restart and failover, which the driver handles). */
export function worldStep(
  w: World,
  step: Step,
  pick: (i: number, of?: (m: Json) => boolean) => Json | undefined,
): void {
  switch (step.k) {
    case 'advance':
      w.t += step.ms;
      return;
    case 'create':
      w.create(step.owner);
      return;
    case 'provision': {
      const m = pick(step.i, (x) => !isProvisioned(x, w.release) && x.metadata.deletionTimestamp === undefined);
      if (m) w.provision(m, step.lag);
      return;
    }
    case 'join': {
      const m = pick(step.i, (x) => isProvisioned(x, w.release) && !x.status.nodeRef);
      if (m) w.join(m);
      return;
    }
    case 'joinLate': {
      // A Machine that joins after its join deadline passed (JoinGuard may be about to ask for it).
      const late = (x: Json) =>
        isProvisioned(x, w.release) &&
        !x.status.nodeRef &&
        x.metadata.deletionTimestamp === undefined &&
        w.t >= (w.truthOf(x.metadata.uid).readyAt ?? w.t) + JOIN_TIMEOUT;
      const m = pick(step.i, late);
      if (m) {
        w.join(m);
        count('joins after the deadline');
      }
      return;
    }
    case 'initialize':
      w.initialize(step.lag);
      return;
    case 'owner':
      machineSetStep(w);
      return;
    case 'kcp':
      kcpStep(w);
      return;
    case 'gone': {
      const m = pick(step.i, (x) => x.metadata.deletionTimestamp !== undefined);
      if (m && !w.clusterPaused) w.gone(m); // its finalizer is CAPI's Machine controller's: paused with the Cluster
      return;
    }
    case 'mhc':
      mhcStep(w, step.healthy);
      return;
    case 'flicker': {
      const m = pick(step.i);
      if (m) w.flicker(m);
      return;
    }
    case 'connection':
      w.connection(step.up);
      return;
    case 'endpoint':
      w.endpointAnswers = step.answers;
      return;
    case 'resume':
      w.annotateCheck('joinguard.io/resume', step.value);
      return;
    case 'unannotate':
      w.annotateCheck('joinguard.io/resume', undefined);
      return;
    case 'withdrawAll':
      w.annotateCheck('joinguard.io/withdraw-all', step.on ? '' : undefined);
      if (step.on) count('withdraw-all set');
      return;
    case 'skip': {
      const m = pick(step.i);
      if (m) w.skip(m);
      return;
    }
    case 'defer':
      w.preflightBlocked = step.on;
      return;
    case 'refuse': {
      // A policy webhook refuses JoinGuard's writes on a Machine it is about to write to: one that has not joined, or
      // one that carries JoinGuard's mark (its withdrawal refused).
      const marked = (x: Json) =>
        w.oracle.marksOf(x.metadata.uid) !== undefined && x.metadata.deletionTimestamp === undefined;
      const m =
        pick(step.i, marked) ?? pick(step.i, (x) => !x.status.nodeRef && x.metadata.deletionTimestamp === undefined);
      if (m && !w.refused.has(m.metadata.name)) {
        w.refused.set(m.metadata.name, step.code);
        count(`Machines refusing JoinGuard (${step.code})`);
      }
      return;
    }
    case 'unrefuse':
      w.unrefuseAll();
      return;
    case 'deleteCheck':
      if (w.check !== undefined && w.check.metadata.deletionTimestamp === undefined) count('checks deleted');
      w.deleteCheck();
      return;
    case 'recreateCheck':
      if (w.check === undefined) count('checks re-created');
      w.createCheck();
      return;
    case 'refuseStatus':
      if (!w.statusRefused) count("check's status refused");
      w.statusRefused = true;
      return;
    case 'unrefuseStatus':
      w.statusRefused = false;
      return;
    case 'selector':
      editSpec(w, (spec) => (spec.selector = structuredClone(SELECTORS[step.which]!)), 'selectors edited');
      return;
    case 'relabel': {
      const m = pick(step.i, (x) => x.metadata.deletionTimestamp === undefined);
      if (m) relabel(w, m, step.pool);
      return;
    }
    case 'budget':
      editSpec(
        w,
        (spec) => {
          spec.maxInFlight = step.maxInFlight;
          spec.remediation = { ...spec.remediation, maxPerOwner: step.maxPerOwner, window: step.window };
        },
        'budgets changed',
      );
      return;
    case 'pause':
    case 'unpause':
      pause(w, step.what, step.k === 'pause');
      return;
    case 'move':
      move(w);
      return;
    case 'joinMidway':
      w.midway = { what: 'join', i: step.i };
      return;
    case 'pauseMidway':
      w.midway = { what: 'pause', i: 0 };
      return;
    case 'initializeMidway':
      w.midway = { what: 'initialize', i: 0 };
      return;
    case 'staleAfterWrite':
      w.staleAfterWrite = step.n;
      return;
    case 'ownerClock':
      if (step.ms !== w.ownerSkewMs) count(`owner clocks ${step.ms < 0 ? 'behind' : 'ahead'}`);
      w.ownerSkewMs = step.ms;
      return;
    default:
      return;
  }
}
