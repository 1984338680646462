// The fleet, in one namespace (`bench`), built afresh for every run. Every pool gets a MachineJoinCheck
// when the run has JoinGuard and a MachineHealthCheck when it has the MHC, with the same selector and
// timeout (joinTimeout = nodeStartupTimeout). Checks use the default strategy (Auto): alone, JoinGuard
// marks through the OwnerRemediated conditions; beside an MHC it sets CAPI's remediate-machine annotation
// and lets that MHC act (bench/watch.ts tells the marks apart).
// Per Cluster: a BenchCluster and BenchControlPlane (created provisioned/initialized), the
// `<cluster>-kubeconfig` Secret (CAPI's ClusterCache connects, RemoteConnectionProbe turns True), and two
// paused MachineSets (CAPI's MachineSet controller leaves paused sets alone, so a remediated Machine is
// marked but never deleted: the bench measures the mark, without churn):
//   <cluster>-rest   the resting Machines; joinTimeout / nodeStartupTimeout 24h, nothing happens to them
//   <cluster>-watch  empty at first; the stuck Machines are added to it at known times; timeout = joinTimeout
// Every Machine is a worker with bootstrap data set directly (spec.bootstrap.dataSecretName) and a
// BenchMachine created already provisioned, so CAPI's Machine controller brings it to Provisioned.
import { BENCH_CLUSTER, BENCH_CONTROL_PLANE, BENCH_MACHINE, BENCH_VERSION } from './crds.js';
import { isConflict, type Json, type KubeClient } from '../hack/testenv/kube-client.js';
import type { Side } from './watch.js';

export const NAMESPACE = 'bench';
const CAPI = '/apis/cluster.x-k8s.io/v1beta2';
const PAUSED = 'cluster.x-k8s.io/paused';
export const REST_TIMEOUT_S = 24 * 3600;

export interface FleetShape {
  machines: number;
  clusters: number;
  resting: number;
  stuck: number;
  joinTimeoutS: number;
  /**
   * Run sharded: the Clusters split into consecutive equal parts, one per shard, each part's objects labelled
   * `cluster.x-k8s.io/watch-filter=<shard>` where docs/install.md says (the Cluster, its checks, the MachineSets'
   * templates, so the Machines).
   */
  shards?: string[];
}

export const WATCH_FILTER = 'cluster.x-k8s.io/watch-filter';

/** The shard owning Cluster i (undefined when the fleet is not sharded). */
export function shardOf(shape: FleetShape, i: number): string | undefined {
  const s = shape.shards;
  return s?.length ? s[Math.floor((i * s.length) / shape.clusters)] : undefined;
}

/** The shard owning a Cluster, or any object named after it (`c0042`, `c0042-watch`, `c0042-watch-0003`, …). */
export function shardOfName(shape: FleetShape, name: string): string | undefined {
  const m = /^c(\d{4})(?![0-9])/.exec(name);
  return m ? shardOf(shape, Number(m[1])) : undefined;
}

const shardLabels = (shape: FleetShape, cluster: string): Record<string, string> => {
  const s = shardOfName(shape, cluster);
  return s ? { [WATCH_FILTER]: s } : {};
};

export function fleetShape(machines: number, joinTimeoutS: number, machinesPerCluster = 100): FleetShape {
  const stuck = Math.max(10, Math.round(machines * 0.05));
  if (machines <= stuck) throw new Error(`--machines must be more than ${stuck}`);
  return {
    machines,
    clusters: Math.ceil(machines / machinesPerCluster),
    resting: machines - stuck,
    stuck,
    joinTimeoutS,
  };
}

export const clusterName = (i: number) => `c${String(i).padStart(4, '0')}`;

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
async function listWithRetry(rest: KubeClient, path: string): Promise<Json> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await rest.list(path);
    } catch (e) {
      if (attempt >= 3) throw e;
      process.stderr.write(`[bench] GET ${path} failed (${(e as Error).message}); retrying\n`);
    }
  }
}

