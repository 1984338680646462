// The fleet, in one namespace (`bench`), built once through CAPI, saved and restored per invocation
// (bench/fleet-cache.ts), shared by its phases (bench/session.ts): the objects are in fleet-objects.ts. The fleet
// at rest: per Cluster its control plane (3 Machines), resting workers (pool `-rest`, a check and an MHC with
// 365-day timeouts) and the empty pool `-watch`, to which each phase
// adds its own stuck Machines (named `<cluster>-watch-<phase>-NNNN`, saved parked and flipped in) and from which
// they are deleted when it ends (the headline plan moves them to `-done` instead). A host phase of the headline plan
// (bench/plan.ts) uses the pool `-long`; the first burst's Clusters and Machines are saved too (burstFleet).
import { isConflict, isNotFound, type Json, type KubeClient } from '../hack/testenv/kube-client.js';
import { BENCH_CLUSTER, BENCH_MACHINE, BENCH_MACHINE_TEMPLATE } from './crds.js';
import {
  benchCluster,
  benchMachine,
  benchMachineTemplate,
  benchPath,
  capiPath,
  checkPath,
  cluster,
  configPath,
  CONTROL_PLANE_LABEL,
  kcpPath,
  kubeadmConfig,
  kubeadmControlPlane,
  kubeconfigSecret,
  livePool,
  machine,
  machineHealthCheck,
  machineJoinCheck,
  machineSet,
  NAMESPACE,
  PAUSED,
  REST_TIMEOUT_S,
  WATCH_FILTER,
  type MachineSpec,
} from './fleet-objects.js';

export { NAMESPACE, WATCH_FILTER, type MachineSpec } from './fleet-objects.js';

export interface FleetShape {
  /** Machines at rest (control plane and resting workers) plus one phase's stuck Machines. */
  machines: number;
  clusters: number;
  /** Control-plane Machines per Cluster (a KubeadmControlPlane's replicas). */
  controlPlanePerCluster: number;
  resting: number;
  stuck: number;
  /** The shards the Clusters are split into (consecutive equal parts), labelled on every fleet object. */
  shards: string[];
}

export const SHARDS = ['shard-a', 'shard-b'];

/** N Machines, 100 per Cluster, 3 of them its control plane, 5 % stuck (in each phase). */
export function fleetShape(machines: number, machinesPerCluster = 100, controlPlanePerCluster = 3): FleetShape {
  const stuck = Math.max(10, Math.round(machines * 0.05));
  // Two Clusters at least: one per shard.
  const clusters = Math.max(SHARDS.length, Math.ceil(machines / machinesPerCluster));
  const resting = machines - stuck - clusters * controlPlanePerCluster;
  if (resting < clusters) throw new Error(`--machines ${machines} leaves no resting workers`);
  return { machines, clusters, controlPlanePerCluster, resting, stuck, shards: SHARDS };
}

export const clusterName = (i: number) => `c${String(i).padStart(4, '0')}`;

/** The shard owning Cluster i. */
export function shardOf(shape: FleetShape, i: number): string | undefined {
  const s = shape.shards;
  return s.length ? s[Math.min(s.length - 1, Math.floor((i * s.length) / shape.clusters))] : undefined;
}

/** The shard owning a Cluster, or any object named after it (`c0042`, `c0042-watch`, `c0042-watch-p03-0003`, …). */
export function shardOfName(shape: FleetShape, name: string): string | undefined {
  const m = /^c(\d{4})(?![0-9])/.exec(name);
  return m ? shardOf(shape, Number(m[1])) : undefined;
}

const shardLabels = (shape: FleetShape, c: string): Record<string, string> => {
  const s = shardOfName(shape, c);
  return s ? { [WATCH_FILTER]: s } : {};
};

/** Runs fn over items with at most `limit` in flight (the client has 16 sockets). */
export async function pool<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

async function create(rest: KubeClient, path: string, obj: Json): Promise<Json> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await rest.create(path, obj);
    } catch (e) {
      // A webhook of a busy CAPI manager can time out under load: retry, an exact duplicate is a 409.
      if (isConflict(e)) return (await rest.get(`${path}/${obj.metadata.name}`))!;
      if (attempt >= 4) throw e;
      await new Promise((r) => setTimeout(r, 500 * (attempt + 1)));
    }
  }
}

/** A list that a busy apiserver may leave unanswered once (seen at 10,000 Machines): up to 3 tries. */
export async function listWithRetry(rest: KubeClient, path: string): Promise<Json> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await rest.list(path);
    } catch (e) {
      if (attempt >= 3) throw e;
      process.stderr.write(`[bench] GET ${path} failed (${(e as Error).message}); retrying\n`);
    }
  }
}

export async function createNamespace(rest: KubeClient, name = NAMESPACE): Promise<void> {
  await create(rest, '/api/v1/namespaces', { metadata: { name } });
}

