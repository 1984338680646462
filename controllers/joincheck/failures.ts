// Failure records: a Machine that becomes Stuck is recorded once (by UID) with the evidence a user needs
// (owner, bootstrap config, data secret), in a bounded list that drops the records of Machines that are
// gone before those of Machines still there. Recording a failure is also what the guards count:
// failuresSinceResume (never-joined) and, for join timeouts only, consecutiveJoinFailures (suspicion).
import type { MachineFacts } from '../../api/capi/model.js';
import type { FailureRecord } from '../../api/v1alpha1/types.js';
import { STATUS_LIMITS } from '../../api/v1alpha1/types.js';
import { target } from './paths.js';
import { ownerRef } from './records.js';
import { iso, ms } from './time.js';
import type { Action, MachineVerdict } from './types.js';

export function hasFailure(list: FailureRecord[] | undefined, uid: string): boolean {
  return (list ?? []).some((f) => f.uid === uid);
}

export function failureRecord(m: MachineFacts, v: MachineVerdict, now: number): FailureRecord {
  const owner = ownerRef(m.owner);
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
  };
}

/** Appends and bounds: records of gone Machines are evicted first (oldest first), then the oldest. */
export function appendFailure(list: FailureRecord[] | undefined, rec: FailureRecord, liveUids: { has(uid: string): boolean }): FailureRecord[] {
  const out = [...(list ?? []), rec];
  while (out.length > STATUS_LIMITS.recentFailures) {
    const gone = out.findIndex((f) => !liveUids.has(f.uid));
    out.splice(gone >= 0 ? gone : 0, 1);
  }
  return out;
}

export function failureEvent(m: MachineFacts, v: MachineVerdict): Action {
  const join = v.failureKind !== 'ProvisionTimeout';
  return {
    type: 'MachineEvent',
    machine: target(m),
    reason: join ? 'JoinTimedOut' : 'ProvisionTimedOut',
    message: `Machine ${m.name}: ${v.reason}`,
    warning: true,
  };
}

export function newestFailureTime(list: FailureRecord[] | undefined): number | undefined {
  let best: number | undefined;
  for (const f of list ?? []) {
    const t = ms(f.time);
    if (t !== undefined && (best === undefined || t > best)) best = t;
  }
  return best;
}

/** The last `n` join-timeout failures, oldest first: the ones the consecutive count is made of. */
export function lastJoinFailures(list: FailureRecord[] | undefined, n: number): FailureRecord[] {
  if (n <= 0) return [];
  return (list ?? []).filter((f) => f.kind === 'JoinTimeout').slice(-n);
}
