// The objects the in-memory apiserver serves (benchmarks and product tests): copies of the ones captured from CAPI's real managers
// (fixtures.json, bench/micro/capture.ts), renamed, relabelled and with their clock inputs set.
//   Cluster c<i>       connected for an hour (no connection grace in the way), initialized long ago
//   pool rest          Machines that joined (Running, nodeRef); a check with a 24h timeout
//   pool watch         Machines added Provisioned with no Node, their deadline at a chosen second
// One MachineJoinCheck per pool (default strategy, budgets open as in the end-to-end fleet) and, when
// `mhc`, one MachineHealthCheck per pool.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FakeApiserver, Json } from './fake-apiserver.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const NS = 'bench';
export const JOIN_TIMEOUT_S = 60;
const fixtures = JSON.parse(fs.readFileSync(path.join(here, 'fixtures.json'), 'utf8')) as Record<
  'machineRunning' | 'machineJoining' | 'cluster' | 'mhc',
  Json
>;
const iso = (ms: number) => new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');

const fresh = (o: Json): Json => {
  const c = structuredClone(o);
  delete c.metadata.uid;
  delete c.metadata.resourceVersion;
  delete c.metadata.creationTimestamp;
  return c;
};

export const clusterName = (i: number) => `c${String(i).padStart(4, '0')}`;

export function cluster(name: string, now: number): Json {
  const c = fresh(fixtures.cluster);
  c.metadata.name = name;
  c.metadata.namespace = NS;
  for (const cond of c.status?.conditions ?? [])
    if (cond.type === 'RemoteConnectionProbe') cond.lastTransitionTime = iso(now - 3600_000);
  return c;
}

function machine(from: Json, c: string, pool: string, name: string): Json {
  const m = fresh(from);
  m.metadata.name = name;
  m.metadata.namespace = NS;
  m.metadata.labels = {
    ...m.metadata.labels,
    pool: `${c}-${pool}`,
    'cluster.x-k8s.io/cluster-name': c,
    'cluster.x-k8s.io/set-name': `${c}-${pool}`,
  };
  for (const o of m.metadata.ownerReferences ?? []) o.name = `${c}-${pool}`;
  m.spec.clusterName = c;
  m.spec.providerID = `bench://${NS}/${name}`;
  if (m.spec.infrastructureRef) m.spec.infrastructureRef.name = name;
  return m;
}

/** A joined worker (Running, nodeRef) of `<c>-rest`. */
export function joined(c: string, i: number): Json {
  const m = machine(fixtures.machineRunning, c, 'rest', `${c}-rest-${String(i).padStart(5, '0')}`);
  m.status.nodeRef = { name: `node-${m.metadata.name}` };
  return m;
}

/**
 * A worker of `<c>-rest` Provisioned an hour before `now`, with no Node: on its 24h clock at rest, as the resting
 * Machines of `npm run bench`'s fleet (bench/fleet.ts) are.
 */
export function restingJoining(c: string, i: number, now: number): Json {
  const m = machine(fixtures.machineJoining, c, 'rest', `${c}-rest-${String(i).padStart(5, '0')}`);
  const start = iso(now - 3600_000);
  m.metadata.creationTimestamp = start;
  for (const cond of m.status?.conditions ?? []) cond.lastTransitionTime = start;
  return m;
}

/** A Provisioned worker of `<c>-watch` with no Node, whose join deadline is `deadline` (a whole second). */
export function joining(c: string, i: number, deadline: number): Json {
  const m = machine(fixtures.machineJoining, c, 'watch', `${c}-watch-${String(i).padStart(5, '0')}`);
  const start = iso(deadline - JOIN_TIMEOUT_S * 1000);
  m.metadata.creationTimestamp = start;
  for (const cond of m.status?.conditions ?? []) cond.lastTransitionTime = start;
  return m;
}

