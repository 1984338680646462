// Fixture builders for planner tests: a healthy default for every fact, overridden per test. Times are
// epoch ms around T0 (whole seconds, as the API server stores them).
import type {
  BootstrapConfigFacts,
  ClusterFacts,
  KcpFacts,
  MachineFacts,
  MachineHealthCheckFacts,
} from '../../../api/capi/model.js';
import { CABPK_GROUP } from '../../../api/capi/model.js';
import type {
  CheckSettings,
  MachineJoinCheck,
  MachineJoinCheckSpec,
  MachineJoinCheckStatus,
} from '../../../api/v1alpha1/types.js';
import { API_VERSION, KIND } from '../../../api/v1alpha1/types.js';
import { HOUR, MINUTE, SECOND } from '../time.js';
import type { Snapshot } from '../types.js';

export { HOUR, MINUTE, SECOND };
export const T0 = Date.parse('2026-03-01T00:00:00Z');
export const NS = 'default';
export const CLUSTER = 'c1';

export type MachineOverrides = Partial<MachineFacts>;

/** A worker of MachineSet ms-a, created at T0, infrastructure and bootstrap data ready at T0+1m, no Node. */
export function machineFacts(name: string, o: MachineOverrides = {}): MachineFacts {
  const created = o.createdAt ?? T0;
  return {
    name,
    namespace: NS,
    uid: `uid-${name}`,
    resourceVersion: '1',
    createdAt: created,
    clusterName: CLUSTER,
    labels: { 'cluster.x-k8s.io/cluster-name': CLUSTER, pool: 'a' },
    annotations: {},
    owner: { kind: 'MachineSet', name: 'ms-a', uid: 'uid-ms-a', controlPlane: false },
    controlPlane: false,
    phase: 'Provisioned',
    providerID: `sim://${name}`,
    infrastructureReady: { value: true, since: created + MINUTE },
    bootstrapReady: { value: true, since: created + MINUTE },
    bootstrapConfigRef: { apiGroup: CABPK_GROUP, kind: 'KubeadmConfig', name },
    dataSecretName: name,
    nodeConnectionDown: false,
    remediateAnnotation: false,
    machinePool: false,
    ...o,
  };
}

export const worker = machineFacts;

/** A KubeadmControlPlane Machine (owner kcp). */
export function cpMachine(name: string, o: MachineOverrides = {}): MachineFacts {
  return machineFacts(name, {
    labels: { 'cluster.x-k8s.io/cluster-name': CLUSTER, 'cluster.x-k8s.io/control-plane': '' },
    owner: { kind: 'KubeadmControlPlane', name: 'kcp', uid: 'uid-kcp', controlPlane: true },
    controlPlane: true,
    ...o,
  });
}

/** Infrastructure not ready yet. */
export function provisioning(name: string, o: MachineOverrides = {}): MachineFacts {
  return machineFacts(name, {
    phase: 'Provisioning',
    infrastructureReady: { value: false },
    bootstrapReady: { value: false },
    ...o,
  });
}

export function withNode(m: MachineFacts, node = `node-${m.name}`): MachineFacts {
  return { ...m, nodeName: node, phase: 'Running' };
}

export function clusterFacts(o: Partial<ClusterFacts> = {}): ClusterFacts {
  return {
    name: CLUSTER,
    namespace: NS,
    uid: 'uid-c1',
    resourceVersion: '1',
    annotations: {},
    paused: false,
    deleting: false,
    controlPlaneInitialized: { value: true, since: T0 - HOUR },
    infrastructureReady: { value: true, since: T0 - 2 * HOUR },
    controlPlaneEndpoint: { host: '10.0.0.10', port: 6443 },
    controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: 'kcp' },
    remoteConnection: { value: true, since: T0 - HOUR },
    ...o,
  };
}

/** A Cluster being created: control plane not initialized, CAPI not connected yet. */
export function newCluster(o: Partial<ClusterFacts> = {}): ClusterFacts {
  return clusterFacts({ controlPlaneInitialized: { value: false }, remoteConnection: { value: false }, ...o });
}

export function kcpFacts(o: Partial<KcpFacts> = {}): KcpFacts {
  return { name: 'kcp', namespace: NS, uid: 'uid-kcp', initialized: false, replicas: 3, remediation: {}, ...o };
}

export function bootstrapConfig(name: string, joinsControlPlane: boolean | undefined): BootstrapConfigFacts {
  return {
    kind: 'KubeadmConfig',
    name,
    namespace: NS,
    ...(joinsControlPlane !== undefined ? { joinsControlPlane, hasJoinConfiguration: joinsControlPlane } : {}),
  };
}

export function configs(...list: BootstrapConfigFacts[]): Map<string, BootstrapConfigFacts> {
  return new Map(list.map((c) => [`${c.kind}/${c.name}`, c]));
}

export function mhcFacts(name: string, o: Partial<MachineHealthCheckFacts> = {}): MachineHealthCheckFacts {
  return {
    name,
    namespace: NS,
    uid: `uid-${name}`,
    clusterName: CLUSTER,
    selector: { matchLabels: { pool: 'a' } },
    paused: false,
    nodeStartupTimeoutSeconds: 0,
    watchesJoinGuardCondition: false,
    ...o,
  };
}

/** DESIGN's defaults. */
export function settings(o: Partial<CheckSettings> = {}): CheckSettings {
  return {
    clusterName: CLUSTER,
    selector: {},
    joinTimeoutMs: 20 * MINUTE,
    maxInFlight: { count: 1 },
    strategy: 'Auto',
    maxPerOwner: 5,
    windowMs: 24 * HOUR,
    consecutiveJoinFailures: 2,
    probeIntervalMs: 30 * MINUTE,
    maxProbeIntervalMs: 8 * HOUR,
    neverJoinedLimit: 3,
    firstControlPlane: 'Remediate',
    dryRun: false,
    paused: false,
    ...o,
  };
}

export function check(
  o: {
    spec?: Partial<MachineJoinCheckSpec>;
    status?: MachineJoinCheckStatus;
    annotations?: Record<string, string>;
    generation?: number;
  } = {},
): MachineJoinCheck {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: {
      name: 'mjc',
      namespace: NS,
      uid: 'uid-mjc',
      generation: o.generation ?? 1,
      ...(o.annotations ? { annotations: o.annotations } : {}),
    },
    spec: { clusterName: CLUSTER, selector: {}, ...o.spec },
    ...(o.status ? { status: o.status } : {}),
  };
}

export interface SnapshotOverrides extends Partial<Omit<Snapshot, 'settings'>> {
  settings?: Partial<CheckSettings>;
}

/**
 * A snapshot at T0 of an initialized Cluster with no Machines, by default; a status previously planned
 * (everJoined: a pool that worked) can be given as `check`.
 */
export function snapshot(o: SnapshotOverrides = {}): Snapshot {
  const { settings: so, ...rest } = o;
  return {
    check: check(),
    settings: settings(so),
    cluster: clusterFacts(),
    machines: [],
    malformed: [],
    bootstrapConfigs: new Map(),
    mhcs: [],
    capi: { apiVersion: 'v1beta2', minor: 14 },
    // Installed with the delete allowed, so strategy Delete is tested as it acts (marks.test.ts tests the refusal).
    allowMachineDelete: true,
    now: T0,
    ...rest,
  };
}
