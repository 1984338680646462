// The controller's caches: one informer per kind, each object turned into the internal model once, at the
// informer (the raw JSON of Machines, Clusters, MachineHealthChecks, KubeadmControlPlanes and KubeadmConfigs is
// dropped), indexes from a Cluster to its objects, and the snapshot of one check built from them — with the
// objects the executor read live in place of the cached ones. An update whose facts did not change emits
// nothing; a Machine event concerns only the checks whose selector matches it (every check of its Cluster for a
// control-plane Machine), so the cost of an event does not grow with the Cluster's size.
import {
  readBootstrapConfig,
  readCluster,
  readKubeadmControlPlane,
  readMachine,
  readMachineHealthCheck,
  readMachineSet,
} from '../../../api/capi/readers.js';
import { matchesSelector } from '../../../api/capi/selector.js';
import {
  CABPK_GROUP,
  type BootstrapConfigFacts,
  type ClusterFacts,
  type KcpFacts,
  type MachineFacts,
  type MachineHealthCheckFacts,
  type MachineSetFacts,
} from '../../../api/capi/model.js';
import type { CapiKind } from '../../../api/capi/resources.js';
import { parseSettings } from '../../../api/v1alpha1/settings.js';
import { CHECK_RESOURCE, type MachineJoinCheck } from '../../../api/v1alpha1/types.js';
import { Informer } from '../../../runtime/informers/informer.js';
import type { Json, Resource } from '../../../runtime/client/rest.js';
import { Index, MachineIndex, namedUids } from './machine-index.js';
import { entryReader, namespaced } from './entry-reader.js';
import { isSettled } from '../rules/verdict-rules.js';
import { snapshotMachines } from './snapshot-machines.js';
import { clusterKey, clusterOf, sameEntry, type CacheOptions, type CheckEntry, type Entry } from './cache-entries.js';
import type { CapiInfo, Snapshot, SnapshotExtras, Live } from '../types.js';
import { keyOf } from '../../../runtime/client/objects.js';
import type { InformerEvent } from '../../../runtime/informers/informer-options.js';

const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';
export const WATCH_FILTER_LABEL = 'cluster.x-k8s.io/watch-filter';

export class Caches {
  readonly checks: Informer<CheckEntry>;
  readonly machines: Informer<Entry<MachineFacts>>;
  readonly clusters: Informer<Entry<ClusterFacts>>;
  readonly mhcs: Informer<Entry<MachineHealthCheckFacts>>;
  readonly kcps?: Informer<Entry<KcpFacts>>;
  readonly configs?: Informer<Entry<BootstrapConfigFacts>>;
  /** MachineSets: a rollout's revisions and templates (rollout-suspect.ts). */
  readonly machineSets: Informer<Entry<MachineSetFacts>>;
  private readonly byCluster = {
    checks: new Index(),
    mhcs: new Index(),
    configs: new Index(),
    machineSets: new Index(),
  };
  /** The Machines of each Cluster: those a plan reads, and the settled ones counted per check. */
  private readonly machineIndex = new MachineIndex((key) => this.machines.store.get(key)?.facts);
  private readonly all: { name: string; inf: Informer<unknown> }[] = [];

