// client-go's client-side rate limit (flowcontrol's token bucket), for the REST client.
/** client-go's flowcontrol token bucket: full at start, refilled at qps, waiters served in order. */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.tokens = burst;
    this.last = now();
  }

  /** Ms to wait for the token just taken (reserved now, so later callers queue behind). */
  take(): number {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.qps) / 1000);
    this.last = t;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens * 1000) / this.qps;
  }
}
