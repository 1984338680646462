// The thin executor: converges the world to one check's Plan. It plans from the caches, reads live what a write
// targets and plans again on it (live-reads.ts). It writes the check's status first (write-ahead: every request is
// recorded before it is made), then converges each Machine to its intent — writing only what is missing, guarded
// by the resourceVersion the decision was made on — then the check's own metadata (before the Machines while the
// finalizer is missing and a mark is due: no mark before the finalizer). 404 on delete is done; 409
// re-reads and decides again; any other refusal is that Machine's alone (refusals.ts); a lost leadership forbids
// every write (the REST client refuses them) and ends the pass at once. Each Machine is converged behind the live-Cluster gate (machine-converge.ts).
import { isDeepStrictEqual } from 'node:util';
import { capiResource } from '../../../api/capi/resources.js';
import {
  ANNOTATION_MEMORY,
  ANNOTATION_REQUESTED_BY,
  ANNOTATION_RESUME,
  CHECK_RESOURCE,
  CLUSTERCTL_ANNOTATION_BLOCK_MOVE,
  FINALIZER,
} from '../../../api/v1alpha1/types.js';
import type { MachineJoinCheckStatus, RemediationOutcome } from '../../../api/v1alpha1/types.js';
import { isConflict, isNotFound, pathOf, type Json, type Resource } from '../../../runtime/client/rest.js';
import { DELETION_BOUND_MS } from '../requests/deletion.js';
import { factsOf, needsWrite, ref } from './machine-writes.js';
import { checkUnchanged, checkWritten, clusterStale, readLive, resource } from './live-reads.js';
import { convergeOne, LiveClusterGate, ROUNDS, writing } from './machine-converge.js';
import type { ExecutorDeps } from './deps.js';
import { plan } from '../plan/planner.js';
import { Refusals } from './refusals.js';
import type {
  MachineTarget,
  MarkIntent,
  Plan,
  PlannedEvent,
  Snapshot,
  Live,
  SnapshotSource,
  RefusedWrite,
} from '../types.js';

export interface Result {
  plan?: Plan;
  /** Epoch ms of the next deadline, if any. */
  wakeAt?: number;
  /** Run again after this long (a conflict, a coalesced status write). */
  requeueAfterMs?: number;
  /** The status was written now (epoch ms). */
  statusWrittenAt?: number;
}

/**
 * Display-only changes to the status (counts, messages, the history, a mark first seen) ride on the next decision's
 * write (decisions are written at once); alone they are written only once the last write is this old, so `kubectl get
 * mjc` lags by at most this much. 30 s: 5 minutes (tried for fewer requests per mark) left counts and the timed list
 * minutes behind the world (4 of 4 joined with 3 Machines left), which operators and the e2e specs read
 * (docs/decisions/requests-per-mark-four.md).
 */
export const STATUS_COALESCE_MS = 30_000;

