// How long an informer waits before it lists or watches again after a failure
// (docs/decisions/informer-backoff-and-decision-gate-after-outage.md). client-go's reflector backs off 0.8 s
// doubling to 30 s with ×1–2 jitter, and ignores Retry-After: after an apiserver restart (a minute of 429 "storage
// is (re)initializing") JoinGuard's informers sat up to 59 s behind a ready apiserver. Here:
// - a failure backs off 0.5 s doubling to 2 s, ×1–2 jitter: never more than 4 s, so every informer is live within
//   ~5 s of a ready apiserver (its next attempt plus one list), for a few cheap refused requests a second per
//   informer while the apiserver is down;
// - an answer with Retry-After is retried after that time (×1–1.25 jitter, at least 0.2 s), capped by the same 4 s:
//   a starting apiserver asks for up to 30 s (cacher's calculateRetryAfterForUnreadyCache grows with its downtime),
//   longer than it stays unready for a client that asks again;
// - a 410 Gone or a silent watch re-lists at once the first time after a quiet spell and with the back-off after
//   that (an apiserver that keeps answering 410 once cost ~48 full lists a second);
// - the streak ends after 2 minutes without a failure (client-go's reset).
export const INFORMER_BACKOFF = {
  initialMs: 500,
  capMs: 2_000,
  resetMs: 120_000,
  maxDelayMs: 4_000,
  minRetryAfterMs: 200,
} as const;

export type BackoffPolicy = typeof INFORMER_BACKOFF;

export class Backoff {
  private failures = 0;
  private last = -Infinity;

  constructor(
    private readonly now: () => number,
    private readonly random: () => number = Math.random,
    private readonly p: BackoffPolicy = INFORMER_BACKOFF,
  ) {}

  /**
   * A failure: how long to wait before the next attempt. `immediateFirst`: 0 for the first failure of a streak.
   * `retryAfterS`: the server's Retry-After, which replaces the exponential delay.
   */
  next(o: { immediateFirst?: boolean; retryAfterS?: number } = {}): number {
    const t = this.now();
    if (t - this.last > this.p.resetMs) this.failures = 0;
    this.last = t;
    const n = this.failures++;
    if (o.retryAfterS !== undefined) {
      const ms = Math.max(this.p.minRetryAfterMs, o.retryAfterS * 1000 * (1 + 0.25 * this.random()));
      return Math.round(Math.min(ms, this.p.maxDelayMs));
    }
    if (n === 0 && o.immediateFirst) return 0;
    const base = Math.min(this.p.initialMs * 2 ** (o.immediateFirst ? n - 1 : n), this.p.capMs);
    return Math.round(Math.min(base * (1 + this.random()), this.p.maxDelayMs));
  }

  /** Failures in the current streak. */
  get streak(): number {
    return this.now() - this.last > this.p.resetMs ? 0 : this.failures;
  }
}
