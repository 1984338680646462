// The guards (DESIGN: "Guards, in the order they apply") as one list, STOPS: every reason Progressing can be False
// for, in precedence order, with whether it announces itself, its gate for one Stuck Machine (the guards of the
// chain; the other stops are met as state) and its message. The chain order, the ranks and the stop messages are
// derived from it: a new guard is one entry (and its reason, with what it means for Ready, timedMachines and the stall
// alert, in api/v1alpha1's STOP_MEANINGS, which manifests/ reads too). Guards 1 and 2 (pause,
// unobservable, first control-plane) are settled before a Machine gets here; the failure memory is failures.ts,
// the budgets budgets.ts.
import type { ClusterFacts, KcpFacts, MachineFacts } from '../../../api/capi/model.js';
import type {
  CheckSettings,
  MachineJoinCheckStatus,
  OwnerWindow,
  RequestRecord,
  StopReason,
} from '../../../api/v1alpha1/types.js';
import { budgetGate, windowStart } from './budgets.js';
import { nextCanaryAt } from './failures.js';
import { formatDuration, iso } from '../time.js';
import type { MachineVerdict } from '../types.js';
import { endpointOf, failureEvidence, heldBack, listNames, runbook, said } from '../words.js';
import { ownerRef } from '../requests/paths.js';
import { ownerRefusal } from '../requests/owner-answer.js';

// ---- guard 3: never joined ----

/** While nothing in scope ever joined, neverJoinedLimit failures since the last resume stop everything. */
export function neverJoinedActive(status: MachineJoinCheckStatus, settings: CheckSettings): boolean {
  return (
    settings.neverJoinedLimit > 0 &&
    status.everJoined !== true &&
    (status.failuresSinceResume ?? 0) >= settings.neverJoinedLimit
  );
}

// ---- guard 4: the suspicion holds join timeouts, but for one canary at the cadence ----

export type SuspicionGate = { go: true; canary: boolean } | { go: false };

export function suspicionGate(
  status: MachineJoinCheckStatus,
  v: MachineVerdict,
  raisedNow: boolean,
  canaryTaken: boolean,
  settings: CheckSettings,
  now: number,
): SuspicionGate {
  // Provision timeouts are not evidence about the join credential: still remediated.
  if (v.failureKind !== 'JoinTimeout' || status.suspicion === undefined) return { go: true, canary: false };
  if (raisedNow || canaryTaken || now < nextCanaryAt(status.suspicion, settings, now)) return { go: false };
  return { go: true, canary: true };
}

// ---- guard 5a: owners are not asked what they would refuse ----

export const KCP_DEFAULT_MIN_HEALTHY_PERIOD_SECONDS = 3600;

export type OwnerGate =
  | { kind: 'ok' }
  | { kind: 'wait'; until?: number; message: string }
  | { kind: 'refused'; until?: number; message: string };

/**
 * KubeadmControlPlane's own bookkeeping, as its checkRetryLimits reads it (CAPI v1.14 remediation.go): the
 * replacement carries `remediation-for` {machine, timestamp, retryCount}; within minHealthyPeriodSeconds of that
 * timestamp a remediation is a retry: deferred within retryPeriodSeconds, refused once retryCount reaches
 * maxRetry (until minHealthyPeriodSeconds has passed, when KCP starts a new sequence). KCP remediates one
 * Machine at a time, and an initialized control plane of one Machine cannot be remediated.
 */