/** Owners of the fleet's Machines: MachineSet name or KubeadmControlPlane name -> uid. */
export type Owners = Map<string, string>;

export interface ClusterOptions {
  server: URL;
  kubeconfigYaml: string;
  /** The control plane initialized (the burst's Clusters start without it). */
  initialized: boolean;
  /** MachineHealthChecks as a ClusterClass makes them (control plane, resting workers). */
  healthChecks: boolean;
}

/** One Cluster with its infrastructure, KubeadmControlPlane, kubeconfig Secret, paused MachineSets and MHCs. */
export async function createCluster(
  rest: KubeClient,
  shape: FleetShape,
  c: string,
  o: ClusterOptions,
  owners: Owners,
): Promise<void> {
  const labels = shardLabels(shape, c);
  for (const t of [`${c}-cp`, `${c}-worker`])
    await create(rest, benchPath(BENCH_MACHINE_TEMPLATE), benchMachineTemplate(t));
  await create(rest, benchPath(BENCH_CLUSTER), benchCluster(c, o.server));
  await rest.mergePatch(benchPath(BENCH_CLUSTER, c, 'status'), { status: { initialization: { provisioned: true } } });
  const kcp = await create(rest, kcpPath(), kubeadmControlPlane(c, shape.controlPlanePerCluster));
  owners.set(c, kcp.metadata.uid);
  await rest.mergePatch(kcpPath(c, 'status'), {
    status: { initialization: { controlPlaneInitialized: o.initialized } },
  });
  await create(rest, `/api/v1/namespaces/${NAMESPACE}/secrets`, kubeconfigSecret(c, o.kubeconfigYaml));
  await create(rest, capiPath('clusters'), cluster(c, labels));
  for (const kind of ['rest', 'watch', 'live'] as const) {
    const ms = await create(rest, capiPath('machinesets'), machineSet(c, `${c}-${kind}`, labels));
    owners.set(`${c}-${kind}`, ms.metadata.uid);
  }
  if (o.healthChecks) {
    await create(
      rest,
      capiPath('machinehealthchecks'),
      machineHealthCheck(c, `${c}-cp`, REST_TIMEOUT_S, {
        [CONTROL_PLANE_LABEL]: '',
        'cluster.x-k8s.io/cluster-name': c,
      }),
    );
    await create(
      rest,
      capiPath('machinehealthchecks'),
      machineHealthCheck(c, `${c}-rest`, REST_TIMEOUT_S, { pool: `${c}-rest` }),
    );
  }
}

/**
 * Marks a Cluster's control plane initialized (the burst's clock start for its workers), then touches the Cluster:
 * CAPI's Cluster controller did not come back to it for a paused KCP's status change (15 s and more, seen here),
 * and reads it at once on a change of the Cluster itself (434 ms).
 */
export async function initializeControlPlane(rest: KubeClient, c: string): Promise<void> {
  await rest.mergePatch(kcpPath(c, 'status'), { status: { initialization: { controlPlaneInitialized: true } } });
  await rest.mergePatch(capiPath('clusters', c), {
    metadata: { annotations: { 'bench.joinguard.io/control-plane-initialized': new Date().toISOString() } },
  });
}

/** Every Cluster of the shape, 8 at a time. */
export async function createClusters(
  rest: KubeClient,
  shape: FleetShape,
  o: Omit<ClusterOptions, 'initialized' | 'healthChecks'>,
): Promise<Owners> {
  const owners: Owners = new Map();
  const names = Array.from({ length: shape.clusters }, (_, i) => clusterName(i));
  await pool(names, 8, (c) => createCluster(rest, shape, c, { ...o, initialized: true, healthChecks: true }, owners));
  return owners;
}

/** The fleet at rest: each Cluster's control-plane Machines, then the resting workers spread over the Clusters. */
export function restingMachines(shape: FleetShape): MachineSpec[] {
  const cp = Array.from({ length: shape.clusters }, (_, i) =>
    Array.from({ length: shape.controlPlanePerCluster }, (_, k): MachineSpec => {
      const c = clusterName(i);
      const shard = shardOf(shape, i);
      return {
        cluster: c,
        pool: `${c}-cp`,
        name: `${c}-cp-${String(k).padStart(4, '0')}`,
        controlPlaneIndex: k,
        ...(shard ? { shard } : {}),
      };
    }),
  ).flat();
  return [...cp, ...spread(shape, shape.resting, (c, k) => ({ pool: `${c}-rest`, name: `${c}-rest-${k}` }))];
}

/**
 * The tags of the stuck Machines saved parked: each runStandard phase's, and each replicas phase's two events
 * (`<tag>f` failover, `<tag>r` re-list); the burst's are saved too, but Provisioned (burstFleet).
 */