export async function execute(deps: ExecutorDeps, src: SnapshotSource): Promise<Result> {
  const machineRes = resource(capiResource('Machine', deps.apiVersion));
  const live: Live = { machines: new Map() };
  let s = src.build(live);
  if (s === undefined) return {};
  let p = plan(s);

  const refusals = deps.refusals ?? new Refusals();
  // Before any write: the Cluster read live, and the plan made again on it (a Cluster paused or disconnected since the
  // cache saw it writes nothing). A Machine is read live only where no write stands for the read: a write is built
  // from the Machine as judged and guarded by its resourceVersion, so a Machine that changed since (it joined) answers
  // 409, and that is its live read and a new decision (DESIGN: "Before any write"). Read first: the Machines whose new
  // state the plan records without writing to them (a failure that raises the suspicion, a request withdrawn or
  // unanswered) — the status must not record a decision a stale cache made.
  for (let round = 0; round <= ROUNDS; round++) {
    if (!(await readBeforeWrites(deps, machineRes, p, s, live))) break;
    s = src.build(live);
    if (s === undefined) return {};
    p = plan(s);
  }

  // clusterctl move's block-move before the status records anything a move must carry (a suspicion, a request): a
  // crash between the two writes, or a status refused, must not leave a record that a move would strip unblocked.
  // Not where it would replace a carried memory annotation: that goes only once the status holds the memory.
  // With it, in the same one patch, what needs no record: the Cluster as owner, the finalizer.
  if (p.check.blockMove === true && !(ANNOTATION_MEMORY in (s.check.metadata.annotations ?? {}))) {
    const { blockMove, ownerCluster, addFinalizer } = p.check;
    const first = { blockMove, ...(ownerCluster ? { ownerCluster } : {}), ...(addFinalizer ? { addFinalizer } : {}) };
    if (!(await writeCheckMetadata(deps, s, { ...p, check: first }, live))) return { requeueAfterMs: 100 };
    if (live.check !== undefined) {
      s = withCheck(s, live.check);
      p = plan(s);
    }
  }

  // Write-ahead: the status that records every request, before any Machine write.
  const written = await writeStatus(deps, s, p, live, src);
  // Not applied: no plan, so the caller neither keeps its view nor counts the newly settled Machines as planned with
  // (a check gone too: a stale cache may still reconcile it, and must then plan with those Machines again).
  if (written.outcome === 'gone') return {};
  if (written.outcome === 'conflict') return { requeueAfterMs: 100 };
  if (written.outcome === 'refused') return withdrawUnrecorded(deps, machineRes, written, live, src, refusals);
  ({ s, p } = written);
  let judged = written.judged ?? s;
  if (written.outcome !== 'deferred') for (const e of p.events) deps.emit(e, s.check);

  // Converge every Machine to its intent, each on its own, withdrawals first: a write refused for one Machine is
  // reported and retried with back-off, and never holds back another (DESIGN: Withdrawal).
  let requeue =
    written.outcome === 'deferred'
      ? Math.max(0, (deps.lastStatusWrite ?? 0) + STATUS_COALESCE_MS - deps.now())
      : undefined;
  // Then the requests in the order they were recorded: one recorded earlier and not made yet (a crash, a refusal) goes
  // before a later one, so each lands within the budget it was recorded under (maxPerOwner raised meanwhile).
  const recordedAt = new Map((p.status.requests ?? []).map((r, n) => [r.uid, n]));
  const ordered = [
    ...p.intents.filter((i) => i.want === 'withdraw'),
    ...p.intents
      .filter((i) => i.want !== 'withdraw')
      .sort((a, b) => (recordedAt.get(a.machine.uid) ?? 0) - (recordedAt.get(b.machine.uid) ?? 0)),
  ];
  // A mark or a delete is made only on the check as it was decided on: when the status was not written now, the check
  // is read live first, and a view that is stale (another replica changed the check, or finalized it) writes
  // withdrawals only this pass.
  let marksAllowed = true;
  const decidedOn = s;
  if (
    written.outcome !== 'written' &&
    p.intents.some((i) => i.want !== 'withdraw' && needsWrite(i, factsOf(decidedOn, i.machine.uid)))
  ) {
    marksAllowed = await checkUnchanged(deps, s);
    if (!marksAllowed) requeue = 100;
  }
  // The finalizer before the first mark: a check deleted between its mark and its finalizer (a crash between the two
  // writes) would go at once with that mark left on the Machine (DESIGN: Deleting a check). The check's metadata is
  // then written before the Machines, in the same one patch.
  let metadataWritten = false;
  if (marksAllowed && p.check.addFinalizer && !(s.check.metadata.finalizers ?? []).includes(FINALIZER)) {
    if (p.intents.some((i) => i.want !== 'withdraw' && needsWrite(i, factsOf(decidedOn, i.machine.uid)))) {
      metadataWritten = true;
      marksAllowed = await writeCheckMetadata(deps, s, p, live);
      if (marksAllowed && live.check !== undefined) s = withCheck(s, live.check);
      else requeue = 100;
    }
  }
  // The Cluster read live after the write-ahead, right before the Machine writes, so that a pause stored while the
  // status was written is seen (DESIGN: "Before any write"): the plan made again on it, with the Machines as judged.
  // Where that changes a decision (a paused Cluster asks nothing), the new one is recorded before anything is written.
  const gate = new LiveClusterGate(deps, machineRes, live, src);
  const again = await gate.plan(judged, s, p);
  if (again !== undefined && !isDeepStrictEqual(decisive(again.status), decisive(p.status))) {
    const w = await writeStatus(deps, s, again, live, src);
    if (w.outcome === 'written' || w.outcome === 'same') {
      ({ s, p } = w);
      judged = w.judged ?? judged;
    } else {
      gate.close();
      requeue = Math.min(requeue ?? 100, 100);
    }
  }
  // The check's own metadata follows the live Cluster too: a deleted check's finalizer waits while it is paused, so a
  // bound that passes meanwhile never lets the check go past a mark it could not withdraw (the cache may not show the
  // pause yet: a live Cluster is never cached).
  if (again !== undefined) p = { ...p, check: again.check };
  // The plan acted on: decided again when a Machine's write met a 409 (and recorded first when that changed a
  // decision), so that every Machine is written as the latest recorded decision says, not as an earlier one did.
  let latest = p;
  for (const first of ordered) {
    const uid = first.machine.uid;
    const intent = latest.intents.find((x) => x.machine.uid === uid);
    if (intent === undefined || (!marksAllowed && intent.want !== 'withdraw')) continue;
    if (!needsWrite(intent, factsOf(s, uid))) {
      refusals.cleared(uid);
      continue;
    }
    if (refusals.waiting(uid, deps.now())) continue;
    const r = await convergeOne(
      deps,
      machineRes,
      intent,
      live,
      s,
      gate,
      () => judged,
      async (now) => {
        s = now;
        let next = plan(s);
        // The new decision is recorded before it is acted on, as the first was (a request dropped, a time pinned): a
        // restart then decides the same. Recording it is a write of the check: the gate reads the Cluster again.
        if (!isDeepStrictEqual(decisive(next.status), decisive(s.check.status))) {
          const w = await writeStatus(deps, s, next, live, src);
          if (w.outcome !== 'written' && w.outcome !== 'same') {
            // Not recorded (refused, or its reply lost): nothing more is written this pass — the plan at hand was
            // made on older Machines than the snapshot now read (seed 191426184: a joined Machine deleted).
            gate.close();
            requeue = Math.min(requeue ?? 100, 100);
            return undefined;
          }
          ({ s, p: next } = w);
          judged = w.judged ?? s;
        } else judged = s;
        latest = next;
        return next.intents.find((x) => x.machine.uid === uid);
      },
    );
    s = r.s;
    if (r.held) requeue = Math.min(requeue ?? 100, 100);
    if (typeof r.result === 'object') {
      const f = refusals.refused(intent.machine, r.result.want, r.result.error, deps.now());
      deps.log.warn('write refused: retried with back-off, other Machines go on', {
        Machine: ref(intent.machine),
        write: r.result.want,
        cause: f.message,
        retryInMs: f.retryAt - deps.now(),
      });
      deps.emit(refusedEvent(intent, f), s.check);
      continue;
    }
    refusals.cleared(uid);
    if (r.unsettled) requeue = Math.min(requeue ?? 1000, 1000);
  }
  p = latest;
  // Kept while its request is open too: a refused request waiting for maxInFlight is still reported, and still holds no
  // budget (remediate.ts).
  const open = (p.status.requests ?? []).filter((r) => r.state === 'Open').map((r) => r.uid);
  refusals.keepOnly(new Set([...p.intents.map((i) => i.machine.uid), ...open]));
  const retryAt = refusals.nextRetryAt();
  if (retryAt !== undefined) requeue = Math.min(requeue ?? Infinity, Math.max(0, retryAt - deps.now()));

  if (!metadataWritten) await writeCheckMetadata(deps, s, p, live);
  return {
    plan: p,
    ...(p.wakeAt !== undefined ? { wakeAt: p.wakeAt } : {}),
    ...(requeue !== undefined ? { requeueAfterMs: requeue } : {}),
    ...(written.outcome === 'written' ? { statusWrittenAt: deps.now() } : {}),
  };
}

