// The planner's first two stages (DESIGN: "What JoinGuard does each pass"). follow: the check's memory, read with
// suspicion, and each request brought up to what its Machine shows now. observe: what the Cluster and its Machines
// say (initialization, the workload connection, the first control-plane Machine, readiness times), the pauses and a
// resume by hand: everything the verdicts are judged from.
import type { ClusterFacts, MachineFacts } from '../../../api/capi/model.js';
import type { CheckSettings, MachineJoinCheckStatus, MachineObservation } from '../../../api/v1alpha1/types.js';
import { ANNOTATION_MEMORY, ANNOTATION_WITHDRAW_ALL } from '../../../api/v1alpha1/types.js';
import { Stops } from '../report/conditions.js';
import { deletionNote, deletionOf, type Deletion } from '../requests/deletion.js';
import {
  findFirstControlPlane,
  formerFirstControlPlane,
  nextFirstControlPlaneMemory,
} from '../rules/first-control-plane.js';
import {
  controlPlaneInitialized,
  controlPlaneInitializedAt,
  isJoined,
  isProvisioned,
  machinesInScope,
  readiness,
  type VerdictContext,
} from '../rules/judge.js';
import { followRequests, made } from '../requests/marks.js';
import { actingMhcPaused } from '../requests/paths.js';
import { followMovedUids, MOVED_WITH_CHECK_MS, readMemory } from '../memory/memory.js';
import { ms } from '../time.js';
import type { CheckMetadataIntent, PlannedEvent, Snapshot } from '../types.js';
import { resume } from '../guards/failures.js';
import { connectionState, DEFAULT_CONNECTION_GRACE_MS, type ConnectionState } from '../rules/connection.js';

/** Any Machine of the Cluster by uid, settled ones included (they are not in `machines`). */
export interface MachinesByUid {
  get(uid: string): MachineFacts | undefined;
  has(uid: string): boolean;
}

export interface Followed {
  prev: MachineJoinCheckStatus;
  /** The next status, built up by every stage. */
  next: MachineJoinCheckStatus;
  events: PlannedEvent[];
  memoryNotes: string[];
  ofCluster: MachineFacts[];
  byUid: Map<string, MachineFacts>;
  anyMachine: MachinesByUid;
  settledInScope: number;
  unreadable: Set<string>;
  deletion: Deletion | undefined;
  /** joinguard.io/withdraw-all, or the check deleted: nothing is asked, every mark it made is withdrawn. */
  withdrawAll: boolean;
  settings: CheckSettings | undefined;
  cluster: ClusterFacts | undefined;
}