export const parkedTags = (plan: { kind: string; tag: string }[]) =>
  plan.flatMap((p) => (p.kind === 'burst' ? [] : p.kind === 'replicas' ? [`${p.tag}f`, `${p.tag}r`] : [p.tag]));

/** Stuck Machines per burst Cluster (bench/burst.ts). */
export const BURST_PER_CLUSTER = 100;

/**
 * The first burst's Clusters (after the fleet's, their control plane not initialized) and their stuck Machines,
 * saved in the fleet Provisioned: their clocks wait for the control plane, which the burst initializes. No Machine
 * of the burst is made mid-run.
 */
export function burstFleet(shape: FleetShape, plan: { kind: string; tag: string }[], burst: number) {
  const p = plan.find((x) => x.kind === 'burst');
  if (!p) return { clusters: [] as string[], machines: [] as MachineSpec[] };
  const n = Math.ceil(burst / BURST_PER_CLUSTER);
  const clusters = Array.from({ length: n }, (_, i) => clusterName(shape.clusters + i));
  return { clusters, machines: stuckMachines(shape, p.tag, burst, clusters) };
}

/**
 * The stuck Machines of the phases with these tags, parked: saved in the fleet, flipped by their phase. Each phase's
 * first one is owned by its Cluster's live MachineSet (ownerAnswers), the rest by the paused `-watch`.
 */
export function parkedMachines(shape: FleetShape, tags: string[], pools: Record<string, string> = {}): MachineSpec[] {
  return tags.flatMap((t) =>
    withLiveOwner(stuckMachines(shape, t, undefined, undefined, pools[t])).map((m) => ({ ...m, parked: true })),
  );
}

/** The pool (suffix) of each parked phase whose stuck Machines are not in `-watch` (a host's, bench/plan.ts). */
export const parkedPools = (plan: { tag: string; pool?: string }[]): Record<string, string> =>
  Object.fromEntries(plan.flatMap((p) => (p.pool ? [[p.tag, p.pool]] : [])));

/** A phase's stuck Machines, the first owned by its Cluster's live MachineSet (livePool): that owner answers. */
export const withLiveOwner = (specs: MachineSpec[]): MachineSpec[] =>
  specs.map((m, i) => (i === 0 ? { ...m, owner: livePool(m.cluster) } : m));

/**
 * The live MachineSets set going once they own their Machines: replicas = the Machines each owns (it neither
 * scales up nor down; a Machine it deletes as remediation is replaced by one with no pool), unpaused.
 */
export async function startLiveOwners(rest: KubeClient, machines: MachineSpec[]): Promise<void> {
  const owned = new Map<string, number>();
  for (const m of machines) if (m.owner) owned.set(m.owner, (owned.get(m.owner) ?? 0) + 1);
  for (const [ms, replicas] of owned)
    await rest.mergePatch(capiPath('machinesets', ms), {
      metadata: { annotations: { [PAUSED]: null } },
      spec: { replicas },
    });
}

/**
 * A phase's stuck Machines (`tag` names the phase), spread over the given Clusters (default: all of them), in the
 * pool `<cluster>-<pool>`: `watch`, or `long` for a phase whose window hosts others (bench/plan.ts), which no other
 * phase's check or MHC selects; those are owned by the paused `-watch` MachineSet as well.
 */
export function stuckMachines(
  shape: FleetShape,
  tag: string,
  n = shape.stuck,
  clusters?: string[],
  pool = 'watch',
): MachineSpec[] {
  return spread(
    shape,
    n,
    (c, k) => ({
      pool: `${c}-${pool}`,
      name: `${c}-${pool}-${tag}-${k}`,
      ...(pool !== 'watch' ? { owner: `${c}-watch` } : {}),
    }),
    clusters,
  );
}

function spread(
  shape: FleetShape,
  n: number,
  naming: (c: string, k: string) => { pool: string; name: string; owner?: string },
  clusters = Array.from({ length: shape.clusters }, (_, i) => clusterName(i)),
): MachineSpec[] {
  return Array.from({ length: n }, (_, i) => {
    const c = clusters[i % clusters.length]!;
    const shard = shardOfName(shape, c);
    return {
      cluster: c,
      ...naming(c, String(Math.floor(i / clusters.length)).padStart(4, '0')),
      ...(shard ? { shard } : {}),
    };
  });
}

/** A BenchMachine, already provisioned (unless parked), its KubeadmConfig, then its Machine (owned by the paused MachineSet or the KCP). */
export async function createMachine(rest: KubeClient, m: MachineSpec, owners: Owners): Promise<void> {
  await create(rest, benchPath(BENCH_MACHINE), benchMachine(m));
  if (!m.parked) await provisionInfrastructure(rest, m.name);
  await create(rest, configPath(), kubeadmConfig(m));
  const owner = owners.get(m.controlPlaneIndex !== undefined ? m.cluster : (m.owner ?? m.pool));
  if (!owner) throw new Error(`${m.name}: no owner ${m.owner ?? m.pool} created`);
  await create(rest, capiPath('machines'), machine(m, owner));
}