  constructor(private readonly o: CacheOptions) {
    const v = o.apiVersion;
    const capi = (k: CapiKind) => namespaced(k, v);
    // --watch-filter selects server-side, so a shard lists and caches only its own Clusters, Machines and checks
    // (docs/decisions/sharding-with-watch-filter.md: how the label reaches Machines). MHCs, KCPs and configs are
    // few and not filtered: one missing from a shard's view would change what it decides.
    const shard = o.watchFilter !== undefined ? `${WATCH_FILTER_LABEL}=${o.watchFilter}` : undefined;
    this.checks = this.informer(
      'checks',
      { ...CHECK_RESOURCE },
      (raw) => this.checkEntry(raw),
      (t, e, old) => this.onCheck(t, e, old),
      undefined,
      shard,
    );
    this.machines = this.informer(
      'machines',
      capi('Machine'),
      entryReader('Machine', `cluster.x-k8s.io/${v}`, (x) => lean(readMachine(x, v))),
      (t, e, old) => this.onMachine(t, e, old),
      sameEntry,
      shard,
    );
    this.clusters = this.informer(
      'clusters',
      capi('Cluster'),
      entryReader('Cluster', `cluster.x-k8s.io/${v}`, (x) => readCluster(x, v)),
      (_t, e) => this.enqueueClusterKey(e.key),
      sameEntry,
      shard,
    );
    this.mhcs = this.informer(
      'machinehealthchecks',
      capi('MachineHealthCheck'),
      entryReader('MachineHealthCheck', `cluster.x-k8s.io/${v}`, (x) => readMachineHealthCheck(x, v)),
      (t, e, old) => this.onIndexed(this.byCluster.mhcs, t, e, old),
      sameEntry,
    );
    // Status is not read, so a MachineSet's replica counts changing emits nothing; a revision or template does.
    this.machineSets = this.informer(
      'machinesets',
      capi('MachineSet'),
      entryReader('MachineSet', `cluster.x-k8s.io/${v}`, (x) => readMachineSet(x)),
      (t, e, old) => this.onIndexed(this.byCluster.machineSets, t, e, old),
      sameEntry,
      shard,
    );
    if (o.kubeadm.controlPlane) this.kcps = this.kcpInformer();
    // Only control-plane configs matter (the first control-plane rules); workers' configs are not cached.
    if (o.kubeadm.bootstrap) this.configs = this.configInformer();
  }

  private kcpInformer(): Informer<Entry<KcpFacts>> {
    const v = this.o.apiVersion;
    return this.informer(
      'kubeadmcontrolplanes',
      namespaced('KubeadmControlPlane', v),
      entryReader('KubeadmControlPlane', `controlplane.cluster.x-k8s.io/${v}`, (x) => readKubeadmControlPlane(x, v)),
      (_t, e) => this.enqueueNamespace(e.key),
      sameEntry,
    );
  }

  private configInformer(): Informer<Entry<BootstrapConfigFacts>> {
    const v = this.o.apiVersion;
    return this.informer(
      'kubeadmconfigs',
      namespaced('KubeadmConfig', v),
      entryReader('KubeadmConfig', `${CABPK_GROUP}/${v}`, (x) => readBootstrapConfig(x)),
      (t, e, old) => this.onIndexed(this.byCluster.configs, t, e, old),
      sameEntry,
      CONTROL_PLANE_LABEL,
    );
  }

  private informer<T>(
    name: string,
    resource: Resource,
    transform: (raw: Json) => T,
    onEvent: (t: InformerEvent, obj: T, old?: T) => void,
    same?: (a: T, b: T) => boolean,
    labelSelector?: string,
  ): Informer<T> {
    const inf = new Informer<T>({
      rest: this.o.rest,
      resource,
      name,
      ...(this.o.namespace ? { namespace: this.o.namespace } : {}),
      ...(labelSelector ? { labelSelector } : {}),
      log: this.o.log,
      livenessMs: this.o.livenessMs,
      transform,
      ...(same ? { same } : {}),
      onEvent,
      onRestart: (why) => this.o.onRestart?.(name, why),
      onCurrent: (current) => this.o.onCurrent?.(name, current),
    });
    this.all.push({ name, inf: inf as Informer<unknown> });
    return inf;
  }

  start(): void {
    for (const { inf } of this.all) inf.start();
  }

  stop(): void {
    for (const { inf } of this.all) inf.stop();
  }

  async synced(): Promise<void> {
    await Promise.all(this.all.map(({ inf }) => inf.synced));
  }

  hasSynced(): boolean {
    return this.all.every(({ inf }) => inf.hasSynced);
  }

  /** Not ok while any informer has been without a live watch past its liveness bound. */
  health(): { ok: boolean; why?: string } {
    for (const { inf } of this.all) {
      const h = inf.health();
      if (!h.ok) return h;
    }
    return { ok: true };
  }

  /** Every informer has synced since its last failure: what a decision may read (the controller's gate). */
  current(): { ok: boolean; why?: string } {
    const behind = this.all.filter(({ inf }) => !inf.current).map(({ name }) => name);
    return behind.length === 0
      ? { ok: true }
      : { ok: false, why: `not re-listed since their list/watch failed: ${behind.join(', ')}` };
  }

  restarts(): Record<string, number> {
    return Object.fromEntries(this.all.map(({ name, inf }) => [name, inf.restarts]));
  }

  checkKeys(): Iterable<string> {
    return this.checks.store.keys();
  }

