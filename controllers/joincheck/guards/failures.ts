// The failure memory the guards count (DESIGN: "Guards, in the order they apply", 4): a Machine that times out is
// counted once; join timeouts in a row, with no Machine joining in between, raise the suspicion, which holds back
// every join timeout but one canary at a growing cadence; a join clears it, and so does a resume by hand.
import type { ClusterFacts, MachineFacts } from '../../../api/capi/model.js';
import type {
  CheckSettings,
  FailureRecord,
  MachineJoinCheckStatus,
  RolloutEvidence,
  SuspicionStatus,
} from '../../../api/v1alpha1/types.js';
import { ANNOTATION_RESUME, STATUS_LIMITS } from '../../../api/v1alpha1/types.js';
import { rolloutMessage } from '../rules/rollout-suspect.js';
import { formatDuration, iso, ms } from '../time.js';
import type { CheckMetadataIntent, MachineVerdict, PlannedEvent, Snapshot } from '../types.js';
import { endpointOf, failureEvidence, listNames, runbook } from '../words.js';
import { ownerRef } from '../requests/paths.js';

/** Counts in status are int32: they saturate instead of overflowing. */
const inc = (n: number | undefined): number => Math.min((n ?? 0) + 1, STATUS_LIMITS.count);

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
 * that reaches the threshold is not rebuilt). `joinAfterProvision`: the Machine's provision timeout was counted
 * before, and it then reached Joining and timed out with no Node: its record becomes the join timeout and it counts
 * in the run (DESIGN's suspicion counts Machines that reached Joining and timed out), not again for neverJoinedLimit.
 */
export function countFailure(
  next: MachineJoinCheckStatus,
  m: MachineFacts,
  v: MachineVerdict,
  live: { has(uid: string): boolean },
  settings: CheckSettings,
  cluster: ClusterFacts,
  now: number,
  events: PlannedEvent[],
  rollout?: (failures: FailureRecord[]) => RolloutEvidence | undefined,
  joinAfterProvision = false,
): boolean {
  const before = (next.recentFailures ?? []).filter((f) => !joinAfterProvision || f.uid !== m.uid);
  const list = [...before, failureRecord(m, v, now)];
  while (list.length > STATUS_LIMITS.recentFailures) {
    const gone = list.findIndex((f) => !live.has(f.uid));
    list.splice(gone >= 0 ? gone : 0, 1);
  }
  next.recentFailures = list;
  if (!joinAfterProvision) next.failuresSinceResume = inc(next.failuresSinceResume);
  if (v.failureKind !== 'JoinTimeout') return false;
  next.consecutiveJoinFailures = inc(next.consecutiveJoinFailures);
  if (next.suspicion !== undefined) {
    // The failures that raised it come first and stay (they are its evidence); later ones fill the list to its bound.
    const { machines } = next.suspicion;
    if (!machines.includes(m.name) && machines.length < STATUS_LIMITS.suspectMachines)
      next.suspicion = { ...next.suspicion, machines: [...machines, m.name] };
    return false;
  }
  const threshold = settings.consecutiveJoinFailures;
  if (threshold <= 0 || next.consecutiveJoinFailures < threshold) return false;
  const raising = list.filter((f) => f.kind === 'JoinTimeout').slice(-threshold);
  const names = raising.map((f) => f.machine);
  next.suspicion = {
    reason: 'BootstrapCredentialSuspect',
    since: iso(now),
    nextCanaryTime: iso(now + canaryDelay(settings, 0)),
    canariesSpent: 0,
    machines: names,
  };
  // [rollout-suspect] the same suspicion, when its failures all come from one new template revision
  // (rollout-suspect.ts).
  const evidence = rollout?.(raising);
  if (evidence !== undefined) next.suspicion = { ...next.suspicion, reason: 'RolloutSuspect', rollout: evidence };
  events.push({
    on: 'Check',
    reason: evidence !== undefined ? 'RolloutSuspect' : 'SuspicionRaised',
    warning: true,
    message: suspicionMessage(next, list, cluster, settings),
  });
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
    message:
      `Machine ${listNames(joined)} joined: Machines can join again, ` +
      `so the suspicion raised at ${next.suspicion.since} is cleared.`,
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

export function suspicionMessage(
  status: MachineJoinCheckStatus,
  failures: readonly FailureRecord[],
  cluster: ClusterFacts | undefined,
  settings: CheckSettings,
  heldBack: string[] = [],
): string {
  const s = status.suspicion!;
  if (s.reason === 'RolloutSuspect' && s.rollout !== undefined)
    return rolloutMessage(status, failures, cluster, settings, heldBack); // [rollout-suspect]
  const names = new Set(s.machines);
  const evidence = failures.filter((f) => f.kind === 'JoinTimeout' && names.has(f.machine));
  const parts = [
    `${Math.max(status.consecutiveJoinFailures ?? 0, s.machines.length)} ` +
      `Machines in a row reached Joining and timed out with no ` +
      `Node ` +
      `(joinTimeout ${formatDuration(settings.joinTimeoutMs)}): ${failureEvidence(evidence) || s.machines.join(', ')}.`,
    `CAPI itself still reaches the Cluster's controlPlaneEndpoint ` +
      `${endpointOf(cluster)}, so the fault is most likely not ` +
      `in the Machines: ` +
      (`the join credential in their bootstrap data (expired or ` +
        `revoked), or the network path from the Machines to that ` +
        `endpoint.`),
  ];
  if (evidence.some((f) => f.controlPlane === true)) {
    parts.push(
      'Control-plane Machines failed: an etcd member left behind ' +
        'by a failed control-plane join also makes every later control-plane ' +
        'join fail (cluster-api #13221).',
    );
  }
  parts.push(
    `Rebuilds stalled since ${s.since}; ${s.canariesSpent} canaries ` +
      `spent, next canary at ${s.nextCanaryTime ?? 'n/a'}. ` +
      `Clears when a Machine joins, or with the joinguard.io/resume annotation.`,
  );
  if (heldBack.length > 0) parts.push(`Held back: ${listNames(heldBack)}.`);
  parts.push(runbook('BootstrapCredentialSuspect'));
  return parts.join(' ');
}

// ---- a resume by hand ----

/**
 * `joinguard.io/resume`: any value not acted on yet (or written again after its annotation was removed) clears
 * the suspicion, the counts, the first control-plane stop and the per-owner window; the annotation is removed.
 * The first control-plane wait (the old Machine gone before its replacement's clock starts) survives it.
 */
export function resume(
  s: Snapshot,
  prev: MachineJoinCheckStatus,
  next: MachineJoinCheckStatus,
  check: CheckMetadataIntent,
  events: PlannedEvent[],
): void {
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
    events.push({
      on: 'Check',
      reason: 'SuspicionCleared',
      warning: false,
      message: `${ANNOTATION_RESUME}=${value}: the suspicion raised at ${next.suspicion.since} is cleared by hand.`,
    });
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
    message:
      `${ANNOTATION_RESUME}=${value}: failure counters, owner refusals ` +
      `and the per-owner window restart now${cleared.length > 0 ? `; cleared ${cleared.join(', ')}` : ''}. ` +
      `JoinGuard decides again from the current state.`,
  });
}
