// A de-duplicating work queue keyed by check, with deadline timers and two lanes. A key is processed by one
// worker at a time; a key added while it is being processed runs again after. `addAfter` keeps only the
// earliest pending timer of a key, so a check wakes once at its next deadline, never on a polling interval.
// A timer that fires puts its key in the deadline lane, which workers empty before the event lane: a Machine
// past its deadline is not kept waiting behind a burst of watch events (controller-runtime's priority queue
// does the same with priorities; the lanes show as workqueue_depth{priority}).
import type { QueueMetrics } from '../metrics.js';

export type Worker = (key: string) => Promise<void>;

/** Lanes, highest first. The numbers are controller-runtime's priority label values. */
export const Priority = { deadline: 1, event: 0 } as const;
export type Priority = (typeof Priority)[keyof typeof Priority];
const LANES: Priority[] = [Priority.deadline, Priority.event];

interface Entry {
  key: string;
  /** Which add put it there: an entry whose key was since taken or moved lanes is stale and skipped. */
  seq: number;
}

/** A FIFO of entries; O(1) at both ends. */
class Lane {
  private items: Entry[] = [];
  private head = 0;

  push(e: Entry): void {
    this.items.push(e);
  }

  shift(): Entry | undefined {
    if (this.head >= this.items.length) return undefined;
    const e = this.items[this.head++]!;
    // Compact once the consumed prefix dominates, so memory follows the live length.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return e;
  }
}

const NO_METRICS: QueueMetrics = { add() {}, promote() {}, get() {}, done() {}, retry() {} };

export class WorkQueue {
  private readonly lanes = new Map<Priority, Lane>(LANES.map((p) => [p, new Lane()]));
  /** Keys waiting in a lane: which lane holds them, and their live entry there. */
  private readonly queued = new Map<string, { priority: Priority; seq: number }>();
  private seq = 0;
  private readonly active = new Set<string>();
  /** Keys added while active, with the highest priority asked for. */
  private readonly dirty = new Map<string, Priority>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private waiting: (() => void)[] = [];
  private stopped = false;
  private running: Promise<void>[] = [];

  constructor(
    private readonly now: () => number = Date.now,
    private readonly metrics: QueueMetrics = NO_METRICS,
  ) {}

  add(key: string, priority: Priority = Priority.event): void {
    if (this.stopped) return;
    if (this.active.has(key)) {
      this.dirty.set(key, Math.max(this.dirty.get(key) ?? priority, priority) as Priority);
      return;
    }
    const lane = this.queued.get(key)?.priority;
    if (lane !== undefined && lane >= priority) return;
    const seq = ++this.seq;
    this.queued.set(key, { priority, seq });
    this.lanes.get(priority)!.push({ key, seq });
    if (lane === undefined) {
      this.metrics.add(key, priority);
      this.waiting.shift()?.();
    } else {
      this.metrics.promote(lane, priority);
    }
  }

  /**
   * Adds the key at `delayMs` from now, unless an earlier wake-up is already set. When the timer fires the
   * key goes into the deadline lane (a retry passes Priority.event).
   */
  addAfter(key: string, delayMs: number, priority: Priority = Priority.deadline): void {
    if (this.stopped) return;
    if (delayMs <= 0) return this.add(key, priority);
    this.metrics.retry();
    const at = this.now() + delayMs;
    const t = this.timers.get(key);
    if (t && t.at <= at) return;
    if (t) clearTimeout(t.timer);
    // Node timers cap at ~24.8 days; a later deadline re-arms on the way.
    const timer = setTimeout(
      () => {
        this.timers.delete(key);
        this.add(key, priority);
      },
      Math.min(delayMs, 2 ** 31 - 1),
    );
    this.timers.set(key, { at, timer });
  }

  /** Retries a failed key with per-key exponential back-off (0.5 s doubling to 60 s), in the event lane. */
  retry(key: string): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const delay = Math.min(500 * 2 ** (n - 1), 60_000);
    this.addAfter(key, delay, Priority.event);
    return delay;
  }

  succeeded(key: string): void {
    this.failures.delete(key);
  }

  /** Drops a key's timer (the check is gone). */
  forget(key: string): void {
    const t = this.timers.get(key);
    if (t) clearTimeout(t.timer);
    this.timers.delete(key);
    this.failures.delete(key);
  }

  nextWake(key: string): number | undefined {
    return this.timers.get(key)?.at;
  }

  /** Keys waiting for a worker, in all lanes. */
  get length(): number {
    return this.queued.size;
  }

  /** Starts `n` workers. */
  run(n: number, work: Worker): void {
    for (let i = 0; i < n; i++) this.running.push(this.workerLoop(work));
  }

  /** Starts `n` more workers that stop once `wanted()` is false (checked before each key they take). */
  runWhile(n: number, work: Worker, wanted: () => boolean): void {
    for (let i = 0; i < n; i++) this.running.push(this.workerLoop(work, wanted));
  }

  /** The next key to work on: the deadline lane first, FIFO within a lane. */
  private take(): { key: string; priority: Priority } | undefined {
    for (const priority of LANES) {
      const lane = this.lanes.get(priority)!;
      for (let e = lane.shift(); e !== undefined; e = lane.shift()) {
        if (this.queued.get(e.key)?.seq !== e.seq) continue; // moved to a higher lane, or taken since
        this.queued.delete(e.key);
        return { key: e.key, priority };
      }
    }
    return undefined;
  }

  private async workerLoop(work: Worker, wanted: () => boolean = () => true): Promise<void> {
    while (!this.stopped && wanted()) {
      const next = this.take();
      if (next === undefined) {
        await new Promise<void>((r) => this.waiting.push(r));
        continue;
      }
      const { key, priority } = next;
      this.metrics.get(key, priority);
      this.active.add(key);
      try {
        await work(key);
      } finally {
        this.active.delete(key);
        this.metrics.done(key);
        const again = this.dirty.get(key);
        if (again !== undefined) {
          this.dirty.delete(key);
          this.add(key, again);
        }
      }
    }
    // A worker that stops may have been woken for a key: the wake goes on to a worker that stays.
    if (!this.stopped && this.queued.size > 0) this.waiting.shift()?.();
  }

  /** Stops taking work; resolves when the workers finished what they were doing. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
    for (const w of this.waiting.splice(0)) w();
    await Promise.all(this.running);
  }
}
