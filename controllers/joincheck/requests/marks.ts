// The life of a request (DESIGN: "How a replacement is asked of CAPI"; the paths are paths.ts) — level-triggered: every
// pass derives from
// the Machine and the request memory what the Machine must carry now (JoinGuard's mark, or no mark JoinGuard
// caused), and the executor converges it, whatever write failed or crashed before. A mark is not a deletion:
// owners defer, and a Machine may join while it waits; then JoinGuard withdraws its mark, again on every pass
// until none remains (cluster-api #12870).
import { carriesAnyMark, type MachineFacts } from '../../../api/capi/model.js';
import { markedMessage } from '../../../api/capi/remediation-writes.js';
import type { RemediationRecord, RequestRecord } from '../../../api/v1alpha1/types.js';
import { ANNOTATION_WITHDRAW_ALL, STATUS_LIMITS } from '../../../api/v1alpha1/types.js';
import { markOwner } from './deletion.js';
import { answersAnnotation, anyMark, causedMarks, ownerRef, PATHS, target, type Path } from './paths.js';
import { answered, openOutcome, recordOwnerAnswer } from './owner-answer.js';
import { formatDuration, iso, ms, MINUTE } from '../time.js';
import type { MachineVerdict, MarkIntent } from '../types.js';

/**
 * A request nobody acted on (no owner answer, no MachineHealthCheck taking it) within this is withdrawn and reported.
 */
export const UNANSWERED_AFTER_MS = 15 * MINUTE;

export interface FollowInput {
  requests: readonly RequestRecord[];
  history: readonly RemediationRecord[];
  machinesByUid: { get(uid: string): MachineFacts | undefined };
  /** Machines the readers could not understand (by uid or name): never taken for gone. */
  unreadable: ReadonlySet<string>;
  /** A Machine not found is not taken for gone either (its Cluster is paused: clusterctl move may be copying it). */
  keepMissing?: boolean;
  /** Joined, as the planner computed it once per Machine (rules/verdict-rules.ts isJoined). */
  joined: (m: MachineFacts) => boolean;
  dryRun: boolean;
  /** The check's joinguard.io/withdraw-all: every open request is withdrawn. */
  withdrawAll?: boolean;
  /**
   * Nobody can answer the request now (its Cluster or the acting MachineHealthCheck paused): its unanswered clock
   * stops, and starts again from the first pass that can be answered (DESIGN: paused time does not count).
   */
  clockStopped?: (r: RequestRecord, m: MachineFacts) => boolean;
  /** A visible mark nobody acted on for this long is withdrawn (UNANSWERED_AFTER_MS; the e2e shortens it). */
  unansweredAfterMs?: number;
  now: number;
}

export interface Followed {
  requests: RequestRecord[];
  history: RemediationRecord[];
  /** Requests that went unanswered in this plan (for the message and the event). */
  unanswered: RequestRecord[];
}

/** Each request follows what its Machine shows now; the history follows the requests. */
export function followRequests(i: FollowInput): Followed {
  const requests: RequestRecord[] = [];
  const history = i.history.map((h) => ({ ...h }));
  const unanswered: RequestRecord[] = [];
  const show = (r: RequestRecord, m: MachineFacts | undefined, outcome?: RemediationRecord['outcome']) => {
    const h = history.find((x) => x.uid === r.uid);
    if (h === undefined) return;
    if (outcome !== undefined && h.outcome !== outcome) h.outcome = outcome;
    recordOwnerAnswer(h, m);
    if (outcome !== undefined && FINISHED.has(outcome) && h.finishedTime === undefined) h.finishedTime = iso(i.now);
  };
  for (const r0 of i.requests) {
    const m = i.machinesByUid.get(r0.uid);
    if (m === undefined) {
      if (i.keepMissing === true || i.unreadable.has(r0.uid) || i.unreadable.has(r0.machine)) requests.push(r0);
      else if (r0.state === 'Open') show(r0, m, 'Replaced');
      continue;
    }
    if (r0.state === 'DryRun' && !i.dryRun) continue; // asked for real once the dry run ends
    const r: RequestRecord = { ...r0 };
    if (r.state === 'Open') {
      if (!r.marked && r.path !== 'Report' && PATHS[r.path].visible(m)) r.marked = true;
      if (!r.answered && answered(r, m)) r.answered = true;
      // Timed from the mark's own time on the Machine (markedFrom: the same whichever pass sees it, so it need not be
      // written alone), else from the first pass that sees it (the annotation carries no time; a record from before
      // markedTime existed); while nobody can answer, not timed: the bound runs again, whole, from the first pass that
      // can be answered (the record then says marked without a time: never the mark's time again).
      if (!r.answered && i.clockStopped?.(r, m) === true) delete r.markedTime;
      else if (r.marked && r.markedTime === undefined) r.markedTime = iso(markedFrom(r0, m, i.now) ?? i.now);
      const deleting = m.deletingSince !== undefined;
      if (!deleting && i.joined(m)) withdraw(r, 'Joined');
      else if (!deleting && m.skipReason !== undefined) withdraw(r, 'OptedOut');
      else if (!deleting && i.withdrawAll === true) withdraw(r, 'WithdrawAll');
      else if (
        !deleting &&
        !r.answered &&
        r.markedTime !== undefined &&
        i.now >= (ms(r.markedTime) ?? i.now) + (i.unansweredAfterMs ?? UNANSWERED_AFTER_MS)
      ) {
        withdraw(r, 'Unanswered');
        unanswered.push(r);
      }
      show(r, m, (r.state as RequestRecord['state']) === 'Withdrawn' ? withdrawnOutcome(r) : openOutcome(r, m));
    }
    // Joined for good (nodeRef is never cleared) and clean: nothing left to remember.
    if (r.state === 'Withdrawn' && m.nodeName !== undefined && !anyMark(causedMarks(m, r.path))) continue;
    requests.push(r);
  }
  return { requests, history, unanswered };
}