export function checks(c: string): Json[] {
  return [
    ['rest', 24 * 3600],
    ['watch', JOIN_TIMEOUT_S],
  ].map(([pool, timeout]) => ({
    apiVersion: 'joinguard.io/v1alpha1',
    kind: 'MachineJoinCheck',
    metadata: { name: `${c}-${pool}`, namespace: NS, generation: 1 },
    spec: {
      clusterName: c,
      selector: { matchLabels: { pool: `${c}-${pool}` } },
      joinTimeout: `${timeout}s`,
      remediation: { maxPerOwner: 1_000_000 },
      maxInFlight: '100%',
      suspicion: { consecutiveJoinFailures: 0 },
      neverJoinedLimit: 0,
    },
  }));
}

export function mhcs(c: string): Json[] {
  return [
    ['rest', 24 * 3600],
    ['watch', JOIN_TIMEOUT_S],
  ].map(([pool, timeout]) => {
    const h = fresh(fixtures.mhc);
    h.metadata.name = `${c}-${pool}`;
    h.metadata.namespace = NS;
    h.spec = {
      ...h.spec,
      clusterName: c,
      selector: { matchLabels: { pool: `${c}-${pool}` } },
      checks: { ...h.spec.checks, nodeStartupTimeoutSeconds: timeout },
    };
    return h;
  });
}

/** clusterctl's inventory entry, as `clusterctl init` leaves it: where JoinGuard reads the CAPI release. */
function putInventory(api: FakeApiserver): void {
  api.put('providers', {
    apiVersion: 'clusterctl.cluster.x-k8s.io/v1alpha3',
    kind: 'Provider',
    metadata: { name: 'cluster-api', namespace: 'capi-system' },
    providerName: 'cluster-api',
    type: 'CoreProvider',
    version: 'v1.14.2',
  });
}

/**
 * `clusters` Clusters of `perCluster` joined Machines each (with `restJoining`: Provisioned with no Node, on their 24h
 * clock), their checks and (with mhc) their MHCs.
 */
export function seed(
  api: FakeApiserver,
  o: { clusters: number; perCluster: number; mhc: boolean; now: number; restJoining?: boolean },
): void {
  putInventory(api);
  for (let i = 0; i < o.clusters; i++) {
    const c = clusterName(i);
    api.put('clusters', cluster(c, o.now));
    for (const k of checks(c)) api.put('machinejoinchecks', k);
    if (o.mhc) for (const h of mhcs(c)) api.put('machinehealthchecks', h);
    for (let j = 0; j < o.perCluster; j++)
      api.put('machines', o.restJoining ? restingJoining(c, j, o.now) : joined(c, j));
  }
}

/**
 * k stuck Machines spread over `clusters`, 8 deadlines per second from `base` (a whole second); each appears,
 * already Provisioned, 3 s before its deadline, as in the end-to-end run where they are created at a steady
 * pace and their deadlines follow. Records when JoinGuard's mark on each was written.
 */
export async function addStuck(api: FakeApiserver, k: number, clusters: string[], base: number) {
  const deadlines = new Map<string, number>();
  const marked = new Map<string, number>();
  api.onWrite = (verb, resource, obj) => {
    const name = markOf(verb, resource, obj);
    if (name && deadlines.has(name) && !marked.has(name)) marked.set(name, Date.now());
  };
  for (let i = 0; i < k; i++) {
    const d = base + Math.floor(i / 8) * 1000;
    const m = joining(clusters[i % clusters.length]!, Math.floor(i / clusters.length), d);
    deadlines.set(m.metadata.name, d);
    const wait = d - 3000 + (i % 8) * 125 - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    api.put('machines', m);
  }
  return { deadlines, marked, lastDeadline: base + Math.floor((k - 1) / 8) * 1000 };
}

