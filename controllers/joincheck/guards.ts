// The guards (DESIGN: "Guards, in the order they apply", 3 to 5), and the failure memory they count: a Machine
// that times out is counted once; join timeouts in a row, with no Machine joining in between, raise the
// suspicion; owners are not asked what they would refuse; budgets are counted from the world. Guards 1 and 2
// (pause, unobservable, first control-plane) are settled before a Machine gets here.
import type { ClusterFacts, KcpFacts, MachineFacts } from '../../api/capi/model.js';
import type { CheckSettings, FailureRecord, MachineJoinCheckStatus, OwnerReference, OwnerWindow, RequestRecord, RolloutEvidence, SuspicionStatus } from '../../api/v1alpha1/types.js';
import { ANNOTATION_RESUME, STATUS_LIMITS } from '../../api/v1alpha1/types.js';
import { endpointOf, failureEvidence, listNames, runbook, type StopReason } from './conditions.js';
import { anyMark, causedMarks, ownerRef, sameOwner } from './marks.js';
import { rolloutMessage } from './rollout-suspect.js';
import { formatDuration, iso, latest, ms } from './time.js';
import type { CheckMetadataIntent, MachineVerdict, PlannedEvent, Snapshot } from './types.js';

/** Counts in status are int32: they saturate instead of overflowing. */
const inc = (n: number | undefined): number => Math.min((n ?? 0) + 1, STATUS_LIMITS.count);

// ---- failures and the suspicion (guard 4's memory) ----

export function failureRecord(m: MachineFacts, v: MachineVerdict, now: number): FailureRecord {
  const owner = ownerRef(m);
  const ref = m.bootstrapConfigRef;
  return {
    machine: m.name,
    uid: m.uid,
    ...(owner ? { owner } : {}),
    kind: v.failureKind ?? 'JoinTimeout',
    time: iso(now),
    ...(ref ? { bootstrapConfig: `${ref.kind}/${ref.name}` } : {}),
    ...(m.dataSecretName !== undefined ? { dataSecretName: m.dataSecretName } : {}),
    ...(m.controlPlane ? { controlPlane: true } : {}),
    ...(m.version !== undefined ? { version: m.version } : {}),
  };
}

/**
 * Counts one failure into the next status: the evidence list (records of gone Machines leave first), the
 * never-joined count and — join timeouts only; provision timeouts neither count nor reset — the consecutive
 * count, which raises the suspicion at its threshold. Returns true when this failure raised it (the failure
 * that reaches the threshold is not rebuilt).
 */
export function countFailure(next: MachineJoinCheckStatus, m: MachineFacts, v: MachineVerdict, live: { has(uid: string): boolean }, settings: CheckSettings, cluster: ClusterFacts, now: number, events: PlannedEvent[], rollout?: (failures: FailureRecord[]) => RolloutEvidence | undefined): boolean {
  const list = [...(next.recentFailures ?? []), failureRecord(m, v, now)];
  while (list.length > STATUS_LIMITS.recentFailures) {
    const gone = list.findIndex((f) => !live.has(f.uid));
    list.splice(gone >= 0 ? gone : 0, 1);
  }
  next.recentFailures = list;
  next.failuresSinceResume = inc(next.failuresSinceResume);
  if (v.failureKind !== 'JoinTimeout') return false;
  next.consecutiveJoinFailures = inc(next.consecutiveJoinFailures);
  if (next.suspicion !== undefined) {
    if (!next.suspicion.machines.includes(m.name)) next.suspicion = { ...next.suspicion, machines: [...next.suspicion.machines, m.name].slice(-STATUS_LIMITS.suspectMachines) };
    return false;
  }
  const threshold = settings.consecutiveJoinFailures;
  if (threshold <= 0 || next.consecutiveJoinFailures < threshold) return false;
  const raising = list.filter((f) => f.kind === 'JoinTimeout').slice(-threshold);
  const names = raising.map((f) => f.machine);
  next.suspicion = { reason: 'BootstrapCredentialSuspect', since: iso(now), nextCanaryTime: iso(now + canaryDelay(settings, 0)), canariesSpent: 0, machines: names };
  // [rollout-suspect] the same suspicion, when its failures all come from one new template revision (rollout-suspect.ts).
  const evidence = rollout?.(raising);
  if (evidence !== undefined) next.suspicion = { ...next.suspicion, reason: 'RolloutSuspect', rollout: evidence };
  events.push({ on: 'Check', reason: evidence !== undefined ? 'RolloutSuspect' : 'SuspicionRaised', warning: true, message: suspicionMessage(next, list, cluster, settings) });
  return true;
}

