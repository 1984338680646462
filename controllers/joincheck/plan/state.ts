// The one state of a planning pass (DESIGN: "What JoinGuard does each pass"): built once from the Snapshot, then
// handed to every stage of STAGES (planner.ts) in order. Each field says which stage owns it: the builder below owns
// what the Snapshot says; each stage owns its part, set from what it returns. The next status is the one record
// all stages fill in, each its own fields of it (listed on `next`).
import type { ClusterFacts, KcpFacts, MachineFacts } from '../../../api/capi/model.js';
import type { CheckSettings, MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import { ANNOTATION_MEMORY, ANNOTATION_WITHDRAW_ALL } from '../../../api/v1alpha1/types.js';
import { followMovedUids, readMemory } from '../memory/memory.js';
import { deletionOf, type Deletion } from '../requests/deletion.js';
import { controlPlaneInitialized, targetsOf, type Target } from '../rules/verdict-rules.js';
import type { Snapshot } from '../types.js';
import type { Followed, Observed } from './observe.js';
import type { Judged } from './judge.js';
import type { Remediated } from './remediate.js';
import type { Described } from './describe.js';

/** Any Machine of the Cluster by uid, settled ones included (they are not in `ofCluster`). */
export interface MachinesByUid {
  get(uid: string): MachineFacts | undefined;
  has(uid: string): boolean;
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
  /** The Snapshot itself, for the few helpers that read a field of it by name (resume, checkMetadata). */
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
