// The thin executor: converges the world to one check's Plan. It plans from the caches, reads live what a write
// targets and plans again on it (live-reads.ts). It writes the check's status first (write-ahead: every request is
// recorded before it is made), then converges each Machine to its intent — writing only what is missing, guarded
// by the resourceVersion the decision was made on — then the check's own metadata (before the Machines while the
// finalizer is missing and a mark is due: no mark before the finalizer). 404 on delete is done; 409
// re-reads and decides again; any other refusal is that Machine's alone (refusals.ts); a lost leadership forbids
// every write (the REST client refuses them) and ends the pass at once. Each Machine is converged behind the live-Cluster gate (machine-converge.ts).
// The Machine writes of a pass go out MACHINE_WRITES_AT_ONCE at a time: every withdrawal settled before the first mark,
// the marks dispatched in the order they were recorded (docs/decisions/parallel-machine-writes.md).
import { isDeepStrictEqual } from 'node:util';
import { capiResource } from '../../../api/capi/resources.js';
import { ANNOTATION_MEMORY, FINALIZER } from '../../../api/v1alpha1/types.js';
import type { Resource } from '../../../runtime/client/rest.js';
import { factsOf, needsWrite, ref } from './machine-writes.js';
import { checkUnchanged, resource } from './live-reads.js';
import { convergeOne, Lanes, LiveClusterGate, ROUNDS } from './machine-converge.js';
import { writeCheckMetadata } from './check-metadata.js';
import {
  decisive,
  readBeforeWrites,
  STATUS_COALESCE_MS,
  withCheck,
  writeStatus,
  type StatusWrite,
} from './status-write.js';
import type { ExecutorDeps } from './deps.js';
import { plan } from '../plan/planner.js';
import { Refusals } from './refusals.js';
import type { MarkIntent, Plan, PlannedEvent, Snapshot, Live, SnapshotSource, RefusedWrite } from '../types.js';

/**
 * Machine writes of one pass in flight at once, at most. A mark costs one write of ~290 ms on a busy 2-core
 * management cluster (the bench at 200 Machines, issue 37): 100 due at once took 29 s one after another; 16 at once
 * would take ~2 s (an estimate: not benchmarked yet), and with the reconciles of other checks
 * (--machinejoincheck-concurrency, 10) stay within the client's limiter (--kube-api-qps 100, burst 400) instead of
 * queueing behind it. It is no budget: maxInFlight still bounds the marks a plan asks for.
 */
export const MACHINE_WRITES_AT_ONCE = 16;

export interface Result {
  plan?: Plan;
  /** Epoch ms of the next deadline, if any. */
  wakeAt?: number;
  /** Run again after this long (a conflict, a coalesced status write). */
  requeueAfterMs?: number;
  /** The status was written now (epoch ms). */
  statusWrittenAt?: number;
}

export async function execute(deps: ExecutorDeps, src: SnapshotSource): Promise<Result> {
  const machineRes = resource(capiResource('Machine', deps.apiVersion));
  const live: Live = { machines: new Map() };
  const read = await planOnLiveReads(deps, machineRes, src, live);
  if (read === undefined) return {};
  let { s, p } = read;
  const refusals = deps.refusals ?? new Refusals();

  // clusterctl move's block-move before the status records anything a move must carry (a suspicion, a request): a
  // crash between the two writes, or a status refused, must not leave a record that a move would strip unblocked.
  // Not where it would replace a carried memory annotation: that goes only once the status holds the memory.
  if (p.check.blockMove === true && !(ANNOTATION_MEMORY in (s.check.metadata.annotations ?? {}))) {
    const blocked = await writeBlockMoveFirst(deps, s, p, live);
    if (blocked === undefined) return { requeueAfterMs: 100 };
    ({ s, p } = blocked);
  }

  // Write-ahead: the status that records every request, before any Machine write.
  const written = await writeStatus(deps, s, p, live, src);
  // Not applied: no plan, so the caller neither keeps its view nor counts the newly settled Machines as planned with
  // (a check gone too: a stale cache may still reconcile it, and must then plan with those Machines again).
  if (written.outcome === 'gone') return {};
  if (written.outcome === 'conflict') return { requeueAfterMs: 100 };
  if (written.outcome === 'refused') return withdrawUnrecorded(deps, machineRes, written, live, src, refusals);
  if (written.outcome !== 'deferred') for (const e of written.p.events) deps.emit(e, written.s.check);
  return new MachinesPass(deps, machineRes, live, src, refusals, written).run();
}

/**
 * The plan made on the caches, then again on what it must read live before any write: the Cluster, and the Machines
 * whose new state it records without writing to them. Undefined when the check is gone.
 */