/**
 * When a request's mark was made, as its Machine says (PATHS.markedAt: its condition's lastTransitionTime, the
 * deletion's timestamp), for a stored record that has never said it was marked: a time that does not depend on the
 * pass that reads it, so what only displays the mark (`marked`, `markedTime`, the history's Marked) rides on the next
 * write made for another reason (act/status-write.ts; docs/decisions/marked-derived-from-the-mark.md). Anyone may
 * write a Machine: never before the request as JoinGuard recorded it, never after now. None where the mark carries
 * no time (the annotation), is not visible, or the record already says marked without a time (its clock restarted
 * after a pause or a move): the first pass that sees it then, as before.
 */
export function markedFrom(r: RequestRecord, m: MachineFacts, now: number): number | undefined {
  if (r.path === 'Report' || r.marked === true || r.markedTime !== undefined || !PATHS[r.path].visible(m))
    return undefined;
  const at = PATHS[r.path].markedAt(m);
  const asked = ms(r.time);
  if (at === undefined || asked === undefined) return undefined;
  return Math.min(Math.max(at, asked), now);
}

const FINISHED = new Set<RemediationRecord['outcome']>(['Withdrawn', 'Cancelled', 'Unanswered', 'Replaced']);

/**
 * The request was made: its mark was seen on the Machine (or is there now). An open request not yet made is a
 * decision recorded before its write (write-ahead), on the Machine as the caches had it: its write waits while the
 * Machine is not due (describe.ts), since the write that makes it may meet a 409 whose read shows it was not.
 */
export function made(r: RequestRecord, m: MachineFacts | undefined): boolean {
  return r.path === 'Report' || r.marked === true || (m !== undefined && PATHS[r.path].visible(m));
}

function withdraw(r: RequestRecord, why: NonNullable<RequestRecord['withdrawn']>): void {
  r.state = 'Withdrawn';
  r.withdrawn = why;
}

function withdrawnOutcome(r: RequestRecord): RemediationRecord['outcome'] {
  if (r.withdrawn === 'Unanswered') return 'Unanswered';
  return r.marked ? 'Withdrawn' : 'Cancelled';
}

/**
 * Appends a new request to the bounded history (oldest finished entries leave first). With its Machine, an open
 * request shows at once what the next plan's followRequests would (an owner's answer already on the Machine, e.g.
 * a deferral of a deleted check's mark): planning twice changes nothing.
 */
export function appendHistory(
  history: RemediationRecord[],
  r: RequestRecord,
  outcome: RemediationRecord['outcome'],
  m?: MachineFacts,
): RemediationRecord[] {
  const entry: RemediationRecord = {
    machine: r.machine,
    uid: r.uid,
    ...(r.owner ? { owner: r.owner } : {}),
    time: r.time,
    path: r.path,
    outcome,
    kind: r.kind,
    ...(r.canary ? { canary: true } : {}),
    ...(r.firstControlPlane ? { firstControlPlane: true } : {}),
  };
  if (m !== undefined && r.state === 'Open') {
    entry.outcome = openOutcome(r, m);
    recordOwnerAnswer(entry, m);
  }
  const out = [...history.filter((h) => h.uid !== r.uid), entry];
  while (out.length > STATUS_LIMITS.remediations) {
    const i = out.findIndex((h) => FINISHED.has(h.outcome) || h.outcome === 'Reported' || h.outcome === 'DryRun');
    out.splice(i >= 0 ? i : 0, 1);
  }
  return out;
}

