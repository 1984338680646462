// Leader election on a coordination.k8s.io/v1 Lease with client-go's semantics (tools/leaderelection, as
// controller-runtime and CAPI's managers use it; defaults 15 s lease, 10 s renew deadline, 2 s retry):
// - acquire: try every retryPeriod with client-go's jitter (x1.0-2.2); a Lease held by someone else is
//   taken only once its record has not changed for leaseDuration, judged from when THIS process saw it
//   change (never by comparing clocks across machines); every update carries the Lease's resourceVersion.
// - renew: a round every retryPeriod; within a round, tries until one succeeds or renewDeadline passes,
//   and every request is aborted at that deadline (and each one bounded by max(renewDeadline/2, 1 s), as
//   controller-runtime sets its leader-election client's timeout). A failed round is the loss: onLost, once.
// - a renewal by the leader is one PUT of the Lease it last saw (client-go's fast path); GET+PUT on conflict.
// - canWrite(): leading and the last successful renewal younger than renewDeadline on a monotonic clock, so
//   a process resumed after SIGSTOP cannot write before any of its timers has run.
// - leader_election_master_status: 0 from the moment the elector exists (client-go's NewLeaderElector calls
//   leaderOff), 1 while leading, 0 again after; so a standby is seen, and "no leader" is max == 0.
// - the Lease lives in the pod's namespace (controller-runtime's default), whatever --namespace watches.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'winston';
import { SERVICE_ACCOUNT_DIR } from './client/kubeconfig.js';
import { ApiError, isConflict, isNotFound, pathOf, type Json, type RestClient } from './client/rest.js';

const LEASES = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespaced: true };
/** client-go's leaderelection.JitterFactor. */
const JITTER = 1.2;

export interface LeaderOptions {
  /** Its own RestClient, without a write gate (the elector must write to keep the Lease). */
  rest: RestClient;
  namespace: string;
  name: string;
  identity: string;
  log: Logger;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Called once, when a renewal round fails (the process must stop writing and exit). */
  onLost: () => void;
  /** Called on every change of leadership (controller-runtime's leader_election_master_status). */
  onStatus?: (leading: boolean) => void;
  /** Monotonic ms (tests inject jumps); default performance.now. */
  monotonic?: () => number;
  /** Wall-clock epoch ms for the Lease's times; default Date.now. */
  wallClock?: () => number;
  random?: () => number;
}

export const LEADER_DEFAULTS = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 } as const;

/** The Lease's default name (--leader-elect-resource-name); a shard needs its own. */
export const DEFAULT_LEASE_NAME = 'joinguard-leader';

/**
 * The pod's namespace, where the Lease lives, as controller-runtime finds it: $POD_NAMESPACE (the Deployment sets
 * it from the downward API), else the ServiceAccount's namespace file; undefined outside a pod.
 */
export function podNamespace(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT_DIR): string | undefined {
  const fromEnv = env['POD_NAMESPACE']?.trim();
  if (fromEnv) return fromEnv;
  try {
    const ns = readFileSync(join(dir, 'namespace'), 'utf8').trim();
    return ns === '' ? undefined : ns;
  } catch {
    return undefined;
  }
}

