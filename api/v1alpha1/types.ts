// MachineJoinCheck (joinguard.io/v1alpha1): the shapes users write and the controller persists.
// DESIGN.md is the contract; the CRD schema in manifests/crd/ is generated from schema.ts beside this file,
// and a test proves the two agree.
import type { LabelSelectorModel } from '../capi/model.js';

export const GROUP = 'joinguard.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = 'MachineJoinCheck';
export const PLURAL = 'machinejoinchecks';
export const SHORT_NAME = 'mjc';

export const ANNOTATION_SKIP = 'joinguard.io/skip';
export const ANNOTATION_RESUME = 'joinguard.io/resume';
export const CAPI_ANNOTATION_SKIP_REMEDIATION = 'cluster.x-k8s.io/skip-remediation';
export const CAPI_ANNOTATION_PAUSED = 'cluster.x-k8s.io/paused';
export const CAPI_ANNOTATION_REMEDIATE_MACHINE = 'cluster.x-k8s.io/remediate-machine';
/** JoinGuard's own Machine condition for the MachineCondition strategy. */
export const CONDITION_JOINGUARD_JOINED = 'JoinGuardJoined';

export type RemediationStrategy = 'Auto' | 'OwnerRemediated' | 'MachineCondition' | 'Delete';
export type FirstControlPlanePolicy = 'Remediate' | 'Report';
export type FailureKind = 'JoinTimeout' | 'ProvisionTimeout';

export interface MachineJoinCheckSpec {
  clusterName: string;
  selector: LabelSelectorModel;
  joinTimeout?: string;
  provisionTimeout?: string;
  maxInFlight?: number | string;
  remediation?: {
    strategy?: RemediationStrategy;
    maxPerOwner?: number;
    window?: string;
  };
  suspicion?: {
    consecutiveJoinFailures?: number;
    probeInterval?: string;
    maxProbeInterval?: string;
  };
  neverJoinedLimit?: number;
  firstControlPlane?: FirstControlPlanePolicy;
  dryRun?: boolean;
  paused?: boolean;
}

// ---- status ----

export const CONDITION_READY = 'Ready';
export const CONDITION_PROGRESSING = 'Progressing';
export const CONDITION_PAUSED = 'Paused';

export const ProgressingReason = {
  AsExpected: 'AsExpected',
  Remediating: 'Remediating',
  BootstrapCredentialSuspect: 'BootstrapCredentialSuspect',
  ControlPlaneEndpointUnreachable: 'ControlPlaneEndpointUnreachable',
  NeverJoined: 'NeverJoined',
  RemediationBudgetExhausted: 'RemediationBudgetExhausted',
  RemediationRefusedByOwner: 'RemediationRefusedByOwner',
  FirstControlPlaneReplacementMisconfigured: 'FirstControlPlaneReplacementMisconfigured',
  DryRun: 'DryRun',
} as const;
export type ProgressingReason = (typeof ProgressingReason)[keyof typeof ProgressingReason];

/** metav1.Condition */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface OwnerReference {
  kind: string;
  name: string;
}

export interface FailureRecord {
  machine: string;
  uid: string;
  owner?: OwnerReference;
  kind: FailureKind;
  time: string;
  /** spec.bootstrap.configRef of the Machine, as `Kind/name`. */
  bootstrapConfig?: string;
  dataSecretName?: string;
  controlPlane?: boolean;
}

/** How a replacement was asked of CAPI. */
export type RemediationPath =
  | 'OwnerRemediated'
  | 'RemediateAnnotation'
  | 'MachineCondition'
  | 'Delete'
  | 'Report';

export type RemediationOutcome =
  | 'Requested' // recorded, write about to be made or made
  | 'Marked' // the write is visible on the Machine
  | 'Deferred' // owner said RemediationDeferred (still in flight)
  | 'Refused' // owner said CannotBeRemediated
  | 'Withdrawn' // the Machine joined before it was deleted; mark removed
  | 'Replaced' // old Machine gone
  | 'Reported' // no owner that can re-create it; reported only
  | 'DryRun'; // what would have been done

export interface RemediationRecord {
  machine: string;
  uid: string;
  owner?: OwnerReference;
  time: string;
  path: RemediationPath;
  outcome: RemediationOutcome;
  kind: FailureKind;
  /** The owner's OwnerRemediated reason/message, as last seen. */
  ownerReason?: string;
  ownerMessage?: string;
  /** When the remediation stopped being in flight (old Machine gone, or withdrawn). */
  finishedTime?: string;
  canary?: boolean;
  /** The request was for the first control-plane Machine (its replacement's clock waits for it to be gone). */
  firstControlPlane?: boolean;
  /** When the write was last retried: a Requested write not visible on the Machine a minute later is made again. */
  lastAttempt?: string;
}

