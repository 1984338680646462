// The planner's input and output. The planner is pure: Snapshot + now -> Plan. The executor performs a
// Plan's actions; nothing in here touches the network.
import type {
  BootstrapConfigFacts,
  CapiApiVersion,
  ClusterFacts,
  KcpFacts,
  MachineFacts,
  MachineHealthCheckFacts,
  WorkloadNodeFacts,
} from '../../api/capi/model.js';
import type {
  FailureKind,
  MachineJoinCheck,
  MachineJoinCheckStatus,
  RemediationPath,
} from '../../api/v1alpha1/types.js';

export type { CheckSettings } from '../../api/v1alpha1/types.js';
import type { CheckSettings } from '../../api/v1alpha1/types.js';

export interface CapiInfo {
  /** The API version JoinGuard reads and writes (found by discovery). */
  apiVersion: CapiApiVersion;
  /** CAPI minor release when known (MachineCondition needs 12+). */
  minor?: number;
}

export interface Snapshot {
  check: MachineJoinCheck;
  /** Parsed settings; undefined with `settingsError` when the spec cannot be understood. */
  settings?: CheckSettings;
  settingsError?: string;
  cluster?: ClusterFacts;
  /** Every Machine of the check's Cluster in its namespace (the planner applies the selector). */
  machines: MachineFacts[];
  /** Machines a reader could not understand: never acted on, reported. */
  malformed: { name: string; error: string }[];
  /** Keyed by `${kind}/${name}`. */
  bootstrapConfigs: Map<string, BootstrapConfigFacts>;
  kcp?: KcpFacts;
  mhcs: MachineHealthCheckFacts[];
  /** Other MachineJoinChecks in the namespace (to spot overlap). */
  capi: CapiInfo;
  /** Result of probing the Cluster's controlPlaneEndpoint, when the executor was asked to. */
  endpointProbe?: { reachable: boolean; at: number };
  /** Workload Nodes when the workload-node check is on and the workload cluster could be read. */
  workloadNodes?: WorkloadNodeFacts[];
  /** Grace after the workload connection is back before verdicts resume (default 2m; tests and demo shorten it). */
  connectionGraceMs?: number;
  now: number;
}

export type MachineState =
  | 'Joined'
  | 'Provisioning'
  | 'Joining'
  | 'Stuck' // past its deadline, no Node
  | 'Unobservable'
  | 'Skipped'
  | 'Deleting'
  | 'Remediating' // already asked to be replaced
  | 'Held'; // a verdict is held (first CP in progress, Node without providerID, grace period)

export interface MachineVerdict {
  machine: string;
  uid: string;
  state: MachineState;
  /** Why, in a sentence a user can read. */
  reason: string;
  /** Epoch ms when the running clock (provision or join) started. */
  clockStart?: number;
  /** Epoch ms of the deadline of the running clock. */
  deadline?: number;
  failureKind?: FailureKind;
  firstControlPlane?: boolean;
  /** Why a verdict is held (state Held or Unobservable). */
  hold?: HoldReason;
  /** The Machine is past its deadline, but its verdict is held (Unobservable or Held). */
  pastDeadline?: boolean;
}

export type HoldReason =
  | 'ConnectionDown'
  | 'ConnectionGrace'
  | 'NodeWithoutProviderID'
  | 'FirstControlPlane'
  | 'ControlPlaneNotInitialized'
  | 'PreviousFirstControlPlane'
  | 'EndpointProbe'
  | 'EndpointAnswered';

export interface MachineTarget {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
}

export type Action =
  | { type: 'MarkOwnerRemediated'; machine: MachineTarget; kind: FailureKind; message: string; setOwnerRemediated: boolean }
  | { type: 'AnnotateRemediate'; machine: MachineTarget; kind: FailureKind; message: string }
  | { type: 'SetJoinGuardCondition'; machine: MachineTarget; kind: FailureKind; message: string }
  | { type: 'DeleteMachine'; machine: MachineTarget; kind: FailureKind }
  | { type: 'Withdraw'; machine: MachineTarget; path: RemediationPath }
  | { type: 'RemoveResumeAnnotation'; value: string }
  | { type: 'ProbeEndpoint'; host: string; port: number }
  | { type: 'MachineEvent'; machine: MachineTarget; reason: MachineEventReason; message: string; warning: boolean }
  | { type: 'CheckEvent'; reason: CheckEventReason; message: string; warning: boolean };

export type MachineEventReason =
  | 'JoinTimedOut'
  | 'ProvisionTimedOut'
  | 'RemediationRequested'
  | 'RemediationWithdrawn'
  | 'RemediationSkipped';
export type CheckEventReason = 'SuspicionRaised' | 'SuspicionCleared' | 'RemediationRestricted' | 'Resumed';

/** Machine-changing actions: the executor re-reads live and re-plans before each of these. */
export const MACHINE_WRITES: ReadonlySet<Action['type']> = new Set([
  'MarkOwnerRemediated',
  'AnnotateRemediate',
  'SetJoinGuardCondition',
  'DeleteMachine',
  'Withdraw',
]);

export interface Plan {
  verdicts: MachineVerdict[];
  /**
   * In order. The new status is written (write-ahead) before any Machine write, so that every request
   * is recorded before it is made.
   */
  actions: Action[];
  status: MachineJoinCheckStatus;
  /** Epoch ms of the next moment the plan would change with no event (the nearest deadline). */
  wakeAt?: number;
}