/** A Machine joined: Machines can join again, so the count restarts and a suspicion clears. */
export function joinSeen(next: MachineJoinCheckStatus, joined: string[], events: PlannedEvent[]): void {
  next.consecutiveJoinFailures = 0;
  if (next.suspicion === undefined) return;
  events.push({
    on: 'Check',
    reason: 'SuspicionCleared',
    warning: false,
    message: `Machine ${listNames(joined)} joined: Machines can join again, so the suspicion raised at ${next.suspicion.since} is cleared.`,
  });
  delete next.suspicion;
}

/** Wait before the next canary after `spent` canaries: probeInterval × 2^spent, capped. */
export function canaryDelay(settings: CheckSettings, spent: number): number {
  return Math.min(settings.probeIntervalMs * 2 ** Math.min(spent, 40), settings.maxProbeIntervalMs);
}

/** The next canary time, never later than one maxProbeInterval from now (the value is user-writable). */
export function nextCanaryAt(s: SuspicionStatus, settings: CheckSettings, now: number): number {
  const t = ms(s.nextCanaryTime) ?? now;
  return Math.min(t, Math.max(ms(s.since) ?? now, now) + settings.maxProbeIntervalMs);
}

export function spendCanary(s: SuspicionStatus, settings: CheckSettings, now: number): SuspicionStatus {
  const spent = Math.min(s.canariesSpent + 1, STATUS_LIMITS.count);
  return { ...s, canariesSpent: spent, nextCanaryTime: iso(now + canaryDelay(settings, spent)) };
}

export function suspicionMessage(status: MachineJoinCheckStatus, failures: readonly FailureRecord[], cluster: ClusterFacts | undefined, settings: CheckSettings, heldBack: string[] = []): string {
  const s = status.suspicion!;
  if (s.reason === 'RolloutSuspect' && s.rollout !== undefined) return rolloutMessage(status, failures, cluster, settings, heldBack); // [rollout-suspect]
  const names = new Set(s.machines);
  const evidence = failures.filter((f) => f.kind === 'JoinTimeout' && names.has(f.machine));
  const parts = [
    `${Math.max(status.consecutiveJoinFailures ?? 0, s.machines.length)} Machines in a row reached Joining and timed out with no Node ` +
      `(joinTimeout ${formatDuration(settings.joinTimeoutMs)}): ${failureEvidence(evidence) || s.machines.join(', ')}.`,
    `CAPI itself still reaches the Cluster's controlPlaneEndpoint ${endpointOf(cluster)}, so the fault is most likely not in the Machines: ` +
      `the join credential in their bootstrap data (expired or revoked), or the network path from the Machines to that endpoint.`,
  ];
  if (evidence.some((f) => f.controlPlane === true)) {
    parts.push('Control-plane Machines failed: an etcd member left behind by a failed control-plane join also makes every later control-plane join fail (cluster-api #13221).');
  }
  parts.push(
    `Rebuilds stalled since ${s.since}; ${s.canariesSpent} canaries spent, next canary at ${s.nextCanaryTime ?? 'n/a'}. ` +
      `Clears when a Machine joins, or with the joinguard.io/resume annotation.`,
  );
  if (heldBack.length > 0) parts.push(`Held back: ${listNames(heldBack)}.`);
  parts.push(runbook('BootstrapCredentialSuspect'));
  return parts.join(' ');
}

// ---- guard 3: never joined ----

/** While nothing in scope ever joined, neverJoinedLimit failures since the last resume stop everything. */
export function neverJoinedActive(status: MachineJoinCheckStatus, settings: CheckSettings): boolean {
  return settings.neverJoinedLimit > 0 && status.everJoined !== true && (status.failuresSinceResume ?? 0) >= settings.neverJoinedLimit;
}

// ---- guard 4: the suspicion holds join timeouts, but for one canary at the cadence ----

export type SuspicionGate = { go: true; canary: boolean } | { go: false };

