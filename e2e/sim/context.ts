// Shared pieces of the simulation's reconcilers (test-only): the context they run in, the event log
// entries, the work queue, and small readers of CAPI objects (of the release's API version, capi-api.ts).
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import type { ResourceCache } from './cache.js';
import type { CapiApi } from './capi-api.js';
import type { JoinPolicy } from './policy.js';
import type { KubeadmConfigLease } from './kubeadm-config.js';
import type { WorkloadClients } from './workload.js';

export interface SimEvent {
  /** Epoch ms. */
  time: number;
  type:
    | 'ClusterProvisioned'
    | 'BootstrapDataCreated'
    | 'MachineProvisioned'
    | 'WaitingForControlPlane'
    | 'JoinHeld'
    | 'JoinFailed'
    | 'NodeJoined'
    | 'KubeadmConfigCreated'
    | 'KubeadmConfigReleased'
    | 'EndpointUnreachable'
    | 'MachineDeleted'
    | 'NodeDeleted'
    | 'PolicyChanged'
    | 'Error';
  namespace: string;
  /** The object the event is about (SimMachine = its Machine's name, SimCluster, SimBootstrapConfig). */
  name: string;
  cluster?: string;
  message: string;
}

export interface ResolvedOptions {
  endpoint: { host: string; port: number };
  clusterDelayMs: number;
  bootstrapDelayMs: number;
  provisionDelayMs: number;
  bootDelayMs: number;
  deleteDelayMs: number;
  nodeAccess: 'kubeconfig' | 'direct';
  mirrorPods: boolean;
  kubeadmConfigLeaseMs: number;
  /** sim-kubelet's port (TestEnv.ports['sim-kubelet']): Nodes point their kubelet endpoint at it. */
  kubeletPort?: number;
}

export interface SimCaches {
  simClusters: ResourceCache;
  simMachines: ResourceCache;
  simBootstrapConfigs: ResourceCache;
  machines: ResourceCache;
  clusters: ResourceCache;
  kcps: ResourceCache;
}

export interface SimContext {
  kube: KubeClient;
  capi: CapiApi;
  opts: ResolvedOptions;
  caches: SimCaches;
  policy: JoinPolicy;
  workloads: WorkloadClients;
  lease: KubeadmConfigLease;
  emit(e: Omit<SimEvent, 'time'>): void;
}

/** A reconcile's answer: look again after this many ms, or not (undefined). */
export type Requeue = number | undefined;

export const SIM_FINALIZER = 'infrastructure.sim.joinguard.io/vm';
export const CAPI_GROUP = 'cluster.x-k8s.io';
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';

/** The Machine that owns an infra or bootstrap object (CAPI's Machine controller sets the ownerRef). */
export function ownerMachine(ctx: SimContext, obj: Json): Json | undefined {
  const ref = ((obj.metadata?.ownerReferences ?? []) as Json[]).find(
    (r) => r.kind === 'Machine' && String(r.apiVersion).startsWith(`${CAPI_GROUP}/`),
  );
  if (!ref) return undefined;
  const machine = ctx.caches.machines.get(obj.metadata.namespace, ref.name);
  return machine && machine.metadata.uid === ref.uid ? machine : undefined;
}

export function clusterOf(ctx: SimContext, namespace: string, name: string | undefined): Json | undefined {
  return name ? ctx.caches.clusters.get(namespace, name) : undefined;
}

export const isControlPlaneMachine = (machine: Json) => machine.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined;

export const epoch = (iso: string | undefined) => (iso ? Date.parse(iso) : NaN);

export function condition(type: string, status: 'True' | 'False', reason: string, message = ''): Json {
  return { type, status, reason, message, lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') };
}

/**
 * A de-duplicating work queue with delayed adds and a few workers; one key is never processed twice
 * at the same time (a key that changes while it runs is run again afterwards).
 */
export class WorkQueue {
  private readonly dirty = new Set<string>();
  private readonly order: string[] = [];
  private readonly running = new Set<string>();
  private readonly timers = new Map<string, { at: number; t: NodeJS.Timeout }>();
  private active = 0;
  private stopped = false;
  private idle?: () => void;

  constructor(
    private readonly handle: (key: string) => Promise<Requeue>,
    private readonly onError: (key: string, err: unknown) => void,
    private readonly concurrency = 4,
  ) {}

  add(key: string): void {
    if (this.stopped || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (!this.running.has(key)) this.order.push(key);
    this.pump();
  }

  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.t);
    const t = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, { at, t });
  }

  /** Stops taking work and waits for the running reconciles. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const { t } of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.order.length = 0;
    this.dirty.clear();
    if (this.active > 0) await new Promise<void>((resolve) => (this.idle = resolve));
  }

  private pump(): void {
    while (!this.stopped && this.active < this.concurrency) {
      const index = this.order.findIndex((k) => !this.running.has(k));
      if (index < 0) return;
      const [key] = this.order.splice(index, 1) as [string];
      this.dirty.delete(key);
      this.running.add(key);
      this.active++;
      void this.run(key);
    }
  }

  private async run(key: string): Promise<void> {
    try {
      const again = await this.handle(key);
      if (again !== undefined) this.addAfter(key, again);
    } catch (err) {
      this.onError(key, err);
      this.addAfter(key, 500);
    } finally {
      this.running.delete(key);
      this.active--;
      if (this.dirty.has(key)) this.order.push(key);
      if (this.stopped && this.active === 0) this.idle?.();
      this.pump();
    }
  }
}
