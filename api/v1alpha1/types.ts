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
/** On a check: ask nothing, withdraw every mark JoinGuard made (before an uninstall). */
export const ANNOTATION_WITHDRAW_ALL = 'joinguard.io/withdraw-all';
/**
 * On a Machine, beside every mark JoinGuard writes: the uid of the check that asked (a mark recognised from the Machine
 * alone).
 */
export const ANNOTATION_REQUESTED_BY = 'joinguard.io/requested-by';
/** On every check: its marks are withdrawn before it goes. */
export const FINALIZER = 'joinguard.io/withdraw-marks';
export const CAPI_ANNOTATION_SKIP_REMEDIATION = 'cluster.x-k8s.io/skip-remediation';
export const CAPI_ANNOTATION_PAUSED = 'cluster.x-k8s.io/paused';
export const CAPI_ANNOTATION_REMEDIATE_MACHINE = 'cluster.x-k8s.io/remediate-machine';
/** JoinGuard's own Machine condition for the MachineCondition strategy. */
export const CONDITION_JOINGUARD_JOINED = 'JoinGuardJoined';

/** How a check asks for a replacement (spec.remediation.strategy): the CRD's enum and the webhook's check use it. */
export const REMEDIATION_STRATEGIES = ['Auto', 'OwnerRemediated', 'MachineCondition', 'Delete'] as const;
export type RemediationStrategy = (typeof REMEDIATION_STRATEGIES)[number];
export type FirstControlPlanePolicy = 'Remediate' | 'Report';
// The status vocabularies, each one `as const` list: the types, the CRD schema's enums (schema-status.ts) and the
// checks on read (controllers/joincheck/memory/memory.ts) are all derived from these, so a word added here is known
// everywhere.
export const FAILURE_KINDS = ['JoinTimeout', 'ProvisionTimeout'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];
/** How a replacement was asked of CAPI (Report: it was not; reported only). */
export const REMEDIATION_PATHS = [
  'OwnerRemediated',
  'RemediateAnnotation',
  'MachineCondition',
  'Delete',
  'Report',
] as const;
/**
 * What became of a request, as shown in the bounded history `status.remediations`: Requested (recorded; the mark is
 * being made), Marked (visible on the Machine), Deferred (the owner said RemediationDeferred; still in flight),
 * Refused (the owner said CannotBeRemediated), Withdrawn (the Machine joined or was opted out before it was deleted;
 * JoinGuard's mark removed), Cancelled (it joined before the mark was ever made: nothing was written), Unanswered
 * (nobody acted on the mark within the bound: withdrawn and reported), Replaced (old Machine gone), Reported (no
 * owner that can re-create it), DryRun (what would have been done).
 */
export const REMEDIATION_OUTCOMES = [
  'Requested',
  'Marked',
  'Deferred',
  'Refused',
  'Withdrawn',
  'Cancelled',
  'Unanswered',
  'Replaced',
  'Reported',
  'DryRun',
] as const;
/**
 * Open: the mark must be on the Machine until it is gone. Withdrawn: every mark JoinGuard caused must be removed.
 * Reported / DryRun: nothing is written, the Machine is not asked again.
 */
export const REQUEST_STATES = ['Open', 'Withdrawn', 'Reported', 'DryRun'] as const;
/** Why a request was withdrawn. */
export const WITHDRAWN_REASONS = ['Joined', 'OptedOut', 'Unanswered', 'WithdrawAll'] as const;
/** Which clock a Machine of `status.timedMachines` is on: provisionTimeout's or joinTimeout's. */
export const TIMED_PHASES = ['Provisioning', 'Joining'] as const;
/**
 * What holds a Machine of `status.timedMachines` back, from a verdict or from a request. A verdict waits for: the first
 * control-plane Machine (FirstControlPlane), the control plane's initialization (ControlPlaneNotInitialized), the
 * previous first control-plane Machine to be gone (PreviousFirstControlPlane), the endpoint probe (EndpointProbe) or
 * the one extension it gave (EndpointAnswered), the workload connection (ConnectionDown, ConnectionGrace), a Node
 * without a providerID (NodeWithoutProviderID). A Machine past its deadline is not asked for because of a guard (its
 * Progressing reason), its KubeadmControlPlane's retry period or one remediation at a time (OwnerBusy), a pause
 * (Paused), the Cluster being deleted (ClusterDeleting), joinguard.io/withdraw-all or the check's deletion
 * (WithdrawingMarks), a paused MachineHealthCheck on the Auto path (MachineHealthCheckPaused), strategy Delete without
 * --allow-machine-delete (MachineDeleteNotAllowed), or a mark someone else made (AlreadyMarked).
 */