/**
 * Display-only differences (what `kubectl get` shows, messages, the history, a mark first seen) are coalesced; every
 * other field is a decision, and so is an owner's answer that holds a request back (deferred, refused, unanswered). Each coalesced field is derived again from the world on every pass until written:
 * `marked`/`markedTime` from the Machine (an unanswered request is then timed from a later moment, never earlier).
 */
function decisive(status: MachineJoinCheckStatus | undefined): unknown {
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
    ...(requests !== undefined ? { requests: requests.map(({ marked, markedTime, ...r }) => r) } : {}),
    conditions: (conditions ?? []).map((c) => [c.type, c.status, c.reason, c.observedGeneration]),
    // An owner's answer that holds a request back is said at once (DESIGN: "records the answer and says so"): the
    // operator acts on it, and it comes once per request; the answers of a request on its way are coalesced.
    answers: (remediations ?? [])
      .filter((r) => HELD_ANSWERS.has(r.outcome))
      .map((r) => [r.uid, r.outcome, r.ownerReason]),
  };
}

const HELD_ANSWERS: ReadonlySet<RemediationOutcome> = new Set(['Deferred', 'Refused', 'Unanswered']);

type StatusWrite =
  /** judged: the snapshot the plan was made on (the check as it was before this write), when it was written now. */
  | {
      outcome: 'written' | 'same' | 'deferred' | 'conflict' | 'gone';
      s: Snapshot;
      p: Plan;
      judged?: Snapshot;
    }
  /** Any error but 404, 409 and a lost leadership (403 from RBAC on /status, an admission policy, a size limit). */
  | { outcome: 'refused'; s: Snapshot; p: Plan; error: Error };