export function suspicionGate(status: MachineJoinCheckStatus, v: MachineVerdict, raisedNow: boolean, canaryTaken: boolean, settings: CheckSettings, now: number): SuspicionGate {
  // Provision timeouts are not evidence about the join credential: still remediated.
  if (v.failureKind !== 'JoinTimeout' || status.suspicion === undefined) return { go: true, canary: false };
  if (raisedNow || canaryTaken || now < nextCanaryAt(status.suspicion, settings, now)) return { go: false };
  return { go: true, canary: true };
}

// ---- guard 5a: owners are not asked what they would refuse ----

export const KCP_DEFAULT_MIN_HEALTHY_PERIOD_SECONDS = 3600;

export type OwnerGate = { kind: 'ok' } | { kind: 'wait'; until?: number; message: string } | { kind: 'refused'; until?: number; message: string };

/**
 * KubeadmControlPlane's own bookkeeping, as its checkRetryLimits reads it (CAPI v1.14 remediation.go): the
 * replacement carries `remediation-for` {machine, timestamp, retryCount}; within minHealthyPeriodSeconds of that
 * timestamp a remediation is a retry: deferred within retryPeriodSeconds, refused once retryCount reaches
 * maxRetry (until minHealthyPeriodSeconds has passed, when KCP starts a new sequence). KCP remediates one
 * Machine at a time, and an initialized control plane of one Machine cannot be remediated.
 */
export function kcpGate(kcp: KcpFacts, m: MachineFacts, kcpMachines: number, initialized: boolean, now: number): OwnerGate {
  if (kcp.remediationInProgress !== undefined) {
    return { kind: 'wait', message: `KubeadmControlPlane ${kcp.name} is remediating ${kcp.remediationInProgress.machine ?? 'a Machine'} and takes one at a time` };
  }
  if (initialized && kcpMachines <= 1) {
    return { kind: 'refused', message: `KubeadmControlPlane ${kcp.name} can't remediate if current replicas are less or equal to 1` };
  }
  const rf = m.remediationFor;
  if (rf === undefined) return { kind: 'ok' };
  const minHealthy = (kcp.remediation.minHealthyPeriodSeconds ?? KCP_DEFAULT_MIN_HEALTHY_PERIOD_SECONDS) * 1000;
  const retryPeriod = (kcp.remediation.retryPeriodSeconds ?? 0) * 1000;
  const last = rf.timestamp ?? now - 2 * Math.max(minHealthy, retryPeriod);
  if (last + minHealthy <= now) return { kind: 'ok' }; // a new retry sequence
  if (last + retryPeriod > now) {
    return { kind: 'wait', until: last + retryPeriod, message: `KubeadmControlPlane ${kcp.name} remediated ${rf.machine ?? 'its predecessor'} at ${iso(last)} and waits retryPeriodSeconds until ${iso(last + retryPeriod)}` };
  }
  const retries = rf.retryCount ?? 0;
  if (kcp.remediation.maxRetry !== undefined && retries >= kcp.remediation.maxRetry) {
    return {
      kind: 'refused',
      until: last + minHealthy,
      message:
        `KubeadmControlPlane ${kcp.name} would refuse ${m.name}: the operation already failed ${retries} times (maxRetry ${kcp.remediation.maxRetry}); ` +
        `it acts again after minHealthyPeriodSeconds, at ${iso(last + minHealthy)}`,
    };
  }
  return { kind: 'ok' };
}

/**
 * An owner that answered CannotBeRemediated to one of JoinGuard's requests, or left one unanswered, is asked
 * nothing more while that Machine is there and has not joined (from the world; a resume does not bring it back).
 */
export function ownerRefusal(owner: OwnerReference | undefined, requests: readonly RequestRecord[], machinesByUid: { get(uid: string): MachineFacts | undefined }): string | undefined {
  if (owner === undefined) return undefined;
  for (const r of requests) {
    if (!sameOwner(r.owner, owner)) continue;
    const m = machinesByUid.get(r.uid);
    if (m === undefined || m.nodeName !== undefined) continue;
    if (r.state === 'Open' && m.ownerRemediated?.status === 'False' && m.ownerRemediated.reason === 'CannotBeRemediated') {
      return `${owner.kind}/${owner.name} answered CannotBeRemediated for ${r.machine}${m.ownerRemediated.message ? `: ${m.ownerRemediated.message}` : ''}`;
    }
    if (r.state === 'Withdrawn' && r.withdrawn === 'Unanswered') {
      return `nobody acted on the request for ${r.machine} (path ${r.path}, owner ${owner.kind}/${owner.name}) within the bound`;
    }
  }
  return undefined;
}

