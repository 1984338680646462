// The owner's answer (DESIGN: "How a replacement is asked of CAPI"): what the Machine's owner (or the
// MachineHealthCheck that acts for it) answered to a request, read from the Machine — whether someone acted on it,
// the outcome and the owner's words the history shows, and an owner that refused or left a request unanswered, which
// the guards ask nothing more (the facts themselves are read by api/capi/machine.ts).
import type { MachineFacts } from '../../../api/capi/model.js';
import type { OwnerReference, RemediationRecord, RequestRecord } from '../../../api/v1alpha1/types.js';
import { PATHS, sameOwner } from './paths.js';
import { ms, SECOND } from '../time.js';

const OWNER_WAITING = 'WaitingForRemediation';

/**
 * How far an owner's clock may lag JoinGuard's and its answer still count (both whole seconds): an answer ignored is
 * a request withdrawn as Unanswered while its owner holds it (issue 35, 9a; docs/decisions/answer-clock-skew.md).
 */
export const ANSWER_CLOCK_SKEW_MS = 30 * SECOND;

/** Someone acted on the request: the owner answered (or a MachineHealthCheck handed it on), or it is being deleted. */
export function answered(r: RequestRecord, m: MachineFacts): boolean {
  const path = r.path;
  if (m.deletingSince !== undefined) return true;
  const or = m.ownerRemediated;
  if (or === undefined) return false;
  // An answer comes after the question: an OwnerRemediated left by an earlier request (its owner has not dropped it
  // yet, e.g. after a deleted check withdrew its mark) does not answer a new one.
  const asked = ms(r.time);
  if (or.since !== undefined && asked !== undefined && or.since < asked - ANSWER_CLOCK_SKEW_MS) return false;
  if (or.reason !== undefined && or.reason !== OWNER_WAITING) return true;
  return path !== 'Report' && PATHS[path].answered; // the MHC marked it for the owner
}

/** The owner's answer the Machine shows, in its history entry. */
export function recordOwnerAnswer(h: RemediationRecord, m: MachineFacts | undefined): void {
  const or = m?.ownerRemediated;
  if (or?.status === 'False' && or.reason !== undefined && or.reason !== OWNER_WAITING) {
    h.ownerReason = or.reason;
    if (or.message !== undefined) h.ownerMessage = or.message;
  }
}

export function openOutcome(r: RequestRecord, m: MachineFacts): RemediationRecord['outcome'] {
  const reason = m.ownerRemediated?.status === 'False' ? m.ownerRemediated.reason : undefined;
  if (reason === 'CannotBeRemediated') return 'Refused';
  if (reason === 'RemediationDeferred') return 'Deferred';
  return r.marked ? 'Marked' : 'Requested';
}

/**
 * An owner that answered CannotBeRemediated to one of JoinGuard's requests, or left one unanswered, is asked
 * nothing more while that Machine is there and has not joined (from the world). Only requests since the last resume are
 * passed in (remediate.ts sinceResume), so `joinguard.io/resume` clears the stop; the Machine itself is not asked again.
 */
export function ownerRefusal(
  owner: OwnerReference | undefined,
  requests: readonly RequestRecord[],
  machinesByUid: { get(uid: string): MachineFacts | undefined },
): string | undefined {
  if (owner === undefined) return undefined;
  for (const r of requests) {
    if (!sameOwner(r.owner, owner)) continue;
    const m = machinesByUid.get(r.uid);
    if (m === undefined || m.nodeName !== undefined) continue;
    if (
      r.state === 'Open' &&
      m.ownerRemediated?.status === 'False' &&
      m.ownerRemediated.reason === 'CannotBeRemediated'
    ) {
      return (
        `${owner.kind}/${owner.name} answered CannotBeRemediated ` +
        `for ${r.machine}${m.ownerRemediated.message ? `: ${m.ownerRemediated.message}` : ''}`
      );
    }
    if (r.state === 'Withdrawn' && r.withdrawn === 'Unanswered') {
      return (
        `nobody acted on the request for ${r.machine} (path ${r.path}, ` +
        `owner ${owner.kind}/${owner.name}) within the bound`
      );
    }
  }
  return undefined;
}