/**
 * The check's status write was refused: nothing is asked (no request without its record), but every withdrawal that
 * needs no record is still written — each Machine converges on its own, withdrawals first (DESIGN: Withdrawal). A
 * withdrawal that rests on something undone later (a skip annotation, withdraw-all) or on memory (unanswered) waits
 * for its record while its request is open in the stored status. The check's metadata follows the world (the
 * finalizer), but a resume is not taken as acted on. Then the refusal is the pass's error: retried with back-off.
 */
async function withdrawUnrecorded(
  deps: ExecutorDeps,
  machineRes: Resource,
  w: Extract<StatusWrite, { outcome: 'refused' }>,
  live: Live,
  src: SnapshotSource,
  refusals: Refusals,
): Promise<never> {
  let { s } = w;
  const { p } = w;
  const stored = new Map((s.check.status?.requests ?? []).map((r) => [r.uid, r.state]));
  deps.writeMetric('status', 'error');
  deps.log.warn("the check's status write was refused: nothing is asked; withdrawals that need no record go on", {
    cause: w.error.message,
  });
  deps.emit(
    {
      on: 'Check',
      reason: 'StatusWriteRefused',
      warning: true,
      message:
        `JoinGuard cannot write this check's status: ${w.error.message}. ` +
        `Nothing is asked of CAPI until it can (every request is recorded before it is made); marks on Machines that ` +
        `joined are still withdrawn. Retried with back-off.`,
    },
    s.check,
  );
  let unsettled = false;
  // The refused PUT may have landed (a lost reply): the gate reads the Cluster again before any withdrawal.
  const gate = new LiveClusterGate(deps, machineRes, live, src);
  const again = await gate.plan(s, s, p);
  for (const intent of p.intents) {
    if (intent.want !== 'withdraw') continue;
    if (intent.needsRecord === true && stored.get(intent.machine.uid) === 'Open') continue;
    const uid = intent.machine.uid;
    if (!needsWrite(intent, factsOf(s, uid)) || refusals.waiting(uid, deps.now())) continue;
    // A 409: read it and decide again (only a withdrawal is written here, on the snapshot as read).
    const r = await convergeOne(
      deps,
      machineRes,
      intent,
      live,
      s,
      gate,
      () => s,
      (now) => {
        s = now;
        return plan(s).intents.find((x) => x.machine.uid === uid && x.want === 'withdraw');
      },
    );
    s = r.s;
    if (typeof r.result === 'object')
      deps.emit(
        refusedEvent(intent, refusals.refused(intent.machine, r.result.want, r.result.error, deps.now())),
        s.check,
      );
    if (r.unsettled) unsettled = true;
  }
  // The finalizer follows the world, a resume is not taken as acted on, and no deleted check goes at its bound past a
  // withdrawal that meets conflicts still (the next pass makes it). Nor is the carried memory taken as stored: its
  // annotation stays (clusterctl move takes it along), no block-move replacing it, while the status cannot be written.
  const { removeResume: _notRecorded, blockMove: _notStored, ...check } = (again ?? p).check;
  if (unsettled) delete check.removeFinalizer;
  await writeCheckMetadata(deps, s, { ...p, check }, live);
  throw w.error;
}

