// Where each CAPI kind JoinGuard reads or writes lives in the API, per CAPI API version. Both versions
// are served by CAPI v1.11+ (v1beta2 stored); v1.8–v1.10 serve only v1beta1. The version in use is
// chosen by discovery at start.
import { CABPK_GROUP, CAPI_GROUP, KCP_GROUP, type CapiApiVersion } from './model.js';

export type CapiKind =
  | 'Cluster'
  | 'Machine'
  | 'MachineSet'
  | 'MachineDeployment'
  | 'MachinePool'
  | 'MachineHealthCheck'
  | 'KubeadmControlPlane'
  | 'KubeadmConfig';

export interface CapiResource {
  group: string;
  version: CapiApiVersion;
  /** `group/version`, as in an object's apiVersion. */
  apiVersion: string;
  plural: string;
  kind: CapiKind;
}

const KINDS: Record<CapiKind, { group: string; plural: string }> = {
  Cluster: { group: CAPI_GROUP, plural: 'clusters' },
  Machine: { group: CAPI_GROUP, plural: 'machines' },
  MachineSet: { group: CAPI_GROUP, plural: 'machinesets' },
  MachineDeployment: { group: CAPI_GROUP, plural: 'machinedeployments' },
  MachinePool: { group: CAPI_GROUP, plural: 'machinepools' },
  MachineHealthCheck: { group: CAPI_GROUP, plural: 'machinehealthchecks' },
  KubeadmControlPlane: { group: KCP_GROUP, plural: 'kubeadmcontrolplanes' },
  KubeadmConfig: { group: CABPK_GROUP, plural: 'kubeadmconfigs' },
};

export const CAPI_KINDS = Object.keys(KINDS) as CapiKind[];

export function capiResource(kind: CapiKind, version: CapiApiVersion): CapiResource {
  const { group, plural } = KINDS[kind];
  return { group, version, apiVersion: `${group}/${version}`, plural, kind };
}

/** Every resource of every version, e.g. for RBAC checks and discovery. */
export const CAPI_RESOURCES: Record<CapiApiVersion, Record<CapiKind, CapiResource>> = {
  v1beta2: Object.fromEntries(CAPI_KINDS.map((k) => [k, capiResource(k, 'v1beta2')])) as Record<CapiKind, CapiResource>,
  v1beta1: Object.fromEntries(CAPI_KINDS.map((k) => [k, capiResource(k, 'v1beta1')])) as Record<CapiKind, CapiResource>,
};

/** Labels and annotations CAPI defines that the readers look at. */
export const CAPI_LABEL_CLUSTER_NAME = 'cluster.x-k8s.io/cluster-name';
export const CAPI_LABEL_CONTROL_PLANE = 'cluster.x-k8s.io/control-plane';
export const CAPI_LABEL_POOL_NAME = 'cluster.x-k8s.io/pool-name';
export const KCP_ANNOTATION_REMEDIATION_IN_PROGRESS = 'controlplane.cluster.x-k8s.io/remediation-in-progress';
export const KCP_ANNOTATION_REMEDIATION_FOR = 'controlplane.cluster.x-k8s.io/remediation-for';
/** The annotation keys a Machine's facts keep: every one JoinGuard reads is under these. */
export const KEPT_ANNOTATION_PREFIXES = [
  'joinguard.io/',
  'cluster.x-k8s.io/',
  'controlplane.cluster.x-k8s.io/',
] as const;

/** The group of an `apiVersion` (`group/version`; core objects have none). */
export function groupOf(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}