export function follow(s: Snapshot): Followed {
  const meta = s.check.metadata;
  const mem = readMemory(s.check.status, meta.annotations?.[ANNOTATION_MEMORY], s.now);
  const prev = mem.status;
  const clusterName = s.settings?.clusterName ?? s.check.spec?.clusterName;
  // In the order given: every rule that picks among Machines orders what it picks (no sort of the whole fleet).
  const ofCluster = s.machines.filter((m) => m.clusterName === clusterName && m.namespace === meta.namespace);
  if (meta.annotations?.[ANNOTATION_MEMORY] !== undefined) {
    // A moved check: the Machines are the same, their uids new (memory.ts followMovedUids).
    const moved = followMovedUids(
      prev,
      new Map(ofCluster.map((m) => [m.name, m.uid])),
      new Set([
        ...ofCluster.map((m) => m.uid),
        ...(prev.requests ?? []).filter((r) => s.settled?.get(r.uid)).map((r) => r.uid),
      ]),
    );
    if (moved > 0) mem.notes.push(`clusterctl move: ${moved} records follow their Machines' new uids`);
  }
  const next: MachineJoinCheckStatus = structuredClone(prev);
  next.observedGeneration = meta.generation;
  const byUid = new Map(ofCluster.map((m) => [m.uid, m]));
  const anyMachine = {
    get: (uid: string) => byUid.get(uid) ?? s.settled?.get(uid),
    has: (uid: string) => byUid.has(uid) || s.settled?.get(uid) !== undefined,
  };
  const unreadable = new Set(s.malformed.flatMap((x) => (x.uid !== undefined ? [x.name, x.uid] : [x.name])));
  const deletion = deletionOf(s.check);
  const withdrawAll = meta.annotations?.[ANNOTATION_WITHDRAW_ALL] !== undefined || deletion !== undefined;
  const followed = followRequests({
    requests: prev.requests ?? [],
    history: prev.remediations ?? [],
    machinesByUid: anyMachine,
    unreadable,
    ...(s.workloadNodes ? { nodes: s.workloadNodes } : {}),
    dryRun: s.settings?.dryRun ?? false,
    // While the Cluster is paused clusterctl move may be copying its Machines: one not there yet is not gone.
    keepMissing: s.cluster?.paused === true,
    clockStopped: (r, m) => s.cluster?.paused === true || actingMhcPaused(r.path, m, s.mhcs),
    withdrawAll,
    ...(s.unansweredAfterMs !== undefined ? { unansweredAfterMs: s.unansweredAfterMs } : {}),
    now: s.now,
  });
  assign(next, 'requests', followed.requests);
  assign(next, 'remediations', followed.history);
  return {
    prev,
    next,
    events: [],
    memoryNotes: mem.notes,
    ofCluster,
    byUid,
    anyMachine,
    settledInScope: s.settled?.inScope ?? 0,
    unreadable,
    deletion,
    withdrawAll,
    settings: s.settingsError === undefined ? s.settings : undefined,
    cluster: s.cluster,
  };
}

export interface Observed {
  settings: CheckSettings;
  cluster: ClusterFacts;
  /** Actions are allowed: not paused, the Cluster not deleted, nothing withdrawn. */
  canAct: boolean;
  stops: Stops;
  /** Moments the plan changes with no event, from every stage. */
  wake: (number | undefined)[];
  check: CheckMetadataIntent;
  initialized: boolean;
  controlPlaneInitializedAt: number | undefined;
  graceMs: number;
  connection: ConnectionState;
  first: MachineFacts | undefined;
  /** Once initialized, the Machine that was first: never marked again. */
  formerFirst: MachineFacts | undefined;
  inScope: MachineFacts[];
  expected: number;
  prevObs: Map<string, MachineObservation>;
  /**
   * Re-created by clusterctl move with this check (a check that came with memory older than itself; its Machines
   * created within MOVED_WITH_CHECK_MS of it): their status was stripped, so no Node is no evidence of not joined.
   */
  movedWithCheck: (m: MachineFacts) => boolean;
  /** Readiness times kept where no object carries them (MachineObservation.readySeen). */
  pins: Map<string, string>;
  ctx: VerdictContext;
}