async function planOnLiveReads(
  deps: ExecutorDeps,
  machineRes: Resource,
  src: SnapshotSource,
  live: Live,
): Promise<{ s: Snapshot; p: Plan } | undefined> {
  let s = src.build(live);
  if (s === undefined) return undefined;
  let p = plan(s);
  // Before any write: the Cluster read live, and the plan made again on it (a Cluster paused or disconnected since the
  // cache saw it writes nothing). A Machine is read live only where no write stands for the read: a write is built
  // from the Machine as judged and guarded by its resourceVersion, so a Machine that changed since (it joined) answers
  // 409, and that is its live read and a new decision (DESIGN: "Before any write"). Read first: the Machines whose new
  // state the plan records without writing to them (a failure that raises the suspicion, a request withdrawn or
  // unanswered) — the status must not record a decision a stale cache made.
  for (let round = 0; round <= ROUNDS; round++) {
    if (!(await readBeforeWrites(deps, machineRes, p, s, live))) break;
    s = src.build(live);
    if (s === undefined) return undefined;
    p = plan(s);
  }
  return { s, p };
}

/**
 * The block-move written alone, with what needs no record in the same one patch (the Cluster as owner, the
 * finalizer), and the plan made again on the check as written. Undefined when the check changed or went.
 */
async function writeBlockMoveFirst(
  deps: ExecutorDeps,
  s: Snapshot,
  p: Plan,
  live: Live,
): Promise<{ s: Snapshot; p: Plan } | undefined> {
  const { blockMove, ownerCluster, addFinalizer } = p.check;
  const first = { blockMove, ...(ownerCluster ? { ownerCluster } : {}), ...(addFinalizer ? { addFinalizer } : {}) };
  if (!(await writeCheckMetadata(deps, s, { ...p, check: first }, live))) return undefined;
  if (live.check === undefined) return { s, p };
  const withIt = withCheck(s, live.check);
  return { s: withIt, p: plan(withIt) };
}

/**
 * After the write-ahead: every Machine converged to its intent, each on its own, withdrawals first — a write refused
 * for one Machine is reported and retried with back-off, and never holds back another (DESIGN: Withdrawal) — then
 * the check's own metadata.
 */
class MachinesPass {
  private s: Snapshot;
  private p: Plan;
  /** The snapshot the acting decision was made on (the check as it was before its write). */
  private judged: Snapshot;
  /**
   * The plan acted on: decided again when a Machine's write met a 409 (and recorded first when that changed a
   * decision), so that every Machine is written as the latest recorded decision says, not as an earlier one did.
   */
  private latest: Plan;
  private requeue: number | undefined;
  private marksAllowed = true;
  private metadataWritten = false;
  private readonly gate: LiveClusterGate;
  private readonly lanes = new Lanes();
  /** Machines converged in this pass: each once (never asked twice). */
  private readonly dispatched = new Set<string>();
  private readonly atOnce: number;

  constructor(
    private readonly deps: ExecutorDeps,
    private readonly machineRes: Resource,
    private readonly live: Live,
    private readonly src: SnapshotSource,
    private readonly refusals: Refusals,
    private readonly written: Exclude<StatusWrite, { outcome: 'refused' }>,
  ) {
    this.s = written.s;
    this.p = written.p;
    this.latest = written.p;
    this.judged = written.judged ?? written.s;
    this.requeue =
      written.outcome === 'deferred'
        ? Math.max(0, (deps.lastStatusWrite ?? 0) + STATUS_COALESCE_MS - deps.now())
        : undefined;
    this.gate = new LiveClusterGate(deps, machineRes, live, src);
    this.atOnce = Math.max(1, deps.machineWritesAtOnce ?? MACHINE_WRITES_AT_ONCE);
  }

  async run(): Promise<Result> {
    const ordered = inRecordedOrder(this.p);
    await this.finalizerBeforeMarks();
    await this.recordOnLiveCluster();
    this.latest = this.p;
    // Withdrawals first, every one settled (its retries and re-decisions too) before the first mark or delete goes out
    // (DESIGN: "withdrawals go first"); each group MACHINE_WRITES_AT_ONCE at a time.
    await this.inParallel(ordered.filter((i) => i.want === 'withdraw'));
    await this.inParallel(ordered.filter((i) => i.want !== 'withdraw'));
    const p = (this.p = this.latest);
    // Kept while its request is open too: a refused request waiting for maxInFlight is still reported, and still holds no
    // budget (remediate.ts).
    const open = (p.status.requests ?? []).filter((r) => r.state === 'Open').map((r) => r.uid);
    this.refusals.keepOnly(new Set([...p.intents.map((i) => i.machine.uid), ...open]));
    const retryAt = this.refusals.nextRetryAt();
    if (retryAt !== undefined)
      this.requeue = Math.min(this.requeue ?? Infinity, Math.max(0, retryAt - this.deps.now()));

    if (!this.metadataWritten) await writeCheckMetadata(this.deps, this.s, p, this.live);
    return {
      plan: p,
      ...(p.wakeAt !== undefined ? { wakeAt: p.wakeAt } : {}),
      ...(this.requeue !== undefined ? { requeueAfterMs: this.requeue } : {}),
      ...(this.written.outcome === 'written' ? { statusWrittenAt: this.deps.now() } : {}),
    };
  }

