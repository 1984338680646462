// Leader election on a coordination.k8s.io/v1 Lease, with controller-runtime's defaults (15 s lease,
// 10 s renew deadline, 2 s retry). Expiry is judged from when this process last saw the record change
// (as client-go does), never by comparing clocks across machines. Every update carries the Lease's
// resourceVersion, so two candidates cannot both win.
import type { Logger } from 'winston';
import { isConflict, isNotFound, pathOf, type Json, type RestClient } from './rest.js';

const LEASES = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', namespaced: true };

export interface LeaderOptions {
  rest: RestClient;
  namespace: string;
  name: string;
  identity: string;
  log: Logger;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Called once leadership is lost (the process should stop reconciling and exit). */
  onLost: () => void;
}

const microTime = (ms: number) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export class LeaderElector {
  private stopped = false;
  private leading = false;
  private observed?: { record: string; at: number };
  private lastRenew = 0;
  private timer?: NodeJS.Timeout;
  private leadResolve!: () => void;
  /** Resolves when this process holds the Lease. */
  readonly leading$: Promise<void>;

  constructor(private readonly o: LeaderOptions) {
    this.leading$ = new Promise((r) => (this.leadResolve = r));
  }

  get isLeader(): boolean {
    return this.leading;
  }

  private get durationMs() {
    return this.o.leaseDurationMs ?? 15_000;
  }

  start(): void {
    void this.tick();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), this.o.retryPeriodMs ?? 2_000);
  }

  private async tick(): Promise<void> {
    try {
      const ok = await this.tryAcquireOrRenew();
      const now = Date.now();
      if (ok) {
        this.lastRenew = now;
        if (!this.leading) {
          this.leading = true;
          this.o.log.info('leader election: became leader', { lease: `${this.o.namespace}/${this.o.name}`, identity: this.o.identity });
          this.leadResolve();
        }
      } else if (this.leading && now - this.lastRenew > (this.o.renewDeadlineMs ?? 10_000)) {
        return this.lose('the lease was not renewed within the renew deadline');
      }
    } catch (e) {
      this.o.log.warn('leader election: request failed', { error: (e as Error).message });
      if (this.leading && Date.now() - this.lastRenew > (this.o.renewDeadlineMs ?? 10_000)) {
        return this.lose('the lease could not be renewed');
      }
    }
    this.schedule();
  }

  private lose(why: string): void {
    this.leading = false;
    this.stopped = true;
    this.o.log.error(`leader election: lost leadership: ${why}`, { identity: this.o.identity });
    this.o.onLost();
  }

  private path(name?: string) {
    return pathOf(LEASES, this.o.namespace, name);
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = Date.now();
    const spec = {
      holderIdentity: this.o.identity,
      leaseDurationSeconds: Math.round(this.durationMs / 1000),
      renewTime: microTime(now),
    };
    let lease: Json;
    try {
      lease = await this.o.rest.get(this.path(this.o.name));
    } catch (e) {
      if (!isNotFound(e)) throw e;
      try {
        await this.o.rest.post(this.path(), {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.o.name, namespace: this.o.namespace },
          spec: { ...spec, acquireTime: microTime(now), leaseTransitions: 0 },
        });
        return true;
      } catch (err) {
        if (isConflict(err)) return false;
        throw err;
      }
    }
    const cur = (lease.spec ?? {}) as Json;
    const record = JSON.stringify([cur.holderIdentity, cur.renewTime, cur.leaseTransitions]);
    if (this.observed?.record !== record) this.observed = { record, at: now };
    const holder: string | undefined = cur.holderIdentity || undefined;
    const heldByMe = holder === this.o.identity;
    const expired = holder === undefined || now - this.observed.at > (cur.leaseDurationSeconds ?? 15) * 1000;
    if (!heldByMe && !expired) return false;
    const next = {
      ...lease,
      spec: {
        ...cur,
        ...spec,
        ...(heldByMe ? {} : { acquireTime: microTime(now), leaseTransitions: (cur.leaseTransitions ?? 0) + 1 }),
      },
    };
    try {
      await this.o.rest.put(this.path(this.o.name), next);
      return true;
    } catch (e) {
      if (isConflict(e)) return false;
      throw e;
    }
  }

  /** Stops campaigning; a leader hands the Lease back so a standby takes over at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    if (!this.leading) return;
    this.leading = false;
    try {
      const lease = await this.o.rest.get(this.path(this.o.name));
      if (lease.spec?.holderIdentity !== this.o.identity) return;
      await this.o.rest.put(this.path(this.o.name), {
        ...lease,
        spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(Date.now()) },
      });
      this.o.log.info('leader election: released the lease', { identity: this.o.identity });
    } catch (e) {
      this.o.log.warn('leader election: could not release the lease', { error: (e as Error).message });
    }
  }
}