export function observe(s: Snapshot, f: Followed, settings: CheckSettings, cluster: ClusterFacts): Observed {
  const { prev, next } = f;
  const canAct = !settings.paused && !cluster.paused && !cluster.deleting && !f.withdrawAll;
  const stops = new Stops();
  if (settings.paused || cluster.paused) stops.wait('paused: JoinGuard changes nothing (see the Paused condition)');
  else if (cluster.deleting) stops.wait(`the Cluster ${cluster.name} is being deleted: JoinGuard changes nothing`);
  else if (f.deletion) stops.wait(`${deletionNote(f.deletion)} (see the Paused condition)`);
  else if (f.withdrawAll)
    stops.wait(
      `${ANNOTATION_WITHDRAW_ALL}: JoinGuard asks nothing and withdraws every mark it made (see the Paused condition)`,
    );
  const check: CheckMetadataIntent = {};
  if (canAct) resume(s, prev, next, check, f.events);

  // What the Cluster says, and the memory of what it did not say with a time.
  const initialized = controlPlaneInitialized(cluster, s.kcp);
  const cpInit = controlPlaneInitializedAt(cluster, initialized, prev, s.now, s.previous?.controlPlaneInitializedAt);
  assign(next, 'controlPlaneInitializedSeen', cpInit.seen);
  const graceMs = s.connectionGraceMs ?? DEFAULT_CONNECTION_GRACE_MS;
  const conn = connectionState(cluster, f.ofCluster, initialized, prev, s.now, graceMs);
  assign(next, 'connectionDownSeen', conn.memory.connectionDownSeen);
  assign(next, 'connectionRestoredSeen', conn.memory.connectionRestoredSeen);

  // The first control-plane Machine and the memory of its replacement.
  const first = findFirstControlPlane(f.ofCluster, s.bootstrapConfigs, initialized);
  const fcpMemory = nextFirstControlPlaneMemory(
    next.firstControlPlane,
    f.ofCluster,
    s.bootstrapConfigs,
    f.unreadable,
    initialized,
    s.now,
  );
  assign(next, 'firstControlPlane', fcpMemory);

  const inScope = machinesInScope(f.ofCluster, settings);
  const expected = inScope.filter((m) => m.deletingSince === undefined).length + f.settledInScope;
  const prevObs = new Map((prev.observations ?? []).map((o) => [o.uid, o]));
  const checkCreated = ms(s.check.metadata.creationTimestamp);
  // Records as old as the check (to the second: a move can follow its source's last write within it) came with it.
  const carried =
    checkCreated !== undefined &&
    [...(prev.recentFailures ?? []), ...(prev.requests ?? [])].some((x) => (ms(x.time) ?? Infinity) <= checkCreated);
  const movedWithCheck = (m: MachineFacts) => carried && m.createdAt <= checkCreated + MOVED_WITH_CHECK_MS;
  const readyAt = new Map<string, number>();
  const pins = new Map<string, string>();
  for (const m of inScope) {
    if (!isProvisioned(m) || isJoined(m, s.workloadNodes) || m.deletingSince !== undefined) continue;
    const r = readiness(m, prevObs.get(m.uid), s.previous, s.now);
    readyAt.set(m.uid, r.at);
    if (r.pin !== undefined) pins.set(m.uid, r.pin);
  }
  const fcp = next.firstControlPlane;
  const extendedUntil = ms(fcp?.extendedUntil);
  const ctx: VerdictContext = {
    settings,
    cluster,
    now: s.now,
    initialized,
    ...(cpInit.at !== undefined ? { controlPlaneInitializedAt: cpInit.at } : {}),
    ...(first ? { firstControlPlane: first } : {}),
    firstControlPlanePending: first !== undefined && !isJoined(first, s.workloadNodes),
    ...(fcp?.replaced ? { previousFirstControlPlane: fcp.replaced } : {}),
    ...(fcp?.extendedFor !== undefined && extendedUntil !== undefined
      ? { extension: { uid: fcp.extendedFor, until: extendedUntil } }
      : {}),
    connection: conn.state,
    ...(s.workloadNodes ? { nodes: s.workloadNodes } : {}),
    // A request not yet made does not hold its Machine's verdict: it stands only while the Machine is due.
    openRequests: new Set(
      (next.requests ?? []).filter((r) => r.state === 'Open' && made(r, f.byUid.get(r.uid))).map((r) => r.uid),
    ),
    readyAt,
  };
  return {
    settings,
    cluster,
    canAct,
    stops,
    wake: [],
    check,
    initialized,
    controlPlaneInitializedAt: cpInit.at,
    graceMs,
    connection: conn.state,
    first,
    formerFirst: formerFirstControlPlane(f.ofCluster, s.bootstrapConfigs, initialized),
    inScope,
    expected,
    prevObs,
    movedWithCheck,
    pins,
    ctx,
  };
}

/** Sets an optional status field, or removes it, so absent memory leaves no `undefined` behind. */
export function assign<K extends keyof MachineJoinCheckStatus>(
  status: MachineJoinCheckStatus,
  key: K,
  value: MachineJoinCheckStatus[K] | undefined,
): void {
  if (value === undefined || (Array.isArray(value) && value.length === 0)) delete status[key];
  else status[key] = value;
}
