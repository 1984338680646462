// Raw CAPI objects as each release serves them, for the in-memory world (test-only): Machines, the Cluster, the
// KubeadmControlPlane and the MachineHealthCheck through the v1beta2 API (CAPI v1.14) or the v1beta1 API (v1.10,
// whose objects carry v1beta1 conditions in status.conditions and the v1beta2 ones under status.v1beta2), the
// condition helpers CAPI's own controllers use on them, and RFC 7386 merge patch. Written from CAPI's Go types
// (core/v1beta1, core/v1beta2, controlplane/kubeadm), not from JoinGuard's readers.
//
// The oracle reads through this file, so it imports nothing of the product (oracle-imports.test.ts holds that).

/** A raw Kubernetes object, as JSON. */
export type Json = Record<string, any>;

/** Epoch ms -> RFC 3339 with whole seconds, as the apiserver stores a metav1.Time. */
export function iso(t: number): string {
  return new Date(Math.floor(t / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

export type Release = 'v1.14' | 'v1.10';
export const NS = 'default';
export const CAPI_GROUP = 'cluster.x-k8s.io';
export const KCP_GROUP = 'controlplane.cluster.x-k8s.io';
export const REMEDIATE_MACHINE = 'cluster.x-k8s.io/remediate-machine';
export const REMEDIATION_FOR = 'controlplane.cluster.x-k8s.io/remediation-for';
export const REMEDIATION_IN_PROGRESS = 'controlplane.cluster.x-k8s.io/remediation-in-progress';

export const versionOf = (r: Release): 'v1beta2' | 'v1beta1' => (r === 'v1.14' ? 'v1beta2' : 'v1beta1');

/**
 * Where a condition lives. `owner`: the list CAPI's owners read for the remediation contract (HealthCheckSucceeded,
 * OwnerRemediated) — v1beta2 status.conditions on v1.14, v1beta1 status.conditions on v1.10. `v2`: the v1beta2
 * conditions — the same list on v1.14, status.v1beta2.conditions on v1.10.
 */
export type List = 'owner' | 'v2';

export function listOf(o: Json, r: Release, which: List): Json[] {
  o.status ??= {};
  if (r === 'v1.14' || which === 'owner') return (o.status.conditions ??= []);
  o.status.v1beta2 ??= {};
  return (o.status.v1beta2.conditions ??= []);
}

export function getCond(o: Json, r: Release, which: List, type: string): Json | undefined {
  return listOf(o, r, which).find((c) => c.type === type);
}

/** Sets a condition as CAPI does: lastTransitionTime moves only when the status changes. */
export function setCond(
  o: Json,
  r: Release,
  which: List,
  c: { type: string; status: string; reason?: string; message?: string },
  t: number,
): void {
  const list = listOf(o, r, which);
  const i = list.findIndex((x) => x.type === c.type);
  const old = i >= 0 ? list[i] : undefined;
  const v1beta1 = r === 'v1.10' && which === 'owner';
  const entry: Json = { type: c.type, status: c.status };
  if (v1beta1) {
    if (c.status === 'False') entry.severity = 'Warning';
    if (c.reason) entry.reason = c.reason;
    if (c.message) entry.message = c.message;
  } else {
    entry.reason = c.reason ?? c.status;
    entry.message = c.message ?? '';
    entry.observedGeneration = 1;
  }
  entry.lastTransitionTime = old !== undefined && old.status === c.status ? old.lastTransitionTime : iso(t);
  if (i >= 0) list[i] = entry;
  else list.push(entry);
}

export function removeCond(o: Json, r: Release, which: List, type: string): void {
  const list = listOf(o, r, which);
  const i = list.findIndex((x) => x.type === type);
  if (i >= 0) list.splice(i, 1);
}

export const isFalse = (c: Json | undefined): boolean => c?.status === 'False';
export const isTrue = (c: Json | undefined): boolean => c?.status === 'True';

export interface MachineSpec {
  name: string;
  uid: string;
  ownerKind: 'MachineSet' | 'KubeadmControlPlane';
  owner: string;
  controlPlane: boolean;
  labels: Record<string, string>;
  annotations?: Record<string, string>;
  t: number;
  rv: string;
}

export function machine(r: Release, s: MachineSpec): Json {
  const v = versionOf(r);
  const ownerApi = s.ownerKind === 'MachineSet' ? `${CAPI_GROUP}/${v}` : `${KCP_GROUP}/${v}`;
  const configRef =
    v === 'v1beta2'
      ? { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name: s.name }
      : { apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta1', kind: 'KubeadmConfig', name: s.name, namespace: NS };
  return {
    apiVersion: `${CAPI_GROUP}/${v}`,
    kind: 'Machine',
    metadata: {
      name: s.name,
      namespace: NS,
      uid: s.uid,
      resourceVersion: s.rv,
      generation: 1,
      creationTimestamp: iso(s.t),
      labels: {
        'cluster.x-k8s.io/cluster-name': 'c1',
        ...(s.controlPlane ? { 'cluster.x-k8s.io/control-plane': '' } : {}),
        ...s.labels,
      },
      annotations: { ...(s.annotations ?? {}) },
      ownerReferences: [
        {
          apiVersion: ownerApi,
          kind: s.ownerKind,
          name: s.owner,
          uid: `uid-${s.owner}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: { clusterName: 'c1', bootstrap: { configRef }, providerID: `sim://${s.name}` },
    status:
      v === 'v1beta2'
        ? {
            phase: 'Provisioning',
            initialization: { infrastructureProvisioned: false, bootstrapDataSecretCreated: false },
            conditions: [],
          }
        : {
            phase: 'Provisioning',
            infrastructureReady: false,
            bootstrapReady: false,
            conditions: [],
            v1beta2: { conditions: [] },
          },
  };
}

/** Infrastructure and bootstrap data ready, the conditions timed at `at` (CAPI's controllers saw it then). */
export function provisionMachine(m: Json, r: Release, at: number): void {
  m.spec.bootstrap.dataSecretName = m.metadata.name;
  m.status.phase = 'Provisioned';
  if (r === 'v1.14') {
    m.status.initialization = { infrastructureProvisioned: true, bootstrapDataSecretCreated: true };
    setCond(m, r, 'v2', { type: 'InfrastructureReady', status: 'True', reason: 'Ready' }, at);
    setCond(m, r, 'v2', { type: 'BootstrapConfigReady', status: 'True', reason: 'Ready' }, at);
  } else {
    m.status.infrastructureReady = true;
    m.status.bootstrapReady = true;
    setCond(m, r, 'owner', { type: 'InfrastructureReady', status: 'True' }, at);
    setCond(m, r, 'owner', { type: 'BootstrapReady', status: 'True' }, at);
    setCond(m, r, 'v2', { type: 'InfrastructureReady', status: 'True', reason: 'Ready' }, at);
    setCond(m, r, 'v2', { type: 'BootstrapConfigReady', status: 'True', reason: 'Ready' }, at);
  }
}

export function isProvisioned(m: Json, r: Release): boolean {
  return r === 'v1.14'
    ? m.status.initialization?.infrastructureProvisioned === true
    : m.status.infrastructureReady === true;
}

export function cluster(r: Release, initialized: boolean, t0: number): Json {
  const v = versionOf(r);
  const c: Json = {
    apiVersion: `${CAPI_GROUP}/${v}`,
    kind: 'Cluster',
    metadata: {
      name: 'c1',
      namespace: NS,
      uid: 'uid-c1',
      resourceVersion: '1',
      generation: 1,
      creationTimestamp: iso(t0 - 3_600_000),
    },
    spec: {
      controlPlaneEndpoint: { host: '10.0.0.10', port: 6443 },
      controlPlaneRef:
        v === 'v1beta2'
          ? { apiGroup: KCP_GROUP, kind: 'KubeadmControlPlane', name: 'kcp' }
          : { apiVersion: `${KCP_GROUP}/v1beta1`, kind: 'KubeadmControlPlane', name: 'kcp', namespace: NS },
    },
    status:
      v === 'v1beta2'
        ? { initialization: { infrastructureProvisioned: true, controlPlaneInitialized: false }, conditions: [] }
        : { infrastructureReady: true, controlPlaneReady: false, conditions: [], v1beta2: { conditions: [] } },
  };
  if (r === 'v1.14')
    setCond(c, r, 'v2', { type: 'InfrastructureReady', status: 'True', reason: 'Ready' }, t0 - 3_600_000);
  else setCond(c, r, 'owner', { type: 'InfrastructureReady', status: 'True' }, t0 - 3_600_000);
  if (initialized) initializeCluster(c, r, t0 - 3_600_000);
  return c;
}

export function initializeCluster(c: Json, r: Release, at: number): void {
  if (r === 'v1.14') {
    c.status.initialization.controlPlaneInitialized = true;
    setCond(c, r, 'v2', { type: 'ControlPlaneInitialized', status: 'True', reason: 'Initialized' }, at);
  } else {
    c.status.controlPlaneReady = true;
    setCond(c, r, 'owner', { type: 'ControlPlaneInitialized', status: 'True' }, at);
  }
  setCond(c, r, 'v2', { type: 'RemoteConnectionProbe', status: 'True', reason: 'ProbeSucceeded' }, at);
}

export function kubeadmControlPlane(
  r: Release,
  o: { replicas: number; maxRetry?: number; retryPeriodSeconds?: number; minHealthyPeriodSeconds?: number },
): Json {
  const v = versionOf(r);
  const remediation: Json = {};
  if (v === 'v1beta2') {
    if (o.maxRetry !== undefined) remediation.maxRetry = o.maxRetry;
    if (o.retryPeriodSeconds !== undefined) remediation.retryPeriodSeconds = o.retryPeriodSeconds;
    if (o.minHealthyPeriodSeconds !== undefined) remediation.minHealthyPeriodSeconds = o.minHealthyPeriodSeconds;
  } else {
    if (o.maxRetry !== undefined) remediation.maxRetry = o.maxRetry;
    if (o.retryPeriodSeconds !== undefined) remediation.retryPeriod = `${o.retryPeriodSeconds}s`;
    if (o.minHealthyPeriodSeconds !== undefined) remediation.minHealthyPeriod = `${o.minHealthyPeriodSeconds}s`;
  }
  return {
    apiVersion: `${KCP_GROUP}/${v}`,
    kind: 'KubeadmControlPlane',
    metadata: { name: 'kcp', namespace: NS, uid: 'uid-kcp', resourceVersion: '1', generation: 1, annotations: {} },
    spec: {
      replicas: o.replicas,
      version: 'v1.33.1',
      ...(v === 'v1beta2' ? { remediation } : { remediationStrategy: remediation }),
    },
    status: v === 'v1beta2' ? { initialization: { controlPlaneInitialized: false } } : { initialized: false },
  };
}

export function kcpInitialized(k: Json, r: Release): boolean {
  return r === 'v1.14' ? k.status.initialization.controlPlaneInitialized === true : k.status.initialized === true;
}

export function setKcpInitialized(k: Json, r: Release): void {
  if (r === 'v1.14') k.status.initialization.controlPlaneInitialized = true;
  else k.status.initialized = true;
}

export function machineHealthCheck(
  r: Release,
  o: { selector: Json; nodeStartupTimeoutSeconds?: number; watchesJoinGuardCondition: boolean },
): Json {
  const v = versionOf(r);
  const spec: Json = { clusterName: 'c1', selector: o.selector };
  if (v === 'v1beta2') {
    spec.checks = {
      ...(o.nodeStartupTimeoutSeconds !== undefined ? { nodeStartupTimeoutSeconds: o.nodeStartupTimeoutSeconds } : {}),
      ...(o.watchesJoinGuardCondition
        ? { unhealthyMachineConditions: [{ type: 'JoinGuardJoined', status: 'False', timeoutSeconds: 0 }] }
        : {}),
    };
  } else if (o.nodeStartupTimeoutSeconds !== undefined) spec.nodeStartupTimeout = `${o.nodeStartupTimeoutSeconds}s`;
  return {
    apiVersion: `${CAPI_GROUP}/${v}`,
    kind: 'MachineHealthCheck',
    metadata: { name: 'mhc', namespace: NS, uid: 'uid-mhc', resourceVersion: '1' },
    spec,
  };
}

/** RFC 7386: objects merge, null deletes, anything else (lists included) replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return structuredClone(patch);
  const out: Json =
    typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...(target as Json) } : {};
  for (const [k, v] of Object.entries(patch as Json)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** RFC 6902, the operations a controller uses (test, add, remove, replace) on object paths. */
export function jsonPatch(target: Json, ops: Json[]): Json {
  const out = structuredClone(target);
  for (const op of ops) {
    const parts = String(op.path)
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop()!;
    let at: any = out;
    for (const p of parts) {
      if (at[p] === undefined) throw new Error(`json patch: no ${op.path}`);
      at = at[p];
    }
    const key = Array.isArray(at) ? (last === '-' ? at.length : Number(last)) : last;
    switch (op.op) {
      case 'test':
        if (JSON.stringify(at[key]) !== JSON.stringify(op.value))
          throw new Error(`json patch: test failed at ${op.path}`);
        break;
      case 'add':
        if (Array.isArray(at)) at.splice(key as number, 0, structuredClone(op.value));
        else at[key] = structuredClone(op.value);
        break;
      case 'replace':
        if (at[key] === undefined) throw new Error(`json patch: no ${op.path}`);
        at[key] = structuredClone(op.value);
        break;
      case 'remove':
        if (at[key] === undefined) throw new Error(`json patch: no ${op.path}`);
        if (Array.isArray(at)) at.splice(key as number, 1);
        else delete at[key];
        break;
      default:
        throw new Error(`json patch: op ${op.op} not supported`);
    }
  }
  return out;
}

/**
 * A MachineSet of the MachineDeployment `md` at a revision (its annotation), its templates named after itself: a
 * rollout from revision 1 (ms-a) to revision 2 (ms-b) changed the bootstrap template.
 */
export function machineSet(r: Release, name: string, revision: number): Json {
  const v = versionOf(r);
  const ref = (kind: string, group: string) =>
    v === 'v1beta2' ? { apiGroup: group, kind, name } : { apiVersion: `${group}/v1beta1`, kind, name };
  return {
    apiVersion: `${CAPI_GROUP}/${v}`,
    kind: 'MachineSet',
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      resourceVersion: '1',
      creationTimestamp: '2026-01-01T00:00:00Z',
      labels: { 'cluster.x-k8s.io/cluster-name': 'c1', 'cluster.x-k8s.io/deployment-name': 'md' },
      annotations: { 'machinedeployment.clusters.x-k8s.io/revision': String(revision) },
      ownerReferences: [
        { apiVersion: `${CAPI_GROUP}/${v}`, kind: 'MachineDeployment', name: 'md', uid: 'uid-md', controller: true },
      ],
    },
    spec: {
      clusterName: 'c1',
      template: {
        spec: {
          clusterName: 'c1',
          infrastructureRef: ref('SimMachineTemplate', 'infrastructure.cluster.x-k8s.io'),
          bootstrap: { configRef: ref('KubeadmConfigTemplate', 'bootstrap.cluster.x-k8s.io') },
        },
      },
    },
  };
}

/** Whether the MachineHealthCheck's selector (pool a, or every pool) takes the Machine. */
export function mhcSelects(mhc: Json, m: Json): boolean {
  return mhc.spec.selector.matchExpressions !== undefined || m.metadata.labels?.pool === 'a';
}