export function kcpGate(
  kcp: KcpFacts,
  m: MachineFacts,
  kcpMachines: number,
  initialized: boolean,
  now: number,
): OwnerGate {
  if (kcp.remediationInProgress !== undefined) {
    return {
      kind: 'wait',
      message:
        `KubeadmControlPlane ${kcp.name} is remediating ${kcp.remediationInProgress.machine ?? 'a Machine'} ` +
        `and takes one at a time`,
    };
  }
  if (initialized && kcpMachines <= 1) {
    return {
      kind: 'refused',
      message: `KubeadmControlPlane ${kcp.name} can't remediate if current replicas are less or equal to 1`,
    };
  }
  const rf = m.remediationFor;
  if (rf === undefined) return { kind: 'ok' };
  const minHealthy = (kcp.remediation.minHealthyPeriodSeconds ?? KCP_DEFAULT_MIN_HEALTHY_PERIOD_SECONDS) * 1000;
  const retryPeriod = (kcp.remediation.retryPeriodSeconds ?? 0) * 1000;
  const last = rf.timestamp ?? now - 2 * Math.max(minHealthy, retryPeriod);
  if (last + minHealthy <= now) return { kind: 'ok' }; // a new retry sequence
  if (last + retryPeriod > now) {
    return {
      kind: 'wait',
      until: last + retryPeriod,
      message:
        `KubeadmControlPlane ${kcp.name} remediated ${rf.machine ?? 'its predecessor'} ` +
        `at ${iso(last)} and waits retryPeriodSeconds until ${iso(last + retryPeriod)}`,
    };
  }
  const retries = rf.retryCount ?? 0;
  if (kcp.remediation.maxRetry !== undefined && retries >= kcp.remediation.maxRetry) {
    return {
      kind: 'refused',
      until: last + minHealthy,
      message:
        `KubeadmControlPlane ${kcp.name} would refuse ${m.name}: ` +
        `the operation already failed ${retries} times (maxRetry ` +
        `${kcp.remediation.maxRetry}); ` +
        `it acts again after minHealthyPeriodSeconds, at ${iso(last + minHealthy)}`,
    };
  }
  return { kind: 'ok' };
}

// ---- guards 3 to 5, in their order ----

/** What the guards see of a plan at one moment: what it asked so far, and the budgets that fills. */
export interface GuardState {
  status: MachineJoinCheckStatus;
  /** Requests since the last resume (an owner's refusals count from there). */
  requests: readonly RequestRecord[];
  canaryTaken: boolean;
  flying: readonly string[];
  ownerWindows: readonly OwnerWindow[];
}

/**
 * The planner's state of the pass (plan/state.ts PlanState) as the guards read it: the planner passes its state
 * itself, nothing is built for them. A guard that needs another fact of the pass adds it here.
 */
export interface PassState {
  readonly settings: CheckSettings;
  readonly now: number;
  /** The check's Cluster (its annotations too: a guard over one needs no new fact). */
  readonly cluster: ClusterFacts;
  /** Any Machine of the Cluster by uid, settled ones included. */
  readonly anyMachine: { get(uid: string): MachineFacts | undefined };
  readonly kcp: KcpFacts | undefined;
  readonly ofCluster: readonly MachineFacts[];
  readonly initialized: boolean;
  readonly expected: number;
}

/** One Stuck Machine put through the guards, and what the plan asked so far (the budgets that fills). */
export interface GuardTarget {
  readonly m: MachineFacts;
  readonly v: MachineVerdict;
  /** Its failure raised the suspicion in this plan. */
  readonly raisedNow: boolean;
  readonly asked: GuardState;
}

export type GuardResult =
  | { go: true; canary: boolean }
  | { go: false; stop: StopReason; note: string; until?: number }
  | { go: false; wait: string; until?: number };

/** What a stop's message may say (conditions.ts fills it in). */
export interface StopContext {
  status: MachineJoinCheckStatus;
  cluster: ClusterFacts;
  settings: {
    neverJoinedLimit: number;
    joinTimeoutMs: number;
    consecutiveJoinFailures: number;
    probeIntervalMs: number;
    maxProbeIntervalMs: number;
  } & Record<string, unknown>;
  connection: { down: boolean; evidence?: string };
  graceMs: number;
  /** Suspicion message builder (failures.ts owns the words of the suspicion). */
  suspicion: (heldBack: string[]) => string;
}

/** A gate's answer for one Stuck Machine: it passes (undefined), stops it with a note, or makes it wait. */
export type Gate = { note: string; until?: number } | { wait: string; until?: number } | undefined;