  /**
   * A mark or a delete is made only on the check as it was decided on: when the status was not written now, the
   * check is read live first, and a view that is stale (another replica changed the check, or finalized it) writes
   * withdrawals only this pass. The finalizer before the first mark: a check deleted between its mark and its
   * finalizer (a crash between the two writes) would go at once with that mark left on the Machine (DESIGN: Deleting
   * a check). The check's metadata is then written before the Machines, in the same one patch.
   */
  private async finalizerBeforeMarks(): Promise<void> {
    const { deps, p, live } = this;
    const decidedOn = this.s;
    const marks = p.intents.some((i) => i.want !== 'withdraw' && needsWrite(i, factsOf(decidedOn, i.machine.uid)));
    if (this.written.outcome !== 'written' && marks) {
      this.marksAllowed = await checkUnchanged(deps, this.s);
      if (!this.marksAllowed) this.requeue = 100;
    }
    if (this.marksAllowed && p.check.addFinalizer && !(this.s.check.metadata.finalizers ?? []).includes(FINALIZER)) {
      if (marks) {
        this.metadataWritten = true;
        this.marksAllowed = await writeCheckMetadata(deps, this.s, p, live);
        if (this.marksAllowed && live.check !== undefined) this.s = withCheck(this.s, live.check);
        else this.requeue = 100;
      }
    }
  }

  /**
   * The Cluster read live after the write-ahead, right before the Machine writes, so that a pause stored while the
   * status was written is seen (DESIGN: "Before any write"): the plan made again on it, with the Machines as judged.
   * Where that changes a decision (a paused Cluster asks nothing), the new one is recorded before anything is written.
   */
  private async recordOnLiveCluster(): Promise<void> {
    const again = await this.gate.plan(this.judged, this.s, this.p);
    let decided = again;
    if (again !== undefined && !isDeepStrictEqual(decisive(again.status), decisive(this.p.status))) {
      const w = await writeStatus(this.deps, this.s, again, this.live, this.src);
      if (w.outcome === 'written' || w.outcome === 'same') {
        ({ s: this.s, p: this.p } = w);
        this.judged = w.judged ?? this.judged;
        // A 409 decided again on the check as it is now (deleted since, say): its metadata is that decision's, not the
        // one made on the check as judged (seed 70041064: a deleted check's memory carried its withdrawn requests Open).
        decided = w.p;
      } else {
        this.gate.close();
        this.requeue = Math.min(this.requeue ?? 100, 100);
      }
    }
    // The check's own metadata follows the live Cluster too: a deleted check's finalizer waits while it is paused, so a
    // bound that passes meanwhile never lets the check go past a mark it could not withdraw (the cache may not show the
    // pause yet: a live Cluster is never cached).
    if (decided !== undefined) this.p = { ...this.p, check: decided.check };
  }