/** Whether a write is JoinGuard's mark on a Machine (the OwnerRemediated conditions or the annotation). */
export function markOf(verb: string, resource: string, obj: Json): string | undefined {
  if (verb !== 'patch' || !obj?.metadata?.name) return undefined;
  if (resource === 'machines' && obj.metadata.annotations?.['cluster.x-k8s.io/remediate-machine'] !== undefined)
    return obj.metadata.name;
  const hcs = (obj.status?.conditions ?? []).find((c: Json) => c.type === 'HealthCheckSucceeded');
  if (resource === 'machines/status' && hcs?.status === 'False' && hcs.reason === 'JoinTimeout')
    return obj.metadata.name;
  return undefined;
}

// ---- a real fleet's objects, sharded (bench/micro/shards.ts) ----

const WATCH_FILTER = 'cluster.x-k8s.io/watch-filter';
const CONTROL_PLANE = 'cluster.x-k8s.io/control-plane';

/** The shard of Cluster i when `clusters` Clusters are split into k consecutive equal parts. */
export const shardName = (i: number, clusters: number, k: number) =>
  `shard-${String(Math.min(k - 1, Math.floor((i * k) / clusters))).padStart(2, '0')}`;

/**
 * A joined worker sharing the fixture's large parts (managedFields, conditions) with every other: 100,000 Machines
 * then fit the bench's own process. Safe because the in-memory apiserver copies an object before it changes it.
 */
function sharedJoined(c: string, i: number, labels: Record<string, string>): Json {
  const base = fixtures.machineRunning;
  const name = `${c}-rest-${String(i).padStart(5, '0')}`;
  return {
    ...base,
    metadata: {
      ...base.metadata,
      uid: undefined,
      resourceVersion: undefined,
      creationTimestamp: undefined,
      name,
      namespace: NS,
      labels: {
        ...base.metadata.labels,
        pool: `${c}-rest`,
        'cluster.x-k8s.io/cluster-name': c,
        'cluster.x-k8s.io/set-name': `${c}-rest`,
        ...labels,
      },
      ownerReferences: (base.metadata.ownerReferences ?? []).map((o: Json) => ({ ...o, name: `${c}-rest` })),
    },
    spec: {
      ...base.spec,
      clusterName: c,
      providerID: `bench://${NS}/${name}`,
      ...(base.spec.infrastructureRef ? { infrastructureRef: { ...base.spec.infrastructureRef, name } } : {}),
    },
    status: { ...base.status, nodeRef: { name: `node-${name}` } },
  };
}

/** A KubeadmControlPlane as CAPI's controller leaves an initialized one (the fields JoinGuard and CAPI read). */
export function kubeadmControlPlane(c: string, replicas: number): Json {
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: { name: c, namespace: NS, labels: { 'cluster.x-k8s.io/cluster-name': c }, generation: 1 },
    spec: {
      replicas,
      version: 'v1.36.3',
      machineTemplate: {
        spec: {
          infrastructureRef: {
            apiGroup: 'infrastructure.cluster.x-k8s.io',
            kind: 'DockerMachineTemplate',
            name: `${c}-cp`,
          },
        },
      },
      kubeadmConfigSpec: {
        clusterConfiguration: { apiServer: { certSANs: ['127.0.0.1'] } },
        initConfiguration: { nodeRegistration: { imagePullPolicy: 'IfNotPresent' } },
      },
      remediation: { maxRetry: 5, retryPeriodSeconds: 60, minHealthyPeriodSeconds: 3600 },
      rollout: { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1 } } },
    },
    status: {
      initialization: { controlPlaneInitialized: true },
      replicas,
      readyReplicas: replicas,
      availableReplicas: replicas,
      upToDateReplicas: replicas,
      version: 'v1.36.3',
      observedGeneration: 1,
      conditions: [
        'Available',
        'CertificatesAvailable',
        'EtcdClusterHealthy',
        'ControlPlaneComponentsHealthy',
        'Initialized',
      ].map((type) => ({
        type,
        status: 'True',
        reason: type,
        lastTransitionTime: '2026-12-01T00:00:00Z',
        observedGeneration: 1,
      })),
    },
  };
}

