// The objects of the bench's fleet, as a ClusterClass-made fleet has them (bench/fleet.ts creates them), built here
// and nowhere else. Per Cluster `c0042`:
//   BenchCluster c0042               infrastructure, created provisioned (a bench-only kind, bench/crds.ts)
//   BenchMachineTemplates c0042-cp, c0042-worker   what the KCP and the MachineSets' templates name
//   KubeadmControlPlane c0042        CAPI's real kind, paused (KCP's controller leaves it alone: no etcd, no rollout),
//                                    its status written initialized by the bench; the Cluster's controlPlaneRef
//   Secret c0042-kubeconfig          CAPI's ClusterCache connects with it (RemoteConnectionProbe turns True)
//   Cluster c0042                    labelled with its shard (cluster.x-k8s.io/watch-filter), always: half the
//                                    Clusters shard-a, half shard-b; a JoinGuard without --watch-filter reads them all
//   MachineSets c0042-rest, -watch   paused: a marked Machine is never deleted (the bench measures marks, not churn)
//   MachineSet c0042-live            live (CAPI's MachineSet controller acts on it; preflight checks skipped): it owns
//                                    the first stuck Machine of each parked phase, so that Machine's owner answers a
//                                    mark (deletes it) and JoinGuard's closing write happens; replicas = the Machines
//                                    it owns, so it never scales; a replacement has no pool label, so no check or
//                                    MHC selects it (docs/decisions/bench-owners-that-answer.md)
//   control-plane Machines c0042-cp-000N, owned by the KCP, each with its KubeadmConfig (the first an init config,
//                                    the others `joinConfiguration.controlPlane`): JoinGuard caches these configs
//   worker Machines                  each with a KubeadmConfig of its own (`spec.bootstrap.configRef`) and its data
//                                    secret named on the Machine, so CABPK only records that the data exists
//   MachineHealthChecks c0042-cp, c0042-rest   as a ClusterClass makes them (one per control plane, one per worker
//                                    class), with a 365-day nodeStartupTimeout (REST_TIMEOUT_S): no Machine of the
//                                    fleet ever gets a Node, so a shorter one would mark the resting Machines;
//                                    c0042-watch only in the phases that measure the MHC, with that phase's timeout.
// Every Machine is Provisioned (infrastructure and bootstrap data ready) and never joins: no Node exists, which in
// this test environment CAPI's ClusterCache would cache once per Cluster (every workload cluster is the same
// apiserver), a cost no real fleet has.
import type { Json } from '../hack/testenv/kube-client.js';
import { BENCH_CLUSTER, BENCH_MACHINE, BENCH_MACHINE_TEMPLATE, BENCH_VERSION } from './crds.js';

export const NAMESPACE = 'bench';
export const CAPI = '/apis/cluster.x-k8s.io/v1beta2';
export const KCP_API = 'controlplane.cluster.x-k8s.io/v1beta2';
export const CABPK_API = 'bootstrap.cluster.x-k8s.io/v1beta2';
export const PAUSED = 'cluster.x-k8s.io/paused';
export const WATCH_FILTER = 'cluster.x-k8s.io/watch-filter';
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';
export const SET_NAME = 'cluster.x-k8s.io/set-name';
export const SKIP_PREFLIGHT = 'machineset.cluster.x-k8s.io/skip-preflight-checks';
/**
 * The resting pools' timeout (checks and MHCs): nothing happens to them. 365 days (8760h, the most a check
 * admits), since the fleet is saved once and restored (bench/fleet-cache.ts): its Machines' creation and
 * condition times are the build's, and a saved fleet is used only while younger than half of this.
 */
export const REST_TIMEOUT_S = 365 * 24 * 3600;
const K8S_VERSION = 'v1.36.3';
const ns = NAMESPACE;

