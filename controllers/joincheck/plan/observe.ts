// The planner's first two stages (DESIGN: "What JoinGuard does each pass"). follow: each request of the check's
// memory brought up to what its Machine shows now (marks.ts followRequests). observe: what the Cluster and its
// Machines say (initialization, the workload connection, the first control-plane Machine, readiness times), the
// pauses and a resume by hand: everything the verdicts are judged from.
import type { MachineFacts } from '../../../api/capi/model.js';
import type { CheckSettings, MachineObservation } from '../../../api/v1alpha1/types.js';
import { ANNOTATION_WITHDRAW_ALL } from '../../../api/v1alpha1/types.js';
import { deletionNote } from '../requests/deletion.js';
import {
  findFirstControlPlane,
  formerFirstControlPlane,
  nextFirstControlPlaneMemory,
} from '../rules/first-control-plane.js';
import { controlPlaneInitializedAt, readiness } from '../rules/clocks.js';
import type { VerdictContext } from '../rules/verdict-rules.js';
import { followRequests, made } from '../requests/marks.js';
import { actingMhcPaused } from '../requests/paths.js';
import { MOVED_WITH_CHECK_MS } from '../memory/memory.js';
import { earliestAfter, ms } from '../time.js';
import type { CheckMetadataIntent, PlannedEvent } from '../types.js';
import { resume } from '../guards/failures.js';
import { connectionState, DEFAULT_CONNECTION_GRACE_MS, type ConnectionState } from '../rules/connection.js';
import type { MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import type { ActiveState, Followed, Observed, PlanState } from './state.js';

export function follow(st: PlanState): { followed: Followed } {
  const { snap: s, next, now } = st;
  const followed = followRequests({
    requests: next.requests ?? [],
    history: next.remediations ?? [],
    machinesByUid: st.anyMachine,
    unreadable: st.unreadable,
    joined: st.joined,
    dryRun: st.settings?.dryRun ?? false,
    // While the Cluster is paused clusterctl move may be copying its Machines: one not there yet is not gone.
    keepMissing: st.cluster?.paused === true,
    clockStopped: (r, m) => st.cluster?.paused === true || actingMhcPaused(r.path, m, s.mhcs),
    withdrawAll: st.withdrawAll,
    ...(s.unansweredAfterMs !== undefined ? { unansweredAfterMs: s.unansweredAfterMs } : {}),
    now,
  });
  assign(next, 'requests', followed.requests);
  assign(next, 'remediations', followed.history);
  const until = st.deletion?.until;
  return { followed: { wakeAt: until !== undefined && until > now ? until : undefined } };
}

export function observe(st: ActiveState): { observed: Observed } {
  const { settings, cluster, next, snap: s } = st;
  const canAct = !settings.paused && !cluster.paused && !cluster.deleting && !st.withdrawAll;
  const check: CheckMetadataIntent = {};
  const events: PlannedEvent[] = [];
  if (canAct) resume(s, st.prev, next, check, events);

  const initialized = st.initialized;
  const { cpInit, graceMs, conn } = clusterSays(st);
  const first = firstControlPlane(st);

  const prevObs = new Map((st.prev.observations ?? []).map((o) => [o.uid, o]));
  const { readyAt, pins } = readinessTimes(st, prevObs);
  const ctx = verdictContext(st, { initialized, cpInitAt: cpInit.at, first, connection: conn.state, readyAt });
  return {
    observed: {
      canAct,
      waits: pauses(st),
      events,
      check,
      controlPlaneInitializedAt: cpInit.at,
      graceMs,
      connection: conn.state,
      first,
      formerFirst: formerFirstControlPlane(st.ofCluster, s.bootstrapConfigs, initialized),
      prevObs,
      movedWithCheck: movedWithCheck(st),
      pins,
      ctx,
      wakeAt: earliestAfter(st.now, [conn.state.graceUntil]),
    },
  };
}

/** What the Cluster says, and the memory of what it did not say with a time (initialization, the connection). */
function clusterSays(st: ActiveState) {
  const { cluster, next, snap: s, initialized } = st;
  const cpInit = controlPlaneInitializedAt(
    cluster,
    initialized,
    st.prev,
    st.now,
    s.previous?.controlPlaneInitializedAt,
  );
  assign(next, 'controlPlaneInitializedSeen', cpInit.seen);
  const graceMs = s.connectionGraceMs ?? DEFAULT_CONNECTION_GRACE_MS;
  const conn = connectionState(cluster, st.ofCluster, initialized, st.prev, st.now, graceMs);
  assign(next, 'connectionDownSeen', conn.memory.connectionDownSeen);
  assign(next, 'connectionRestoredSeen', conn.memory.connectionRestoredSeen);
  return { cpInit, graceMs, conn };
}

/** The first control-plane Machine, and the memory of its replacement. */
function firstControlPlane(st: ActiveState): MachineFacts | undefined {
  const { next, snap: s, initialized } = st;
  const first = findFirstControlPlane(st.ofCluster, s.bootstrapConfigs, initialized);
  const fcpMemory = nextFirstControlPlaneMemory(
    next.firstControlPlane,
    st.ofCluster,
    s.bootstrapConfigs,
    st.unreadable,
    initialized,
    st.now,
  );
  assign(next, 'firstControlPlane', fcpMemory);
  return first;
}

/** Why nothing is changed now, if anything says so: a pause, the Cluster deleted, the check deleted, withdraw-all. */
function pauses(st: ActiveState): string[] {
  const { settings, cluster } = st;
  if (settings.paused || cluster.paused) return ['paused: JoinGuard changes nothing (see the Paused condition)'];
  if (cluster.deleting) return [`the Cluster ${cluster.name} is being deleted: JoinGuard changes nothing`];
  if (st.deletion) return [`${deletionNote(st.deletion)} (see the Paused condition)`];
  if (st.withdrawAll)
    return [
      `${ANNOTATION_WITHDRAW_ALL}: JoinGuard asks nothing and withdraws every mark it made (see the Paused condition)`,
    ];
  return [];
}

/** Re-created by clusterctl move with this check (Observed.movedWithCheck). */
function movedWithCheck(st: ActiveState): (m: MachineFacts) => boolean {
  const { prev } = st;
  const checkCreated = ms(st.snap.check.metadata.creationTimestamp);
  // Records as old as the check (to the second: a move can follow its source's last write within it) came with it.
  const carried =
    checkCreated !== undefined &&
    [...(prev.recentFailures ?? []), ...(prev.requests ?? [])].some((x) => (ms(x.time) ?? Infinity) <= checkCreated);
  return (m) => carried && m.createdAt <= checkCreated + MOVED_WITH_CHECK_MS;
}

/** The join clock's readiness time of each provisioned, not joined Machine in scope, and the times to keep. */
function readinessTimes(
  st: ActiveState,
  prevObs: ReadonlyMap<string, MachineObservation>,
): { readyAt: Map<string, number>; pins: Map<string, string> } {
  const readyAt = new Map<string, number>();
  const pins = new Map<string, string>();
  for (const m of st.inScope) {
    const t = st.targets.get(m.uid)!;
    if (!t.provisioned || t.joined || m.deletingSince !== undefined) continue;
    const r = readiness(m, prevObs.get(m.uid), st.snap.previous, st.now);
    readyAt.set(m.uid, r.at);
    if (r.pin !== undefined) pins.set(m.uid, r.pin);
  }
  return { readyAt, pins };
}

/** What every verdict is judged from (verdict-rules.ts). */
function verdictContext(
  st: ActiveState,
  o: {
    initialized: boolean;
    cpInitAt: number | undefined;
    first: MachineFacts | undefined;
    connection: ConnectionState;
    readyAt: Map<string, number>;
  },
): VerdictContext {
  const { settings, cluster, next, snap: s } = st;
  const { first, cpInitAt } = o;
  const fcp = next.firstControlPlane;
  const extendedUntil = ms(fcp?.extendedUntil);
  return {
    settings: settings satisfies CheckSettings,
    cluster,
    now: st.now,
    initialized: o.initialized,
    ...(cpInitAt !== undefined ? { controlPlaneInitializedAt: cpInitAt } : {}),
    ...(first ? { firstControlPlane: first } : {}),
    firstControlPlanePending: first !== undefined && !st.joined(first),
    ...(fcp?.replaced ? { previousFirstControlPlane: fcp.replaced } : {}),
    ...(fcp?.extendedFor !== undefined && extendedUntil !== undefined
      ? { extension: { uid: fcp.extendedFor, until: extendedUntil } }
      : {}),
    connection: o.connection,
    ...(s.workloadNodes ? { nodes: s.workloadNodes } : {}),
    joined: st.joined,
    // A request not yet made does not hold its Machine's verdict: it stands only while the Machine is due.
    openRequests: new Set(
      (next.requests ?? []).filter((r) => r.state === 'Open' && made(r, st.byUid.get(r.uid))).map((r) => r.uid),
    ),
    readyAt: o.readyAt,
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
