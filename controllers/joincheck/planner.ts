// The planner: Snapshot -> Plan, pure (no I/O; `s.now` is the clock). Everything it decides is derived
// from the objects and from the check's previous status, and the Plan's status is the full next status,
// so a restarted controller plans the same. The rules run in DESIGN.md's order; each lives in its own
// file. Events and writes are emitted only on transitions, so replanning a snapshot is a no-op.
import { CONDITION_PROGRESSING, CONDITION_READY } from '../../api/v1alpha1/types.js';
import type { MachineJoinCheckStatus } from '../../api/v1alpha1/types.js';
import { controlPlaneInitialized, controlPlaneInitializedAt, nextControlPlaneInitializedSeen, nextObservations, observationsByUid } from './clocks.js';
import { DEFAULT_CONNECTION_GRACE_MS, connectionState } from './connection.js';
import type { Work } from './context.js';
import { findFirstControlPlane, isJoined, nextFirstControlPlaneMemory, replacementMisconfiguration } from './first-control-plane.js';
import { applyJoins } from './joins.js';
import { settleFirstControlPlane } from './probe.js';
import { addOwners, isOpen, observeRecords } from './records.js';
import { remediate } from './remediate.js';
import { resume } from './resume.js';
import { withdraw } from './withdrawal.js';
import { clusterMachines, expectedMachines, machinesInScope } from './scope.js';
import { RESTRICTING, conditionOf, countVerdicts, paused, progressing, ready, setCondition } from './status.js';
import { iso, ms } from './time.js';
import type { MachineVerdict, Plan, Snapshot } from './types.js';
import { judge } from './verdicts.js';
import { wakeAt } from './wake.js';

