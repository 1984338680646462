// The planner's input and output. The planner is pure: Snapshot -> Plan. The executor converges the world to
// a Plan; nothing in here touches the network.
import type {
  BootstrapConfigFacts,
  CapiApiVersion,
  ClusterFacts,
  KcpFacts,
  MachineFacts,
  MachineHealthCheckFacts,
  MachineSetFacts,
  WorkloadNodeFacts,
} from '../../api/capi/model.js';
import type {
  FailureKind,
  MachineJoinCheck,
  MachineJoinCheckStatus,
  RemediationPath,
  CheckSettings,
} from '../../api/v1alpha1/types.js';
import type { Json } from '../../runtime/client/rest.js';

export interface CapiInfo {
  /** The API version JoinGuard reads and writes (found by discovery). */
  apiVersion: CapiApiVersion;
  /** CAPI minor release when known (MachineCondition needs 12+). */
  minor?: number;
}

/** What this process computed in its previous plan of the check; not persisted (a restart starts without it). */
export interface PreviousView {
  /**
   * Readiness times (the join clock's) by Machine UID: one that moves later while its flag stays true is not trusted.
   */
  readyAt: ReadonlyMap<string, number>;
  /** The Cluster's initialization time decided on: one that moves later while it stays initialized is not trusted. */
  controlPlaneInitializedAt?: number;
  /** Machines (UIDs) in scope that had not joined: a join this process sees happen is measured (join durations). */
  pending: ReadonlySet<string>;
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
  malformed: { name: string; uid?: string; error: string }[];
  /** Keyed by `${kind}/${name}`. */
  bootstrapConfigs: ReadonlyMap<string, BootstrapConfigFacts>;
  kcp?: KcpFacts;
  mhcs: MachineHealthCheckFacts[];
  /** The Cluster's MachineSets (absent: not known, e.g. a test that builds none): a rollout's revisions. */
  machineSets?: MachineSetFacts[];
  capi: CapiInfo;
  /** Result of probing the Cluster's controlPlaneEndpoint, when the executor was asked to. */
  endpointProbe?: { reachable: boolean; at: number };
  /** Workload Nodes when the workload-node check is on and the workload cluster could be read. */
  workloadNodes?: WorkloadNodeFacts[];
  /** Grace after the workload connection is back before verdicts resume (default 2m; tests and demo shorten it). */
  connectionGraceMs?: number;
  /** A visible mark nobody acted on for this long is withdrawn as Unanswered (default 15m; the e2e shortens it). */
  unansweredAfterMs?: number;
  /** Machines whose writes the apiserver refuses now (this process's memory, refusals.ts): reported in Progressing. */
  refusedWrites?: readonly RefusedWrite[];
  /** The uids of the checks of this namespace (deleting ones too): a mark naming none of them is a deleted check's. */
  checkUids?: ReadonlySet<string>;
  previous?: PreviousView;
  /** The manager runs with --allow-machine-delete: only then does strategy Delete delete (absent: it is refused). */
  allowMachineDelete?: boolean;
  /** Machines of the Cluster left out of `machines` (absent: every Machine is in `machines`). */
  settled?: SettledMachines;
  now: number;
}

/** What a snapshot carries beside the caches: the process's own memory of the check, and tunings. */
export type SnapshotExtras = Pick<Snapshot, 'now'> &
  Partial<
    Pick<
      Snapshot,
      | 'previous'
      | 'endpointProbe'
      | 'workloadNodes'
      | 'connectionGraceMs'
      | 'unansweredAfterMs'
      | 'refusedWrites'
      | 'checkUids'
      | 'allowMachineDelete'
    >
  >;

/**
 * The Cluster's Machines that are settled (verdict-rules.ts `isSettled`: joined for good, nothing on them for JoinGuard): a
 * large fleet's steady state. The planner needs only their count, and any one of them by uid (a request's Machine),
 * so the cache keeps them out of every plan: a Machine event costs the same whatever the Cluster's size.
 */
export interface SettledMachines {
  /** Settled Machines the check's selector chooses. */
  inScope: number;
  /** All settled Machines of the Cluster. */
  total: number;
  get(uid: string): MachineFacts | undefined;
  /**
   * A settled Machine of the Cluster the predicate accepts (O(Cluster): asked only when a suspicion is about to be
   * raised, rollout-suspect.ts). Absent: not known.
   */
  find?(pred: (m: MachineFacts) => boolean): MachineFacts | undefined;
}

export type MachineState =
  | 'Joined'
  | 'Provisioning'
  | 'Joining'
  | 'Stuck' // past its deadline, no Node
  | 'Unobservable'
  | 'Skipped'
  | 'Deleting'
  | 'Remediating' // already asked to be replaced (by JoinGuard or someone else)
  | 'Held'; // a verdict is held (first CP in progress, Node without providerID, grace period, probe)

export type HoldReason =
  | 'ConnectionDown'
  | 'ConnectionGrace'
  | 'NodeWithoutProviderID'
  | 'FirstControlPlane'
  | 'ControlPlaneNotInitialized'
  | 'PreviousFirstControlPlane'
  | 'EndpointProbe'
  | 'EndpointAnswered';

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

export interface MachineTarget {
  name: string;
  namespace: string;
  uid: string;
  /** The version the decision was made on: every write is guarded by it. */
  resourceVersion: string;
}

/**
 * What one Machine must carry now; the executor converges the live Machine to it on every pass, until it holds.
 * `mark`: JoinGuard's mark on `path` (written only where the Machine carries no mark yet). `withdraw`: no mark
 * that JoinGuard caused (its conditions, its annotation, the HealthCheckSucceeded=False a MachineHealthCheck
 * wrote because JoinGuard asked it). `delete`: the Machine deleted (strategy Delete), guarded by uid. `marker`: the
 * `joinguard.io/requested-by` value the Machine carries beside the mark (written before it, removed after it).
 */