const benchPath = (r: typeof BENCH_MACHINE, ns: string, name?: string, sub?: string) =>
  `/apis/${r.group}/${BENCH_VERSION}/namespaces/${ns}/${r.plural}${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;

export async function createNamespace(rest: KubeClient, name = NAMESPACE): Promise<void> {
  await create(rest, '/api/v1/namespaces', { metadata: { name } });
}

/** Clusters with their infrastructure, control plane, kubeconfig Secret and the two paused MachineSets. */
export async function createClusters(
  rest: KubeClient,
  shape: FleetShape,
  server: URL,
  kubeconfigYaml: string,
): Promise<Map<string, string>> {
  const ns = NAMESPACE;
  const msUids = new Map<string, string>();
  const names = Array.from({ length: shape.clusters }, (_, i) => clusterName(i));
  await pool(names, 8, async (c) => {
    await create(rest, benchPath(BENCH_CLUSTER, ns), {
      apiVersion: `${BENCH_CLUSTER.group}/${BENCH_VERSION}`,
      kind: BENCH_CLUSTER.kind,
      metadata: { name: c },
      spec: { controlPlaneEndpoint: { host: server.hostname, port: Number(server.port) } },
    });
    await rest.mergePatch(benchPath(BENCH_CLUSTER, ns, c, 'status'), {
      status: { initialization: { provisioned: true } },
    });
    await create(rest, benchPath(BENCH_CONTROL_PLANE, ns), {
      apiVersion: `${BENCH_CONTROL_PLANE.group}/${BENCH_VERSION}`,
      kind: BENCH_CONTROL_PLANE.kind,
      metadata: { name: c },
      spec: {},
    });
    await rest.mergePatch(benchPath(BENCH_CONTROL_PLANE, ns, c, 'status'), {
      status: { initialization: { controlPlaneInitialized: true } },
    });
    await create(rest, `/api/v1/namespaces/${ns}/secrets`, {
      metadata: { name: `${c}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': c } },
      type: 'cluster.x-k8s.io/secret',
      data: { value: Buffer.from(kubeconfigYaml).toString('base64') },
    });
    await create(rest, `${CAPI}/namespaces/${ns}/clusters`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name: c, labels: shardLabels(shape, c) },
      spec: {
        infrastructureRef: { apiGroup: BENCH_CLUSTER.group, kind: BENCH_CLUSTER.kind, name: c },
        controlPlaneRef: { apiGroup: BENCH_CONTROL_PLANE.group, kind: BENCH_CONTROL_PLANE.kind, name: c },
      },
    });
    for (const kind of ['rest', 'watch'] as const) {
      const name = `${c}-${kind}`;
      const ms = await create(rest, `${CAPI}/namespaces/${ns}/machinesets`, {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'MachineSet',
        metadata: {
          name,
          annotations: { [PAUSED]: '' },
          labels: { 'cluster.x-k8s.io/cluster-name': c, ...shardLabels(shape, c) },
        },
        spec: {
          clusterName: c,
          replicas: 0,
          selector: { matchLabels: { pool: name } },
          template: {
            metadata: { labels: { pool: name, 'cluster.x-k8s.io/cluster-name': c, ...shardLabels(shape, c) } },
            spec: {
              clusterName: c,
              bootstrap: { dataSecretName: 'bench-bootstrap' },
              infrastructureRef: { apiGroup: BENCH_MACHINE.group, kind: 'BenchMachineTemplate', name: 'unused' },
            },
          },
        },
      });
      msUids.set(name, ms.metadata.uid);
    }
  });
  return msUids;
}

