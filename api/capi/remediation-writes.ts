// The Machine status writes JoinGuard makes, as pure builders: each returns the whole new
// status.conditions list (a merge patch replaces a list whole), to be written once on /status guarded by
// the Machine's resourceVersion (statusPatch). Other entries are kept as they are, in place.
// v1beta2 entries are metav1.Condition (observedGeneration = metadata.generation, lastTransitionTime
// moves only when status changes, as apimachinery's meta.SetStatusCondition does). v1beta1 entries are
// CAPI's v1beta1 Condition (severity on False, no empty reason/message since the CRD refuses them;
// lastTransitionTime moves when status, reason, severity or message changes, as CAPI's v1beta1
// conditions.Set does). The shapes are those MachineHealthCheck writes (machinehealthcheck_controller.go).
import { CONDITION_JOINGUARD_JOINED, type FailureKind } from '../v1alpha1/types.js';
import { readConditions } from './conditions.js';
import type { CapiApiVersion } from './model.js';
import { isObj, ObjectReader } from './reader.js';

export const CONDITION_HEALTH_CHECK_SUCCEEDED = 'HealthCheckSucceeded';
export const CONDITION_OWNER_REMEDIATED = 'OwnerRemediated';
export const REASON_WAITING_FOR_REMEDIATION = 'WaitingForRemediation';
/** v1beta2 reason of HealthCheckSucceeded=True (MachineHealthCheckSucceededReason). */
export const REASON_HEALTH_CHECK_SUCCEEDED = 'HealthCheckSucceeded';
export const WITHDRAW_MESSAGE =
  'The Machine got a Node before it was replaced: JoinGuard withdrew its remediation request';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/**
 * The marker inside a mark's condition message (DESIGN: "Recognisable marks"): the check that asked, named with its
 * uid in the same write as the mark — `JoinGuard (MachineJoinCheck <namespace>/<name>, uid <uid>): ...`. A withdrawal
 * rewrites the message, so the marker goes with the mark. One home for the words: written by markedMessage, read by
 * markerIn.
 */
export function markedMessage(check: { namespace: string; name: string; uid: string }, says: string): string {
  return `JoinGuard (MachineJoinCheck ${check.namespace}/${check.name}, uid ${check.uid}): ${says}`;
}

const MARKER = /^JoinGuard \(MachineJoinCheck [^\s,()]+, uid ([A-Za-z0-9-]+)\): /;

/** The uid a mark's condition message names (markedMessage), or undefined. */
export function markerIn(message: string | undefined): string | undefined {
  return message === undefined ? undefined : MARKER.exec(message)?.[1];
}

interface Desired {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  /** v1beta1 only, on False. */
  severity?: 'Error' | 'Warning' | 'Info';
}

export interface ConditionsWrite {
  conditions: unknown[];
}

/**
 * HealthCheckSucceeded=False (reason JoinTimeout/ProvisionTimeout) and, unless the owner already holds it,
 * OwnerRemediated=False.
 */
export function markForRemediation(
  machine: unknown,
  v: CapiApiVersion,
  o: { kind: 'JoinTimeout' | 'ProvisionTimeout'; message: string; now: Date; setOwnerRemediated: boolean },
): ConditionsWrite {
  const m = current(machine, v);
  let list = upsert(
    m,
    {
      type: CONDITION_HEALTH_CHECK_SUCCEEDED,
      status: 'False',
      reason: o.kind satisfies FailureKind,
      message: o.message,
      severity: 'Warning',
    },
    o.now,
  );
  // CAPI's contract: OwnerRemediated is created when absent or True; once the owner has changed it
  // (RemediationDeferred, CannotBeRemediated, ...) it is the owner's, and never re-asserted.
  const owner = m.parsed.get(CONDITION_OWNER_REMEDIATED);
  if (o.setOwnerRemediated && (owner === undefined || owner.status === 'True')) {
    list = upsert(
      { ...m, list },
      {
        type: CONDITION_OWNER_REMEDIATED,
        status: 'False',
        reason: REASON_WAITING_FOR_REMEDIATION,
        message: v === 'v1beta2' ? 'Waiting for remediation' : '',
        severity: 'Warning',
      },
      o.now,
    );
  }
  return { conditions: list };
}

/** HealthCheckSucceeded=True; OwnerRemediated is left for the owner to drop (CAPI's cleanup path). */
export function withdrawMark(machine: unknown, v: CapiApiVersion, now: Date): ConditionsWrite {
  return withdrawConditions(machine, v, now, { healthCheck: true, condition: false });
}

