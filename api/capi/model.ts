// The internal model of the CAPI objects JoinGuard reads. Readers in this folder turn v1beta2 and v1beta1
// objects into these shapes; nothing outside api/capi/ ever looks at a raw CAPI object's fields, so a new
// CAPI API version touches this folder alone. Times are epoch milliseconds (numbers compare and subtract
// without parsing); `undefined` means "not known", never "false".

export type CapiApiVersion = 'v1beta2' | 'v1beta1';

export const CAPI_GROUP = 'cluster.x-k8s.io';
export const KCP_GROUP = 'controlplane.cluster.x-k8s.io';
export const CABPK_GROUP = 'bootstrap.cluster.x-k8s.io';

/** A condition as JoinGuard needs it; `since` is lastTransitionTime in epoch ms. */
export interface Cond {
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  since?: number;
}

/** A boolean fact with the time it became true, when an object says so. */
export interface TimedFact {
  value: boolean;
  /** lastTransitionTime of the condition backing the fact, only while it is True. */
  since?: number;
}

export interface ObjectRef {
  apiGroup: string;
  kind: string;
  name: string;
}

export type OwnerKind = 'MachineSet' | 'KubeadmControlPlane' | 'MachinePool' | 'Other' | 'None';

export interface OwnerFacts {
  kind: OwnerKind;
  /** The raw kind of the controller owner reference (e.g. a non-kubeadm control plane's kind). */
  rawKind?: string;
  name?: string;
  uid?: string;
  /** True when the owner is a control-plane provider (the Machine has the control-plane label). */
  controlPlane: boolean;
}

export interface MachineFacts {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
  generation?: number;
  createdAt: number;
  deletingSince?: number;
  clusterName: string;
  labels: Record<string, string>;
  /**
   * Only the annotations JoinGuard reads: keys under joinguard.io/, cluster.x-k8s.io/ and
   * controlplane.cluster.x-k8s.io/ (KEPT_ANNOTATION_PREFIXES), so 10,000 cached Machines do not hold every
   * tool's annotations. Labels are kept whole: selectors need them.
   */
  annotations: Record<string, string>;
  owner: OwnerFacts;
  /** Label `cluster.x-k8s.io/control-plane` present. */
  controlPlane: boolean;
  /** status.phase as CAPI reports it (Pending, Provisioning, Provisioned, Running, Deleting, Failed, ...). */
  phase?: string;
  providerID?: string;
  /** status.nodeRef.name; set once a Node with the providerID exists, never cleared. */
  nodeName?: string;
  infrastructureReady: TimedFact;
  bootstrapReady: TimedFact;
  bootstrapConfigRef?: ObjectRef;
  dataSecretName?: string;
  /** spec.version: the Kubernetes version (a KubeadmControlPlane rollout's revision, rollout-suspect.ts). */
  version?: string;
  /** NodeReady / NodeHealthy reason `ConnectionDown`: CAPI cannot see the workload cluster for this Machine. */
  nodeConnectionDown: boolean;
  /** The remediation-contract conditions as the owners read them (v1beta2 `status.conditions` on v1.11+). */
  healthCheckSucceeded?: Cond;
  /**
   * The owner's answer: on v1beta1 (CAPI v1.9/v1.10) from `status.v1beta2.conditions` when there, where those owners
   * write it.
   */
  ownerRemediated?: Cond;
  /** JoinGuard's own condition for the `MachineCondition` strategy. */
  joinGuardJoined?: Cond;
  /** `cluster.x-k8s.io/remediate-machine` annotation present. */
  remediateAnnotation: boolean;
  /**
   * The uid of the check whose mark this Machine carries (its marker): in the message of JoinGuard's condition
   * (HealthCheckSucceeded or JoinGuardJoined, False), or — the annotation path, and marks of the previous layout —
   * the annotation `joinguard.io/requested-by`.
   */
  requestedBy?: string;
  /** The annotation `joinguard.io/requested-by` as the Machine carries it (a withdrawal removes it). */
  markerAnnotation?: string;
  /**
   * The raw `status.conditions` list, so that a write can be built from the Machine as judged and guarded by its
   * resourceVersion (a merge patch replaces the list whole). The controller's caches drop it for settled Machines.
   */
  conditions?: readonly unknown[];
  /** `joinguard.io/skip`, `cluster.x-k8s.io/skip-remediation`, `cluster.x-k8s.io/paused`. */
  skipReason?: 'joinguard.io/skip' | 'cluster.x-k8s.io/skip-remediation' | 'cluster.x-k8s.io/paused';
  /** `machine.cluster.x-k8s.io/...` pool membership: label `cluster.x-k8s.io/pool-name` or a MachinePool owner. */
  machinePool: boolean;
  /**
   * KCP's `controlplane.cluster.x-k8s.io/remediation-for` annotation on a replacement control-plane Machine (its
   * RemediationData: the Machine it replaced, when, and the retry count KCP's checkRetryLimits reads). `{}` when
   * the annotation is there but is not that JSON.
   */
  remediationFor?: RemediationData;
}