export type MarkIntent =
  | {
      want: 'mark';
      machine: MachineTarget;
      path: Exclude<RemediationPath, 'Report' | 'Delete'>;
      kind: FailureKind;
      message: string;
      event: PlannedEvent;
      marker?: string;
    }
  | { want: 'delete'; machine: MachineTarget; kind: FailureKind; event: PlannedEvent }
  | {
      want: 'withdraw';
      machine: MachineTarget;
      path: Exclude<RemediationPath, 'Report'>;
      event: PlannedEvent;
      marker?: string;
      /**
       * The withdrawal rests on something that can be undone (a skip annotation, withdraw-all) or on memory (nobody
       * answered): written only once it is recorded, or the request would be asked again. Without it, the withdrawal
       * is derived from the world again on every pass (the Machine joined, the check is deleted, its check is gone)
       * and needs no write-ahead.
       */
      needsRecord?: true;
    };

export type MachineEventReason =
  | 'JoinTimedOut'
  | 'ProvisionTimedOut'
  | 'RemediationRequested'
  | 'RemediationWithdrawn'
  | 'RemediationSkipped'
  | 'WriteRefused';
export type CheckEventReason =
  | 'SuspicionRaised'
  | 'RolloutSuspect'
  | 'SuspicionCleared'
  | 'RemediationRestricted'
  | 'Resumed'
  | 'MarksLeftBehind'
  | 'StatusWriteRefused';

export type PlannedEvent =
  | { on: 'Machine'; machine: MachineTarget; reason: MachineEventReason; message: string; warning: boolean }
  | { on: 'Check'; reason: CheckEventReason; message: string; warning: boolean };

/** Writes to the check's own metadata, converged like Machine marks. */
export interface CheckMetadataIntent {
  /** Remove `joinguard.io/resume` if it still has this value (acted on). */
  removeResume?: string;
  /** The Cluster is paused (clusterctl move): carry the memory in an annotation and release block-move. */
  carryMemory?: string;
  /** The Cluster is not paused: keep clusterctl's block-move on the check, drop a stale memory annotation. */
  blockMove?: boolean;
  /** The (non-controller) ownerReference to the Cluster, as MachineHealthChecks carry it. */
  ownerCluster?: { apiVersion: string; name: string; uid: string };
  /** Add the finalizer that withdraws the check's marks before it goes. */
  addFinalizer?: boolean;
  /** The check is being deleted and no mark of its own is left (or the bound passed): let it go. */
  removeFinalizer?: boolean;
  /** With removeFinalizer past the bound: the Machines still carrying a mark, named in an event. */
  marksLeftBehind?: string[];
}

export interface Plan {
  verdicts: MachineVerdict[];
  /** The complete next status. The executor writes it before any Machine write (write-ahead). */
  status: MachineJoinCheckStatus;
  /** Every Machine that must carry (or must not carry) a mark now, by UID. */
  intents: MarkIntent[];
  /** Events owed by this plan's status change, sent once the status is written. */
  events: PlannedEvent[];
  check: CheckMetadataIntent;
  /**
   * Machines whose new state this plan decides without writing to them — a failure counted (it can raise a
   * suspicion), a request withdrawn or unanswered: the executor reads them live before the status says so.
   */
  confirm: (MachineTarget & {
    /**
     * What was decided rests on what this plan's own write to the Machine re-checks (a failure counted on a Machine it
     * marks or deletes; a request withdrawn because the Machine joined — a join is never undone): that write, guarded
     * by the resourceVersion judged, stands for its read.
     */
    byWrite?: true;
  })[];
  /** Ask the executor to probe the Cluster's endpoint (first control-plane Machine). */
  probe?: { host: string; port: number };
  /** Epoch ms of the next moment the plan would change with no event (the nearest deadline). */
  wakeAt?: number;
  /** Settled Machines in scope (joined), counted but not in `verdicts`. */
  settledInScope: number;
  /** Values read from the persisted status that could not be trusted (a user wrote them): logged. */
  memoryNotes: string[];
  /** The view to hand to the next plan of this check in this process. */
  view: PreviousView;
}

// Shared by the executor (act/) and the caches (world/), the status (report/) and the tests: here, so that no
// folder imports act/ for a type.

export type RefusedKind = 'mark' | 'withdraw' | 'delete';

export interface RefusedWrite {
  uid: string;
  machine: string;
  write: RefusedKind;
  /** The HTTP status, when the apiserver answered. */
  code?: number;
  /** The apiserver's message (an admission webhook names itself and its reason there). */
  message: string;
  /** First refusal of this run of refusals (epoch ms). */
  since: number;
  attempts: number;
  /** Not tried again before this (epoch ms). */
  retryAt: number;
}

/** Objects read live in this reconcile (null: read as gone). */
export interface Live {
  machines: Map<string, Json | null>;
  cluster?: Json | null;
  check?: Json;
  /** Writes of the check tried in this reconcile (each may have landed, and a 409 shows another writer's). */
  checkWrites?: number;
  /** `checkWrites` when the Cluster was last read live. */
  clusterReadAt?: number;
}

/** The controller's view of one check: a snapshot from its caches, with the live objects in place of cached ones. */
export interface SnapshotSource {
  build(live: Live): Snapshot | undefined;
}

/**
 * The end of an exhaustive switch: a case left out (a new path, write or mark kind) fails the type check here, and a
 * value the types rule out fails loudly rather than falling to some other case.
 */
export function assertNever(x: never, what: string): never {
  throw new Error(`unexpected ${what}: ${String(x)}`);
}