export const HOLDS = [
  'FirstControlPlane',
  'ControlPlaneNotInitialized',
  'PreviousFirstControlPlane',
  'EndpointProbe',
  'EndpointAnswered',
  'ConnectionDown',
  'ConnectionGrace',
  'NodeWithoutProviderID',
  'FirstControlPlaneReplacementMisconfigured',
  'NeverJoined',
  'BootstrapCredentialSuspect',
  'RolloutSuspect',
  'RemediationRefusedByOwner',
  'OwnerBusy',
  'RemediationBudgetExhausted',
  'Paused',
  'ClusterDeleting',
  'WithdrawingMarks',
  'MachineHealthCheckPaused',
  'MachineDeleteNotAllowed',
  'AlreadyMarked',
] as const;
export type Hold = (typeof HOLDS)[number];

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
  RolloutSuspect: 'RolloutSuspect',
  ControlPlaneEndpointUnreachable: 'ControlPlaneEndpointUnreachable',
  NeverJoined: 'NeverJoined',
  RemediationBudgetExhausted: 'RemediationBudgetExhausted',
  RemediationRefusedByOwner: 'RemediationRefusedByOwner',
  FirstControlPlaneReplacementMisconfigured: 'FirstControlPlaneReplacementMisconfigured',
  DryRun: 'DryRun',
} as const;
export type ProgressingReason = (typeof ProgressingReason)[keyof typeof ProgressingReason];
/** Progressing=False reasons: something keeps JoinGuard from remediating (guards.ts's STOPS, one entry each). */
export type StopReason = Exclude<ProgressingReason, 'AsExpected' | 'Remediating'>;

/**
 * What a stop means beyond Progressing. Ready: `NotReady` turns Ready False (a stall); `NotReadyUnlessPaced` too,
 * unless maxInFlight is what holds (report/conditions.ts); `Ready` leaves it True (a mode the user chose). hold: the
 * word a Machine it holds back shows in status.timedMachines (`null`: it holds none of its own). stallAlert:
 * JoinGuardCheckStalled `fires` after 15m, `unlessPacing` (only when nothing moves), `ownAlert` (a stop announced by an
 * alert of its own, at once) or `quiet`.
 */
export interface StopMeaning {
  ready: 'NotReady' | 'NotReadyUnlessPaced' | 'Ready';
  hold: Hold | null;
  stallAlert: 'fires' | 'unlessPacing' | 'ownAlert' | 'quiet';
}

/**
 * The meaning half of STOPS (controllers/joincheck/guards/guards.ts): here, beside the reason, because the stall alert
 * (manifests/alerts.ts, which imports api/ alone) is derived from it as Ready and timedMachines are. A new reason
 * fails to compile here until its meaning is decided (docs/decisions/stop-meanings-in-api.md).
 */
export const STOP_MEANINGS = {
  FirstControlPlaneReplacementMisconfigured: {
    ready: 'NotReady',
    hold: 'FirstControlPlaneReplacementMisconfigured',
    stallAlert: 'fires',
  },
  // Met as state: the Machine's own verdict says ConnectionDown or ConnectionGrace.
  ControlPlaneEndpointUnreachable: { ready: 'NotReady', hold: null, stallAlert: 'fires' },
  NeverJoined: { ready: 'NotReady', hold: 'NeverJoined', stallAlert: 'fires' },
  BootstrapCredentialSuspect: { ready: 'NotReady', hold: 'BootstrapCredentialSuspect', stallAlert: 'ownAlert' },
  RolloutSuspect: { ready: 'NotReady', hold: 'RolloutSuspect', stallAlert: 'ownAlert' },
  RemediationRefusedByOwner: { ready: 'NotReady', hold: 'RemediationRefusedByOwner', stallAlert: 'fires' },
  RemediationBudgetExhausted: {
    ready: 'NotReadyUnlessPaced',
    hold: 'RemediationBudgetExhausted',
    stallAlert: 'unlessPacing',
  },
  // A dry run holds nothing back: what it would ask is recorded as a request (remediations, outcome DryRun).
  DryRun: { ready: 'Ready', hold: null, stallAlert: 'quiet' },
} as const satisfies Record<StopReason, StopMeaning>;

/** The stops of a StopMeaning value (e.g. every stop the stall alert leaves to another alert or to nobody). */
export function stopsWhere<K extends keyof StopMeaning>(key: K, ...values: StopMeaning[K][]): StopReason[] {
  return (Object.keys(STOP_MEANINGS) as StopReason[]).filter((r) =>
    values.includes((STOP_MEANINGS as Record<StopReason, StopMeaning>)[r][key]),
  );
}

