// The write-ahead: the check's status, which records every request before any Machine write, written with what must
// be read live before it; display-only changes coalesced. A 409 re-reads the check and decides again.
import { isDeepStrictEqual } from 'node:util';
import { capiResource } from '../../../api/capi/resources.js';
import { CHECK_RESOURCE } from '../../../api/v1alpha1/types.js';
import type { MachineJoinCheckStatus, RemediationOutcome } from '../../../api/v1alpha1/types.js';
import { isConflict, isNotFound, pathOf, type Json, type Resource } from '../../../runtime/client/rest.js';
import { factsOf } from './machine-writes.js';
import { checkWritten, clusterStale, readLive, resource } from './live-reads.js';
import { ROUNDS, writing } from './machine-converge.js';
import type { ExecutorDeps } from './deps.js';
import { plan } from '../plan/planner.js';
import { markedFrom } from '../requests/marks.js';
import { iso } from '../time.js';
import type { MachineTarget, Plan, Snapshot, Live, SnapshotSource } from '../types.js';

/**
 * Display-only changes to the status (counts, messages, the history, a mark first seen where it carries no time) ride
 * on the next decision's write (decisions are written at once); alone they are written only once the last write is
 * this old, so `kubectl get mjc` lags by at most this much. What a pass derives from a mark's own time is never
 * written alone (withoutMarkShown; docs/decisions/marked-derived-from-the-mark.md). 30 s: 5 minutes (tried for fewer
 * requests per mark) left counts and the timed list minutes behind the world (4 of 4 joined with 3 Machines left),
 * which operators and the e2e specs read (docs/decisions/requests-per-mark-four.md).
 */
export const STATUS_COALESCE_MS = 30_000;

/**
 * Display-only differences (what `kubectl get` shows, messages, the history, a mark first seen) are coalesced; every
 * other field is a decision, and so is an owner's answer that holds a request back (deferred, refused, unanswered). Each coalesced field is derived again from the world on every pass until written:
 * `marked`/`markedTime` from the Machine — its mark's own time where it carries one (then never written alone:
 * withoutMarkShown), else the first pass that sees it (an unanswered request is then timed from a later moment, never
 * earlier). A clock stopped while nobody can answer is a decision.
 */
export function decisive(status: MachineJoinCheckStatus | undefined): unknown {
  if (status === undefined) return {};
  const {
    expectedMachines,
    joinedMachines,
    joiningMachines,
    stuckMachines,
    heldMachines,
    heldReason,
    timedMachines,
    joinDurations,
    remediations,
    conditions,
    requests,
    ...rest
  } = status;
  return {
    ...rest,
    // A stopped clock is not display (marked, no markedTime: nobody can answer): said at once, so the bound runs again
    // whole after the pause even when the mark's own time was never written (marks.ts markedFrom would time it).
    ...(requests !== undefined
      ? {
          requests: requests.map(({ marked, markedTime, ...r }) =>
            r.state === 'Open' && marked === true && markedTime === undefined && r.answered !== true
              ? { ...r, clockStopped: true }
              : r,
          ),
        }
      : {}),
    conditions: (conditions ?? []).map((c) => [c.type, c.status, c.reason, c.observedGeneration]),
    // An owner's answer that holds a request back is said at once (DESIGN: "records the answer and says so"): the
    // operator acts on it, and it comes once per request; the answers of a request on its way are coalesced.
    answers: (remediations ?? [])
      .filter((r) => HELD_ANSWERS.has(r.outcome))
      .map((r) => [r.uid, r.outcome, r.ownerReason]),
  };
}

/**
 * `next` without what it derives from the Machines' own marks for requests the stored status has never said were
 * marked (marks.ts markedFrom): `marked`, `markedTime` and the history's Requested -> Marked. That alone is not
 * written, even after STATUS_COALESCE_MS (issue 37: 4 requests per mark); it rides on the next write made for
 * another reason, and is the same whichever pass writes it. A time not derived from the mark (the annotation's,
 * the first pass that sees it) is not taken out: it is written as before.
 */
export function withoutMarkShown(
  next: MachineJoinCheckStatus,
  prev: MachineJoinCheckStatus | undefined,
  s: Snapshot,
): MachineJoinCheckStatus {
  const stored = new Map((prev?.requests ?? []).map((r) => [r.uid, r]));
  const shown = new Set<string>();
  const requests = next.requests?.map((r) => {
    const was = stored.get(r.uid);
    const m = factsOf(s, r.uid);
    if (was === undefined || m === undefined || r.marked !== true) return r;
    const at = markedFrom(was, m, s.now);
    if (at === undefined || r.markedTime !== iso(at)) return r;
    shown.add(r.uid);
    const { marked: _marked, markedTime: _markedTime, ...rest } = r;
    return rest;
  });
  if (shown.size === 0) return next;
  const steps = new Map((prev?.remediations ?? []).map((h) => [h.uid, h.outcome]));
  const remediations = next.remediations?.map((h) =>
    shown.has(h.uid) && h.outcome === 'Marked' && steps.get(h.uid) === 'Requested'
      ? { ...h, outcome: 'Requested' as const }
      : h,
  );
  return {
    ...next,
    ...(requests !== undefined ? { requests } : {}),
    ...(remediations !== undefined ? { remediations } : {}),
  };
}

