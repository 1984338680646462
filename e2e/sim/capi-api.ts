// The CAPI API of the release under test, for the simulation and the specs (test-only). v1.11+ store
// v1beta2 and their providers follow the v1beta2 contract; v1.10 stores v1beta1 and its providers follow
// the v1beta1 contract. Field names from CAPI's contract docs and types:
//   v1beta2 contract: InfraCluster/InfraMachine status.initialization.provisioned, bootstrap
//     status.initialization.dataSecretCreated; refs {apiGroup, kind, name}.
//   v1beta1 contract (v1.10 docs/book/src/developer/providers/contracts): status.ready on all three,
//     bootstrap status.dataSecretName, InfraMachine spec.providerID and status.addresses; refs {apiVersion, kind, name}.
import { pathOf, type Json, type Resource } from '../../hack/testenv/kube-client.js';

export type CapiApiVersion = 'v1beta2' | 'v1beta1';
export type CapiKind =
  'Cluster' | 'Machine' | 'MachineDeployment' | 'MachineSet' | 'KubeadmControlPlane' | 'KubeadmConfig';

const GROUP: Record<CapiKind, string> = {
  Cluster: 'cluster.x-k8s.io',
  Machine: 'cluster.x-k8s.io',
  MachineDeployment: 'cluster.x-k8s.io',
  MachineSet: 'cluster.x-k8s.io',
  KubeadmControlPlane: 'controlplane.cluster.x-k8s.io',
  KubeadmConfig: 'bootstrap.cluster.x-k8s.io',
};

export interface CapiApi {
  /** The version the managers store, and the provider contract of the release (the same for both here). */
  version: CapiApiVersion;
  apiVersionOf(kind: CapiKind): string;
  resource(kind: CapiKind): Resource;
  path(kind: CapiKind, namespace: string, name?: string, sub?: string): string;
  /** A reference to an object of another group, as this API version writes it. */
  ref(group: string, version: string, kind: string, name: string): Json;
  /** Whether the Cluster's control plane is initialized (what CABPK waits for before worker join data). */
  controlPlaneInitialized(cluster: Json | undefined): boolean;
  /** metav1-style conditions: v1beta2 `status.conditions`; v1beta1 `status.v1beta2.conditions` (v1.9–v1.10). */
  v1beta2Conditions(obj: Json | undefined): Json[];
  /** The Machine conditions whose times start a join clock (DESIGN), and the Cluster's. */
  clockConditions: { infrastructure: string; bootstrap: string; controlPlaneInitialized: string };
  /** A provider's status fields saying it is provisioned (InfraCluster, InfraMachine). */
  provisionedStatus(): Json;
  isProvisioned(obj: Json | undefined): boolean;
  /** A bootstrap provider's status fields saying the data secret exists. */
  dataSecretStatus(secretName: string): Json;
  isDataSecretCreated(obj: Json | undefined): boolean;
}

const conditionTrue = (list: Json[] | undefined, type: string) =>
  (list ?? []).some((c) => c.type === type && c.status === 'True');

export function capiApi(version: CapiApiVersion): CapiApi {
  const v2 = version === 'v1beta2';
  const apiVersionOf = (kind: CapiKind) => `${GROUP[kind]}/${version}`;
  const resource = (kind: CapiKind): Resource => ({
    group: GROUP[kind],
    version,
    plural: `${kind.toLowerCase()}s`,
    namespaced: true,
  });
  return {
    version,
    apiVersionOf,
    resource,
    path: (kind, namespace, name, sub) => pathOf(resource(kind), namespace, name, sub),
    ref: (group, refVersion, kind, name) =>
      v2 ? { apiGroup: group, kind, name } : { apiVersion: `${group}/${refVersion}`, kind, name },
    controlPlaneInitialized: (c) =>
      v2
        ? c?.status?.initialization?.controlPlaneInitialized === true
        : // v1beta1: CABPK waits for the Cluster's (v1beta1) ControlPlaneInitialized condition.
          conditionTrue(c?.status?.conditions, 'ControlPlaneInitialized'),
    v1beta2Conditions: (o) => ((v2 ? o?.status?.conditions : o?.status?.v1beta2?.conditions) ?? []) as Json[],
    clockConditions: {
      infrastructure: 'InfrastructureReady',
      bootstrap: v2 ? 'BootstrapConfigReady' : 'BootstrapReady',
      controlPlaneInitialized: 'ControlPlaneInitialized',
    },
    provisionedStatus: () => (v2 ? { initialization: { provisioned: true } } : { ready: true }),
    isProvisioned: (o) => (v2 ? o?.status?.initialization?.provisioned === true : o?.status?.ready === true),
    dataSecretStatus: (secretName) =>
      v2
        ? { initialization: { dataSecretCreated: true }, dataSecretName: secretName }
        : { ready: true, dataSecretName: secretName },
    isDataSecretCreated: (o) =>
      v2 ? o?.status?.initialization?.dataSecretCreated === true : o?.status?.ready === true,
  };
}