  /**
   * The Machines of `batch` converged, MACHINE_WRITES_AT_ONCE at a time, taken in the batch's order. An error that ends
   * the pass (a lost leadership, a failed live read) closes the gate: no further write goes out, the writes in flight
   * settle, and the first error is the pass's.
   */
  private async inParallel(batch: MarkIntent[]): Promise<void> {
    const queue = [...new Set(batch.map((i) => i.machine.uid))];
    let failure: { error: unknown } | undefined;
    const worker = async (): Promise<void> => {
      for (let uid = queue.shift(); uid !== undefined && failure === undefined; uid = queue.shift()) {
        if (this.dispatched.has(uid)) continue;
        this.dispatched.add(uid);
        try {
          await this.convergeMachine(uid);
        } catch (error) {
          failure ??= { error };
          this.gate.close();
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.atOnce, queue.length) }, worker));
    if (failure !== undefined) throw failure.error;
  }

  /** One Machine converged to the latest decision on it; a refusal is reported and retried with back-off. */
  private async convergeMachine(uid: string): Promise<void> {
    const { deps, refusals } = this;
    // The decision is taken in a lane: never while a 409's new decision is being made and recorded.
    const entered = await this.lanes.enter();
    const intent = this.toWrite(uid);
    if (intent === undefined) {
      entered();
      return;
    }
    const r = await convergeOne(
      deps,
      this.machineRes,
      intent,
      this.live,
      this.s,
      { gate: this.gate, lanes: this.lanes, judged: () => this.judged, redecide: (now) => this.redecide(now, intent) },
      entered,
    );
    // (this.s is not taken from r.s: a 409's new decision made it the snapshot read then, under the lanes, and a write
    // that settles later must not set an older one back.)
    if (r.held) this.requeue = Math.min(this.requeue ?? 100, 100);
    if (typeof r.result === 'object') {
      const f = refusals.refused(intent.machine, r.result.want, r.result.error, deps.now());
      deps.log.warn('write refused: retried with back-off, other Machines go on', {
        Machine: ref(intent.machine),
        write: r.result.want,
        cause: f.message,
        retryInMs: f.retryAt - deps.now(),
      });
      deps.emit(refusedEvent(intent, f), this.s.check);
      return;
    }
    refusals.cleared(uid);
    if (r.unsettled) this.requeue = Math.min(this.requeue ?? 1000, 1000);
  }

  /** The latest decision on the Machine, where it still has something to write now (not within its back-off). */
  private toWrite(uid: string): MarkIntent | undefined {
    const intent = this.latest.intents.find((x) => x.machine.uid === uid);
    if (intent === undefined || (!this.marksAllowed && intent.want !== 'withdraw')) return undefined;
    if (!needsWrite(intent, factsOf(this.s, uid))) {
      this.refusals.cleared(uid);
      return undefined;
    }
    return this.refusals.waiting(uid, this.deps.now()) ? undefined : intent;
  }

  /** Decided again on a Machine a 409 re-read: the new decision recorded before it is acted on. */
  private async redecide(now: Snapshot, intent: MarkIntent): Promise<MarkIntent | undefined> {
    this.s = now;
    let next = plan(now);
    // The new decision is recorded before it is acted on, as the first was (a request dropped, a time pinned): a
    // restart then decides the same. Recording it is a write of the check: the gate reads the Cluster again.
    if (!isDeepStrictEqual(decisive(next.status), decisive(now.check.status))) {
      const w = await writeStatus(this.deps, now, next, this.live, this.src);
      if (w.outcome !== 'written' && w.outcome !== 'same') {
        // Not recorded (refused, or its reply lost): nothing more is written this pass — the plan at hand was
        // made on older Machines than the snapshot now read (seed 191426184: a joined Machine deleted).
        this.gate.close();
        this.requeue = Math.min(this.requeue ?? 100, 100);
        return undefined;
      }
      ({ s: this.s, p: next } = w);
      this.judged = w.judged ?? this.s;
    } else this.judged = now;
    this.latest = next;
    return next.intents.find((x) => x.machine.uid === intent.machine.uid);
  }
}

/**
 * Withdrawals first, then the requests in the order they were recorded: one recorded earlier and not made yet (a
 * crash, a refusal) goes before a later one, so each lands within the budget it was recorded under (maxPerOwner
 * raised meanwhile).
 */
function inRecordedOrder(p: Plan): MarkIntent[] {
  const recordedAt = new Map((p.status.requests ?? []).map((r, n) => [r.uid, n]));
  return [
    ...p.intents.filter((i) => i.want === 'withdraw'),
    ...p.intents
      .filter((i) => i.want !== 'withdraw')
      .sort((a, b) => (recordedAt.get(a.machine.uid) ?? 0) - (recordedAt.get(b.machine.uid) ?? 0)),
  ];
}

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
  reportStatusRefused(deps, w.error, s);
  let unsettled = false;
  // The refused PUT may have landed (a lost reply): the gate reads the Cluster again before any withdrawal.
  const gate = new LiveClusterGate(deps, machineRes, live, src);
  const again = await gate.plan(s, s, p);
  const lanes = new Lanes(); // (one write at a time here: this path is rare, and each takes its lane in turn)
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
      {
        gate,
        lanes,
        judged: () => s,
        redecide: (now) => {
          s = now;
          return plan(s).intents.find((x) => x.machine.uid === uid && x.want === 'withdraw');
        },
      },
      await lanes.enter(),
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

/** The status write refused: counted, logged, and said on the check. */
function reportStatusRefused(deps: ExecutorDeps, error: Error, s: Snapshot): void {
  deps.writeMetric('status', 'error');
  deps.log.warn("the check's status write was refused: nothing is asked; withdrawals that need no record go on", {
    cause: error.message,
  });
  deps.emit(
    {
      on: 'Check',
      reason: 'StatusWriteRefused',
      warning: true,
      message:
        `JoinGuard cannot write this check's status: ${error.message}. ` +
        `Nothing is asked of CAPI until it can (every request is recorded before it is made); marks on Machines that ` +
        `joined are still withdrawn. Retried with back-off.`,
    },
    s.check,
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