/** A write the apiserver refused (any error but 404, 409 and a lost leadership): reported, retried with back-off. */
async function writeStatus(
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
    if (isDeepStrictEqual(next, prev ?? {})) return { outcome: 'same', s, p };
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
async function readBeforeWrites(deps: ExecutorDeps, res: Resource, p: Plan, s: Snapshot, live: Live): Promise<boolean> {
  const unread = mustRead(p, s, live);
  if (unread.length === 0) return false;
  await readLive(deps, res, s, unread, live, clusterStale(live));
  return true;
}

/** The snapshot judged, with the check as the apiserver returned it after this process's own write. */
function withCheck(s: Snapshot, check: Json): Snapshot {
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

function refusedEvent(i: MarkIntent, f: RefusedWrite): PlannedEvent {
  const what = { withdraw: 'withdrawal of its mark', delete: 'deletion', mark: 'mark' }[i.want];
  return {
    on: 'Machine',
    machine: i.machine,
    reason: 'WriteRefused',
    warning: true,
    message:
      `Machine ${i.machine.name}: JoinGuard's ${what} was refused: ` +
      `${f.message}. It is retried with back-off; other Machines ` +
      `are not held back.`,
  };
}

/**
 * The check's own metadata: resume acted on, the Cluster as owner, clusterctl move's block-move and memory, the
 * finalizer. False when the check changed or went since (the next reconcile decides again).
 */
async function writeCheckMetadata(deps: ExecutorDeps, s: Snapshot, p: Plan, live: Live): Promise<boolean> {
  const c = p.check;
  const meta = s.check.metadata;
  const annotations: Record<string, string | null> = {};
  const have = meta.annotations ?? {};
  if (c.removeResume !== undefined && have[ANNOTATION_RESUME] === c.removeResume) annotations[ANNOTATION_RESUME] = null;
  if (c.carryMemory !== undefined) {
    if (have[ANNOTATION_MEMORY] !== c.carryMemory) annotations[ANNOTATION_MEMORY] = c.carryMemory;
    if (CLUSTERCTL_ANNOTATION_BLOCK_MOVE in have) annotations[CLUSTERCTL_ANNOTATION_BLOCK_MOVE] = null;
  }
  if (c.blockMove) {
    if (!(CLUSTERCTL_ANNOTATION_BLOCK_MOVE in have)) annotations[CLUSTERCTL_ANNOTATION_BLOCK_MOVE] = 'joinguard.io';
    if (ANNOTATION_MEMORY in have) annotations[ANNOTATION_MEMORY] = null;
  }
  const body: Json = { metadata: { resourceVersion: meta.resourceVersion } };
  if (Object.keys(annotations).length > 0) body['metadata'].annotations = annotations;
  // A merge patch replaces the list whole, guarded by the resourceVersion: other controllers' finalizers are kept.
  const finalizers = meta.finalizers ?? [];
  if (c.addFinalizer && !finalizers.includes(FINALIZER)) body['metadata'].finalizers = [...finalizers, FINALIZER];
  if (c.removeFinalizer && finalizers.includes(FINALIZER))
    body['metadata'].finalizers = finalizers.filter((f) => f !== FINALIZER);
  // A merge patch replaces a list whole: the Cluster is added to the owners the check already has.
  if (c.ownerCluster !== undefined)
    body['metadata'].ownerReferences = [...(meta.ownerReferences ?? []), { ...c.ownerCluster, kind: 'Cluster' }];
  if (Object.keys(body['metadata']).length === 1) return true;
  checkWritten(live);
  try {
    const written = await deps.rest.mergePatch(pathOf(CHECK_RESOURCE, meta.namespace, meta.name), body);
    live.check = written;
    deps.remember('check', written);
    deps.writeMetric('check-metadata', 'ok');
    if (c.removeFinalizer) {
      const left = c.marksLeftBehind ?? [];
      deps.log.info(
        left.length > 0
          ? 'the deleted check goes with marks left (bound passed)'
          : 'every mark withdrawn: the deleted check goes',
        { left },
      );
      if (left.length > 0) {
        const message =
          `The check is deleted after ${DELETION_BOUND_MS / 60_000}m ` +
          `with JoinGuard's mark still on ${left.join(', ')} (writes ` +
          `refused, or the Machine unreadable). Each mark carries ${ANNOTATION_REQUESTED_BY} ` +
          `with this check's uid: a check whose scope holds the Machine ` +
          `withdraws it; withdraw it by hand otherwise (docs/runbook.md).`;
        deps.emit({ on: 'Check', reason: 'MarksLeftBehind', warning: true, message }, s.check);
      }
    }
  } catch (e) {
    if (!isConflict(e) && !isNotFound(e)) throw e;
    deps.writeMetric('check-metadata', isConflict(e) ? 'conflict' : 'gone');
    // The check changed since: read again into the cache, so the next reconcile decides on it even when its watch
    // event is late (a cache that lags would meet the same 409 every pass).
    if (isConflict(e)) await rememberLiveCheck(deps, meta.namespace, meta.name);
    return false;
  }
  return true;
}

async function rememberLiveCheck(deps: ExecutorDeps, namespace: string, name: string): Promise<void> {
  try {
    deps.remember('check', await deps.rest.get(pathOf(CHECK_RESOURCE, namespace, name)));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