export interface Stop {
  reason: StopReason;
  /** Announced with a RemediationRestricted event when it begins. */
  restricting: boolean;
  /** The guard of the chain, for one Stuck Machine; none for a stop met as state (its evidence is not a candidate). */
  gate?: (st: PassState, t: GuardTarget) => Gate;
  /** Progressing's message: what was seen (`notes`), the Machines held back, the runbook section. */
  message: (c: StopContext, notes: readonly string[], machines: readonly string[]) => string;
}

const until = (t: number | undefined) => (t !== undefined ? { until: t } : {});

/** The suspicion's gate, for the entry of the suspicion's kind (status.suspicion.reason). */
function suspicionHolds(kind: StopReason, st: PassState, t: GuardTarget): Gate {
  const { status, canaryTaken } = t.asked;
  if ((status.suspicion?.reason ?? 'BootstrapCredentialSuspect') !== kind) return undefined;
  return suspicionGate(status, t.v, t.raisedNow, canaryTaken, st.settings, st.now).go ? undefined : { note: '' };
}

/** Every stop, highest precedence first; the guards of the chain apply in this order. */
export const STOPS = [
  {
    reason: 'FirstControlPlaneReplacementMisconfigured',
    restricting: false,
    message: (_c, notes, machines) =>
      `JoinGuard stopped remediating the first control-plane Machine: ` +
      `${notes[0] ?? 'its replacement is not an init Machine'}.` +
      `${heldBack(machines)} ${runbook('FirstControlPlaneReplacementMisconfigured')}`,
  },
  {
    reason: 'ControlPlaneEndpointUnreachable',
    restricting: false,
    message: (c, _notes, machines) => {
      const seen = c.connection.down
        ? `CAPI cannot see the workload cluster: ${c.connection.evidence}`
        : `${c.connection.evidence ?? 'the workload connection came back'}, ` +
          `less than the grace period (${formatDuration(c.graceMs)}) ` +
          `ago`;
      return (
        `${seen} (controlPlaneEndpoint ${endpointOf(c.cluster)}). ` +
        `Past their deadline without a Node: ${listNames(machines)}; ` +
        `a Machine whose Node ` +
        (`CAPI cannot see is never taken for one that never joined, ` +
          `so there is no verdict until the connection has been back ` +
          `for `) +
        `${formatDuration(c.graceMs)}. ${runbook('ControlPlaneEndpointUnreachable')}`
      );
    },
  },
  {
    reason: 'NeverJoined',
    restricting: true,
    gate: (st, t) => (neverJoinedActive(t.asked.status, st.settings) ? { note: '' } : undefined),
    message: ({ status, settings, cluster }, _notes, machines) => {
      const since = status.lastResume?.time;
      const failures = (status.recentFailures ?? []).filter((f) => since === undefined || f.time >= since);
      const evidence = failureEvidence(failures.slice(-settings.neverJoinedLimit));
      return (
        `No Machine in scope has ever joined and ${status.failuresSinceResume ?? 0} ` +
        `failures happened${since !== undefined ? ` since the resume at ${since}` : ''} ` +
        `(neverJoinedLimit ${settings.neverJoinedLimit}): ${evidence}. The cluster looks misconfigured ` +
        (`from the start (image, bootstrap settings, an endpoint ${endpointOf(cluster)} ` +
          `the Machines cannot reach); rebuilding would repeat it, ` +
          `so all `) +
        (`remediation stopped.${heldBack(machines)} Fix the templates, ` +
          `then resume with joinguard.io/resume. ${runbook('NeverJoined')}`)
      );
    },
  },
  {
    reason: 'BootstrapCredentialSuspect',
    restricting: true,
    gate: (st, t) => suspicionHolds('BootstrapCredentialSuspect', st, t),
    message: (c, _notes, machines) => c.suspicion([...machines]),
  },
  {
    // The same suspicion when its failures all come from one new template revision (rollout-suspect.ts words it);
    // never both at once.
    reason: 'RolloutSuspect',
    restricting: true,
    gate: (st, t) => suspicionHolds('RolloutSuspect', st, t),
    message: (c, _notes, machines) => c.suspicion([...machines]),
  },
  {
    reason: 'RemediationRefusedByOwner',
    restricting: true,
    gate: (st, { m, asked }) => {
      const refused = ownerRefusal(ownerRef(m), asked.requests, st.anyMachine);
      if (refused !== undefined) return { note: refused };
      const kcp = st.kcp;
      if (m.owner.kind !== 'KubeadmControlPlane' || kcp === undefined || kcp.name !== m.owner.name) return undefined;
      const kcpMachines = st.ofCluster.filter(
        (x) => x.owner.kind === 'KubeadmControlPlane' && x.owner.name === kcp.name,
      ).length;
      const g = kcpGate(kcp, m, kcpMachines, st.initialized, st.now);
      if (g.kind === 'wait') return { wait: `${m.name}: ${g.message}`, ...until(g.until) };
      return g.kind === 'refused' ? { note: g.message, ...until(g.until) } : undefined;
    },
    message: (_c, notes, machines) =>
      `An owner refuses remediation, so JoinGuard does not ask ` +
      `it: ${said(notes)}.${heldBack(machines)} ${runbook('RemediationRefusedByOwner')}`,
  },
  {
    reason: 'RemediationBudgetExhausted',
    restricting: true,
    gate: (st, { m, asked }) => {
      const from = windowStart(st.now, st.settings, asked.status.lastResume?.time);
      const b = budgetGate(asked.flying, asked.ownerWindows, ownerRef(m), st.settings, st.expected, from);
      return b.ok ? undefined : { note: b.message, ...until(b.frees) };
    },
    message: (_c, notes, machines) =>
      `A remediation budget holds back requests: ${said(notes)}.` +
      `${heldBack(machines)} ${runbook('RemediationBudgetExhausted')}`,
  },
  {
    reason: 'DryRun',
    restricting: false,
    message: (_c, notes) =>
      notes.length > 0
        ? `spec.dryRun is true: JoinGuard would ask for the replacement ` +
          `of ${listNames(notes)}, and changes no Machine. ${runbook('DryRun')}`
        : `spec.dryRun is true: JoinGuard judges and reports, and changes ` +
          `no Machine; nothing would be asked now. ${runbook('DryRun')}`,
  },
] as const satisfies readonly Stop[];

