// The infrastructure and bootstrap SIMULATION (test-only) that stands in for a real provider, so that
// CAPI's real controllers can run Machines through their whole life on the test control plane: the sim
// provisions SimClusters and SimMachines, writes worker bootstrap data, and makes each VM register its
// Node in the workload cluster (the same apiserver, reached through `<cluster>-kubeconfig`) — or not, as
// its JoinPolicy says. CAPI's Machine controller then sets nodeRef on its own. It speaks the provider
// contract of the release under test (capiApiVersion: v1beta2 for CAPI v1.11+, v1beta1 for v1.10).
//
//   const sim = await startSim(env.kube(), { capiApiVersion: env.capiApiVersion });   // the sim closes the client
//   sim.policy.expireCredential({ namespace });     // "the join credential expired"
//   ...
//   await sim.stop();
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { ResourceCache } from './cache.js';
import { capiApi, type CapiApiVersion } from './capi-api.js';
import { WorkQueue, type ResolvedOptions, type SimCaches, type SimContext, type SimEvent } from './context.js';
import { installSimCrds, SIM_BOOTSTRAP, SIM_CLUSTER, SIM_MACHINE } from './crds.js';
import { JoinPolicy } from './policy.js';
import { reconcileSimBootstrap } from './reconcile-bootstrap.js';
import { reconcileSimCluster } from './reconcile-infra-cluster.js';
import { reconcileSimMachine } from './reconcile-infra-machine.js';
import { KubeadmConfigLease, leaseStep } from './kubeadm-config.js';
import { WorkloadClients } from './workload.js';

export interface SimOptions extends Partial<ResolvedOptions> {
  /** Where every SimCluster's control plane answers; default: the kubeconfig's server. */
  endpoint?: { host: string; port: number };
  /** Called for every sim event (the demo prints them); they are kept in `sim.events` too. */
  onEvent?: (e: SimEvent) => void;
  /** The CAPI API version (and provider contract) of the release under test; default v1beta2. */
  capiApiVersion?: CapiApiVersion;
}

const DEFAULTS: Omit<ResolvedOptions, 'endpoint'> = {
  clusterDelayMs: 200,
  bootstrapDelayMs: 200,
  provisionDelayMs: 500,
  bootDelayMs: 500,
  deleteDelayMs: 300,
  nodeAccess: 'kubeconfig',
  mirrorPods: true,
  kubeadmConfigLeaseMs: 60_000,
};
const LEASE_CHECK_MS = 1000;
const MAX_EVENTS = 5000;

export class Sim {
  readonly events: SimEvent[] = [];
  readonly errors: string[] = [];
  private readonly queues: WorkQueue[] = [];
  private leaseTimer?: NodeJS.Timeout;

  private constructor(
    readonly policy: JoinPolicy,
    private readonly ctx: SimContext,
    private readonly caches: ResourceCache[],
    private readonly machineQueue: WorkQueue,
  ) {}

