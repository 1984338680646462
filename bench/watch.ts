// What the bench sees from the apiserver, through its own (unaudited) identity: a list+watch per kind,
// restarted on any end of the stream, recording per object the first moment something became visible.
// "Visible" is the arrival of the watch event here: it includes the controller's write and the
// apiserver's fan-out, which is what a user (or CAPI's MachineSet controller) waits for.
//   MachineWatcher  per Machine: clock inputs, Provisioned, and each side's first mark (below)
//   CheckWatcher    per MachineJoinCheck (by uid: the bench makes them afresh before each JoinGuard start): the first
//                   status JoinGuard wrote (its first reconcile)
// Marks, told apart by who writes what:
//   JoinGuard: CAPI's remediate-machine annotation (strategy Auto beside an MHC), HealthCheckSucceeded=False
//     with its own reasons JoinTimeout/ProvisionTimeout (Auto with no MHC: the OwnerRemediated path), or its
//     own condition JoinGuardJoined=False (MachineCondition)
//   MHC: HealthCheckSucceeded=False with any other reason (NodeStartupTimeout on its own timeout,
//     HasRemediateAnnotation when acting on JoinGuard's annotation)
import type { Json, KubeClient } from '../hack/testenv/kube-client.js';

export type Side = 'joinguard' | 'mhc';
const JOINGUARD_REASONS = new Set(['JoinTimeout', 'ProvisionTimeout']);
const REMEDIATE_ANNOTATION = 'cluster.x-k8s.io/remediate-machine';

export interface Mark {
  /** ms epoch at which the bench first saw it. */
  seenAt: number;
  /** JoinGuard: annotation | OwnerRemediated | MachineCondition; MHC: the condition's reason. */
  how: string;
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
}

const ts = (s: unknown): number | undefined => (typeof s === 'string' ? Date.parse(s) : undefined);
const conditionOf = (obj: Json, type: string): Json | undefined =>
  ((obj.status?.conditions ?? []) as Json[]).find((c) => c.type === type);
const trueSince = (obj: Json, type: string) => {
  const c = conditionOf(obj, type);
  return c?.status === 'True' ? ts(c.lastTransitionTime) : undefined;
};

/** List, then watch from the list's resourceVersion; any end of the stream re-lists (records only grow). */
abstract class ListWatch {
  private readonly abort = new AbortController();
  restarts = 0;
  private readonly waiters: { check: () => boolean; resolve: () => void }[] = [];

  constructor(
    protected readonly kube: KubeClient,
    private readonly path: string,
  ) {}

  protected abstract observe(obj: Json, now: number): void;
  /** A DELETED event. */
  protected forget(_obj: Json): void {}
  /** A whole list: what is in it is all there is (a deletion during a broken stream shows here). */
  protected listed(_items: Json[]): void {}