export const benchPath = (r: { group: string; plural: string }, name?: string, sub?: string) =>
  `/apis/${r.group}/${BENCH_VERSION}/namespaces/${ns}/${r.plural}${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;
export const capiPath = (plural: string, name?: string, sub?: string) =>
  `${CAPI}/namespaces/${ns}/${plural}${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;
export const kcpPath = (name?: string, sub?: string) =>
  `/apis/${KCP_API}/namespaces/${ns}/kubeadmcontrolplanes${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;
export const configPath = (name?: string) =>
  `/apis/${CABPK_API}/namespaces/${ns}/kubeadmconfigs${name ? `/${name}` : ''}`;
export const checkPath = (name?: string) =>
  `/apis/joinguard.io/v1alpha1/namespaces/${ns}/machinejoinchecks${name ? `/${name}` : ''}`;

export const benchCluster = (c: string, server: URL): Json => ({
  apiVersion: `${BENCH_CLUSTER.group}/${BENCH_VERSION}`,
  kind: BENCH_CLUSTER.kind,
  metadata: { name: c },
  spec: { controlPlaneEndpoint: { host: server.hostname, port: Number(server.port) } },
});

export const benchMachineTemplate = (name: string): Json => ({
  apiVersion: `${BENCH_MACHINE_TEMPLATE.group}/${BENCH_VERSION}`,
  kind: BENCH_MACHINE_TEMPLATE.kind,
  metadata: { name },
  spec: { template: { spec: {} } },
});

export const kubeadmControlPlane = (c: string, replicas: number): Json => ({
  apiVersion: KCP_API,
  kind: 'KubeadmControlPlane',
  metadata: { name: c, annotations: { [PAUSED]: '' }, labels: { 'cluster.x-k8s.io/cluster-name': c } },
  spec: {
    replicas,
    version: K8S_VERSION,
    machineTemplate: {
      spec: {
        infrastructureRef: { apiGroup: BENCH_MACHINE.group, kind: BENCH_MACHINE_TEMPLATE.kind, name: `${c}-cp` },
      },
    },
    kubeadmConfigSpec: {
      clusterConfiguration: { apiServer: { certSANs: ['127.0.0.1'] } },
      initConfiguration: { nodeRegistration: { imagePullPolicy: 'IfNotPresent' } },
    },
  },
});

export const kubeconfigSecret = (c: string, kubeconfigYaml: string): Json => ({
  metadata: { name: `${c}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': c } },
  type: 'cluster.x-k8s.io/secret',
  data: { value: Buffer.from(kubeconfigYaml).toString('base64') },
});

export const cluster = (c: string, labels: Record<string, string>): Json => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'Cluster',
  metadata: { name: c, labels },
  spec: {
    infrastructureRef: { apiGroup: BENCH_CLUSTER.group, kind: BENCH_CLUSTER.kind, name: c },
    controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: c },
  },
});

/** The live MachineSet of a Cluster (its replacements have no pool: no check or MHC selects them). */
export const livePool = (c: string) => `${c}-live`;

/**
 * A MachineSet, created paused at 0 replicas. The live one (livePool) selects its Machines by set name, whatever
 * their pool, and skips CAPI's preflight checks (the KCP is paused); bench/fleet.ts unpauses it once it owns them.
 */
export const machineSet = (c: string, pool: string, labels: Record<string, string>): Json => {
  const live = pool === livePool(c);
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'MachineSet',
    metadata: {
      name: pool,
      annotations: { [PAUSED]: '', ...(live ? { [SKIP_PREFLIGHT]: 'All' } : {}) },
      labels: { 'cluster.x-k8s.io/cluster-name': c, ...labels },
    },
    spec: {
      clusterName: c,
      replicas: 0,
      selector: { matchLabels: live ? { [SET_NAME]: pool } : { pool } },
      template: {
        metadata: {
          labels: {
            // The live one's template has no pool: CAPI's MachineSet propagates its template's labels onto the
            // Machines it owns (in place), and a replacement must be selected by no check or MHC.
            ...(live ? { [SET_NAME]: pool } : { pool }),
            'cluster.x-k8s.io/cluster-name': c,
            ...labels,
          },
        },
        spec: {
          clusterName: c,
          bootstrap: { dataSecretName: 'bench-bootstrap' },
          infrastructureRef: { apiGroup: BENCH_MACHINE.group, kind: BENCH_MACHINE_TEMPLATE.kind, name: `${c}-worker` },
        },
      },
    },
  };
};

/** A check over one pool; the guards that exist to stop a pool that keeps failing are off (budgets open). */
export const machineJoinCheck = (c: string, pool: string, timeoutS: number, labels: Record<string, string>): Json => ({
  apiVersion: 'joinguard.io/v1alpha1',
  kind: 'MachineJoinCheck',
  metadata: { name: pool, labels },
  spec: {
    clusterName: c,
    selector: { matchLabels: { pool } },
    joinTimeout: `${timeoutS}s`,
    // Every Machine of a watch pool is stuck on purpose, so the guards that exist to stop exactly that are off
    // here (they are measured in the wasted-rebuilds table); budgets open. MHC has no such limits by default.
    remediation: { maxPerOwner: 1_000_000 },
    maxInFlight: '100%',
    suspicion: { consecutiveJoinFailures: 0 },
    neverJoinedLimit: 0,
  },
});