  static async start(kube: KubeClient, options: SimOptions = {}): Promise<Sim> {
    const { capiApiVersion = 'v1beta2', onEvent, ...rest } = options;
    const capi = capiApi(capiApiVersion);
    await installSimCrds(kube, capi.version);
    const server = kube.server;
    const opts: ResolvedOptions = {
      ...DEFAULTS,
      ...Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)),
      endpoint: options.endpoint ?? { host: server.hostname, port: Number(server.port || 443) },
    };

    // eslint-disable-next-line prefer-const -- assigned once below, after the closures that use it are made
    let sim!: Sim;
    const emit = (e: Omit<SimEvent, 'time'>) => sim.record({ time: Date.now(), ...e });
    const onError = (what: string) => (key: string, err: unknown) =>
      sim.recordError(`${what} ${key}: ${err instanceof Error ? err.message : String(err)}`);
    const machineQueue = new WorkQueue(
      (key) => split(key, (ns, n) => reconcileSimMachine(ctx, ns, n)),
      onError('SimMachine'),
    );
    const clusterQueue = new WorkQueue(
      (key) => split(key, (ns, n) => reconcileSimCluster(ctx, ns, n)),
      onError('SimCluster'),
      2,
    );
    const bootstrapQueue = new WorkQueue(
      (key) => split(key, (ns, n) => reconcileSimBootstrap(ctx, ns, n)),
      onError('SimBootstrapConfig'),
    );
    const policy = new JoinPolicy(Date.now, () => {
      for (const m of caches.simMachines.list()) machineQueue.add(keyOf(m));
    });
    const cacheError = (what: string) => (err: unknown) =>
      sim.recordError(`watch ${what}: ${err instanceof Error ? err.message : String(err)}`);
    const caches: SimCaches = {
      simClusters: new ResourceCache(
        kube,
        SIM_CLUSTER,
        (_t, o) => clusterQueue.add(keyOf(o)),
        cacheError('SimCluster'),
      ),
      simMachines: new ResourceCache(
        kube,
        SIM_MACHINE,
        (_t, o) => machineQueue.add(keyOf(o)),
        cacheError('SimMachine'),
      ),
      simBootstrapConfigs: new ResourceCache(
        kube,
        SIM_BOOTSTRAP,
        (_t, o) => bootstrapQueue.add(keyOf(o)),
        cacheError('SimBootstrapConfig'),
      ),
      // A Machine change concerns its own VM and bootstrap config (owner reference set, data ready).
      machines: new ResourceCache(
        kube,
        capi.resource('Machine'),
        (_t, m) => {
          const ns = m.metadata.namespace as string;
          const infra = m.spec?.infrastructureRef as Json | undefined;
          if (infra?.kind === SIM_MACHINE.kind) machineQueue.add(`${ns}/${infra.name}`);
          const boot = m.spec?.bootstrap?.configRef as Json | undefined;
          if (boot?.kind === SIM_BOOTSTRAP.kind) bootstrapQueue.add(`${ns}/${boot.name}`);
        },
        cacheError('Machine'),
      ),
      // A Cluster change (control plane initialized) concerns the waiting configs and VMs of its namespace.
      clusters: new ResourceCache(
        kube,
        capi.resource('Cluster'),
        (_t, c) => {
          const ns = c.metadata.namespace as string;
          for (const b of caches.simBootstrapConfigs.list(ns)) bootstrapQueue.add(keyOf(b));
          for (const m of caches.simMachines.list(ns)) machineQueue.add(keyOf(m));
          void sim?.releaseLease();
        },
        cacheError('Cluster'),
      ),
      // KCPs and their Machines tell whether a control plane rolls out (it then needs kubeadm-config).
      kcps: new ResourceCache(
        kube,
        capi.resource('KubeadmControlPlane'),
        () => void sim?.releaseLease(),
        cacheError('KubeadmControlPlane'),
      ),
    };
    const ctx: SimContext = {
      kube,
      capi,
      opts,
      caches,
      policy,
      emit,
      workloads: new WorkloadClients(kube, opts.nodeAccess),
      lease: new KubeadmConfigLease(kube, opts.kubeadmConfigLeaseMs),
    };
    const all = [
      caches.clusters,
      caches.kcps,
      caches.machines,
      caches.simClusters,
      caches.simBootstrapConfigs,
      caches.simMachines,
    ];
    sim = new Sim(policy, ctx, all, machineQueue);
    sim.onEvent = onEvent;
    sim.queues.push(machineQueue, clusterQueue, bootstrapQueue);
    await Promise.all(all.map((c) => c.start()));
    sim.leaseTimer = setInterval(() => void sim.releaseLease(), LEASE_CHECK_MS);
    return sim;
  }

  private onEvent?: (e: SimEvent) => void;

  /** Sim events of one namespace (and type), oldest first. */
  eventsOf(namespace: string, type?: SimEvent['type']): SimEvent[] {
    return this.events.filter((e) => e.namespace === namespace && (type === undefined || e.type === type));
  }

  /** Looks at every VM again (after a test changed something the sim does not watch). */
  touchAll(): void {
    for (const m of this.ctx.caches.simMachines.list()) this.machineQueue.add(keyOf(m));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    await Promise.all(this.queues.map((q) => q.stop()));
    await Promise.all(this.caches.map((c) => c.stop()));
    await this.releaseLease(true);
    this.ctx.workloads.close();
    this.ctx.kube.close();
  }

  private record(e: SimEvent): void {
    this.events.push(e);
    if (this.events.length > MAX_EVENTS) this.events.splice(0, this.events.length - MAX_EVENTS);
    this.onEvent?.(e);
  }

  private recordError(message: string): void {
    this.errors.push(message);
    if (this.errors.length > 200) this.errors.shift();
    this.record({ time: Date.now(), type: 'Error', namespace: '', name: '', message });
  }

  private leaseRun?: Promise<void>;
  private leaseAgain = false;
  private stopped = false;

  /** Hands the shared kubeadm-config on (kubeadm-config.ts): one pass at a time, again if asked meanwhile. */
  private releaseLease(force = false): Promise<void> {
    if (this.stopped && !force) return Promise.resolve();
    if (this.leaseRun) {
      this.leaseAgain ||= !force;
      return force ? this.leaseRun.then(() => this.releaseLease(true)) : this.leaseRun;
    }
    this.leaseRun = this.leasePass(force).finally(() => {
      this.leaseRun = undefined;
      if (this.leaseAgain) {
        this.leaseAgain = false;
        void this.releaseLease();
      }
    });
    return this.leaseRun;
  }

  private async leasePass(force: boolean): Promise<void> {
    const { lease, caches, capi } = this.ctx;
    try {
      const world = {
        clusters: caches.clusters.list(),
        kcps: caches.kcps.list(),
        machines: caches.machines.list(),
        controlPlaneInitialized: (c: Json) => capi.controlPlaneInitialized(c),
        conditions: (o: Json) => capi.v1beta2Conditions(o),
      };
      const step = force ? { release: 'the simulation stops' } : leaseStep(world, lease.state);
      const why = await lease.maybeRelease(() => (step && 'release' in step ? step.release : true));
      if (why) {
        this.record({
          time: Date.now(),
          type: 'KubeadmConfigReleased',
          namespace: 'kube-system',
          name: 'kubeadm-config',
          message: why,
        });
        this.touchAll();
      }
      if (step && 'acquire' in step && lease.state === undefined) {
        const got = await lease.acquire(step.acquire, step.version, step.endpoint, 'rollout');
        if (got === 'acquired') {
          this.record({
            time: Date.now(),
            type: 'KubeadmConfigCreated',
            namespace: step.acquire.namespace,
            name: 'kubeadm-config',
            cluster: step.acquire.cluster,
            message: 'for the rollout of its KubeadmControlPlane',
          });
        }
      }
    } catch (err) {
      this.recordError(`kubeadm-config lease: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

export const startSim = (kube: KubeClient, options?: SimOptions) => Sim.start(kube, options);

const keyOf = (o: Json) => `${o.metadata.namespace}/${o.metadata.name}`;

function split<T>(key: string, fn: (namespace: string, name: string) => Promise<T>): Promise<T> {
  const i = key.indexOf('/');
  return fn(key.slice(0, i), key.slice(i + 1));
}