// ---- guard 5b: budgets, from the world ----

export function maxInFlightLimit(settings: CheckSettings, expectedMachines: number): number {
  const m = settings.maxInFlight;
  if ('count' in m) return m.count;
  return Math.max(1, Math.floor((m.percent * expectedMachines) / 100));
}

/**
 * In flight (by name): Machines in scope, not gone, that JoinGuard asked to replace and has not withdrawn, or that
 * still carry a mark JoinGuard caused (remembered or not: a mark only JoinGuard writes counts even without memory);
 * an open request whose Machine cannot be read counts too (it is not gone).
 */
export function inFlight(inScope: readonly MachineFacts[], requests: readonly RequestRecord[], unreadable: ReadonlySet<string>): string[] {
  const byUid = new Map(requests.map((r) => [r.uid, r]));
  const flying = inScope.filter((m) => {
    const r = byUid.get(m.uid);
    if (r?.state === 'Open' && r.path !== 'Report') return true;
    if (r?.state === 'Reported' || r?.state === 'DryRun') return false;
    if (r?.path === 'Delete' && m.deletingSince !== undefined) return true; // being deleted because JoinGuard asked
    if (r === undefined && m.healthCheckSucceeded?.status !== 'False' && m.joinGuardJoined?.status !== 'False') return false; // most of a fleet
    return anyMark(causedMarks(m, r?.path));
  });
  const unread = requests.filter((r) => r.state === 'Open' && (unreadable.has(r.uid) || unreadable.has(r.machine)));
  return [...flying.map((m) => m.name), ...unread.map((r) => r.machine)];
}

/** The window of maxPerOwner: starts a window ago, or at the last resume, whichever is later. */
export function windowStart(now: number, settings: CheckSettings, lastResume: string | undefined): number {
  return latest(now - settings.windowMs, ms(lastResume)) as number;
}

/** Request times of each owner still inside the window (the newest maxPerOwner of them: all that can matter). */
export function trimWindows(windows: readonly OwnerWindow[] | undefined, start: number, keep: number): OwnerWindow[] {
  const out: OwnerWindow[] = [];
  for (const w of windows ?? []) {
    const times = w.times.filter((t) => (ms(t) ?? 0) >= start).slice(-Math.max(keep, 1));
    if (times.length > 0) out.push({ kind: w.kind, name: w.name, times });
  }
  return out;
}

export function recordOwnerRequest(windows: OwnerWindow[], owner: OwnerReference | undefined, now: number, keep: number): OwnerWindow[] {
  if (owner === undefined) return windows;
  const i = windows.findIndex((w) => w.kind === owner.kind && w.name === owner.name);
  const times = [...(i >= 0 ? windows[i]!.times : []), iso(now)].slice(-Math.max(keep, 1));
  const out = windows.filter((_, j) => j !== i);
  out.push({ kind: owner.kind, name: owner.name, times });
  return out.sort((a, b) => (`${a.kind}/${a.name}` < `${b.kind}/${b.name}` ? -1 : 1));
}

export type BudgetGate = { ok: true } | { ok: false; frees?: number; message: string };