export interface IntentInput {
  /** Joined, as the planner computed it once per Machine (rules/verdict-rules.ts isJoined). */
  joined: (m: MachineFacts) => boolean;
  checkName: string;
  /** The check's uid: the marker every mark carries (joinguard.io/requested-by). */
  checkUid?: string;
  /** The namespace's live checks: a marker naming none of them is a deleted check's (deletion.ts). */
  liveChecks?: ReadonlySet<string>;
  /** Machines (uids) in the check's scope: a deleted check's marks are withdrawn there. */
  inScope?: ReadonlySet<string>;
  /** joinguard.io/withdraw-all, or the check is being deleted: every mark this check made is withdrawn. */
  withdrawAll?: boolean;
  deleting?: boolean;
  unansweredAfterMs?: number;
}

/**
 * What every Machine must carry now. Open requests keep their mark (written only where the Machine carries no
 * mark at all: never over someone else's, never re-asserting what an owner changed), with the check's marker;
 * withdrawn ones, and joined Machines that carry a mark only JoinGuard writes (its reasons, its condition) even
 * with no memory of asking, lose every mark JoinGuard caused and the marker. A mark whose marker names another
 * live check is never touched; one naming a deleted check is withdrawn where this check's scope holds the
 * Machine, or anywhere in its Cluster once the Machine joined. A Machine being deleted is left alone.
 */
export function markIntents(
  requests: readonly RequestRecord[],
  machines: readonly MachineFacts[],
  o: IntentInput,
): MarkIntent[] {
  const out: MarkIntent[] = [];
  const byUid = new Map(requests.map((r) => [r.uid, r]));
  for (const m of machines) {
    if (m.deletingSince !== undefined) continue;
    const r = byUid.get(m.uid);
    // Most of a fleet: asked nothing, carrying no mark at all.
    if (r === undefined && m.requestedBy === undefined && !carriesAnyMark(m)) continue;
    const owner = markOwner(m, o.checkUid, o.liveChecks);
    if (owner === 'other') continue; // another live check's mark: its business
    const orphan = owner === 'orphan';
    const joined = o.joined(m);
    // A deleted check's mark: the check whose scope holds it withdraws it — unless this check asked for the Machine
    // (its request followed the Machine through clusterctl move: the marker names the check before the move). On a
    // joined Machine any check of its Cluster does: no live check may hold it, and a joined Machine keeps no mark.
    if (orphan && r === undefined && o.inScope?.has(m.uid) !== true && !joined) continue;
    const intent = r?.state === 'Open' ? askIntent(m, r, o) : withdrawIntent({ m, r, owner, joined }, o);
    if (intent !== undefined) out.push(intent);
  }
  return out;
}

/** An open request's mark (or delete), with the check's marker; none for a request only reported. */
function askIntent(m: MachineFacts, r: RequestRecord, o: IntentInput): MarkIntent | undefined {
  const t = target(m);
  const marker = o.checkUid !== undefined ? { marker: o.checkUid } : {};
  // The marker inside the mark's own write: the condition's message names the check and its uid.
  const says = `${r.kind}, requested at ${r.time}`;
  const message =
    o.checkUid !== undefined
      ? markedMessage({ namespace: m.namespace, name: o.checkName, uid: o.checkUid }, says)
      : `JoinGuard (MachineJoinCheck ${m.namespace}/${o.checkName}): ${says}`;
  const event = {
    on: 'Machine' as const,
    machine: t,
    reason: 'RemediationRequested' as const,
    warning: true,
    message:
      `Machine ${m.name}: ${r.kind}. JoinGuard asks for its replacement ` +
      `via path ${r.path}${r.canary ? ', as a canary' : ''}.`,
  };
  if (r.path === 'Delete') return { want: 'delete', machine: t, kind: r.kind, event };
  if (r.path !== 'Report') return { want: 'mark', machine: t, path: r.path, kind: r.kind, message, event, ...marker };
  return undefined;
}