const UNHEALTHY_NODE = [
  { type: 'Ready', status: 'Unknown', timeoutSeconds: 300 },
  { type: 'Ready', status: 'False', timeoutSeconds: 300 },
];

/** An MHC as a ClusterClass makes it, over a pool (matchLabels pool) or the control plane. */
export const machineHealthCheck = (
  c: string,
  name: string,
  timeoutS: number,
  selector: Record<string, string>,
): Json => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'MachineHealthCheck',
  metadata: { name, labels: { 'cluster.x-k8s.io/cluster-name': c } },
  spec: {
    clusterName: c,
    selector: { matchLabels: selector },
    checks: { nodeStartupTimeoutSeconds: timeoutS, unhealthyNodeConditions: UNHEALTHY_NODE },
  },
});

export interface MachineSpec {
  cluster: string;
  /** The pool label: `<cluster>-rest`, `<cluster>-watch`, or `<cluster>-cp` for the control plane. */
  pool: string;
  name: string;
  /** The shard's label, as the MachineSet's (or the KCP's) template would give it. */
  shard?: string;
  /** The control plane's Nth Machine (0: the one that initialized it). */
  controlPlaneIndex?: number;
  /**
   * A stuck Machine saved in the fleet (bench/fleet-cache.ts): its BenchMachine not provisioned, the Machine in the
   * pool `<cluster>-parked`, which no check or MHC selects, until its phase flips it (bench/phase-kit.ts flipPaced).
   */
  parked?: boolean;
  /** A worker's MachineSet when it is not its pool's: the live one (livePool), whose owner answers a mark. */
  owner?: string;
}

export const parkedPool = (c: string) => `${c}-parked`;

export const benchMachine = (m: MachineSpec): Json => ({
  apiVersion: `${BENCH_MACHINE.group}/${BENCH_VERSION}`,
  kind: BENCH_MACHINE.kind,
  metadata: { name: m.name },
  spec: { providerID: `bench://${ns}/${m.name}` },
});

export const kubeadmConfig = (m: MachineSpec): Json => {
  const cp = m.controlPlaneIndex !== undefined;
  let spec: Json;
  if (!cp) spec = { joinConfiguration: { nodeRegistration: { imagePullPolicy: 'IfNotPresent' } } };
  else if (m.controlPlaneIndex === 0)
    spec = {
      clusterConfiguration: { apiServer: { certSANs: ['127.0.0.1'] } },
      initConfiguration: { nodeRegistration: { imagePullPolicy: 'IfNotPresent' } },
    };
  else spec = { joinConfiguration: { controlPlane: {}, nodeRegistration: { imagePullPolicy: 'IfNotPresent' } } };
  return {
    apiVersion: CABPK_API,
    kind: 'KubeadmConfig',
    metadata: {
      name: m.name,
      labels: { 'cluster.x-k8s.io/cluster-name': m.cluster, ...(cp ? { [CONTROL_PLANE_LABEL]: '' } : {}) },
    },
    spec,
  };
};

/** The Machine, owned by its MachineSet (a worker) or its KubeadmControlPlane (`ownerUid`). */
export const machine = (m: MachineSpec, ownerUid: string): Json => {
  const cp = m.controlPlaneIndex !== undefined;
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name: m.name,
      labels: {
        pool: m.parked ? parkedPool(m.cluster) : m.pool,
        'cluster.x-k8s.io/cluster-name': m.cluster,
        ...(cp
          ? { [CONTROL_PLANE_LABEL]: '', 'cluster.x-k8s.io/control-plane-name': m.cluster }
          : { [SET_NAME]: m.owner ?? m.pool }),
        ...(m.shard ? { [WATCH_FILTER]: m.shard } : {}),
      },
      ownerReferences: [
        cp
          ? { apiVersion: KCP_API, kind: 'KubeadmControlPlane', name: m.cluster, uid: ownerUid }
          : { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet', name: m.owner ?? m.pool, uid: ownerUid },
      ].map((o) => ({ ...o, controller: true, blockOwnerDeletion: true })),
    },
    spec: {
      clusterName: m.cluster,
      ...(cp ? { version: K8S_VERSION } : {}),
      // The data secret named on the Machine and a KubeadmConfig referenced: CAPI takes the named secret
      // (machine_controller_phases.go reconcileBootstrap) and CABPK records it on the config.
      bootstrap: {
        dataSecretName: 'bench-bootstrap',
        configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name: m.name },
      },
      infrastructureRef: { apiGroup: BENCH_MACHINE.group, kind: BENCH_MACHINE.kind, name: m.name },
    },
  };
};