/**
 * The withdrawal of JoinGuard's conditions in one list: HealthCheckSucceeded=True where JoinGuard caused the
 * False (the owners then drop OwnerRemediated), and JoinGuardJoined=True (its MachineHealthCheck stops matching).
 */
export function withdrawConditions(
  machine: unknown,
  v: CapiApiVersion,
  now: Date,
  parts: { healthCheck: boolean; condition: boolean },
): ConditionsWrite {
  let m = current(machine, v);
  if (parts.healthCheck) {
    const list = upsert(
      m,
      {
        type: CONDITION_HEALTH_CHECK_SUCCEEDED,
        status: 'True',
        reason: v === 'v1beta2' ? REASON_HEALTH_CHECK_SUCCEEDED : '',
        message: WITHDRAW_MESSAGE,
      },
      now,
    );
    m = { ...m, list };
  }
  if (parts.condition) {
    const list = upsert(
      m,
      {
        type: CONDITION_JOINGUARD_JOINED,
        status: 'True',
        reason: v === 'v1beta2' ? 'NodeJoined' : '',
        message: WITHDRAW_MESSAGE,
      },
      now,
    );
    m = { ...m, list };
  }
  return { conditions: m.list };
}

/** JoinGuard's own condition JoinGuardJoined, for the MachineCondition strategy's MachineHealthCheck. */
export function setJoinGuardCondition(
  machine: unknown,
  v: CapiApiVersion,
  o: { status: ConditionStatus; reason: string; message: string; now: Date },
): ConditionsWrite {
  const m = current(machine, v);
  return {
    conditions: upsert(
      m,
      { type: CONDITION_JOINGUARD_JOINED, status: o.status, reason: o.reason, message: o.message, severity: 'Warning' },
      o.now,
    ),
  };
}

export function removeJoinGuardCondition(machine: unknown, v: CapiApiVersion): ConditionsWrite {
  const m = current(machine, v);
  return { conditions: m.list.filter((c) => !(isObj(c) && c['type'] === CONDITION_JOINGUARD_JOINED)) };
}

/** The merge-patch body for /status: the new list, guarded by the resourceVersion it was built from. */
export function statusPatch(
  machine: unknown,
  write: ConditionsWrite,
): { metadata: { resourceVersion: string }; status: { conditions: unknown[] } } {
  const r: ObjectReader = ObjectReader.of(machine, 'Machine');
  return {
    metadata: { resourceVersion: r.requiredString('metadata.resourceVersion') },
    status: { conditions: write.conditions },
  };
}

interface Current {
  v: CapiApiVersion;
  list: unknown[];
  parsed: ReturnType<typeof readConditions>;
  generation?: number;
}

function current(machine: unknown, v: CapiApiVersion): Current {
  const r: ObjectReader = ObjectReader.of(machine, 'Machine');
  const parsed = readConditions(r, 'status.conditions'); // throws on a list it cannot understand
  const list = structuredClone(r.list('status.conditions') ?? []);
  const generation = r.int('metadata.generation');
  return { v, list, parsed, ...(generation !== undefined ? { generation } : {}) };
}

/** metav1.Time precision: seconds. */
function stamp(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function upsert(m: Current, d: Desired, now: Date): unknown[] {
  const i = m.list.findIndex((c) => isObj(c) && c['type'] === d.type);
  const old = i >= 0 ? (m.list[i] as Record<string, unknown>) : undefined;
  const entry: Record<string, unknown> = { type: d.type, status: d.status };
  let changed: boolean;
  if (m.v === 'v1beta2') {
    if (m.generation !== undefined) entry['observedGeneration'] = m.generation;
    entry['reason'] = d.reason;
    entry['message'] = d.message;
    changed = old?.['status'] !== d.status;
  } else {
    if (d.status === 'False' && d.severity) entry['severity'] = d.severity;
    if (d.reason !== '') entry['reason'] = d.reason;
    if (d.message !== '') entry['message'] = d.message;
    changed = ['status', 'reason', 'message', 'severity'].some((k) => (old?.[k] ?? '') !== (entry[k] ?? ''));
  }
  entry['lastTransitionTime'] =
    !changed && typeof old?.['lastTransitionTime'] === 'string' ? old['lastTransitionTime'] : stamp(now);
  const list = [...m.list];
  if (i >= 0) list[i] = entry;
  else list.push(entry);
  return list;
}