export function plan(s: Snapshot): Plan {
  const prev: MachineJoinCheckStatus = s.check.status ?? {};
  const next: MachineJoinCheckStatus = structuredClone(prev);
  const generation = s.check.metadata.generation;
  next.observedGeneration = generation;

  if (s.settings === undefined || s.settingsError !== undefined) {
    const why = s.settingsError ?? 'the spec could not be read';
    next.conditions = setCondition(next.conditions, { type: CONDITION_READY, status: 'False', reason: 'InvalidSpec', message: `The spec is invalid: ${why}. JoinGuard does nothing until it is fixed.` }, s.now, generation);
    return { verdicts: [], actions: [], status: next };
  }
  const settings = s.settings;
  const ofCluster = clusterMachines(s.machines, settings, s.check.metadata.namespace);
  const inScope = machinesInScope(ofCluster, settings);
  const cluster = s.cluster;
  if (cluster === undefined) {
    next.expectedMachines = expectedMachines(inScope);
    next.joinedMachines = inScope.filter((m) => m.deletingSince === undefined && isJoined(m, s.workloadNodes)).length;
    next.joiningMachines = 0;
    next.stuckMachines = 0;
    const message = `Cluster ${s.check.metadata.namespace}/${settings.clusterName} not found: nothing is judged or changed until it exists.`;
    next.conditions = setCondition(next.conditions, { type: CONDITION_READY, status: 'False', reason: 'ClusterNotFound', message }, s.now, generation);
    return { verdicts: [], actions: [], status: next };
  }

  const w: Work = {
    s,
    settings,
    cluster,
    now: s.now,
    prev,
    next,
    actions: [],
    canAct: !settings.paused && !cluster.paused && !cluster.deleting,
    machinesByUid: new Map(s.machines.map((m) => [m.uid, m])),
    ofCluster,
    inScope,
    expected: expectedMachines(inScope),
    verdicts: new Map(),
    observationsByUid: new Map(),
    stops: new Map(),
    waits: [],
    pausedMhcs: [],
    wake: [],
    connection: { down: false },
    graceMs: s.connectionGraceMs ?? DEFAULT_CONNECTION_GRACE_MS,
  };
  if (settings.paused || cluster.paused) w.waits.push('paused: JoinGuard changes nothing (see the Paused condition)');
  else if (cluster.deleting) w.waits.push(`the Cluster ${cluster.name} is being deleted: JoinGuard changes nothing`);

  // Resume first: it clears the stops the rules below would otherwise apply.
  resume(w);

  // What the Cluster says, and the memory of what it did not say with a time.
  const initialized = controlPlaneInitialized(cluster, s.kcp);
  const conn = connectionState(cluster, ofCluster, initialized, prev, s.now, w.graceMs);
  w.connection = conn.state;
  assign(next, 'connectionDownSeen', conn.memory.connectionDownSeen);
  assign(next, 'connectionRestoredSeen', conn.memory.connectionRestoredSeen);
  assign(next, 'controlPlaneInitializedSeen', nextControlPlaneInitializedSeen(cluster, initialized, prev, s.now));

  // The first control-plane Machine and the memory of its remediation.
  const prevFirstMemory = next.firstControlPlaneRemediation;
  const first = findFirstControlPlane(ofCluster, s.bootstrapConfigs, initialized);
  const unreadableNames = new Set(s.malformed.map((x) => x.name));
  assign(next, 'firstControlPlaneRemediation', nextFirstControlPlaneMemory(next.firstControlPlaneRemediation, ofCluster, unreadableNames, initialized, s.now));
  if (next.firstControlPlaneRemediation === undefined) {
    delete next.firstControlPlaneMisconfigured; // the replacement worked (or a resume started afresh)
  } else if (next.firstControlPlaneMisconfigured === undefined) {
    const message = replacementMisconfiguration(next.firstControlPlaneRemediation, ofCluster, s.bootstrapConfigs, initialized);
    if (message !== undefined) next.firstControlPlaneMisconfigured = { since: iso(s.now), message };
  }

  // Records follow what the Machines show now.
  const observed = observeRecords(next.remediations ?? [], w.machinesByUid, unreadableNames, s.now);
  next.remediations = observed.records;
  assign(next, 'refusedOwners', addOwners(next.refusedOwners, observed.newlyRefused));

  // Observations first: a state seen now without a transition time starts its clock now, in this plan too.
  const seenBefore = observationsByUid(prev.observations);
  const joinedUids = new Set(inScope.filter((m) => isJoined(m, s.workloadNodes)).map((m) => m.uid));
  next.observations = nextObservations(inScope, joinedUids, prev.observations, first?.uid, s.now);
  const observations = observationsByUid(next.observations);
  w.observationsByUid = observations;

  // Verdicts.
  const cpInitAt = controlPlaneInitializedAt(cluster, next);
  const extendedUntil = ms(next.firstControlPlaneExtendedUntil);
  const ctx = {
    settings,
    cluster,
    now: s.now,
    initialized,
    controlPlaneInitializedAt: cpInitAt,
    firstControlPlane: first,
    firstControlPlanePending: first !== undefined && !isJoined(first, s.workloadNodes),
    previousFirstControlPlane: next.firstControlPlaneRemediation,
    connection: conn.state,
    nodes: s.workloadNodes,
    openRecordUids: new Set((next.remediations ?? []).filter(isOpen).map((r) => r.uid)),
    observations,
    ...(next.firstControlPlaneExtendedFor !== undefined && extendedUntil !== undefined
      ? { extension: { uid: next.firstControlPlaneExtendedFor, until: extendedUntil } }
      : {}),
  };
  for (const m of inScope) w.verdicts.set(m.uid, judge(m, ctx));

  // Join events: everJoined, the consecutive count, the suspicion, join durations.
  applyJoins(w, seenBefore, { controlPlaneInitializedAt: cpInitAt, previousFirst: prevFirstMemory });

  // Actions: withdrawals, the first control-plane probe, then the remediation loop with its guards.
  withdraw(w);
  settleFirstControlPlane(w);
  remediate(w);

  // Status: counts, conditions, the event that says a stop began.
  const verdicts = inScope.map((m) => w.verdicts.get(m.uid) as MachineVerdict);
  const c = countVerdicts(verdicts);
  next.expectedMachines = w.expected;
  next.joinedMachines = c.joined;
  next.joiningMachines = c.joining;
  next.stuckMachines = c.stuck;
  next.consecutiveJoinFailures ??= 0;
  next.everJoined ??= false;
  const prog = progressing(w, verdicts);
  if (w.canAct && prog.status === 'False' && RESTRICTING.has(prog.reason) && conditionOf(prev, CONDITION_PROGRESSING)?.reason !== prog.reason) {
    w.actions.push({ type: 'CheckEvent', reason: 'RemediationRestricted', message: prog.message, warning: true });
  }
  let conditions = setCondition(next.conditions, ready(w), s.now, generation);
  conditions = setCondition(conditions, prog, s.now, generation);
  conditions = setCondition(conditions, paused(w, verdicts), s.now, generation);
  next.conditions = conditions;

  const wake = wakeAt(w, verdicts, conn.state.graceUntil);
  return {
    verdicts,
    actions: w.canAct ? w.actions : [],
    status: next,
    ...(wake !== undefined ? { wakeAt: wake } : {}),
  };
}

/** Sets an optional status field, or removes it, so absent memory leaves no `undefined` behind. */
function assign<K extends keyof MachineJoinCheckStatus>(status: MachineJoinCheckStatus, key: K, value: MachineJoinCheckStatus[K] | undefined): void {
  if (value === undefined) delete status[key];
  else status[key] = value;
}