/**
 * Ready summarises, as CAPI's v1beta2 Ready does (util/conditions summary): `Ready`, or `NotReady` while remediation
 * stalls (Progressing=False for any reason but DryRun, a mode the user chose). Three reasons of its own say the
 * check cannot work as written: nothing is judged (InvalidSpec, ClusterNotFound), or nothing is deleted
 * (MachineDeleteNotAllowed). Each but Ready has its runbook section.
 */
export const ReadyReason = {
  Ready: 'Ready',
  NotReady: 'NotReady',
  InvalidSpec: 'InvalidSpec',
  ClusterNotFound: 'ClusterNotFound',
  MachineDeleteNotAllowed: 'MachineDeleteNotAllowed',
} as const;
export type ReadyReason = (typeof ReadyReason)[keyof typeof ReadyReason];

/**
 * CAPI's Paused reasons (util/paused) for a pause — spec.paused, a paused Cluster, a paused MachineHealthCheck on the
 * Auto path — and two of JoinGuard's while a check asks nothing because it withdraws every mark it made
 * (joinguard.io/withdraw-all, or the check deleted): what an uninstall waits for.
 */
export const PausedReason = {
  Paused: 'Paused',
  NotPaused: 'NotPaused',
  WithdrawingMarks: 'WithdrawingMarks',
  MarksWithdrawn: 'MarksWithdrawn',
} as const;

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
  /** spec.version of the Machine: a KubeadmControlPlane rollout's revision (RolloutSuspect). */
  version?: string;
}

export type RemediationPath = (typeof REMEDIATION_PATHS)[number];
export type RemediationOutcome = (typeof REMEDIATION_OUTCOMES)[number];

/** One entry of the bounded history of requests (display; the decisions come from `requests`). */
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
  /** When the remediation stopped being in flight (old Machine gone, or the mark withdrawn). */
  finishedTime?: string;
  canary?: boolean;
  firstControlPlane?: boolean;
}

/**
 * JoinGuard's exact memory of what it asked about a Machine that still exists: never asked twice, the mark
 * it keeps converging, the mark it withdraws. Dropped once the Machine is gone, or once it has a Node and
 * carries no mark JoinGuard caused.
 */
export interface RequestRecord {
  machine: string;
  uid: string;
  owner?: OwnerReference;
  path: RemediationPath;
  kind: FailureKind;
  /** When the request was recorded (before it was made). */
  time: string;
  /** REQUEST_STATES. */
  state: (typeof REQUEST_STATES)[number];
  /** Why a request was withdrawn. */
  withdrawn?: (typeof WITHDRAWN_REASONS)[number];
  /** The mark was seen on the Machine at least once. */
  marked?: boolean;
  /** When the mark was first seen on the Machine: "unanswered" is timed from here, not from `time`. */
  markedTime?: string;
  /** The owner (or the MachineHealthCheck asked) acted on it. */
  answered?: boolean;
  canary?: boolean;
  firstControlPlane?: boolean;
}

/**
 * One Machine being timed or held (display only: derived from the verdicts on every pass, never read back). No field
 * depends on the clock: an entry changes only when its Machine enters or leaves the list, changes phase or hold.
 */
export interface TimedMachine {
  machine: string;
  phase: (typeof TIMED_PHASES)[number];
  /** When its clock started. */
  since?: string;
  /** Its deadline: since + provisionTimeout or joinTimeout (a first control-plane Machine's, once extended). */
  until?: string;
  /** What holds it back, if anything. */
  onHold?: Hold;
}

/** Request times of one owner inside `remediation.window` (the newest `maxPerOwner`): exact per-owner budget. */
export interface OwnerWindow {
  kind: string;
  name: string;
  times: string[];
}

export interface SuspicionStatus {
  reason: 'BootstrapCredentialSuspect' | 'RolloutSuspect';
  since: string;
  nextCanaryTime?: string;
  canariesSpent: number;
  /** Machines (names) whose failures raised the suspicion. */
  machines: string[];
  /** RolloutSuspect: the template revision the failures all come from (rollout-suspect.ts). */
  rollout?: RolloutEvidence;
}

