// The remediation records: what JoinGuard asked of CAPI, and what it has seen since. Every request is
// recorded (write-ahead) in the plan that makes it; afterwards the outcome follows what the objects show:
// the mark visible -> Marked; the owner defers -> Deferred; the owner refuses -> Refused (and no more
// requests to that owner until a resume); the Machine (UID) gone -> Replaced. A record stays in flight
// until the old Machine is gone, or until the mark is withdrawn.
import type { MachineFacts, OwnerFacts } from '../../api/capi/model.js';
import type { OwnerReference, RemediationRecord } from '../../api/v1alpha1/types.js';
import { STATUS_LIMITS } from '../../api/v1alpha1/types.js';
import { iso } from './time.js';

const OPEN = new Set<RemediationRecord['outcome']>(['Requested', 'Marked', 'Deferred', 'Refused']);

/** Not finished: the old Machine may still be acted on by its owner (and may be withdrawn). */
export function isOpen(r: RemediationRecord): boolean {
  return OPEN.has(r.outcome) && r.finishedTime === undefined;
}

/**
 * Holds a maxInFlight slot. A refused request does not: its owner will not act on it, and counting it
 * would stop every other owner's remediation until someone deletes the Machine by hand.
 */
export function isInFlight(r: RemediationRecord): boolean {
  return isOpen(r) && r.outcome !== 'Refused';
}

/** A request that asked CAPI for something (not a report, not a dry run). */
export function isRequest(r: RemediationRecord): boolean {
  return r.path !== 'Report' && r.outcome !== 'DryRun' && r.outcome !== 'Reported';
}

export function ownerRef(owner: OwnerFacts): OwnerReference | undefined {
  if (owner.kind === 'None' || owner.name === undefined) return undefined;
  return { kind: owner.rawKind ?? owner.kind, name: owner.name };
}

export function sameOwner(a: OwnerReference | undefined, b: OwnerReference | undefined): boolean {
  return a !== undefined && b !== undefined && a.kind === b.kind && a.name === b.name;
}

/** The write of this path is visible on the Machine. */
function markVisible(r: RemediationRecord, m: MachineFacts): boolean {
  switch (r.path) {
    case 'OwnerRemediated':
      return (
        m.healthCheckSucceeded?.status === 'False' &&
        (m.healthCheckSucceeded.reason === 'JoinTimeout' || m.healthCheckSucceeded.reason === 'ProvisionTimeout')
      );
    case 'RemediateAnnotation':
      return m.remediateAnnotation;
    case 'MachineCondition':
      return m.joinGuardJoined?.status === 'False';
    case 'Delete':
      return m.deletingSince !== undefined;
    default:
      return false;
  }
}

export interface ObservedRecords {
  records: RemediationRecord[];
  /** Owners that refused in this observation (a transition: they were not Refused before). */
  newlyRefused: OwnerReference[];
}

/** Moves one open record's outcome to what its Machine (undefined: gone) shows now. */
export function observeRecord(r: RemediationRecord, m: MachineFacts | undefined, now: number): { record: RemediationRecord; refused: boolean } {
  if (!isOpen(r)) return { record: r, refused: false };
  if (m === undefined) return { record: { ...r, outcome: 'Replaced', finishedTime: iso(now) }, refused: false };
  const n: RemediationRecord = { ...r };
  let refused = false;
  if (n.outcome === 'Requested' && markVisible(n, m)) n.outcome = 'Marked';
  const or = m.ownerRemediated;
  if (or !== undefined && or.status === 'False' && or.reason !== undefined) {
    n.ownerReason = or.reason;
    if (or.message !== undefined) n.ownerMessage = or.message;
    if (or.reason === 'RemediationDeferred' && (n.outcome === 'Requested' || n.outcome === 'Marked')) n.outcome = 'Deferred';
    if (or.reason === 'CannotBeRemediated' && n.outcome !== 'Refused') {
      n.outcome = 'Refused';
      refused = n.owner !== undefined;
    }
  }
  return { record: n, refused };
}

/**
 * Moves each open record's outcome to what the Machine shows now. A Machine the reader could not
 * understand (`unreadable`, by name) is not gone: its record is left as it is.
 */
export function observeRecords(
  records: RemediationRecord[],
  machinesByUid: ReadonlyMap<string, MachineFacts>,
  unreadable: ReadonlySet<string>,
  now: number,
): ObservedRecords {
  const newlyRefused: OwnerReference[] = [];
  const out = records.map((r) => {
    const m = machinesByUid.get(r.uid);
    if (m === undefined && unreadable.has(r.machine)) return r;
    const o = observeRecord(r, m, now);
    if (o.refused && o.record.owner !== undefined) newlyRefused.push(o.record.owner);
    return o.record;
  });
  return { records: out, newlyRefused };
}

export function addOwners(list: OwnerReference[] | undefined, add: OwnerReference[]): OwnerReference[] | undefined {
  const all = [...(list ?? [])];
  for (const o of add) if (!all.some((x) => sameOwner(x, o))) all.push(o);
  all.sort((a, b) => (a.kind + '/' + a.name < b.kind + '/' + b.name ? -1 : 1));
  return all.length > 0 ? all : undefined;
}

/** Bounded list: finished records go first (oldest first); open ones only when nothing else is left. */
export function boundRecords(records: RemediationRecord[]): RemediationRecord[] {
  const limit = STATUS_LIMITS.remediations;
  const out = [...records];
  while (out.length > limit) {
    const i = out.findIndex((r) => !isOpen(r));
    out.splice(i >= 0 ? i : 0, 1);
  }
  return out;
}

/** Any record for this UID except a dry run (unless still in dry run): the Machine is never acted on twice. */
export function alreadyHandled(records: RemediationRecord[], uid: string, dryRun: boolean): boolean {
  return records.some((r) => r.uid === uid && (r.outcome !== 'DryRun' || dryRun));
}