/** The BenchMachine's status written provisioned: CAPI's Machine controller then marks the Machine InfrastructureReady. */
export async function provisionInfrastructure(rest: KubeClient, name: string): Promise<void> {
  await rest.mergePatch(benchPath(BENCH_MACHINE, name, 'status'), {
    status: { initialization: { provisioned: true }, addresses: [{ type: 'InternalIP', address: '127.0.0.1' }] },
  });
}

/** A parked Machine moved into its pool (its `pool` label), where the phase's check and MHC select it. */
export async function unpark(rest: KubeClient, m: MachineSpec): Promise<void> {
  await rest.mergePatch(capiPath('machines', m.name), { metadata: { labels: { pool: m.pool } } });
}

/** Deletes Machines (CAPI's Machine controller deletes their BenchMachine and KubeadmConfig, then lets them go). */
export async function deleteMachines(rest: KubeClient, names: string[]): Promise<void> {
  await pool(names, 16, async (n) => {
    await rest.delete(capiPath('machines', n)).catch((e: unknown) => {
      if (!isNotFound(e)) throw e;
    });
  });
}

/**
 * Every check afresh, as a first install has them: each existing one's finalizer dropped and the check deleted
 * (JoinGuard is stopped), then a new one created. Returns the new checks' names and uids.
 */
export async function freshChecks(
  rest: KubeClient,
  shape: FleetShape,
  joinTimeoutS: number,
  clusters: string[],
): Promise<{ name: string; uid: string; cluster: string }[]> {
  const made: { name: string; uid: string; cluster: string }[] = [];
  const items = clusters.flatMap((c) => [
    { c, pool: `${c}-rest`, timeoutS: REST_TIMEOUT_S },
    { c, pool: `${c}-watch`, timeoutS: joinTimeoutS },
  ]);
  await pool(items, 8, async ({ c, pool: p, timeoutS }) => {
    const cur = await rest.get(checkPath(p));
    if (cur) {
      if (cur.metadata?.finalizers?.length) await rest.mergePatch(checkPath(p), { metadata: { finalizers: null } });
      await rest.delete(checkPath(p));
      for (let i = 0; i < 100 && (await rest.get(checkPath(p))); i++) await new Promise((r) => setTimeout(r, 50));
    }
    const obj = await create(rest, checkPath(), machineJoinCheck(c, p, timeoutS, shardLabels(shape, c)));
    made.push({ name: p, uid: obj.metadata.uid, cluster: c });
  });
  return made;
}

/** The watch pools' MHCs (or another pool's, `long`): made with this timeout, or deleted (undefined). */
export async function watchHealthChecks(
  rest: KubeClient,
  clusters: string[],
  timeoutS: number | undefined,
  suffix = 'watch',
) {
  await pool(clusters, 8, async (c) => {
    const name = `${c}-${suffix}`;
    await rest.delete(capiPath('machinehealthchecks', name));
    if (timeoutS === undefined) return;
    for (let i = 0; i < 100 && (await rest.get(capiPath('machinehealthchecks', name))); i++)
      await new Promise((r) => setTimeout(r, 50));
    await create(rest, capiPath('machinehealthchecks'), machineHealthCheck(c, name, timeoutS, { pool: name }));
  });
}

/** Cluster facts the deadlines need: ControlPlaneInitialized and InfrastructureReady transition times. */
export interface ClusterTimes {
  ready: boolean;
  controlPlaneInitializedAt?: number;
  infrastructureReadyAt?: number;
  /** RemoteConnectionProbe True since: JoinGuard holds verdicts for a grace period after it. */
  remoteConnectionAt?: number;
}

export async function clusterTimes(rest: KubeClient): Promise<Map<string, ClusterTimes>> {
  const list = await listWithRetry(rest, capiPath('clusters'));
  const out = new Map<string, ClusterTimes>();
  for (const c of list.items as Json[]) {
    const cond = (t: string) =>
      ((c.status?.conditions ?? []) as Json[]).find((x) => x.type === t && x.status === 'True');
    const cpi = cond('ControlPlaneInitialized');
    const infra = cond('InfrastructureReady');
    const probe = cond('RemoteConnectionProbe');
    out.set(c.metadata.name, {
      ready: Boolean(cpi && infra && probe),
      ...(probe ? { remoteConnectionAt: Date.parse(probe.lastTransitionTime) } : {}),
      ...(cpi ? { controlPlaneInitializedAt: Date.parse(cpi.lastTransitionTime) } : {}),
      ...(infra ? { infrastructureReadyAt: Date.parse(infra.lastTransitionTime) } : {}),
    });
  }
  return out;
}