// Every StopReason has its entry: the type checker fails here when a reason is added to api/ and not to STOPS.
type Listed = (typeof STOPS)[number]['reason'];
const _everyReasonListed: [StopReason] extends [Listed] ? true : never = true;

export const STOPS_IN_ORDER: readonly StopReason[] = STOPS.map((x) => x.reason);
/** Stops that announce themselves with a RemediationRestricted event when they begin. */
export const RESTRICTING = Object.fromEntries(STOPS.map((x) => [x.reason, x.restricting])) as Readonly<
  Record<StopReason, boolean>
>;
const BY_REASON = new Map<StopReason, Stop>(STOPS.map((x) => [x.reason, x]));

export function stopMessage(
  reason: StopReason,
  c: StopContext,
  notes: readonly string[],
  machines: readonly string[],
): string {
  return BY_REASON.get(reason)!.message(c, notes, machines);
}

/**
 * The guards of the chain in STOPS order for one Stuck Machine: the first that holds it says why (and when it may
 * free).
 */
export function guardChain(st: PassState, t: GuardTarget): GuardResult {
  for (const s of STOPS) {
    const g = 'gate' in s ? s.gate(st, t) : undefined;
    if (g === undefined) continue;
    if ('wait' in g) return { go: false, ...g };
    return { go: false, stop: s.reason, ...g };
  }
  // Past the suspicion's gate, a join timeout under suspicion is its canary.
  return { go: true, canary: t.v.failureKind === 'JoinTimeout' && t.asked.status.suspicion !== undefined };
}