const HELD_ANSWERS: ReadonlySet<RemediationOutcome> = new Set(['Deferred', 'Refused', 'Unanswered']);

export type StatusWrite =
  /** judged: the snapshot the plan was made on (the check as it was before this write), when it was written now. */
  | {
      outcome: 'written' | 'same' | 'deferred' | 'conflict' | 'gone';
      s: Snapshot;
      p: Plan;
      judged?: Snapshot;
    }
  /** Any error but 404, 409 and a lost leadership (403 from RBAC on /status, an admission policy, a size limit). */
  | { outcome: 'refused'; s: Snapshot; p: Plan; error: Error };

/** A write the apiserver refused (any error but 404, 409 and a lost leadership): reported, retried with back-off. */
export async function writeStatus(
  deps: ExecutorDeps,
  s: Snapshot,
  p: Plan,
  live: Live,
  src: SnapshotSource,
): Promise<StatusWrite> {
  const ns = s.check.metadata.namespace;
  const name = s.check.metadata.name;
  for (let attempt = 0; attempt < ROUNDS; attempt++) {
    const next = JSON.parse(JSON.stringify(p.status)) as MachineJoinCheckStatus;
    const prev = s.check.status;
    // What only displays a mark the Machine shows is derived again by every pass, the same: never written alone.
    if (isDeepStrictEqual(withoutMarkShown(next, prev, s), prev ?? {})) return { outcome: 'same', s, p };
    const countsOnly = isDeepStrictEqual(decisive(next), decisive(prev));
    if (countsOnly && deps.lastStatusWrite !== undefined && deps.now() - deps.lastStatusWrite < STATUS_COALESCE_MS)
      return { outcome: 'deferred', s, p };
    checkWritten(live);
    try {
      // PUT on /status: the status stanza is replaced exactly; the resourceVersion guards it.
      const written = await deps.rest.put(pathOf(CHECK_RESOURCE, ns, name, 'status'), { ...s.check, status: next });
      live.check = written;
      deps.remember('check', written);
      deps.writeMetric('status', 'ok');
      // The snapshot the plan was made on, with the check as written: not rebuilt from the caches, which may have
      // taken newer Machines meanwhile (a Node appeared while this PUT was in flight) — each Machine write is built
      // from, and guarded by, the object judged (DESIGN: "Before any write"; issue 35).
      return { outcome: 'written', s: withCheck(s, written), p, judged: s };
    } catch (e) {
      if (isNotFound(e)) return { outcome: 'gone', s, p };
      if ((e as Error).name === 'WritesForbiddenError') throw e; // leadership lost: nothing more, at once
      if (!isConflict(e)) return { outcome: 'refused', s, p, error: e as Error };
      deps.writeMetric('status', 'conflict');
      // The check changed (a user edit, an annotation): read it and decide again before anything else.
      try {
        const fresh = await deps.rest.get(pathOf(CHECK_RESOURCE, ns, name));
        live.check = fresh;
        deps.remember('check', fresh);
      } catch (err) {
        if (isNotFound(err)) return { outcome: 'gone', s, p };
        throw err;
      }
      const again = src.build(live);
      if (again === undefined) return { outcome: 'gone', s, p };
      s = again;
      p = plan(s);
      // What the new plan decides without a write (a request forgotten, withdrawn, unanswered) is read live first,
      // with the Cluster if the plan it was read for wrote nothing.
      if (await readBeforeWrites(deps, resource(capiResource('Machine', deps.apiVersion)), p, s, live)) {
        s = src.build(live) ?? s;
        p = plan(s);
      }
    }
  }
  return { outcome: 'conflict', s, p };
}

/**
 * The live reads a plan needs before its status is written (mustRead, with the Cluster): false when none. The Cluster
 * a Machine write needs is read after the write-ahead (liveClusterGate).
 */
export async function readBeforeWrites(
  deps: ExecutorDeps,
  res: Resource,
  p: Plan,
  s: Snapshot,
  live: Live,
): Promise<boolean> {
  const unread = mustRead(p, s, live);
  if (unread.length === 0) return false;
  await readLive(deps, res, s, unread, live, clusterStale(live));
  return true;
}

/** The snapshot judged, with the check as the apiserver returned it after this process's own write. */
export function withCheck(s: Snapshot, check: Json): Snapshot {
  return { ...s, check: check as Snapshot['check'] };
}

/**
 * The Machines to read live before the status records this plan: those it decides without a write (Plan.confirm),
 * but where this plan's own write re-checks the decision (`byWrite`: guarded by the resourceVersion judged, it is the
 * read) — and those a write must be built from whose list the caches did not keep.
 */
function mustRead(p: Plan, s: Snapshot, live: Live): MachineTarget[] {
  const written = new Set(writing(p, s).map((i) => i.machine.uid));
  const withoutList = writing(p, s)
    .filter((i) => i.want !== 'delete' && factsOf(s, i.machine.uid)?.conditions === undefined)
    .map((i) => i.machine);
  return [...p.confirm.filter((t) => !(t.byWrite === true && written.has(t.uid))), ...withoutList].filter(
    (t, n, all) => !live.machines.has(t.uid) && all.findIndex((x) => x.uid === t.uid) === n,
  );
}
