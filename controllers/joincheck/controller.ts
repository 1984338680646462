// The MachineJoinCheck controller: informers on checks, Machines, Clusters, MachineHealthChecks,
// KubeadmControlPlanes and control-plane KubeadmConfigs; callbacks that only map an object to the checks
// it concerns and enqueue their keys; and a reconcile that snapshots the caches and hands them to the
// executor. Work is level-triggered: each reconcile ends by arming a timer at the plan's next deadline.
import type { Logger } from 'winston';
import { capiResource, type CapiKind } from '../../api/capi/resources.js';
import type { CapiApiVersion } from '../../api/capi/model.js';
import { Informer, keyOf, type InformerEvent } from '../runtime/informer.js';
import { WorkQueue } from '../runtime/queue.js';
import type { Json, Resource, RestClient } from '../runtime/rest.js';
import type { EventRecorder } from './events.js';
import { CHECKS, execute } from './executor.js';
import { ClusterIndex, clusterKey, clusterOf } from './indexes.js';
import type { JoinGuardMetrics } from './metrics.js';
import type { ReconcileResult, RuntimeMetrics } from '../runtime/metrics.js';
import { MACHINEJOINCHECK_CONTROLLER } from '../options.js';
import type { RawSnapshot } from './snapshot.js';
import type { WorkloadNodeReader } from './workload-nodes.js';

export interface JoinCheckControllerOptions {
  rest: RestClient;
  apiVersion: CapiApiVersion;
  kubeadm: { controlPlane: boolean; bootstrap: boolean };
  namespace?: string;
  log: Logger;
  metrics: JoinGuardMetrics;
  /** controller-runtime's families: reconcile counts and times, the queue's. */
  runtimeMetrics?: RuntimeMetrics;
  events: EventRecorder;
  clock: () => number;
  livenessMs: number;
  connectionGraceMs?: number;
  workloadNodes?: WorkloadNodeReader;
  workers?: number;
}

const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';
const CONTROLLER_NAME = MACHINEJOINCHECK_CONTROLLER.name;

export class JoinCheckController {
  readonly queue: WorkQueue;
  private readonly informers: Record<string, Informer> = {};
  private readonly checksByCluster = new ClusterIndex();
  private readonly machinesByCluster = new ClusterIndex();
  private readonly mhcsByCluster = new ClusterIndex();
  private readonly configsByCluster = new ClusterIndex();
  private readonly probes = new Map<string, { reachable: boolean; at: number }>();
  private readonly loggedProblems = new Map<string, string>();
  readonly reconciled = new Set<string>();
  private fullAt?: number;
  private started = false;

  constructor(private readonly o: JoinCheckControllerOptions) {
    this.queue = new WorkQueue(o.clock, o.runtimeMetrics?.queue(CONTROLLER_NAME));
    const capi = (k: CapiKind): Resource => ({ ...capiResource(k, o.apiVersion), namespaced: true });
    this.add('checks', CHECKS, (t, obj) => this.onCheck(t, obj));
    this.add('machines', capi('Machine'), (t, obj) => this.onClusterObject(this.machinesByCluster, t, obj));
    this.add('clusters', capi('Cluster'), (_t, obj) => this.enqueueCluster(obj.metadata?.namespace, obj.metadata?.name));
    this.add('machinehealthchecks', capi('MachineHealthCheck'), (t, obj) => this.onClusterObject(this.mhcsByCluster, t, obj));
    if (o.kubeadm.controlPlane) this.add('kubeadmcontrolplanes', capi('KubeadmControlPlane'), (_t, obj) => this.enqueueNamespace(obj.metadata?.namespace));
    // Only control-plane configs matter (the first control-plane rules); workers' configs are not cached.
    if (o.kubeadm.bootstrap) this.add('kubeadmconfigs', capi('KubeadmConfig'), (t, obj) => this.onClusterObject(this.configsByCluster, t, obj), CONTROL_PLANE_LABEL);
  }

  private add(name: string, resource: Resource, handler: (t: InformerEvent, obj: Json, old?: Json) => void, labelSelector?: string): void {
    this.informers[name] = new Informer({
      rest: this.o.rest,
      resource,
      name,
      ...(this.o.namespace ? { namespace: this.o.namespace } : {}),
      ...(labelSelector ? { labelSelector } : {}),
      log: this.o.log,
      livenessMs: this.o.livenessMs,
      onEvent: handler,
    });
  }

  startInformers(): void {
    for (const i of Object.values(this.informers)) i.start();
  }

  async synced(): Promise<void> {
    await Promise.all(Object.values(this.informers).map((i) => i.synced));
  }

  hasSynced(): boolean {
    return Object.values(this.informers).every((i) => i.hasSynced);
  }

  watchRestarts(): Record<string, number> {
    return Object.fromEntries(Object.entries(this.informers).map(([k, i]) => [k, i.restarts]));
  }

  /** Starts the workers (after the caches synced and, with leader election, the Lease is held). */
  startWorkers(): void {
    this.started = true;
    this.queue.run(this.o.workers ?? 2, (key) => this.reconcile(key));
    for (const k of this.informers['checks']!.store.keys()) this.queue.add(k);
  }

  async stop(): Promise<void> {
    for (const i of Object.values(this.informers)) i.stop();
    await this.queue.shutdown();
  }

  firstFullReconcileAt(): number | undefined {
    return this.fullAt;
  }

  // ---- event mapping: look up keys, enqueue, nothing else ----