/** The withdrawal of every mark JoinGuard caused, and of its marker, where nothing asks for them now. */
function withdrawIntent(
  x: { m: MachineFacts; r: RequestRecord | undefined; owner: ReturnType<typeof markOwner>; joined: boolean },
  o: IntentInput,
): MarkIntent | undefined {
  const { m, r, owner, joined } = x;
  const withdrawAll = o.withdrawAll ?? false;
  const orphan = owner === 'orphan';
  const withdrawing = r?.state === 'Withdrawn';
  // A mark with no record of it: JoinGuard's own reasons, or its marker, identify it; withdrawn once joined,
  // when all are, or when its check is gone.
  const unremembered = r === undefined && (withdrawAll || orphan || joined);
  if (!withdrawing && !unremembered) return undefined;
  // With no memory of the path, the marker says the remediate-machine annotation is JoinGuard's too.
  const recorded: Path | undefined = r !== undefined && r.path !== 'Report' ? r.path : undefined;
  const path: Path = recorded ?? unrememberedPath(m, owner !== 'unmarked');
  const marks = causedMarks(m, path);
  const staleMarker = owner === 'this' || orphan ? { marker: m.requestedBy as string } : {};
  if (!anyMark(marks) && !('marker' in staleMarker)) return undefined;
  const why = withdrawalWhy({ m, r, path, orphan, allWithdrawn: r === undefined && withdrawAll && !joined }, o);
  // Joined (nodeRef is never cleared), the check deleted, or its check gone: true again on every pass.
  const derived = joined || o.deleting === true || orphan;
  const t = target(m);
  return {
    want: 'withdraw',
    machine: t,
    path,
    ...(derived ? {} : { needsRecord: true as const }),
    event: {
      on: 'Machine',
      machine: t,
      reason: 'RemediationWithdrawn',
      warning: r?.withdrawn === 'Unanswered',
      message: `Machine ${m.name}: ${why}.`,
    },
    ...staleMarker,
  };
}

/** A new request record for a Stuck Machine. */
export function newRequest(
  m: MachineFacts,
  v: MachineVerdict,
  path: RequestRecord['path'],
  state: RequestRecord['state'],
  now: number,
  canary = false,
): RequestRecord {
  const owner = ownerRef(m);
  const r: RequestRecord = {
    machine: m.name,
    uid: m.uid,
    ...(owner ? { owner } : {}),
    path,
    kind: v.failureKind ?? 'JoinTimeout',
    time: iso(now),
    state,
    ...(canary ? { canary: true } : {}),
    ...(v.firstControlPlane ? { firstControlPlane: true } : {}),
  };
  // As followRequests would find it in the next plan (planning twice changes nothing): an answer in the same second.
  if (state === 'Open' && path !== 'Report' && answered(r, m)) r.answered = true;
  return r;
}

/**
 * The path of a mark JoinGuard has no record of: the annotation if its marker says so — or the MachineHealthCheck's
 * answer to it, once a withdrawal cut short removed the annotation alone (it goes first) — else what the Machine shows.
 */
function unrememberedPath(m: MachineFacts, marked: boolean): Path {
  if (marked && (m.remediateAnnotation || answersAnnotation(m))) return 'RemediateAnnotation';
  return m.joinGuardJoined?.status === 'False' ? 'MachineCondition' : 'OwnerRemediated';
}

/** Why a mark is withdrawn, for the RemediationWithdrawn event. */
function withdrawalWhy(
  w: { m: MachineFacts; r: RequestRecord | undefined; path: Path; orphan: boolean; allWithdrawn: boolean },
  o: IntentInput,
): string {
  const { m, r, path } = w;
  if (w.orphan) {
    return (
      `its mark was made by a MachineJoinCheck that no longer exists ` +
      `(uid ${m.requestedBy}); JoinGuard withdraws it, and ${o.checkName} ` +
      `judges the Machine anew`
    );
  }
  if (r?.withdrawn === 'Unanswered') {
    const bound = formatDuration(o.unansweredAfterMs ?? UNANSWERED_AFTER_MS);
    return (
      `nobody acted on JoinGuard's ${path} request within ${bound} ` +
      `of its mark; it is withdrawn and the Machine is not asked ` +
      `again`
    );
  }
  if (r?.withdrawn === 'OptedOut')
    return `it was opted out (${m.skipReason}) before it was replaced; JoinGuard withdraws its ${path} request`;
  if (r?.withdrawn === 'WithdrawAll' || w.allWithdrawn) {
    if (o.deleting)
      return `its check ${o.checkName} is being deleted; JoinGuard withdraws its ${path} request before the check goes`;
    return (
      `its check carries ${ANNOTATION_WITHDRAW_ALL}; JoinGuard ` +
      `withdraws its ${path} request (and never asks for this Machine ` +
      `again)`
    );
  }
  const node = m.nodeName !== undefined ? `Node ${m.nodeName}` : 'a Node with its providerID';
  return `it joined (${node}) before it was replaced; JoinGuard withdraws its ${path} request`;
}
