// Which Machines a check's plan reads, kept up to date event by event: per Cluster, the Machines that are not settled
// (verdict-rules.ts `isSettled`: joined for good, nothing on them for JoinGuard) go into every plan; the settled ones only as
// a count per check (its selector decides) and a lookup by uid. A Machine that just became settled stays in its
// checks' plans until each has planned once with it (the join is seen: everJoined, join events, durations). So a
// plan, and a Machine event, cost the same whatever the Cluster's size in its steady state.
import type { LabelSelectorModel, MachineFacts } from '../../../api/capi/model.js';
import { matchesSelector } from '../../../api/capi/selector.js';
import { isSettled } from '../rules/verdict-rules.js';
import type { MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import type { SettledMachines } from '../types.js';

/** A multimap from a Cluster key to object keys. */
export class Index {
  private readonly byCluster = new Map<string, Set<string>>();
  private readonly clusterOfKey = new Map<string, string>();

  set(key: string, ck: string): void {
    const old = this.clusterOfKey.get(key);
    if (old === ck) return;
    if (old !== undefined) this.remove(key);
    let s = this.byCluster.get(ck);
    if (!s) this.byCluster.set(ck, (s = new Set()));
    s.add(key);
    this.clusterOfKey.set(key, ck);
  }

  remove(key: string): void {
    const ck = this.clusterOfKey.get(key);
    if (ck === undefined) return;
    this.clusterOfKey.delete(key);
    const s = this.byCluster.get(ck);
    s?.delete(key);
    if (s && s.size === 0) this.byCluster.delete(ck);
  }

  filedUnder(key: string): string | undefined {
    return this.clusterOfKey.get(key);
  }

  keys(ck: string): ReadonlySet<string> {
    return this.byCluster.get(ck) ?? EMPTY;
  }
}

const EMPTY: ReadonlySet<string> = new Set();

interface Known {
  ck: string;
  uid?: string;
  labels: Record<string, string>;
  settled: boolean;
}

interface CheckView {
  ck: string;
  selector: LabelSelectorModel | undefined;
  settled: number;
  /** Machines that became settled (or came settled) since this check last planned with them. */
  recent: Set<string>;
  /**
   * The recent Machines every plan of the check since its last successful reconcile read: what `consumed` counts
   * from then on. Only Machines that were recent when planned: one that settles after it was planned (the executor's
   * own write, the marker removed from a joined Machine) has not been seen joined by the plan the process keeps.
   */
  seen?: Set<string>;
}

export class MachineIndex {
  readonly all = new Index();
  private readonly active = new Index();
  private readonly known = new Map<string, Known>();
  private readonly byUid = new Map<string, string>();
  private readonly settledTotal = new Map<string, number>();
  private readonly checks = new Map<string, CheckView>();

  constructor(private readonly factsOf: (key: string) => MachineFacts | undefined) {}

  /** A Machine's new value (undefined: deleted, or readable no more as a Machine of a Cluster). */
  update(key: string, ck: string | undefined, facts: MachineFacts | undefined, malformed: boolean): void {
    const before = this.known.get(key);
    if (before !== undefined) this.leave(key, before);
    if (ck === undefined) return;
    const now: Known = {
      ck,
      ...(facts ? { uid: facts.uid } : {}),
      labels: facts?.labels ?? {},
      settled: !malformed && facts !== undefined && isSettled(facts),
    };
    this.known.set(key, now);
    this.all.set(key, ck);
    if (now.uid !== undefined) this.byUid.set(now.uid, key);
    if (!now.settled) {
      this.active.set(key, ck);
      return;
    }
    this.settledTotal.set(ck, (this.settledTotal.get(ck) ?? 0) + 1);
    for (const v of this.checks.values()) {
      if (v.ck !== ck) continue;
      const inScope = this.matches(v, now.labels);
      if (inScope) v.settled++;
      // Newly settled (it came so, or just joined), or newly in the check's scope (its labels edited): each check plans
      // with it once, to see the join.
      const entered = inScope && before !== undefined && !this.matches(v, before.labels);
      if (before === undefined || !before.settled || before.ck !== ck || entered) v.recent.add(key);
    }
  }

  private leave(key: string, k: Known): void {
    this.known.delete(key);
    this.all.remove(key);
    this.active.remove(key);
    if (k.uid !== undefined && this.byUid.get(k.uid) === key) this.byUid.delete(k.uid);
    if (!k.settled) return;
    this.settledTotal.set(k.ck, (this.settledTotal.get(k.ck) ?? 1) - 1);
    for (const v of this.checks.values()) if (v.ck === k.ck && this.matches(v, k.labels)) v.settled--;
  }

  private matches(v: CheckView, labels: Record<string, string>): boolean {
    return v.selector !== undefined && matchesSelector(v.selector, labels);
  }

  /**
   * A check's Cluster and selector. A new check, or a new Cluster, plans once with every Machine (rare, O(Cluster));
   * a new selector recounts.
   */
  watch(checkKey: string, ck: string, selector: LabelSelectorModel | undefined): void {
    const v = this.checks.get(checkKey);
    if (v !== undefined && v.ck === ck && v.selector === selector) return;
    const same = v?.ck === ck; // the same Cluster: what its reconcile in flight planned with is kept
    const fresh: CheckView = {
      ck,
      selector,
      settled: 0,
      recent: same ? v.recent : new Set(),
      ...(same && v.seen !== undefined ? { seen: v.seen } : {}),
    };
    for (const key of this.all.keys(ck)) {
      const k = this.known.get(key);
      if (!k?.settled) continue;
      const inScope = this.matches(fresh, k.labels);
      if (inScope) fresh.settled++;
      // A new Cluster, or a settled Machine the new selector takes in: planned with once, so that a join it made out of
      // scope is seen as the plan over every Machine sees it (seed 70041052).
      if (!same || (inScope && !this.matches(v, k.labels))) fresh.recent.add(key);
    }
    this.checks.set(checkKey, fresh);
  }

  forget(checkKey: string): void {
    this.checks.delete(checkKey);
  }

  /**
   * The keys of the Machines a plan of the check reads: those not settled, the newly settled, and the settled ones
   * its status names (by uid: an observation, a request), whose memory the plan must see them to update.
   */
  planned(checkKey: string, ck: string, namedUids: Iterable<string>): string[] {
    const v = this.checks.get(checkKey);
    const keys = new Set(this.active.keys(ck));
    const recent = new Set<string>();
    for (const k of v?.recent ?? EMPTY) if (this.known.get(k)?.ck === ck) recent.add(k);
    for (const k of recent) keys.add(k);
    // Every plan of one reconcile reads the recent Machines of the first and more (recent ones only come, until
    // consumed): the ones all of them read are those the plan the reconcile keeps has read, whichever it is.
    if (v !== undefined) v.seen = v.seen === undefined ? recent : new Set([...v.seen].filter((k) => recent.has(k)));
    for (const uid of namedUids) {
      const k = this.byUid.get(uid);
      if (k !== undefined && this.known.get(k)?.ck === ck) keys.add(k);
    }
    return [...keys];
  }

  /**
   * The check's reconcile succeeded: the newly settled Machines every plan of it read (`seen`) are counted from now
   * on. Not the Machines it read while they were not settled yet: those are planned with once more.
   */
  consumed(checkKey: string): void {
    const v = this.checks.get(checkKey);
    if (v === undefined) return;
    for (const k of v.seen ?? EMPTY) v.recent.delete(k);
    delete v.seen;
  }

  /**
   * The settled Machines of the Cluster outside a plan that reads the Machines of `included` (keys). A Machine the
   * plan reads is never looked up here: the plan's copy (perhaps a live read older than the cache) is the one.
   */
  settled(checkKey: string, ck: string, included: Iterable<string>): SettledMachines {
    const v = this.checks.get(checkKey);
    const inPlan = new Set(included);
    let inScope = v?.settled ?? 0;
    let total = this.settledTotal.get(ck) ?? 0;
    for (const key of inPlan) {
      const k = this.known.get(key);
      if (!k?.settled || k.ck !== ck) continue;
      total--;
      if (v !== undefined && this.matches(v, k.labels)) inScope--;
    }
    const outside = (key: string | undefined): key is string =>
      key !== undefined && !inPlan.has(key) && this.known.get(key)?.settled === true;
    return {
      inScope,
      total,
      get: (uid) => {
        const key = this.byUid.get(uid);
        return outside(key) ? this.factsOf(key) : undefined;
      },
      find: (pred) => {
        for (const key of this.all.keys(ck)) {
          if (!outside(key)) continue;
          const f = this.factsOf(key);
          if (f !== undefined && pred(f)) return f;
        }
        return undefined;
      },
    };
  }

  /** The key of the Machine with this uid, if known. */
  keyOf(uid: string): string | undefined {
    return this.byUid.get(uid);
  }

  /** Some Machine of the Cluster has no nodeRef (settled ones all have one). */
  anyUnjoined(ck: string): boolean {
    for (const key of this.active.keys(ck)) if (this.factsOf(key)?.nodeName === undefined) return true;
    return false;
  }
}

/** The Machines a check's status remembers by uid (read defensively: status is user-writable). */
export function namedUids(status: MachineJoinCheckStatus | undefined): string[] {
  if (status === undefined || status === null || typeof status !== 'object') return [];
  const lists: unknown[] = [status.observations, status.requests, status.recentFailures, status.remediations];
  const uids: unknown[] = lists.flatMap((l) =>
    Array.isArray(l) ? l.map((x: { uid?: unknown } | null) => x?.uid) : [],
  );
  uids.push(status.firstControlPlane?.replaced?.uid);
  return uids.filter((u): u is string => typeof u === 'string');
}