/** Per pool, a MachineJoinCheck and/or a MachineHealthCheck: the resting pool with a 24h timeout, the watch pool with joinTimeout. */
export async function createChecks(rest: KubeClient, shape: FleetShape, sides: readonly Side[]): Promise<number> {
  const ns = NAMESPACE;
  const items = Array.from({ length: shape.clusters }, (_, i) => clusterName(i)).flatMap((c) => [
    { c, pool: `${c}-rest`, timeoutS: REST_TIMEOUT_S },
    { c, pool: `${c}-watch`, timeoutS: shape.joinTimeoutS },
  ]);
  await pool(items, 8, async ({ c, pool: p, timeoutS }) => {
    if (sides.includes('joinguard')) {
      await create(rest, `/apis/joinguard.io/v1alpha1/namespaces/${ns}/machinejoinchecks`, {
        apiVersion: 'joinguard.io/v1alpha1',
        kind: 'MachineJoinCheck',
        metadata: { name: p, labels: shardLabels(shape, c) },
        spec: {
          clusterName: c,
          selector: { matchLabels: { pool: p } },
          joinTimeout: `${timeoutS}s`,
          // Every Machine of a watch pool is stuck on purpose, so the guards that exist to stop exactly
          // that are off here (they are measured in the wasted-rebuilds table); budgets open. MHC has no
          // such limits by default (no triggerIf).
          remediation: { maxPerOwner: 1_000_000 },
          maxInFlight: '100%',
          suspicion: { consecutiveJoinFailures: 0 },
          neverJoinedLimit: 0,
        },
      });
    }
    if (sides.includes('mhc')) {
      await create(rest, `${CAPI}/namespaces/${ns}/machinehealthchecks`, {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'MachineHealthCheck',
        metadata: { name: p },
        spec: {
          clusterName: c,
          selector: { matchLabels: { pool: p } },
          checks: { nodeStartupTimeoutSeconds: timeoutS },
        },
      });
    }
  });
  return items.length;
}

export interface MachineSpec {
  cluster: string;
  pool: string;
  name: string;
  /** The shard's label, as the MachineSet's template would give it (the bench's sets are paused). */
  shard?: string;
}

export function restingMachines(shape: FleetShape): MachineSpec[] {
  return spread(shape, shape.resting, 'rest');
}

export function stuckMachines(shape: FleetShape): MachineSpec[] {
  return spread(shape, shape.stuck, 'watch');
}

function spread(shape: FleetShape, n: number, kind: string): MachineSpec[] {
  const clusters = shape.clusters;
  return Array.from({ length: n }, (_, i) => {
    const c = clusterName(i % clusters);
    const shard = shardOf(shape, i % clusters);
    return {
      cluster: c,
      pool: `${c}-${kind}`,
      name: `${c}-${kind}-${String(Math.floor(i / clusters)).padStart(4, '0')}`,
      ...(shard ? { shard } : {}),
    };
  });
}

/** A BenchMachine, already provisioned, then its Machine (owned by the paused MachineSet). */
export async function createMachine(rest: KubeClient, m: MachineSpec, msUids: Map<string, string>): Promise<void> {
  const ns = NAMESPACE;
  await create(rest, benchPath(BENCH_MACHINE, ns), {
    apiVersion: `${BENCH_MACHINE.group}/${BENCH_VERSION}`,
    kind: BENCH_MACHINE.kind,
    metadata: { name: m.name },
    spec: { providerID: `bench://${ns}/${m.name}` },
  });
  await rest.mergePatch(benchPath(BENCH_MACHINE, ns, m.name, 'status'), {
    status: { initialization: { provisioned: true }, addresses: [{ type: 'InternalIP', address: '127.0.0.1' }] },
  });
  await create(rest, `${CAPI}/namespaces/${ns}/machines`, {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name: m.name,
      labels: {
        pool: m.pool,
        'cluster.x-k8s.io/cluster-name': m.cluster,
        'cluster.x-k8s.io/set-name': m.pool,
        ...(m.shard ? { [WATCH_FILTER]: m.shard } : {}),
      },
      ownerReferences: [
        {
          apiVersion: 'cluster.x-k8s.io/v1beta2',
          kind: 'MachineSet',
          name: m.pool,
          uid: msUids.get(m.pool)!,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      clusterName: m.cluster,
      bootstrap: { dataSecretName: 'bench-bootstrap' },
      infrastructureRef: { apiGroup: BENCH_MACHINE.group, kind: BENCH_MACHINE.kind, name: m.name },
    },
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
  const list = await listWithRetry(rest, `${CAPI}/namespaces/${NAMESPACE}/clusters`);
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