/** KCP's RemediationData (controlplane/kubeadm remediation.go), as its annotations carry it; timestamp in epoch ms. */
export interface RemediationData {
  machine?: string;
  timestamp?: number;
  retryCount?: number;
}

export interface ClusterFacts {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
  /**
   * Its annotations under KEPT_ANNOTATION_PREFIXES (as a Machine's), read once: a rule over a Cluster annotation
   * reads them here and needs no new fact.
   */
  annotations: Readonly<Record<string, string>>;
  /** spec.paused or the `cluster.x-k8s.io/paused` annotation. */
  paused: boolean;
  deleting: boolean;
  /** ControlPlaneInitialized (set once, never reset). */
  controlPlaneInitialized: TimedFact;
  infrastructureReady: TimedFact;
  controlPlaneEndpoint?: { host: string; port: number };
  controlPlaneRef?: ObjectRef;
  /**
   * RemoteConnectionProbe (v1beta2 only). `value: false` means CAPI cannot reach the workload cluster;
   * `since` is when the probe last became True (for the 2m grace period). Undefined when not reported.
   */
  remoteConnection?: { value: boolean; since?: number };
}

export interface KcpRemediationSpec {
  maxRetry?: number;
  retryPeriodSeconds?: number;
  minHealthyPeriodSeconds?: number;
}

export interface KcpFacts {
  name: string;
  namespace: string;
  uid: string;
  /** status.initialization.controlPlaneInitialized (v1beta2) or status.initialized (v1beta1). */
  initialized: boolean;
  replicas?: number;
  /** spec.version: the version its new Machines get (the current revision of a rollout). */
  version?: string;
  remediation: KcpRemediationSpec;
  /** `controlplane.cluster.x-k8s.io/remediation-in-progress` annotation, parsed when it is JSON. */
  remediationInProgress?: RemediationData;
}

/**
 * A MachineSet as a rollout sees it (rollout-suspect.ts): the MachineDeployment it belongs to, its revision
 * (annotation `machinedeployment.clusters.x-k8s.io/revision`) and the templates its Machines are made from.
 * Status is not read: which Machines joined is read from the Machines themselves.
 */
export interface MachineSetFacts {
  name: string;
  namespace: string;
  uid: string;
  clusterName: string;
  createdAt: number;
  deletingSince?: number;
  /** The controller owner's name when it is a MachineDeployment, else the `cluster.x-k8s.io/deployment-name` label. */
  deployment?: string;
  /** The revision annotation as written (an integer string); undefined when absent. */
  revision?: string;
  /** spec.template.spec: `Kind/name` of the infrastructure and bootstrap templates, and the version. */
  infrastructureTemplate?: string;
  bootstrapTemplate?: string;
  version?: string;
}

/** What JoinGuard needs of a Machine's bootstrap config (KubeadmConfig, or another provider's). */
export interface BootstrapConfigFacts {
  kind: string;
  name: string;
  namespace: string;
  /** KubeadmConfig only: does it carry a join configuration for a control-plane Machine? */
  joinsControlPlane?: boolean;
  /** KubeadmConfig only: any joinConfiguration at all (v1beta1 init Machines have none). */
  hasJoinConfiguration?: boolean;
}

export interface MachineHealthCheckFacts {
  name: string;
  namespace: string;
  uid: string;
  clusterName: string;
  selector: LabelSelectorModel;
  /** The MHC is paused (annotation `cluster.x-k8s.io/paused` or its Cluster paused). */
  paused: boolean;
  /** nodeStartupTimeout in seconds as written; undefined when unset (CAPI then uses 600 s). */
  nodeStartupTimeoutSeconds?: number;
  /** checks.unhealthyMachineConditions names `JoinGuardJoined` (the MachineCondition strategy's MHC). */
  watchesJoinGuardCondition: boolean;
}

export interface LabelSelectorModel {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }[];
}

/** A Node of the workload cluster (only with the opt-in workload-node check). */
export interface WorkloadNodeFacts {
  name: string;
  providerID?: string;
}

/** What a reader says about an object it could not understand. */
export class MalformedObjectError extends Error {
  constructor(
    readonly kind: string,
    readonly objectName: string,
    readonly field: string,
    problem: string,
  ) {
    super(`${kind} ${objectName}: field ${field}: ${problem}`);
    this.name = 'MalformedObjectError';
  }
}

/**
 * A remediation mark of anyone's: HealthCheckSucceeded=False, the remediate-machine annotation, JoinGuardJoined=False.
 */
export function carriesAnyMark(m: MachineFacts): boolean {
  return m.healthCheckSucceeded?.status === 'False' || m.remediateAnnotation || m.joinGuardJoined?.status === 'False';
}