export interface SuspicionStatus {
  reason: 'BootstrapCredentialSuspect';
  since: string;
  nextCanaryTime?: string;
  canariesSpent: number;
  /** Machines (names) whose failures raised the suspicion. */
  machines: string[];
}

export interface JoinDurationsStatus {
  count: number;
  p50Seconds?: number;
  p95Seconds?: number;
  maxSeconds?: number;
  /** p95 × 1.5, rounded up to a minute, at least 2m: a joinTimeout that the observed joins fit in. */
  suggestedJoinTimeout?: string;
  /** The most recent join durations in seconds (bounded), from which the figures above are computed. */
  recentSeconds?: number[];
}

/** Per-Machine memory for times no object carries ("the first time the controller saw the state"). */
export interface MachineObservation {
  machine: string;
  uid: string;
  /** First time seen with infrastructure and bootstrap data ready (fallback when conditions lack times). */
  readySeen?: string;
  /** For the first control-plane replacement: when the old Machine's infrastructure was seen gone. */
  clockHeldUntil?: string;
  /** The Machine was ever seen as a first control-plane Machine (never marked again once initialized). */
  firstControlPlane?: boolean;
  /** When its failure was recorded: once per Machine, even after recentFailures (bounded) dropped it. */
  failedAt?: string;
}

export interface MachineJoinCheckStatus {
  observedGeneration?: number;
  expectedMachines?: number;
  joinedMachines?: number;
  joiningMachines?: number;
  stuckMachines?: number;
  everJoined?: boolean;
  consecutiveJoinFailures?: number;
  recentFailures?: FailureRecord[];
  remediations?: RemediationRecord[];
  suspicion?: SuspicionStatus;
  joinDurations?: JoinDurationsStatus;
  observations?: MachineObservation[];
  /** When the workload connection was last seen coming back (for the 2m grace), when no condition says. */
  connectionRestoredSeen?: string;
  /** The last `joinguard.io/resume` value acted on, and when. */
  lastResume?: { value: string; time: string };
  /** Owners that refused (CannotBeRemediated): no more requests to them until a resume. */
  refusedOwners?: OwnerReference[];
  /** Endpoint probe before acting on the first control-plane Machine: the deadline was extended once. */
  firstControlPlaneExtendedUntil?: string;
  /** The Machine (UID) that firstControlPlaneExtendedUntil belongs to: the extension is given once per Machine. */
  firstControlPlaneExtendedFor?: string;
  /** When the endpoint probe was last asked for; asked again only after a minute without an answer. */
  endpointProbeRequested?: string;
  /** The last first control-plane remediation requested; its replacement's join clock waits for finishedTime. */
  firstControlPlaneRemediation?: { machine: string; uid: string; time: string; finishedTime?: string };
  /** Set when the first control-plane replacement is not an init Machine: no more first-CP remediation. */
  firstControlPlaneMisconfigured?: { since: string; message: string };
  /** When the workload connection was seen down (after initialization), to start the grace once it is back. */
  connectionDownSeen?: string;
  /** First time the control plane was seen initialized, when the Cluster's condition carries no time. */
  controlPlaneInitializedSeen?: string;
  /** Failures recorded since the last resume: what `neverJoinedLimit` counts. */
  failuresSinceResume?: number;
  conditions?: Condition[];
}

export interface ObjectMeta {
  name: string;
  namespace: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string;
}

export interface MachineJoinCheck {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: ObjectMeta;
  spec: MachineJoinCheckSpec;
  status?: MachineJoinCheckStatus;
}

/** The check's spec with defaults applied and durations in milliseconds (parsed by settings.ts). */
export interface CheckSettings {
  clusterName: string;
  selector: LabelSelectorModel;
  joinTimeoutMs: number;
  provisionTimeoutMs?: number;
  /** Either an absolute number or a percent of expectedMachines (rounded down, at least 1). */
  maxInFlight: { count: number } | { percent: number };
  strategy: RemediationStrategy;
  maxPerOwner: number;
  windowMs: number;
  consecutiveJoinFailures: number;
  probeIntervalMs: number;
  maxProbeIntervalMs: number;
  neverJoinedLimit: number;
  firstControlPlane: FirstControlPlanePolicy;
  dryRun: boolean;
  paused: boolean;
}

/** Bounds on the status lists, so that a check's status stays small at any fleet size. */
export const STATUS_LIMITS = {
  recentFailures: 20,
  remediations: 20,
  joinDurationSamples: 50,
} as const;

/** The runbook's sections, one per Progressing reason; messages point here. */
export const RUNBOOK_URL = 'docs/runbook.md';
