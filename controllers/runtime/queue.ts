// A de-duplicating work queue keyed by check, with deadline timers. A key is processed by one worker at a
// time; a key added while it is being processed runs again after. `addAfter` keeps only the earliest
// pending timer of a key, so a check wakes once at its next deadline, never on a polling interval.
export type Worker = (key: string) => Promise<void>;

export class WorkQueue {
  private readonly pending: string[] = [];
  private readonly queued = new Set<string>();
  private readonly active = new Set<string>();
  private readonly dirty = new Set<string>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  private waiting: (() => void)[] = [];
  private stopped = false;
  private running: Promise<void>[] = [];

  constructor(private readonly now: () => number = Date.now) {}

  add(key: string): void {
    if (this.stopped) return;
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.pending.push(key);
    this.waiting.shift()?.();
  }

  /** Adds the key at `delayMs` from now, unless an earlier wake-up is already set. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopped) return;
    if (delayMs <= 0) return this.add(key);
    const at = this.now() + delayMs;
    const t = this.timers.get(key);
    if (t && t.at <= at) return;
    if (t) clearTimeout(t.timer);
    // Node timers cap at ~24.8 days; a later deadline re-arms on the way.
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, Math.min(delayMs, 2 ** 31 - 1));
    this.timers.set(key, { at, timer });
  }

  /** Retries a failed key with per-key exponential back-off (0.5 s doubling to 60 s). */
  retry(key: string): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const delay = Math.min(500 * 2 ** (n - 1), 60_000);
    this.addAfter(key, delay);
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

  get length(): number {
    return this.pending.length;
  }

  /** Starts `n` workers. */
  run(n: number, work: Worker): void {
    for (let i = 0; i < n; i++) this.running.push(this.workerLoop(work));
  }

  private async workerLoop(work: Worker): Promise<void> {
    while (!this.stopped) {
      const key = this.pending.shift();
      if (key === undefined) {
        await new Promise<void>((r) => this.waiting.push(r));
        continue;
      }
      this.queued.delete(key);
      this.active.add(key);
      try {
        await work(key);
      } finally {
        this.active.delete(key);
        if (this.dirty.delete(key)) this.add(key);
      }
    }
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