  /** Puts an object read or written by the executor back into its cache. */
  remember(kind: 'check' | 'machine' | 'cluster', raw: Json): void {
    if (!raw?.metadata?.name) return;
    if (kind === 'check') this.checks.upsert(raw);
    else if (kind === 'machine') this.machines.upsert(raw);
    else this.clusters.upsert(raw);
  }

  /** The check's Cluster is outside --watch-filter (not in the filtered cache): the check is left alone. */
  filteredOut(key: string): boolean {
    if (this.o.watchFilter === undefined) return false;
    const c = this.checks.store.get(key);
    const cluster = c?.raw?.spec?.clusterName;
    return typeof cluster !== 'string' || !this.clusters.store.has(clusterKey(c!.raw.metadata.namespace, cluster));
  }

  // ---- events: look up keys, enqueue, nothing else ----

  /** A check of a Cluster outside --watch-filter is not queued, as CAPI's filter predicate drops its events. */
  private enqueue(key: string): void {
    if (this.checks.store.get(key) !== undefined && this.filteredOut(key)) return;
    this.o.enqueue(key);
  }

  private checkEntry(raw: Json): CheckEntry {
    const parsed = parseSettings(raw?.spec);
    if (parsed.settings) return { raw, settings: parsed.settings };
    return { raw, settingsError: parsed.errors.map((e) => `${e.field}: ${e.message}`).join('; ') };
  }

  private onCheck(t: InformerEvent, e: CheckEntry, old?: CheckEntry): void {
    const key = keyOf(e.raw);
    if (old !== undefined) this.byCluster.checks.remove(key);
    const cluster = clusterOf(e.raw);
    if (t !== 'delete' && cluster !== undefined) {
      const ck = clusterKey(e.raw.metadata.namespace, cluster);
      this.byCluster.checks.set(key, ck);
      this.machineIndex.watch(key, ck, e.settings?.selector);
    } else this.machineIndex.forget(key);
    this.enqueue(key);
  }

  private onMachine(t: InformerEvent, e: Entry<MachineFacts>, old?: Entry<MachineFacts>): void {
    const ns = e.key.slice(0, e.key.indexOf('/'));
    const before = this.machineIndex.all.filedUnder(e.key);
    const ck = t === 'delete' || e.cluster === undefined ? undefined : clusterKey(ns, e.cluster);
    this.machineIndex.update(e.key, ck, e.facts, e.malformed !== undefined);
    const now = ck;
    for (const ck of new Set([before, now])) {
      if (ck === undefined) continue;
      for (const c of this.byCluster.checks.keys(ck))
        if (this.concerns(c, e) || (old !== undefined && this.concerns(c, old))) this.enqueue(c);
    }
  }

  /** A Machine event concerns a check whose selector matches it; a control-plane or unreadable Machine, every check. */
  private concerns(checkKey: string, e: Entry<MachineFacts>): boolean {
    const f = e.facts;
    if (f === undefined || f.controlPlane) return true;
    const settings = this.checks.store.get(checkKey)?.settings;
    return settings === undefined || matchesSelector(settings.selector, f.labels);
  }

  private onIndexed<F>(index: Index, t: InformerEvent, e: Entry<F>, _old?: Entry<F>): void {
    const ns = e.key.slice(0, e.key.indexOf('/'));
    const before = index.filedUnder(e.key);
    if (t === 'delete' || e.cluster === undefined) index.remove(e.key);
    else index.set(e.key, clusterKey(ns, e.cluster));
    for (const ck of new Set([before, index.filedUnder(e.key)])) if (ck !== undefined) this.enqueueClusterKey(ck);
  }

  private enqueueClusterKey(ck: string): void {
    for (const c of this.byCluster.checks.keys(ck)) this.enqueue(c);
  }

  private enqueueNamespace(key: string): void {
    const prefix = key.slice(0, key.indexOf('/') + 1);
    for (const k of this.checks.store.keys()) if (k.startsWith(prefix)) this.enqueue(k);
  }

  // ---- snapshots ----

