// Watches the Machines of one namespace from the bench's own identity and records, per Machine, what the
// latency figures need: when CAPI brought it to Provisioned, its clock inputs, and the first moment each
// controller's mark was visible to a watcher of the apiserver: JoinGuard's JoinGuardJoined=False, the
// MachineHealthCheck's HealthCheckSucceeded=False (v1beta2 conditions).
// "Visible" is the arrival time of the watch event here: it includes the controller's write and the
// apiserver's watch fan-out, which is what a user (or CAPI's MachineSet controller) waits for.
import type { Json, RestClient } from '../controllers/runtime/rest.js';
import type { Side } from './fleet.js';

/** The condition each controller sets to False on a Machine it judges. */
export const MARK_CONDITION: Record<Side, string> = { joinguard: 'JoinGuardJoined', mhc: 'HealthCheckSucceeded' };

export interface Mark {
  /** ms epoch at which the bench first saw the condition False. */
  seenAt: number;
  reason?: string;
}

export interface MachineRecord {
  name: string;
  uid: string;
  pool: string;
  createdAt: number;
  provisioned: boolean;
  infraReadyAt?: number;
  bootstrapReadyAt?: number;
  marks: Partial<Record<Side, Mark>>;
  ownerRemediatedReason?: string;
}

const ts = (s: unknown): number | undefined => (typeof s === 'string' ? Date.parse(s) : undefined);

function conditionOf(obj: Json, type: string): Json | undefined {
  return ((obj.status?.conditions ?? []) as Json[]).find((c) => c.type === type);
}

function trueSince(obj: Json, type: string): number | undefined {
  const c = conditionOf(obj, type);
  return c?.status === 'True' ? ts(c.lastTransitionTime) : undefined;
}

export class MachineWatcher {
  readonly machines = new Map<string, MachineRecord>();
  private abort?: () => void;
  private stopped = false;
  private rv = '';
  restarts = 0;
  /** Kept incrementally so that waiting costs nothing per event at 10,000 Machines. */
  provisionedCount = 0;
  readonly markedCount: Record<Side, number> = { joinguard: 0, mhc: 0 };
  private readonly waiters: { check: () => boolean; resolve: () => void }[] = [];

  constructor(
    private readonly rest: RestClient,
    private readonly namespace: string,
  ) {}

  private path(): string {
    return `/apis/cluster.x-k8s.io/v1beta2/namespaces/${this.namespace}/machines`;
  }

  async start(): Promise<void> {
    const list = await this.rest.get(this.path());
    for (const m of list.items as Json[]) this.observe(m, Date.now());
    this.rv = list.metadata.resourceVersion;
    void this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      try {
        await this.watchOnce();
      } catch {
        if (this.stopped) return;
        this.restarts++;
        await new Promise((r) => setTimeout(r, 200));
        // Expired resourceVersion or a broken stream: relist (nothing is lost, records only grow).
        try {
          const list = await this.rest.get(this.path());
          for (const m of list.items as Json[]) this.observe(m, Date.now());
          this.rv = list.metadata.resourceVersion;
        } catch {
          // try again
        }
      }
    }
  }

  private async watchOnce(): Promise<void> {
    const { res, abort } = await this.rest.open('GET', this.path(), {
      query: { watch: 1, resourceVersion: this.rv, allowWatchBookmarks: true, timeoutSeconds: 300 },
    });
    this.abort = abort;
    if (res.statusCode !== 200) {
      res.resume();
      throw new Error(`watch ${this.path()}: ${res.statusCode}`);
    }
    let partial = '';
    res.setEncoding('utf8');
    await new Promise<void>((resolve, reject) => {
      res.on('data', (chunk: string) => {
        const now = Date.now();
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          if (!line) continue;
          const e = JSON.parse(line) as { type: string; object: Json };
          if (e.type === 'ERROR') return reject(new Error(`watch error ${JSON.stringify(e.object).slice(0, 200)}`));
          if (e.object?.metadata?.resourceVersion) this.rv = e.object.metadata.resourceVersion;
          if (e.type === 'ADDED' || e.type === 'MODIFIED') this.observe(e.object, now);
        }
      });
      res.on('end', resolve);
      res.on('error', (err) => (this.stopped ? resolve() : reject(err)));
      res.on('aborted', () => (this.stopped ? resolve() : reject(new Error('aborted'))));
    });
  }

  private observe(m: Json, now: number): void {
    const uid = m.metadata?.uid as string;
    let r = this.machines.get(uid);
    if (!r) {
      r = { name: m.metadata.name, uid, pool: m.metadata.labels?.pool ?? '', createdAt: ts(m.metadata.creationTimestamp)!, provisioned: false, marks: {} };
      this.machines.set(uid, r);
    }
    r.infraReadyAt = trueSince(m, 'InfrastructureReady');
    r.bootstrapReadyAt = trueSince(m, 'BootstrapConfigReady');
    const provisioned = m.status?.phase === 'Provisioned' && r.infraReadyAt !== undefined && r.bootstrapReadyAt !== undefined;
    if (provisioned && !r.provisioned) this.provisionedCount++;
    r.provisioned ||= provisioned;
    for (const side of ['joinguard', 'mhc'] as const) {
      const c = conditionOf(m, MARK_CONDITION[side]);
      if (c?.status !== 'False' || r.marks[side]) continue;
      r.marks[side] = { seenAt: now, reason: c.reason };
      this.markedCount[side]++;
    }
    const or = conditionOf(m, 'OwnerRemediated');
    if (or) r.ownerRemediatedReason = or.reason;
    for (const w of [...this.waiters]) if (w.check()) {
      this.waiters.splice(this.waiters.indexOf(w), 1);
      w.resolve();
    }
  }

  count(pred: (r: MachineRecord) => boolean): number {
    let n = 0;
    for (const r of this.machines.values()) if (pred(r)) n++;
    return n;
  }

  /** Resolves when check() holds (re-evaluated on every event), rejects after timeoutMs. */
  until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = { check, resolve: () => (clearTimeout(t), resolve()) };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`${this.namespace}: timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  stop(): void {
    this.stopped = true;
    this.abort?.();
  }
}
