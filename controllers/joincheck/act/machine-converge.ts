// Each Machine write behind the live-Cluster gate (DESIGN: "Before any write"): the Cluster is read live again
// whenever the check was written since the last read (ours, a reply lost, or another writer's record a 409 showed),
// and the plan made again on it with the Machines as judged; a write goes out only where that plan still wants it.
// One Machine is converged by one loop: gate, write, and on a 409 a live re-read and a new decision. The Machine
// writes of a pass go out several at once (executor.ts): each gate-and-write holds a shared lane, and one stale gate
// is read and planned again once for all of them; a 409's re-read and new decision (and its record on the check) takes
// the lanes alone, once every write in flight has settled and before any other goes out (docs/decisions/
// parallel-machine-writes.md).
import { converge, factsOf, needsWrite, ref, type Converged } from './machine-writes.js';
import { clusterStale, readLive } from './live-reads.js';
import type { ConvergeDeps, LiveReadDeps } from './deps.js';
import { plan } from '../plan/planner.js';
import type { Resource } from '../../../runtime/client/rest.js';
import type { MarkIntent, Plan, Snapshot, Live, SnapshotSource } from '../types.js';

/** How many times a write is decided again after a 409 (or an unread object) in one pass. */
export const ROUNDS = 3;

export const intentKey = (i: MarkIntent) => `${i.machine.uid}/${i.want}`;

/** The intents that still have something to write, as the snapshot shows their Machines. */
export function writing(p: Plan, s: Snapshot): MarkIntent[] {
  return p.intents.filter((i) => needsWrite(i, factsOf(s, i.machine.uid)));
}

/**
 * The Cluster before each Machine write: read live again whenever the check was written since the last read
 * (clusterStale), and the plan made again on it — on `judged` (the snapshot the acting decision was made on, the check
 * as it was before its write), with the Machines as judged. A Machine is written only as that plan still wants it.
 */
export class LiveClusterGate {
  private allowed: Set<string> | undefined;
  private on: Snapshot | undefined;
  private closed = false;

  constructor(
    private readonly deps: LiveReadDeps,
    private readonly res: Resource,
    private readonly live: Live,
    private readonly src: SnapshotSource,
  ) {}

  /** The plan on the live Cluster, reading it if stale; undefined when `p` writes no Machine. */
  async plan(judged: Snapshot, s: Snapshot, p: Plan): Promise<Plan | undefined> {
    if (writing(p, s).length === 0) return undefined;
    return this.replan(judged, s);
  }

  /** The snapshot from the caches with what this pass read live. */
  build(): Snapshot | undefined {
    return this.src.build(this.live);
  }

  /** Nothing more is written in this pass (a re-decision the live Cluster asked for could not be recorded). */
  close(): void {
    this.closed = true;
  }

  /**
   * Whether the plan on the live Cluster still wants this write. Concurrent callers share one re-read: while it is
   * under way the others wait for it, and each then asks again (a check written meanwhile makes it stale again).
   */
  async allows(judged: Snapshot, s: Snapshot, intent: MarkIntent): Promise<boolean> {
    for (;;) {
      if (this.closed) return false;
      if (this.replanning !== undefined) {
        await this.replanning;
        continue;
      }
      if (this.allowed !== undefined && this.on === judged && !clusterStale(this.live))
        return this.allowed.has(intentKey(intent));
      const once = this.replan(judged, s).then(() => undefined);
      this.replanning = once;
      try {
        await once;
      } finally {
        this.replanning = undefined;
      }
    }
  }

  /** The one live read and plan under way, that concurrent writers wait for (never two at once). */
  private replanning: Promise<void> | undefined;

  private async replan(judged: Snapshot, s: Snapshot): Promise<Plan> {
    if (clusterStale(this.live)) await readLive(this.deps, this.res, s, [], this.live);
    const fresh = this.src.build(this.live);
    const { cluster: _cached, ...rest } = judged;
    const p = plan({ ...rest, ...(fresh?.cluster !== undefined ? { cluster: fresh.cluster } : {}) });
    this.allowed = new Set(p.intents.map(intentKey));
    this.on = judged;
    return p;
  }
}

export interface ConvergedOne {
  result: Converged;
  /** The snapshot after any live re-read. */
  s: Snapshot;
  /** Still wanted but not written (a 409 or an unread Machine each round): run again soon. */
  unsettled: boolean;
  /** The live Cluster's plan does not want it now (paused since): run again soon. */
  held: boolean;
}

/**
 * The lanes of one pass's Machine writes: a gate-and-write holds a shared lane; a 409's re-read and new decision
 * (which may record it on the check) holds them all, once every write in flight has settled, and no write goes out
 * until it is done — so no write is let through by a plan older than a check write made since, and the plan is made
 * again on what the writes in flight left (DESIGN: "Before any write"; a 409 "is a live re-read and a new decision").
 */