  private onCheck(t: InformerEvent, obj: Json): void {
    const key = keyOf(obj);
    if (t === 'delete') this.checksByCluster.remove(key);
    else this.checksByCluster.set(key, obj);
    this.queue.add(key);
  }

  private onClusterObject(index: ClusterIndex, t: InformerEvent, obj: Json): void {
    const key = keyOf(obj);
    const before = index.filedUnder(key);
    const now = t === 'delete' ? index.remove(key) : index.set(key, obj);
    for (const ck of new Set([before, now])) if (ck !== undefined) for (const c of this.checksByCluster.keys(ck)) this.queue.add(c);
  }

  private enqueueCluster(ns: string | undefined, name: string | undefined): void {
    if (ns === undefined || name === undefined) return;
    for (const c of this.checksByCluster.keys(clusterKey(ns, name))) this.queue.add(c);
  }

  private enqueueNamespace(ns: string | undefined): void {
    for (const k of this.informers['checks']!.store.keys()) if (k.startsWith(`${ns}/`)) this.queue.add(k);
  }

  /** Puts an object read or written by the executor back into its cache. */
  private remember(kind: 'check' | 'machine' | 'cluster', obj: Json): void {
    const inf = this.informers[kind === 'check' ? 'checks' : kind === 'machine' ? 'machines' : 'clusters'];
    if (obj?.metadata?.name) inf?.upsert(obj);
  }

  // ---- reconcile ----

  rawSnapshot(key: string): RawSnapshot | undefined {
    const check = this.informers['checks']!.store.get(key);
    if (!check) return undefined;
    const ns: string = check.metadata.namespace;
    const cluster = typeof check.spec?.clusterName === 'string' ? check.spec.clusterName : '';
    const ck = clusterKey(ns, cluster);
    const pick = (inf: string, keys: ReadonlySet<string>) => {
      const store = this.informers[inf]?.store;
      const out: Json[] = [];
      if (store) for (const k of keys) {
        const o = store.get(k);
        if (o) out.push(o);
      }
      return out;
    };
    const clusterObj = this.informers['clusters']!.store.get(ck);
    const cpName = clusterObj?.spec?.controlPlaneRef?.name;
    const kcp = typeof cpName === 'string' ? this.informers['kubeadmcontrolplanes']?.store.get(`${ns}/${cpName}`) : undefined;
    const probe = this.probes.get(key);
    return {
      check,
      ...(clusterObj ? { cluster: clusterObj } : {}),
      machines: pick('machines', this.machinesByCluster.keys(ck)),
      mhcs: pick('machinehealthchecks', this.mhcsByCluster.keys(ck)),
      kcps: kcp ? [kcp] : [],
      bootstrapConfigs: pick('kubeadmconfigs', this.configsByCluster.keys(ck)),
      capi: { apiVersion: this.o.apiVersion },
      now: this.o.clock(),
      ...(probe ? { endpointProbe: probe } : {}),
      ...(this.o.connectionGraceMs !== undefined ? { connectionGraceMs: this.o.connectionGraceMs } : {}),
    };
  }

  async reconcile(key: string): Promise<void> {
    const started = process.hrtime.bigint();
    let result: ReconcileResult = 'success';
    this.o.runtimeMetrics?.reconcileStarted(CONTROLLER_NAME);
    try {
      const raw = this.rawSnapshot(key);
      if (!raw) {
        this.queue.forget(key);
        this.probes.delete(key);
        this.reconciled.delete(key);
        const [namespace, check] = key.split('/');
        this.o.metrics.forget({ namespace: namespace!, check: check! });
        return;
      }
      if (this.o.workloadNodes) {
        const nodes = await this.o.workloadNodes.nodesFor(raw);
        if (nodes) raw.workloadNodes = nodes;
      }
      const r = await execute(
        { rest: this.o.rest, apiVersion: this.o.apiVersion, log: this.o.log, events: this.o.events, metrics: this.o.metrics, remember: (k, obj) => this.remember(k, obj) },
        raw,
      );
      this.logProblems(key, r.problems, raw.check);
      if (r.probe) this.probes.set(key, r.probe);
      this.queue.succeeded(key);
      if (r.requeue) this.queue.addAfter(key, r.probe ? 0 : 100);
      if (r.wakeAt !== undefined) this.queue.addAfter(key, Math.max(0, r.wakeAt - this.o.clock()) + 5);
      if (r.requeue) result = 'requeue';
      else if (r.wakeAt !== undefined) result = 'requeue_after';
      this.markReconciled(key);
    } catch (e) {
      result = 'error';
      const delay = this.queue.retry(key);
      this.o.log.error('reconcile failed, retrying', { check: key, error: (e as Error).message, retryInMs: delay });
    } finally {
      this.o.runtimeMetrics?.reconcileDone(CONTROLLER_NAME, result, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  private markReconciled(key: string): void {
    this.reconciled.add(key);
    if (this.fullAt !== undefined) return;
    for (const k of this.informers['checks']!.store.keys()) if (!this.reconciled.has(k)) return;
    this.fullAt = this.o.clock();
  }

  private logProblems(key: string, problems: { kind: string; name: string; error: string }[], check: Json): void {
    const text = problems.map((p) => p.error).join(' | ');
    if (this.loggedProblems.get(key) === text) return;
    this.loggedProblems.set(key, text);
    for (const p of problems) {
      this.o.log.warn(`ignored an object JoinGuard cannot understand: ${p.error}`, { check: check.metadata.name, namespace: check.metadata.namespace, cluster: clusterOf(check), object: `${p.kind}/${p.name}` });
    }
  }

  get isStarted(): boolean {
    return this.started;
  }
}