export function budgetGate(flying: readonly string[], windows: readonly OwnerWindow[], owner: OwnerReference | undefined, settings: CheckSettings, expected: number): BudgetGate {
  const limit = maxInFlightLimit(settings, expected);
  if (flying.length >= limit) {
    return { ok: false, message: `maxInFlight ${limit} reached: ${listNames([...flying].sort())} in flight; it frees when one of their old Machines is gone` };
  }
  if (owner === undefined) return { ok: true };
  const w = windows.find((x) => x.kind === owner.kind && x.name === owner.name);
  const times = (w?.times ?? []).map((t) => ms(t) ?? 0);
  if (times.length < settings.maxPerOwner) return { ok: true };
  const frees = times[times.length - settings.maxPerOwner]! + settings.windowMs;
  return {
    ok: false,
    frees,
    message: `remediation.maxPerOwner ${settings.maxPerOwner} reached for ${owner.kind}/${owner.name} within remediation.window ${formatDuration(settings.windowMs)}; it frees at ${iso(frees)}`,
  };
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

export interface GuardWorld {
  settings: CheckSettings;
  machines: { get(uid: string): MachineFacts | undefined };
  kcp?: KcpFacts;
  kcpMachines: number;
  initialized: boolean;
  expected: number;
  now: number;
}

export type GuardResult =
  | { go: true; canary: boolean }
  | { go: false; stop: StopReason; note: string; until?: number }
  | { go: false; wait: string; until?: number };

/** Guards 3 to 5 in order for one Stuck Machine: the first that holds it says why (and when it may free). */
export function guardChain(m: MachineFacts, v: MachineVerdict, raisedNow: boolean, st: GuardState, w: GuardWorld): GuardResult {
  if (neverJoinedActive(st.status, w.settings)) return { go: false, stop: 'NeverJoined', note: '' };
  const sg = suspicionGate(st.status, v, raisedNow, st.canaryTaken, w.settings, w.now);
  if (!sg.go) return { go: false, stop: st.status.suspicion?.reason ?? 'BootstrapCredentialSuspect', note: '' }; // [rollout-suspect] either suspicion
  const owner = ownerRef(m);
  const refused = ownerRefusal(owner, st.requests, w.machines);
  if (refused !== undefined) return { go: false, stop: 'RemediationRefusedByOwner', note: refused };
  if (m.owner.kind === 'KubeadmControlPlane' && w.kcp !== undefined && w.kcp.name === m.owner.name) {
    const g = kcpGate(w.kcp, m, w.kcpMachines, w.initialized, w.now);
    if (g.kind === 'wait') return { go: false, wait: `${m.name}: ${g.message}`, ...(g.until !== undefined ? { until: g.until } : {}) };
    if (g.kind === 'refused') return { go: false, stop: 'RemediationRefusedByOwner', note: g.message, ...(g.until !== undefined ? { until: g.until } : {}) };
  }
  const b = budgetGate(st.flying, st.ownerWindows, owner, w.settings, w.expected);
  if (!b.ok) return { go: false, stop: 'RemediationBudgetExhausted', note: b.message, ...(b.frees !== undefined ? { until: b.frees } : {}) };
  return { go: true, canary: sg.canary };
}

// ---- a resume by hand ----

/**
 * `joinguard.io/resume`: any value not acted on yet (or written again after its annotation was removed) clears
 * the suspicion, the counts, the first control-plane stop and the per-owner window; the annotation is removed.
 * The first control-plane wait (the old Machine gone before its replacement's clock starts) survives it.
 */
export function resume(s: Snapshot, prev: MachineJoinCheckStatus, next: MachineJoinCheckStatus, check: CheckMetadataIntent, events: PlannedEvent[]): void {
  const value = s.check.metadata.annotations?.[ANNOTATION_RESUME];
  const last = prev.lastResume;
  if (value === undefined) {
    if (last !== undefined && !last.removed) next.lastResume = { ...last, removed: true };
    return;
  }
  check.removeResume = value;
  if (last !== undefined && last.value === value && !last.removed) return; // acted on; its removal is pending
  const cleared: string[] = [];
  if (next.suspicion !== undefined) {
    cleared.push(`the suspicion raised at ${next.suspicion.since}`);
    events.push({ on: 'Check', reason: 'SuspicionCleared', warning: false, message: `${ANNOTATION_RESUME}=${value}: the suspicion raised at ${next.suspicion.since} is cleared by hand.` });
  }
  if (next.firstControlPlane?.misconfigured !== undefined) cleared.push('the first control-plane stop');
  delete next.suspicion;
  if (next.firstControlPlane !== undefined) delete next.firstControlPlane.misconfigured;
  delete next.ownerWindows;
  next.consecutiveJoinFailures = 0;
  next.failuresSinceResume = 0;
  next.lastResume = { value, time: iso(s.now) };
  events.push({
    on: 'Check',
    reason: 'Resumed',
    warning: false,
    message: `${ANNOTATION_RESUME}=${value}: failure counters, owner refusals and the per-owner window restart now${cleared.length > 0 ? `; cleared ${cleared.join(', ')}` : ''}. JoinGuard decides again from the current state.`,
  });
}
