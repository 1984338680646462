// The one state of a planning pass (DESIGN: "What JoinGuard does each pass"): built once from the Snapshot, then
// handed to every stage of STAGES (planner.ts) in order. Each field says which stage owns it: the builder below owns
// what the Snapshot says; each stage owns its part, set from what it returns. The next status is the one record
// all stages fill in, each its own fields of it (listed on `next`).
import type { ClusterFacts, KcpFacts, MachineFacts } from '../../../api/capi/model.js';
import type {
  CheckSettings,
  Hold,
  MachineJoinCheckStatus,
  MachineObservation,
  RequestRecord,
} from '../../../api/v1alpha1/types.js';
import { ANNOTATION_MEMORY, ANNOTATION_WITHDRAW_ALL } from '../../../api/v1alpha1/types.js';
import { followMovedUids, readMemory } from '../memory/memory.js';
import type { Stops } from '../report/conditions.js';
import { deletionOf, type Deletion } from '../requests/deletion.js';
import type { ConnectionState } from '../rules/connection.js';
import { controlPlaneInitialized, targetsOf, type Target, type VerdictContext } from '../rules/verdict-rules.js';
import type { CheckMetadataIntent, MachineVerdict, MarkIntent, Plan, PlannedEvent, Snapshot } from '../types.js';

/** Any Machine of the Cluster by uid, settled ones included (they are not in `ofCluster`). */
export interface MachinesByUid {
  get(uid: string): MachineFacts | undefined;
  has(uid: string): boolean;
}

// ---- each stage's part: the stage of the same name owns it, and only it writes it ----

/** follow's part: beside the status fields it writes (requests, remediations), only its wake. */
export interface Followed {
  /** The deletion's bound: the one moment follow knows the plan changes with no event. */
  wakeAt: number | undefined;
}

export interface Observed {
  /** Actions are allowed: not paused, the Cluster not deleted, nothing withdrawn. */
  canAct: boolean;
  /** Why nothing is changed now (a pause, a deletion, withdraw-all): remediate gathers every stop. */
  waits: string[];
  events: PlannedEvent[];
  /** The check's own metadata to write (the resume's removal; describe adds the finalizer and owner). */
  check: CheckMetadataIntent;
  controlPlaneInitializedAt: number | undefined;
  graceMs: number;
  connection: ConnectionState;
  first: MachineFacts | undefined;
  /** Once initialized, the Machine that was first: never marked again. */
  formerFirst: MachineFacts | undefined;
  prevObs: Map<string, MachineObservation>;
  /**
   * Re-created by clusterctl move with this check (a check that came with memory older than itself; its Machines
   * created within MOVED_WITH_CHECK_MS of it): their status was stripped, so no Node is no evidence of not joined.
   */
  movedWithCheck: (m: MachineFacts) => boolean;
  /** Readiness times kept where no object carries them (MachineObservation.readySeen). */
  pins: Map<string, string>;
  ctx: VerdictContext;
  /** The connection's grace: the plan changes when it ends. */
  wakeAt: number | undefined;
}

export interface Judged {
  /** The verdict of each target in scope, by index of `st.inScope` (the targets are the builder's). */
  verdicts: MachineVerdict[];
  probe?: Plan['probe'];
  /** The first control-plane step's wait, if any (a stop). */
  waits: string[];
  events: PlannedEvent[];
  /** The earliest of the deadlines of the Machines being timed, the probe's retry, the extension's end. */
  wakeAt: number | undefined;
}

export interface Remediated {
  requests: RequestRecord[];
  /** Names of the Machines in flight (maxInFlight counts them). */
  flying: string[];
  confirm: Plan['confirm'];
  /** "MachineHealthCheck h selects it and is paused: m is left to it" (the Paused condition). */
  pausedMhcs: string[];
  /** Strategy Delete without --allow-machine-delete: the Machines it holds back (the Ready condition). */
  deleteNotAllowed: string[];
  /** Stuck Machines not asked for, by uid, and what held each back (status.timedMachines). */
  held: Map<string, Hold>;
  /** Open requests not made yet whose write waits for maxInFlight (a refused one's retry, issue 35, 3). */
  overBudget: Set<string>;
  /** Every stop of the pass: observe's and judge's waits, then what the guards and the state hold. */
  stops: Stops;
  events: PlannedEvent[];
  /** The earliest of: when a held Machine may free, the next canary, an unanswered request's bound. */
  wakeAt: number | undefined;
}

export interface Described {
  /** What every Machine must carry now. */
  intents: MarkIntent[];
  /** What the check itself must carry (observe's resume removal, the owner, the memory, the finalizer). */
  check: CheckMetadataIntent;
  /** RemediationRestricted, when a restricting stop begins. */
  events: PlannedEvent[];
}

/** Each stage's own part, set by plan() from what the stage returns (its owner is its name). */
export interface Parts {
  followed: Followed;
  observed: Observed;
  judged: Judged;
  remediated: Remediated;
  described: Described;
}