/** The revision a RolloutSuspect names, and the last revision of the same owner whose Machines joined. */
export interface RolloutEvidence {
  /** The MachineDeployment or KubeadmControlPlane rolling out. */
  owner: OwnerReference;
  /** The MachineDeployment's revision number, or the KubeadmControlPlane's version. */
  revision: string;
  /** The MachineSet of that revision (a MachineDeployment's). */
  machineSet?: string;
  previousRevision: string;
  previousMachineSet?: string;
  /** What differs from the previous revision: `what: old -> new`. */
  changes: string[];
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

/**
 * Per-Machine memory, kept only where no object carries it: a readiness time that is missing, in the
 * future or moved while its flag stayed true (the first time seen stands), and that the Machine's failure
 * was counted. Dropped when the Machine is gone or has joined.
 */
export interface MachineObservation {
  machine: string;
  uid: string;
  /** The join clock's readiness time JoinGuard trusts when the conditions' times cannot be trusted. */
  readySeen?: string;
  /** When its failure was counted: a Machine's failure counts once. */
  failedAt?: string;
  /**
   * ProvisionTimeout when the failure counted was a provision timeout: if the Machine then reaches Joining and times
   * out, that join timeout still counts towards the suspicion (absent: a join timeout, or an older status).
   */
  failedKind?: 'ProvisionTimeout';
}

/** The memory of the first control-plane Machine's replacement. */
export interface FirstControlPlaneStatus {
  /**
   * The last first control-plane Machine JoinGuard had replaced; its replacement's join clock starts once it is gone.
   */
  replaced?: { machine: string; uid: string; time: string; goneTime?: string };
  /** The endpoint answered: this Machine (UID) was given one more joinTimeout, until `extendedUntil`. */
  extendedFor?: string;
  extendedUntil?: string;
  /** When the endpoint probe was last asked for; asked again only after a minute without an answer. */
  probeRequested?: string;
  /** Set when the replacement is not an init Machine: no more first control-plane remediation until a resume. */
  misconfigured?: { since: string; message: string };
}

export interface MachineJoinCheckStatus {
  observedGeneration?: number;
  expectedMachines?: number;
  joinedMachines?: number;
  joiningMachines?: number;
  stuckMachines?: number;
  /** Machines held back from a verdict or a request, and the main reason (for `kubectl get`). */
  heldMachines?: number;
  heldReason?: string;
  /** The Machines being timed or held, nearest deadline first (bounded): display only. */
  timedMachines?: TimedMachine[];
  everJoined?: boolean;
  consecutiveJoinFailures?: number;
  /** Failures counted since the last resume: what `neverJoinedLimit` counts. */
  failuresSinceResume?: number;
  recentFailures?: FailureRecord[];
  remediations?: RemediationRecord[];
  requests?: RequestRecord[];
  ownerWindows?: OwnerWindow[];
  suspicion?: SuspicionStatus;
  joinDurations?: JoinDurationsStatus;
  observations?: MachineObservation[];
  firstControlPlane?: FirstControlPlaneStatus;
  /** When the workload connection was seen down (after initialization), to start the grace once it is back. */
  connectionDownSeen?: string;
  /** When the workload connection was seen coming back, when no condition says. */
  connectionRestoredSeen?: string;
  /** First time the control plane was seen initialized, when the Cluster's condition carries no time. */
  controlPlaneInitializedSeen?: string;
  /** The last `joinguard.io/resume` value acted on, when, and whether its annotation has been seen removed. */
  lastResume?: { value: string; time: string; removed?: boolean };
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
  finalizers?: string[];
  ownerReferences?: {
    apiVersion: string;
    kind: string;
    name: string;
    uid: string;
    controller?: boolean;
    blockOwnerDeletion?: boolean;
  }[];
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
  /**
   * The nearest deadlines an operator reads at a glance in `kubectl describe` (the counts give the totals): 20 entries
   * keep a check's status a few KiB larger whatever the fleet, like the history's 20.
   */
  timedMachines: 20,
  joinDurationSamples: 50,
  /** Requests and observations are exact, one per live Machine: bounded like CAPI's own lists of Machines. */
  requests: 10000,
  observations: 10000,
  ownerWindows: 1000,
  suspectMachines: 10,
  rolloutChanges: 5,
  /** int32, like every count in the Kubernetes API. */
  count: 2147483647,
} as const;

/** This release, as clusterctl and the image know it. */
export const RELEASE = 'v0.1.0';
/**
 * The runbook's sections, one per Progressing reason; condition messages link here (pinned to the release, readable
 * from a cluster).
 */
export const RUNBOOK_URL = `https://github.com/joinguard/joinguard/blob/${RELEASE}/docs/runbook.md`;
/** Annotations on a check: the memory carried across `clusterctl move`, and clusterctl's block-move. */
export const ANNOTATION_MEMORY = 'joinguard.io/memory';
export const CLUSTERCTL_ANNOTATION_BLOCK_MOVE = 'clusterctl.cluster.x-k8s.io/block-move';
/** The checks' resource, for REST paths. */
export const CHECK_RESOURCE = { group: GROUP, version: VERSION, plural: PLURAL, namespaced: true } as const;