  /**
   * The snapshot of one check: everything its planner reads, from the caches, with what the executor read live
   * (a Machine read as gone is left out; the Cluster read live replaces the cached one).
   */
  snapshot(key: string, live: Live, capi: CapiInfo, extra: SnapshotExtras): Snapshot | undefined {
    const entry = live.check !== undefined ? this.checkEntry(live.check) : this.checks.store.get(key);
    if (entry === undefined) return undefined;
    const raw = entry.raw;
    const ns: string = raw.metadata.namespace;
    const clusterName = typeof raw.spec?.clusterName === 'string' ? raw.spec.clusterName : '';
    const ck = clusterKey(ns, clusterName);
    const v = this.o.apiVersion;

    let cluster: ClusterFacts | undefined = this.clusters.store.get(ck)?.facts;
    const problems: { name: string; uid?: string; error: string }[] = [];
    if (live.cluster !== undefined) {
      cluster = undefined;
      if (live.cluster !== null) {
        try {
          cluster = readCluster(live.cluster, v);
        } catch (e) {
          problems.push({ name: clusterName, error: (e as Error).message });
        }
      }
    }

    const planned = this.machineIndex.planned(key, ck, namedUids(raw.status));
    const source = {
      get: (k: string) => this.machines.store.get(k),
      keyOf: (uid: string) => this.machineIndex.keyOf(uid),
    };
    const inCluster = (l: Json) => clusterOf(l) === clusterName && l.metadata?.namespace === ns;
    const { machines, included } = snapshotMachines(planned, source, live.machines, inCluster, v, problems);

    const ref = cluster?.controlPlaneRef;
    const kcp = ref?.kind === 'KubeadmControlPlane' ? this.kcps?.store.get(`${ns}/${ref.name}`)?.facts : undefined;
    const filed = <F>(index: Index, inf: Informer<Entry<F>> | undefined): F[] =>
      [...index.keys(ck)].flatMap((k) => inf?.store.get(k)?.facts ?? []);
    const bootstrapConfigs = new Map(
      filed(this.byCluster.configs, this.configs).map((f) => [`${f.kind}/${f.name}`, f]),
    );
    const mhcs = filed(this.byCluster.mhcs, this.mhcs);
    const machineSets = filed(this.byCluster.machineSets, this.machineSets);
    return {
      check: raw as MachineJoinCheck,
      ...(entry.settings
        ? { settings: entry.settings }
        : { settingsError: entry.settingsError ?? 'the spec could not be read' }),
      ...(cluster ? { cluster } : {}),
      machines,
      malformed: problems,
      bootstrapConfigs,
      ...(kcp ? { kcp } : {}),
      mhcs,
      machineSets,
      capi,
      settled: this.machineIndex.settled(key, ck, included),
      checkUids: this.checkUids(ns, raw.metadata.uid),
      // What the process knows beside the caches (the previous view, a probe, refused writes, tunings).
      ...(Object.fromEntries(Object.entries(extra).filter(([, x]) => x !== undefined)) as SnapshotExtras),
    };
  }

  /** The uids of the namespace's checks (deleting ones too): a mark naming none of them is a deleted check's. */
  private checkUids(ns: string, own: unknown): Set<string> {
    const uids = new Set<string>(typeof own === 'string' ? [own] : []);
    for (const k of this.checks.store.keys()) {
      const uid = k.startsWith(`${ns}/`) ? this.checks.store.get(k)?.raw?.metadata?.uid : undefined;
      if (typeof uid === 'string') uids.add(uid);
    }
    return uids;
  }

  /** Some Machine of the check's Cluster has no nodeRef (the workload Nodes are read only then). */
  anyUnjoined(key: string): { namespace: string; cluster: string } | undefined {
    const raw = this.checks.store.get(key)?.raw;
    const cluster = raw?.spec?.clusterName;
    if (raw === undefined || typeof cluster !== 'string') return undefined;
    return this.machineIndex.anyUnjoined(clusterKey(raw.metadata.namespace, cluster))
      ? { namespace: raw.metadata.namespace, cluster }
      : undefined;
  }

  /** The check's reconcile succeeded: the just-settled Machines its snapshots included are counted from now on. */
  consumed(key: string): void {
    this.machineIndex.consumed(key);
  }
}

/** A settled Machine is never written: its raw conditions are not kept (10,000 Machines, most of them settled). */
function lean(f: MachineFacts): MachineFacts {
  if (f.conditions === undefined || !isSettled(f)) return f;
  const { conditions: _unused, ...rest } = f;
  return rest;
}