const microTime = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export class LeaderElector {
  private readonly leaseMs: number;
  private readonly renewMs: number;
  private readonly retryMs: number;
  private readonly requestMs: number;
  private readonly mono: () => number;
  private readonly wall: () => number;
  private stopped = false;
  private leading = false;
  private lost = false;
  /** The Lease as last read or written (its resourceVersion guards the next update). */
  private lease?: Json;
  private observed?: { record: string; at: number };
  private lastRenew = -Infinity;
  private wake?: () => void;
  /** Aborts the requests of the current acquisition try or renewal round (stop, deadline). */
  private round?: AbortController;
  private leadResolve!: () => void;
  /** Resolves when this process holds the Lease. */
  readonly leading$: Promise<void>;

  constructor(private readonly o: LeaderOptions) {
    this.leaseMs = o.leaseDurationMs ?? LEADER_DEFAULTS.leaseDurationMs;
    this.renewMs = o.renewDeadlineMs ?? LEADER_DEFAULTS.renewDeadlineMs;
    this.retryMs = o.retryPeriodMs ?? LEADER_DEFAULTS.retryPeriodMs;
    // client-go's NewLeaderElector checks.
    if (!(this.leaseMs > this.renewMs))
      throw new Error('leader election: the lease duration must be greater than the renew deadline');
    if (!(this.renewMs > JITTER * this.retryMs))
      throw new Error('leader election: the renew deadline must be greater than 1.2 x the retry period');
    if (!(this.retryMs > 0)) throw new Error('leader election: the retry period must be greater than zero');
    this.requestMs = Math.max(this.renewMs / 2, 1_000);
    this.mono = o.monotonic ?? (() => performance.now());
    this.wall = o.wallClock ?? Date.now;
    this.leading$ = new Promise((r) => (this.leadResolve = r));
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /** True only while leading and the last successful renewal is younger than the renew deadline. */
  canWrite(): boolean {
    return this.leading && !this.lost && this.heldByMe() && this.mono() - this.lastRenew < this.renewMs;
  }

  /** client-go's IsLeader: the Lease as last observed names this process. */
  private heldByMe(): boolean {
    return this.lease?.spec?.holderIdentity === this.o.identity;
  }

  start(): void {
    this.o.onStatus?.(false);
    void this.run().catch((e: Error) =>
      this.o.log.error('Leader election stopped on an unexpected error', { err: e.message, lease: this.lock }),
    );
  }

  private get lock(): string {
    return `${this.o.namespace}/${this.o.name}`;
  }

  private async run(): Promise<void> {
    this.o.log.info('Attempting to acquire the leader Lease', { lease: this.lock, identity: this.o.identity });
    while (!this.stopped) {
      this.round = new AbortController();
      const acquired = await this.attempt(this.round.signal);
      this.round = undefined;
      if (acquired) break;
      await this.sleep(this.retryMs * (1 + (this.o.random ?? Math.random)() * JITTER));
    }
    if (this.stopped) return;
    this.leading = true;
    this.o.log.info('Acquired the leader Lease', { lease: this.lock, identity: this.o.identity });
    this.o.onStatus?.(true);
    this.leadResolve();
    while (!this.stopped) {
      await this.sleep(this.retryMs);
      if (this.stopped) return;
      const why = await this.renewRound();
      if (why === undefined || this.stopped) continue;
      this.lose(why);
      return;
    }
  }

  /** client-go's PollUntilContextTimeout(retryPeriod, renewDeadline, immediate): undefined when renewed. */
  private async renewRound(): Promise<string | undefined> {
    const ac = new AbortController();
    this.round = ac;
    const start = this.mono();
    const deadline = setTimeout(() => ac.abort(new Error(`renew deadline ${this.renewMs} ms passed`)), this.renewMs);
    try {
      for (;;) {
        if (await this.attempt(ac.signal)) return undefined;
        if (this.stopped) return undefined;
        const left = this.renewMs - (this.mono() - start);
        if (ac.signal.aborted || left <= 0)
          return `the lease was not renewed within the renew deadline (${this.renewMs} ms)`;
        await this.sleep(Math.min(this.retryMs, left), ac.signal);
      }
    } finally {
      clearTimeout(deadline);
      this.round = undefined;
    }
  }

  /** One tryAcquireOrRenew; errors are logged and count as a failed try. */
  private async attempt(signal: AbortSignal | undefined): Promise<boolean> {
    const startedAt = this.mono();
    try {
      const ok = await this.tryAcquireOrRenew(signal);
      // A renewal counts from before it was sent: the others' expiry clocks start no earlier than that.
      if (ok) this.lastRenew = startedAt;
      return ok;
    } catch (e) {
      if (!this.stopped)
        this.o.log.info('Leader Lease request failed', { lease: this.lock, err: (e as Error).message });
      return false;
    }
  }

  private path(name?: string) {
    return pathOf(LEASES, this.o.namespace, name);
  }

  private record(identity: string, acquireMs: number | string, transitions: number): Json {
    return {
      holderIdentity: identity,
      leaseDurationSeconds: Math.round(this.leaseMs / 1000),
      acquireTime: typeof acquireMs === 'string' ? acquireMs : microTime(acquireMs),
      renewTime: microTime(this.wall()),
      leaseTransitions: transitions,
    };
  }

  private leaseValid(now: number): boolean {
    return (
      this.observed !== undefined && this.observed.at + Number(this.lease?.spec?.leaseDurationSeconds ?? 0) * 1000 > now
    );
  }

  private async update(lease: Json, spec: Json, signal: AbortSignal | undefined): Promise<void> {
    const next = { ...lease, spec };
    const written = await this.o.rest.put(this.path(this.o.name), next, {
      timeoutMs: this.requestMs,
      ...(signal ? { signal } : {}),
    });
    this.lease = written;
    this.observe(written, this.mono());
  }

  private observe(lease: Json, at: number): void {
    const s = lease.spec ?? {};
    const record = JSON.stringify([
      s.holderIdentity,
      s.leaseDurationSeconds,
      s.acquireTime,
      s.renewTime,
      s.leaseTransitions,
    ]);
    if (this.observed?.record !== record) this.observed = { record, at };
  }

  private async tryAcquireOrRenew(signal: AbortSignal | undefined): Promise<boolean> {
    const opts = { timeoutMs: this.requestMs, ...(signal ? { signal } : {}) };
    const now = this.mono();
    // 1. The leader updates the Lease it last saw, optimistically — only while that Lease names it (client-go's
    // IsLeader): a Lease read since with another holder must never get this identity written over it.
    if (this.leading && this.lease && this.heldByMe() && this.leaseValid(now)) {
      const cur = this.lease.spec ?? {};
      try {
        await this.update(this.lease, this.record(this.o.identity, cur.acquireTime, cur.leaseTransitions ?? 0), signal);
        return true;
      } catch (e) {
        if (signal?.aborted) throw e;
        this.o.log.debug('Optimistic Lease renewal failed, reading the Lease', {
          lease: this.lock,
          err: (e as Error).message,
        });
      }
    }
    // 2. Read it, or create it.
    let lease: Json;
    try {
      lease = await this.o.rest.get(this.path(this.o.name), undefined, opts);
    } catch (e) {
      if (!isNotFound(e)) throw e;
      try {
        const created = await this.o.rest.post(
          this.path(),
          {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.o.name, namespace: this.o.namespace },
            spec: this.record(this.o.identity, this.wall(), 0),
          },
          opts,
        );
        this.lease = created;
        this.observe(created, this.mono());
        return true;
      } catch (err) {
        if (isConflict(err)) return false;
        throw err;
      }
    }
    this.lease = lease;
    this.observe(lease, this.mono());
    const cur = (lease.spec ?? {}) as Json;
    const holder: string = cur.holderIdentity ?? '';
    const mine = holder === this.o.identity;
    // 3. Held by someone else and not expired (by our own observation): wait.
    if (holder !== '' && !mine && this.leaseValid(this.mono())) return false;
    // 4. Take or renew it, guarded by the resourceVersion just read.
    const spec = mine
      ? this.record(this.o.identity, cur.acquireTime, cur.leaseTransitions ?? 0)
      : // eslint-disable-next-line @typescript-eslint/restrict-plus-operands -- the Lease's field, as read
        this.record(this.o.identity, this.wall(), (cur.leaseTransitions ?? 0) + 1);
    try {
      await this.update(lease, spec, signal);
      return true;
    } catch (e) {
      if (isConflict(e)) return false;
      throw e;
    }
  }

  private lose(why: string): void {
    if (this.lost) return;
    this.lost = true;
    this.leading = false;
    this.stopped = true;
    this.o.log.error('Lost the leader Lease', { err: why, lease: this.lock, identity: this.o.identity });
    this.o.onStatus?.(false);
    this.o.onLost();
  }

  private sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        signal?.removeEventListener('abort', done);
        this.wake = undefined;
        resolve();
      };
      const t = setTimeout(done, ms);
      signal?.addEventListener('abort', done, { once: true });
      this.wake = done;
    });
  }

  /**
   * Stops campaigning. A leader that still holds the Lease (canWrite) hands it back, as client-go's
   * ReleaseOnCancel does, so a standby takes over at once; a deposed one writes nothing.
   */
  async stop(): Promise<void> {
    if (this.stopped && !this.leading) return;
    const release = this.canWrite() && this.lease !== undefined;
    this.stopped = true;
    this.round?.abort(new Error('stopping'));
    this.wake?.();
    if (this.leading) {
      this.leading = false;
      this.o.onStatus?.(false);
    }
    if (!release) return;
    try {
      const lease = await this.o.rest.get(this.path(this.o.name), undefined, { timeoutMs: this.requestMs });
      if (lease.spec?.holderIdentity !== this.o.identity) return;
      const now = microTime(this.wall());
      await this.o.rest.put(
        this.path(this.o.name),
        {
          ...lease,
          spec: {
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
            leaseTransitions: lease.spec?.leaseTransitions ?? 0,
          },
        },
        { timeoutMs: this.requestMs },
      );
      this.o.log.info('Released the leader Lease', { lease: this.lock, identity: this.o.identity });
    } catch (e) {
      const gone = e instanceof ApiError && e.code === 404;
      if (!gone) this.o.log.warn('Could not release the leader Lease', { lease: this.lock, err: (e as Error).message });
    }
  }
}