export class Lanes {
  private inFlight = 0;
  private alone: Promise<void> | undefined;
  private drained: (() => void)[] = [];

  /** A shared lane, once no exclusive section is pending: the returned function leaves it (once). */
  async enter(): Promise<() => void> {
    while (this.alone !== undefined) await this.alone;
    this.inFlight++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      if (--this.inFlight === 0) for (const wake of this.drained.splice(0)) wake();
    };
  }

  /** `f` alone: no new lane is entered from now on, and `f` runs once every lane in use is left. */
  async exclusively<T>(f: () => Promise<T>): Promise<T> {
    while (this.alone !== undefined) await this.alone;
    let done!: () => void;
    this.alone = new Promise<void>((r) => (done = r));
    try {
      while (this.inFlight > 0) await new Promise<void>((r) => this.drained.push(r));
      return await f();
    } finally {
      this.alone = undefined;
      done();
    }
  }

  /** Lanes in use now (tests). */
  get writing(): number {
    return this.inFlight;
  }
}

/** What converging one Machine needs of its pass. */
export interface Converging {
  gate: LiveClusterGate;
  lanes: Lanes;
  /** The snapshot the acting decision was made on, as it is now. */
  judged: () => Snapshot;
  /** Decided again on the Machine as a 409 re-read it (run alone: Lanes.exclusively). */
  redecide: (s: Snapshot) => MarkIntent | undefined | Promise<MarkIntent | undefined>;
}

/**
 * One Machine converged to its intent: each attempt first passes the live-Cluster gate, then writes, in a shared lane
 * (`entered`: the caller's, already entered for the first attempt); a 409 (or a Machine not read yet) reads it live
 * and decides again through `redecide`, alone, at most ROUNDS times.
 */
export async function convergeOne(
  deps: ConvergeDeps,
  machineRes: Resource,
  intent: MarkIntent,
  live: Live,
  s: Snapshot,
  c: Converging,
  entered: () => void,
): Promise<ConvergedOne> {
  const { gate, lanes } = c;
  let current: MarkIntent | undefined = intent;
  let result: Converged = 'none';
  let leave: (() => void) | undefined = entered;
  try {
    for (let attempt = 0; current !== undefined && attempt < ROUNDS; attempt++) {
      leave ??= await lanes.enter();
      if (!(await gate.allows(c.judged(), s, current))) {
        deps.log.info('the live Cluster holds this write back (paused since it was decided?)', {
          Machine: ref(current.machine),
        });
        return { result: 'none', s, unsettled: false, held: true };
      }
      result = await converge(deps, machineRes, current, live, s);
      if (typeof result === 'object' && outcomeUnknown(result.error)) {
        // No answer, or a 5xx: the write may have landed. The Machine is read so that neither this pass nor the caches
        // go on from the version before it (a mark that landed counts in flight; issue 35, seed 233753310).
        // Only the verdict on this write is taken from the read: the pass goes on with the snapshot judged (a rebuilt
        // one would carry other Machines' newer versions into writes decided on older ones: seed 191426184).
        if (await readBack(deps, machineRes, current, live, s, gate)) result = 'ok';
      }
      if (result === 'ok') deps.emit(current.event, s.check);
      leave();
      leave = undefined;
      if (result !== 'conflict' && result !== 'unread') break;
      // Not read yet, or CAPI changed it since: read it and decide again — alone, on what the writes in flight left.
      const m: MarkIntent = current;
      const again = await lanes.exclusively(async () => {
        live.machines.delete(m.machine.uid);
        await readLive(deps, machineRes, s, [m.machine], live, false);
        const rebuilt = gate.build();
        if (rebuilt === undefined) return undefined;
        s = rebuilt;
        return { next: await c.redecide(rebuilt) };
      });
      if (again === undefined) break;
      current = again.next;
      if (current === undefined)
        deps.log.info('decided again on the changed Machine: nothing to write now', { Machine: ref(intent.machine) });
    }
  } finally {
    leave?.();
  }
  return {
    result,
    s,
    unsettled: current !== undefined && (result === 'conflict' || result === 'unread'),
    held: false,
  };
}

/** A write error that does not say the write was not made: no HTTP answer, or a server error. */
function outcomeUnknown(e: Error & { code?: unknown }): boolean {
  return typeof e.code !== 'number' || e.code === 0 || e.code >= 500;
}

/** The Machine read live after a write whose outcome is unknown (the caches remember it): true when it landed. */
async function readBack(
  deps: ConvergeDeps,
  machineRes: Resource,
  intent: MarkIntent,
  live: Live,
  s: Snapshot,
  gate: LiveClusterGate,
): Promise<boolean> {
  try {
    live.machines.delete(intent.machine.uid);
    await readLive(deps, machineRes, s, [intent.machine], live, false);
  } catch {
    return false; // unknown still: the write is retried with back-off, as refused
  }
  const read = gate.build();
  return read !== undefined && !needsWrite(intent, factsOf(read, intent.machine.uid));
}