  async start(): Promise<void> {
    // A CRD just installed answers 429 "storage is (re)initializing" for a moment.
    for (let attempt = 1; ; attempt++) {
      try {
        const rv = await this.list();
        void this.loop(rv);
        return;
      } catch (e) {
        if (attempt >= 60) throw e;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  private async list(): Promise<string> {
    const list = await this.kube.list(this.path);
    const now = Date.now();
    this.listed(list.items);
    for (const o of list.items) this.observe(o, now);
    this.notify();
    return list.metadata.resourceVersion ?? '';
  }

  private async loop(rv: string): Promise<void> {
    while (!this.abort.signal.aborted) {
      let expired = false;
      try {
        await this.kube.watch(
          this.path,
          rv,
          (e) => {
            if (e.type === 'ERROR') expired = true;
            if (e.object?.metadata?.resourceVersion) rv = e.object.metadata.resourceVersion;
            if (e.type === 'ADDED' || e.type === 'MODIFIED') this.observe(e.object, Date.now());
            if (e.type === 'DELETED') this.forget(e.object);
            this.notify();
          },
          this.abort.signal,
          300,
        );
        if (!expired) continue;
      } catch {
        // a broken stream: re-list below
      }
      if (this.abort.signal.aborted) return;
      this.restarts++;
      await new Promise((r) => setTimeout(r, 200));
      rv = await this.list().catch(() => rv);
    }
  }

  protected notify(): void {
    for (const w of [...this.waiters])
      if (w.check()) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve();
      }
  }

  /** Resolves when check() holds (re-evaluated on every event), rejects after timeoutMs. */
  until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const w = { check, resolve: () => (clearTimeout(t), resolve()) };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  stop(): void {
    this.abort.abort();
  }
}

export class MachineWatcher extends ListWatch {
  readonly machines = new Map<string, MachineRecord>();
  /** Kept incrementally so that waiting costs nothing per event at 10,000 Machines. */
  provisionedCount = 0;
  readonly markedCount: Record<Side, number> = { joinguard: 0, mhc: 0 };
  /** Names of the Machines that exist now (deleted ones leave). */
  readonly present = new Set<string>();
  lastChangeAt = Date.now();

  constructor(kube: KubeClient, namespace: string) {
    super(kube, `/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/machines`);
  }

  /** Resolves once no Machine has changed for quietMs (CAPI's follow-up reconciles are done), or after maxMs. */
  async settle(quietMs: number, maxMs: number): Promise<number> {
    const start = Date.now();
    while (Date.now() - this.lastChangeAt < quietMs && Date.now() - start < maxMs)
      await new Promise((r) => setTimeout(r, 250));
    return Date.now() - start;
  }

  private readonly byName = new Map<string, MachineRecord>();

  /** The records of the named Machines (by name: the newest record of a name). */
  named(names: Iterable<string>): MachineRecord[] {
    return [...names].map((n) => this.byName.get(n)).filter((r): r is MachineRecord => r !== undefined);
  }

  protected override listed(items: Json[]): void {
    this.present.clear();
    for (const m of items) this.present.add(m.metadata?.name);
  }

  protected override forget(m: Json): void {
    this.lastChangeAt = Date.now();
    this.present.delete(m.metadata?.name);
    this.notify();
  }

  protected observe(m: Json, now: number): void {
    this.lastChangeAt = now;
    this.present.add(m.metadata?.name);
    const uid = m.metadata?.uid as string;
    let r = this.machines.get(uid);
    if (!r) {
      r = {
        name: m.metadata.name,
        uid,
        pool: m.metadata.labels?.pool ?? '',
        createdAt: ts(m.metadata.creationTimestamp)!,
        provisioned: false,
        marks: {},
      };
      this.machines.set(uid, r);
      this.byName.set(r.name, r);
    }
    // A parked Machine of a saved fleet moves into its watch pool when flipped (bench/phase-kit.ts flipPaced).
    r.pool = m.metadata.labels?.pool ?? '';
    // A Machine being deleted keeps the times it had: CAPI turns these conditions False as it tears it down (an
    // owner that answers a mark deletes the Machine, bench/fleet-objects.ts livePool), and its deadline stays.
    if (!m.metadata?.deletionTimestamp) {
      r.infraReadyAt = trueSince(m, 'InfrastructureReady');
      r.bootstrapReadyAt = trueSince(m, 'BootstrapConfigReady');
    }
    if (
      !r.provisioned &&
      m.status?.phase === 'Provisioned' &&
      r.infraReadyAt !== undefined &&
      r.bootstrapReadyAt !== undefined
    ) {
      r.provisioned = true;
      this.provisionedCount++;
    }
    const hcs = conditionOf(m, 'HealthCheckSucceeded');
    const hcsFalse = hcs?.status === 'False' ? String(hcs.reason ?? '') : undefined;
    const jg =
      m.metadata?.annotations?.[REMEDIATE_ANNOTATION] !== undefined
        ? 'annotation'
        : hcsFalse !== undefined && JOINGUARD_REASONS.has(hcsFalse)
          ? 'OwnerRemediated'
          : conditionOf(m, 'JoinGuardJoined')?.status === 'False'
            ? 'MachineCondition'
            : undefined;
    if (jg && !r.marks.joinguard) {
      r.marks.joinguard = { seenAt: now, how: jg };
      this.markedCount.joinguard++;
    }
    if (hcsFalse !== undefined && !JOINGUARD_REASONS.has(hcsFalse) && !r.marks.mhc) {
      r.marks.mhc = { seenAt: now, how: hcsFalse };
      this.markedCount.mhc++;
    }
  }
}

export class CheckWatcher extends ListWatch {
  /** Check uid -> ms epoch at which a status written by JoinGuard was first seen. */
  private readonly statusAt = new Map<string, number>();

  constructor(kube: KubeClient, namespace: string) {
    super(kube, `/apis/joinguard.io/v1alpha1/namespaces/${namespace}/machinejoinchecks`);
  }

  protected observe(c: Json, now: number): void {
    const uid = c.metadata?.uid as string;
    const written = c.status && Object.keys(c.status).length > 0;
    if (written && !this.statusAt.has(uid)) this.statusAt.set(uid, now);
  }

  /** When each check (by uid) first had a status (undefined: not yet). */
  firstStatusAt(uids: Iterable<string>): (number | undefined)[] {
    return [...uids].map((u) => this.statusAt.get(u));
  }

  /** Whether every check named by uid has a status. */
  allReconciled(uids: string[]): boolean {
    return uids.length > 0 && this.firstStatusAt(uids).every((t) => t !== undefined);
  }
}