/** A control-plane Machine's KubeadmConfig (the first one an init config; the others join the control plane). */
export function controlPlaneConfig(c: string, k: number): Json {
  const name = `${c}-cp-${String(k).padStart(4, '0')}`;
  const node = {
    nodeRegistration: {
      imagePullPolicy: 'IfNotPresent',
      kubeletExtraArgs: [{ name: 'eviction-hard', value: 'nodefs.available<0%' }],
    },
  };
  return {
    apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmConfig',
    metadata: {
      name,
      namespace: NS,
      labels: { 'cluster.x-k8s.io/cluster-name': c, [CONTROL_PLANE]: '' },
      ownerReferences: [
        { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Machine', name, uid: `uid-${name}`, controller: true },
      ],
    },
    spec:
      k === 0
        ? { clusterConfiguration: { apiServer: { certSANs: ['127.0.0.1'] } }, initConfiguration: node }
        : { joinConfiguration: { ...node, controlPlane: {} } },
    status: { initialization: { dataSecretCreated: true }, dataSecretName: name, observedGeneration: 1 },
  };
}

export interface FleetOptions {
  clusters: number;
  perCluster: number;
  controlPlanePerCluster: number;
  /** Shards the Clusters are split into (labels as docs/install.md says). */
  shards: number;
  now: number;
}

/** A fleet as bench/fleet-objects.ts builds it, in the in-memory apiserver: each Cluster with its control plane (KCP,
 * Machines, configs), its MHCs, MachineSets and checks, labelled with its shard. Returns the shard of each Cluster. */
export function seedFleet(api: FakeApiserver, o: FleetOptions): Map<string, string> {
  const shardOf = new Map<string, string>();
  putInventory(api);
  for (let i = 0; i < o.clusters; i++) {
    const c = clusterName(i);
    const shard = shardName(i, o.clusters, o.shards);
    shardOf.set(c, shard);
    const labels = { [WATCH_FILTER]: shard };
    const cl = cluster(c, o.now);
    cl.metadata.labels = { ...cl.metadata.labels, ...labels };
    api.put('clusters', cl);
    api.put('kubeadmcontrolplanes', kubeadmControlPlane(c, o.controlPlanePerCluster));
    for (const k of checks(c)) api.put('machinejoinchecks', { ...k, metadata: { ...k.metadata, labels } });
    for (const h of mhcs(c)) api.put('machinehealthchecks', h);
    for (const pool of ['rest', 'watch'])
      api.put('machinesets', {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'MachineSet',
        metadata: {
          name: `${c}-${pool}`,
          namespace: NS,
          labels: { 'cluster.x-k8s.io/cluster-name': c, ...labels },
          generation: 1,
        },
        spec: {
          clusterName: c,
          replicas: 0,
          selector: { matchLabels: { pool: `${c}-${pool}` } },
          template: { metadata: { labels: { pool: `${c}-${pool}`, ...labels } }, spec: { clusterName: c } },
        },
      });
    for (let k = 0; k < o.controlPlanePerCluster; k++) {
      api.put('kubeadmconfigs', controlPlaneConfig(c, k));
      const m = sharedJoined(c, k, labels);
      const name = `${c}-cp-${String(k).padStart(4, '0')}`;
      m.metadata = {
        ...m.metadata,
        name,
        labels: { ...m.metadata.labels, pool: `${c}-cp`, [CONTROL_PLANE]: '' },
        ownerReferences: [
          {
            apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
            kind: 'KubeadmControlPlane',
            name: c,
            uid: `uid-${c}-kcp`,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      };
      m.spec = {
        ...m.spec,
        bootstrap: { configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name } },
      };
      api.put('machines', m);
    }
    for (let j = 0; j < o.perCluster - o.controlPlanePerCluster; j++) api.put('machines', sharedJoined(c, j, labels));
  }
  return shardOf;
}