export interface PlanState {
  // ---- owned by planState(): what the Snapshot says, read once ----
  /**
   * The Snapshot as given, never written: the inputs the stages use as they are (mhcs, capi, previous, the probe,
   * the tunings) and the helpers that take it whole (resume, checkMetadata).
   */
  readonly snap: Snapshot;
  readonly now: number;
  /** The settings, resolved once: undefined when the spec is invalid. */
  readonly settings: CheckSettings | undefined;
  readonly cluster: ClusterFacts | undefined;
  readonly kcp: KcpFacts | undefined;
  /** The Cluster or its KubeadmControlPlane says the control plane is initialized (set once, never reset). */
  readonly initialized: boolean;
  /** The Machines in scope not being deleted, and the settled ones: the base of maxInFlight's percent. */
  readonly expected: number;
  /** The check's Cluster's Machines in its namespace, in the order given (rules that pick order what they pick). */
  readonly ofCluster: readonly MachineFacts[];
  /** Every Machine of `ofCluster` by uid, as a target. */
  readonly targets: ReadonlyMap<string, Target>;
  /** The targets the selector chooses, in `ofCluster`'s order. */
  readonly inScope: readonly MachineFacts[];
  readonly byUid: ReadonlyMap<string, MachineFacts>;
  readonly anyMachine: MachinesByUid;
  readonly unreadable: ReadonlySet<string>;
  readonly deletion: Deletion | undefined;
  /** joinguard.io/withdraw-all, or the check deleted: nothing is asked, every mark it made is withdrawn. */
  readonly withdrawAll: boolean;
  readonly settledInScope: number;
  /** The memory read back (validated), with the records that followed a moved check's new uids. */
  readonly prev: MachineJoinCheckStatus;
  readonly memoryNotes: string[];
  /**
   * The next status. follow: requests, remediations; observe: lastResume and the resume's clears,
   * controlPlaneInitializedSeen, connection times, firstControlPlane; judge: everJoined, the join counts, the
   * suspicion's clearing, joinDurations, firstControlPlane's probe; remediate: requests, remediations, failures,
   * suspicion, ownerWindows, observations; describe: the counts, timedMachines, heldReason, conditions.
   */
  readonly next: MachineJoinCheckStatus;
  /** Joined, computed once per Machine per pass (settled Machines too, when a request names one). */
  readonly joined: (m: MachineFacts) => boolean;
  // ---- owned by the stages, one part each ----
  readonly parts: Partial<Parts>;
}

/** A pass with a valid spec and its Cluster: the stages after follow run only on one. */
export type ActiveState = PlanState & { readonly settings: CheckSettings; readonly cluster: ClusterFacts };

export function isActive(st: PlanState): st is ActiveState {
  return st.settings !== undefined && st.cluster !== undefined;
}

/** A stage's part, read by a later stage: plan() runs the stages in order, so a missing one is a planner bug. */
export function part<K extends keyof Parts>(st: PlanState, k: K): Parts[K] {
  const p = st.parts[k];
  if (p === undefined) throw new Error(`plan: ${k} read before its stage ran`);
  return p;
}

/** The state of one pass, from the Snapshot: the only place the planner reads it field by field. */
export function planState(s: Snapshot): PlanState {
  const meta = s.check.metadata;
  const mem = readMemory(s.check.status, meta.annotations?.[ANNOTATION_MEMORY], s.now);
  const prev = mem.status;
  const clusterName = s.settings?.clusterName ?? s.check.spec?.clusterName;
  const ofCluster = s.machines.filter((m) => m.clusterName === clusterName && m.namespace === meta.namespace);
  if (meta.annotations?.[ANNOTATION_MEMORY] !== undefined) {
    // A moved check: the Machines are the same, their uids new (memory.ts followMovedUids).
    const settledAsked = (prev.requests ?? []).filter((r) => s.settled?.get(r.uid)).map((r) => r.uid);
    const byName = new Map(ofCluster.map((m) => [m.name, m.uid]));
    const moved = followMovedUids(prev, byName, new Set([...ofCluster.map((m) => m.uid), ...settledAsked]));
    if (moved > 0) mem.notes.push(`clusterctl move: ${moved} records follow their Machines' new uids`);
  }
  const settings = s.settingsError === undefined ? s.settings : undefined;
  const { targets, inScope, joined } = targetsOf(ofCluster, settings, s.workloadNodes);
  const settledInScope = s.settled?.inScope ?? 0;
  const byUid = new Map(ofCluster.map((m) => [m.uid, m]));
  const deletion = deletionOf(s.check);
  const next: MachineJoinCheckStatus = structuredClone(prev);
  next.observedGeneration = meta.generation;
  return {
    snap: s,
    now: s.now,
    settings,
    cluster: s.cluster,
    kcp: s.kcp,
    initialized: s.cluster !== undefined && controlPlaneInitialized(s.cluster, s.kcp),
    expected: inScope.filter((m) => m.deletingSince === undefined).length + settledInScope,
    ofCluster,
    targets,
    inScope,
    byUid,
    anyMachine: {
      get: (uid: string) => byUid.get(uid) ?? s.settled?.get(uid),
      has: (uid: string) => byUid.has(uid) || s.settled?.get(uid) !== undefined,
    },
    unreadable: new Set(s.malformed.flatMap((x) => (x.uid !== undefined ? [x.name, x.uid] : [x.name]))),
    deletion,
    withdrawAll: meta.annotations?.[ANNOTATION_WITHDRAW_ALL] !== undefined || deletion !== undefined,
    settledInScope,
    prev,
    memoryNotes: mem.notes,
    next,
    joined,
    parts: {},
  };
}
