// The planner: Snapshot -> Plan, pure (no I/O; `s.now` is the one clock). What to do is derived each pass from
// the world and the check's persisted memory (validated on read); the Plan's status is the complete next
// status, and its intents say what every Machine must carry now, so a restarted controller plans the same and
// the executor converges whatever failed before. The rules live in one file per section of DESIGN (judge,
// first-control-plane, marks, guards, conditions); this file only merges their results, in DESIGN's order.
import type { MachineFacts } from '../../api/capi/model.js';
import type { CheckSettings, MachineJoinCheckStatus, MachineObservation, RequestRecord } from '../../api/v1alpha1/types.js';
import { ANNOTATION_MEMORY, ANNOTATION_WITHDRAW_ALL, CONDITION_PROGRESSING, CONDITION_READY, ReadyReason, STATUS_LIMITS } from '../../api/v1alpha1/types.js';
import { addJoinDuration, conditionOf, pausedCondition, progressing, readyCondition, RESTRICTING, setCondition, Stops } from './conditions.js';
import { countVerdicts } from './counts.js';
import { findFirstControlPlane, nextFirstControlPlaneMemory, probeDecision } from './first-control-plane.js';
import { countFailure, guardChain, inFlight, joinSeen, neverJoinedActive, nextCanaryAt, recordOwnerRequest, resume, spendCanary, suspicionMessage, trimWindows, windowStart, type GuardResult, type GuardState, type GuardWorld } from './guards.js';
import {
  byName as byNameOrder,
  connectionState,
  controlPlaneInitialized,
  controlPlaneInitializedAt,
  DEFAULT_CONNECTION_GRACE_MS,
  isJoined,
  isProvisioned,
  joinClockStart,
  judge,
  machinesInScope,
  readiness,
  trusted,
  type VerdictContext,
} from './judge.js';
import { appendHistory, choosePath, followRequests, markIntents, newRequest, ownerRef, target, UNANSWERED_AFTER_MS, type IntentInput } from './marks.js';
import { deletionNote, deletionOf, finalizerIntent } from './deletion.js';
import { clearRolloutIfOver, rolloutSuspect, type RolloutWorld } from './rollout-suspect.js';
import { checkMetadata, readMemory } from './memory.js';
import { earliestAfter, iso, ms } from './time.js';
import type { CheckMetadataIntent, MachineTarget, MachineVerdict, Plan, PlannedEvent, Snapshot } from './types.js';

export function plan(s: Snapshot): Plan {
  const meta = s.check.metadata;
  const mem = readMemory(s.check.status, meta.annotations?.[ANNOTATION_MEMORY], s.now);
  const prev = mem.status;
  const next: MachineJoinCheckStatus = structuredClone(prev);
  next.observedGeneration = meta.generation;
  const events: PlannedEvent[] = [];
  const clusterName = s.settings?.clusterName ?? s.check.spec?.clusterName;
  // In the order given: every rule that picks among Machines orders what it picks (no sort of the whole fleet).
  const ofCluster = s.machines.filter((m) => m.clusterName === clusterName && m.namespace === meta.namespace);
  const byUid = new Map(ofCluster.map((m) => [m.uid, m]));
  // Any Machine of the Cluster by uid, settled ones included (they are not in `machines`).
  const anyMachine = { get: (uid: string) => byUid.get(uid) ?? s.settled?.get(uid), has: (uid: string) => byUid.has(uid) || s.settled?.get(uid) !== undefined };
  const settledInScope = s.settled?.inScope ?? 0;
  const unreadable = new Set(s.malformed.flatMap((x) => (x.uid !== undefined ? [x.name, x.uid] : [x.name])));
  // joinguard.io/withdraw-all (before an uninstall), or the check deleted: nothing is asked, every mark it made is withdrawn.
  const deletion = deletionOf(s.check);
  const withdrawAll = meta.annotations?.[ANNOTATION_WITHDRAW_ALL] !== undefined || deletion !== undefined;
  const followed = followRequests({
    requests: prev.requests ?? [],
    history: prev.remediations ?? [],
    machinesByUid: anyMachine,
    unreadable,
    ...(s.workloadNodes ? { nodes: s.workloadNodes } : {}),
    dryRun: s.settings?.dryRun ?? false,
    withdrawAll,
    ...(s.unansweredAfterMs !== undefined ? { unansweredAfterMs: s.unansweredAfterMs } : {}),
    now: s.now,
  });
  assign(next, 'requests', followed.requests);
  assign(next, 'remediations', followed.history);
  const settings = s.settingsError === undefined ? s.settings : undefined;
  const cluster = s.cluster;
  const base = { verdicts: [], settledInScope, events, memoryNotes: mem.notes, view: { readyAt: new Map<string, number>(), pending: new Set<string>() } };

  if (settings === undefined || cluster === undefined) {
    // Nothing is judged; only JoinGuard's own marks on joined Machines are withdrawn (that never waits).
    const why = settings === undefined
      ? { reason: ReadyReason.InvalidSpec, message: `The spec is invalid: ${s.settingsError ?? 'it could not be read'}. JoinGuard does nothing until it is fixed.` }
      : { reason: ReadyReason.ClusterNotFound, message: `Cluster ${meta.namespace}/${settings.clusterName} not found: nothing is judged or changed until it exists.` };
    next.conditions = setCondition(next.conditions, { type: CONDITION_READY, status: 'False', ...why }, s.now, meta.generation);
    const intents = markIntents(next.requests ?? [], ofCluster, intentInput(s, withdrawAll)).filter((i) => i.want === 'withdraw');
    const check = finalizerIntent(s.check, deletion, intents.map((i) => i.machine.name), cluster?.paused === true, s.now);
    return { ...base, status: next, intents, confirm: [], check, ...(deletion && deletion.until > s.now ? { wakeAt: deletion.until } : {}) };
  }

  const canAct = !settings.paused && !cluster.paused && !cluster.deleting && !withdrawAll;
  const stops = new Stops();
  const wake: (number | undefined)[] = [];
  const pausedMhcs: string[] = [];
  if (settings.paused || cluster.paused) stops.wait('paused: JoinGuard changes nothing (see the Paused condition)');
  else if (cluster.deleting) stops.wait(`the Cluster ${cluster.name} is being deleted: JoinGuard changes nothing`);
  else if (deletion) stops.wait(`${deletionNote(deletion)} (see the Paused condition)`);
  else if (withdrawAll) stops.wait(`${ANNOTATION_WITHDRAW_ALL}: JoinGuard asks nothing and withdraws every mark it made (see the Paused condition)`);
  const check: CheckMetadataIntent = {};
  if (canAct) resume(s, prev, next, check, events);

  // What the Cluster says, and the memory of what it did not say with a time.
  const initialized = controlPlaneInitialized(cluster, s.kcp);
  const cpInit = controlPlaneInitializedAt(cluster, initialized, prev, s.now);
  assign(next, 'controlPlaneInitializedSeen', cpInit.seen);
  const graceMs = s.connectionGraceMs ?? DEFAULT_CONNECTION_GRACE_MS;
  const conn = connectionState(cluster, ofCluster, initialized, prev, s.now, graceMs);
  assign(next, 'connectionDownSeen', conn.memory.connectionDownSeen);
  assign(next, 'connectionRestoredSeen', conn.memory.connectionRestoredSeen);

  // The first control-plane Machine and the memory of its replacement.
  const first = findFirstControlPlane(ofCluster, s.bootstrapConfigs, initialized);
  assign(next, 'firstControlPlane', nextFirstControlPlaneMemory(next.firstControlPlane, ofCluster, s.bootstrapConfigs, unreadable, initialized, s.now));

  // Verdicts, for the Machines in scope.
  const inScope = machinesInScope(ofCluster, settings);
  const expected = inScope.filter((m) => m.deletingSince === undefined).length + settledInScope;
  const prevObs = new Map((prev.observations ?? []).map((o) => [o.uid, o]));
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
    ...(fcp?.extendedFor !== undefined && extendedUntil !== undefined ? { extension: { uid: fcp.extendedFor, until: extendedUntil } } : {}),
    connection: conn.state,
    ...(s.workloadNodes ? { nodes: s.workloadNodes } : {}),
    openRequests: new Set((next.requests ?? []).filter((r) => r.state === 'Open').map((r) => r.uid)),
    readyAt,
  };
  // One verdict per Machine in scope, by index (the first control-plane Machine's may be replaced below).
  const verdictList = inScope.map((m) => judge(m, ctx));

  // Join events: everJoined, the consecutive count, the suspicion.
  const joinedNow = inScope.filter((_, i) => verdictList[i]!.state === 'Joined');
  if (joinedNow.length > 0 || settledInScope > 0) next.everJoined = true;
  const newestFailure = Math.max(...(prev.recentFailures ?? []).map((f) => ms(f.time) ?? 0), 0);
  const somethingToReset = (next.consecutiveJoinFailures ?? 0) > 0 || next.suspicion !== undefined;
  const joinEvents = joinedNow.filter((m) => prevObs.has(m.uid) || (somethingToReset && newestFailure > 0 && m.createdAt > newestFailure));
  if (joinEvents.length > 0 && somethingToReset) joinSeen(next, joinEvents.map((m) => m.name), events);
  // [rollout-suspect] which revision the failures come from; a RolloutSuspect clears once its revision is rolled back.
  const rolloutWorld: RolloutWorld = { machines: ofCluster, ...(s.settled ? { settled: s.settled } : {}), ...(s.machineSets ? { machineSets: s.machineSets } : {}), ...(s.kcp ? { kcp: s.kcp } : {}) };
  clearRolloutIfOver(next, rolloutWorld, events);
  // Join durations of the joins seen happen (by this process, or remembered as not joined).
  // By name: the samples kept must not depend on the order the caches list Machines in.
  const timedJoins = joinedNow.filter((m) => joinEvents.includes(m) || s.previous?.pending.has(m.uid) === true).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const m of timedJoins) {
    const readyAt = Math.max(trusted(m.infrastructureReady.since, s.now) ?? m.createdAt, trusted(m.bootstrapReady.since, s.now) ?? m.createdAt);
    const start = joinClockStart(m, { firstControlPlane: m.controlPlane, readyAt, ...(cpInit.at !== undefined ? { controlPlaneInitializedAt: cpInit.at } : {}) });
    next.joinDurations = addJoinDuration(next.joinDurations, Math.max(0, Math.round((s.now - start) / 1000)));
  }

  // The first control-plane Machine: probe its endpoint before acting on it.
  const handled = new Set((next.requests ?? []).map((r) => r.uid));
  const firstIndex = first !== undefined ? inScope.indexOf(first) : -1;
  const firstVerdict = firstIndex >= 0 ? verdictList[firstIndex] : undefined;
  let probe: Plan['probe'];
  if (first !== undefined && firstVerdict?.state === 'Stuck' && firstVerdict.failureKind === 'JoinTimeout' && canAct && settings.firstControlPlane === 'Remediate' && next.firstControlPlane?.misconfigured === undefined && !handled.has(first.uid)) {
    const d = probeDecision(firstVerdict, cluster, next.firstControlPlane, s.endpointProbe, settings.joinTimeoutMs, s.now);
    const memory = (next.firstControlPlane ??= {});
    if (d.kind === 'probe') {
      if (d.ask) {
        probe = { host: d.host, port: d.port };
        memory.probeRequested = iso(s.now);
      }
      wake.push(d.retryAt);
      stops.wait(`probing the control-plane endpoint ${d.host}:${d.port} before acting on the first control-plane Machine ${first.name}`);
      verdictList[firstIndex] = { ...firstVerdict, state: 'Held', hold: 'EndpointProbe', pastDeadline: true, reason: `${firstVerdict.reason}; probing the control-plane endpoint before acting` };
    } else if (d.kind === 'extend') {
      delete memory.probeRequested;
      Object.assign(memory, { extendedFor: first.uid, extendedUntil: iso(d.until) });
      verdictList[firstIndex] = { ...firstVerdict, state: 'Held', hold: 'EndpointAnswered', deadline: d.until, pastDeadline: false, reason: `the control plane answered at its endpoint, so initialization may be finishing: given another joinTimeout until ${iso(d.until)}` };
    } else delete memory.probeRequested;
  } else if (next.firstControlPlane?.probeRequested !== undefined) {
    delete next.firstControlPlane.probeRequested;
  }

  // The remediation loop: every Stuck Machine not handled before, oldest deadline first, through the guards.
  const windows = trimWindows(next.ownerWindows, windowStart(s.now, settings, next.lastResume?.time), settings.maxPerOwner);
  const flying = inFlight(inScope, next.requests ?? [], unreadable);
  const failed = new Map<string, string>([...prevObs].flatMap(([uid, o]) => (o.failedAt !== undefined ? [[uid, o.failedAt]] : [])));
  const candidates = inScope
    .map((m, i) => ({ m, v: verdictList[i]! }))
    .filter(({ m, v }) => v.state === 'Stuck' && !handled.has(m.uid))
    .sort((a, b) => (a.v.deadline ?? 0) - (b.v.deadline ?? 0) || byNameOrder(a.m, b.m));
  const requests = [...(next.requests ?? [])];
  // Request changes decided here (withdrawn, unanswered) are confirmed live like failures counted below.
  const prevState = new Map((prev.requests ?? []).map((r) => [r.uid, r.state]));
  const confirm: MachineTarget[] = (next.requests ?? []).filter((r) => prevState.get(r.uid) !== r.state && byUid.has(r.uid)).map((r) => target(byUid.get(r.uid)!));
  // A request forgotten because its Machine is not in the caches is confirmed gone by a live read first: a cache that
  // lags (a Machine created after its last event) must not erase a request another process recorded.
  const kept = new Set((next.requests ?? []).map((r) => r.uid));
  for (const r of prev.requests ?? []) {
    if (r.state === 'Open' && !kept.has(r.uid) && !anyMachine.has(r.uid)) confirm.push({ name: r.machine, namespace: meta.namespace, uid: r.uid, resourceVersion: '' });
  }
  let history = next.remediations ?? [];
  let ownerWindows = windows;
  let canaryTaken = false;
  const wouldAsk: string[] = [];
  const holds: { m: MachineFacts; v: MachineVerdict; loop: GuardResult & { go: false } }[] = [];
  const deleteNotAllowed: string[] = [];
  const kcp = s.kcp;
  const guardWorld: GuardWorld = {
    settings,
    machines: anyMachine,
    ...(kcp ? { kcp } : {}),
    kcpMachines: kcp ? ofCluster.filter((x) => x.owner.kind === 'KubeadmControlPlane' && x.owner.name === kcp.name).length : 0,
    initialized,
    expected,
    now: s.now,
  };
  const sinceResume = (list: readonly RequestRecord[]) => list.filter((r) => r.time >= (next.lastResume?.time ?? ''));
  for (const { m, v } of canAct ? candidates : []) {
    let raisedNow = false;
    const fresh = !failed.has(m.uid);
    if (fresh) {
      confirm.push(target(m));
      failed.set(m.uid, iso(s.now));
      raisedNow = countFailure(next, m, v, anyMachine, settings, cluster, s.now, events, (f) => rolloutSuspect(f, rolloutWorld)); // [rollout-suspect]
    }
    const stuckEvent = (): void => {
      if (fresh) events.push({ on: 'Machine', machine: target(m), reason: v.failureKind === 'ProvisionTimeout' ? 'ProvisionTimedOut' : 'JoinTimedOut', warning: true, message: `Machine ${m.name}: ${v.reason}` });
    };
    if (v.firstControlPlane && next.firstControlPlane?.misconfigured !== undefined) {
      stops.add('FirstControlPlaneReplacementMisconfigured', '', m.name);
      stuckEvent();
      continue;
    }
    const choice = choosePath(m, settings, s.mhcs, s.capi, v.firstControlPlane === true);
    if (choice.kind === 'blocked') {
      pausedMhcs.push(`${choice.why}: ${m.name} is left to it`);
      stuckEvent();
      continue;
    }
    // Strategy Delete without --allow-machine-delete: nothing is deleted and nothing recorded, so the Machine is
    // deleted once the flag is on; Ready says why (MachineDeleteNotAllowed).
    if (choice.kind === 'request' && choice.path === 'Delete' && s.allowMachineDelete !== true) {
      deleteNotAllowed.push(m.name);
      stops.wait(`${m.name} is not deleted: JoinGuard runs without --allow-machine-delete (see the Ready condition)`);
      stuckEvent();
      continue;
    }
    if (choice.kind === 'report') {
      const r = newRequest(m, v, 'Report', 'Reported', s.now);
      requests.push(r);
      history = appendHistory(history, r, 'Reported');
      events.push({ on: 'Machine', machine: target(m), reason: 'RemediationSkipped', warning: true, message: `Machine ${m.name}: ${v.reason}. JoinGuard does not remediate it: ${choice.why}. Reported only.` });
      continue;
    }
    const owner = ownerRef(m);
    const gate = guardChain(m, v, raisedNow, { status: next, requests: sinceResume(next.requests ?? []), canaryTaken, flying, ownerWindows }, guardWorld);
    if (!gate.go) {
      holds.push({ m, v, loop: gate });
      stuckEvent();
      continue;
    }
    if (gate.canary) canaryTaken = true;
    // Spent in a dry run too: it shows the cadence the real thing would keep (one would-be canary per interval).
    if (gate.canary && next.suspicion !== undefined) next.suspicion = spendCanary(next.suspicion, settings, s.now);
    const r = newRequest(m, v, choice.path, settings.dryRun ? 'DryRun' : 'Open', s.now, gate.canary);
    requests.push(r);
    history = appendHistory(history, r, settings.dryRun ? 'DryRun' : 'Requested');
    if (settings.dryRun) {
      wouldAsk.push(`${m.name} via ${choice.path}`);
      events.push({ on: 'Machine', machine: target(m), reason: 'RemediationSkipped', warning: false, message: `dry run: Machine ${m.name}: ${v.reason}. JoinGuard would ask for its replacement via ${choice.via} (path ${choice.path}).` });
      continue;
    }
    flying.push(m.name);
    ownerWindows = recordOwnerRequest(ownerWindows, owner, s.now, settings.maxPerOwner);
    if (v.firstControlPlane) (next.firstControlPlane ??= {}).replaced = { machine: m.name, uid: m.uid, time: iso(s.now) };
  }

  // Why each held Machine waits, as the guards see it once this plan's requests are made (a canary taken, budgets
  // filled): the words the next plan will find, whatever order the Machines were decided in.
  const final: GuardState = { status: next, requests: sinceResume(requests), canaryTaken, flying, ownerWindows };
  for (const h of holds) {
    const g = guardChain(h.m, h.v, false, final, guardWorld);
    const why = g.go ? h.loop : g;
    wake.push(why.until);
    if ('wait' in why) stops.wait(why.wait);
    else stops.add(why.stop, why.note, h.m.name);
  }

  assign(next, 'requests', requests);
  assign(next, 'remediations', history);
  assign(next, 'ownerWindows', ownerWindows.length > 0 ? ownerWindows : undefined);

  // Per-Machine memory, only where no object carries it (see MachineObservation), and every not-joined Machine
  // while there is a count or a suspicion that a join would reset.
  const watchAll = (next.consecutiveJoinFailures ?? 0) > 0 || next.suspicion !== undefined;
  const observations: MachineObservation[] = [];
  for (const [i, m] of inScope.entries()) {
    if (m.deletingSince !== undefined || verdictList[i]!.state === 'Joined') continue;
    const pin = pins.get(m.uid);
    const failedAt = failed.get(m.uid);
    if (pin === undefined && failedAt === undefined && !watchAll) continue;
    observations.push({ machine: m.name, uid: m.uid, ...(pin !== undefined ? { readySeen: pin } : {}), ...(failedAt !== undefined ? { failedAt } : {}) });
  }
  observations.sort((a, b) => (a.machine < b.machine ? -1 : a.machine > b.machine ? 1 : 0));
  assign(next, 'observations', observations.length > 0 ? observations.slice(0, STATUS_LIMITS.observations) : undefined);

  // An emptied memory is no memory (the next plan reads it back as none: planning twice must change nothing).
  if (next.firstControlPlane !== undefined && Object.keys(next.firstControlPlane).length === 0) delete next.firstControlPlane;

  // Stops whose evidence is state, not this plan's candidates.
  if (next.firstControlPlane?.misconfigured !== undefined) stops.add('FirstControlPlaneReplacementMisconfigured', next.firstControlPlane.misconfigured.message);
  for (const v of verdictList) if ((v.hold === 'ConnectionDown' || v.hold === 'ConnectionGrace') && v.pastDeadline) stops.add('ControlPlaneEndpointUnreachable', '', v.machine);
  if (neverJoinedActive(next, settings)) stops.add('NeverJoined', '');
  if (next.suspicion !== undefined) stops.add(next.suspicion.reason, ''); // [rollout-suspect] either suspicion
  if (settings.dryRun) {
    const stuck = new Set(verdictList.filter((v) => v.state === 'Stuck').map((v) => v.uid));
    for (const r of requests) if (r.state === 'DryRun' && stuck.has(r.uid) && !wouldAsk.includes(`${r.machine} via ${r.path}`)) wouldAsk.push(`${r.machine} via ${r.path}`);
    stops.add('DryRun', '');
    for (const w of wouldAsk) stops.add('DryRun', w);
  }

  // Status: counts, conditions, the event that says a stop began.
  const c = countVerdicts(verdictList);
  const held = new Set([...stops.machinesHeld(), ...deleteNotAllowed, ...verdictList.filter((v) => v.state === 'Held' || v.state === 'Unobservable').map((v) => v.machine)]);
  Object.assign(next, { expectedMachines: expected, joinedMachines: c.joined + settledInScope, joiningMachines: c.joining, stuckMachines: c.stuck, heldMachines: held.size });
  next.consecutiveJoinFailures ??= 0;
  next.everJoined ??= false;
  const byName = new Map(flying.map((name) => [name, ofCluster.find((x) => x.name === name)]));
  const flyingNames = [...flying].sort().map((name) => {
    const m = byName.get(name);
    const r = requests.find((x) => x.machine === name);
    const or = m?.ownerRemediated;
    return `${name} (${r?.path ?? 'mark'}${m === undefined ? ', unreadable' : ''}${or?.status === 'False' && or.reason ? `, owner says ${or.reason}` : ''})`;
  });
  const prog = progressing({
    stops,
    status: next,
    cluster,
    settings: settings as CheckSettings & Record<string, unknown>,
    expected,
    verdicts: verdictList,
    settledJoined: settledInScope,
    flying: flyingNames,
    connection: conn.state,
    graceMs,
    suspicion: (held) => suspicionMessage(next, next.recentFailures ?? [], cluster, settings, held),
    ...(s.refusedWrites !== undefined ? { refused: s.refusedWrites } : {}),
  });
  // The first held Machine by name: the caches list Machines in no set order (a count field must not flap with it).
  const firstHeld = verdictList.filter((v) => v.state === 'Held' || v.state === 'Unobservable').reduce<MachineVerdict | undefined>((a, v) => (a === undefined || v.machine < a.machine ? v : a), undefined);
  const heldReason = stops.first()?.reason ?? (deleteNotAllowed.length > 0 ? ReadyReason.MachineDeleteNotAllowed : firstHeld?.hold);
  assign(next, 'heldReason', next.heldMachines! > 0 ? heldReason : undefined);
  if (canAct && prog.status === 'False' && RESTRICTING[prog.reason as keyof typeof RESTRICTING] && conditionOf(prev, CONDITION_PROGRESSING)?.reason !== prog.reason) {
    events.push({ on: 'Check', reason: 'RemediationRestricted', message: prog.message, warning: true });
  }
  const ready = readyCondition({
    inScope: inScope.length + settledInScope,
    ofCluster: ofCluster.length + (s.settled?.total ?? 0),
    cluster: cluster.name,
    malformed: s.malformed,
    progressing: prog,
    ...(settings.strategy === 'Delete' && s.allowMachineDelete !== true ? { deleteNotAllowed } : {}),
  });
  let conditions = setCondition(next.conditions, ready, s.now, meta.generation);
  conditions = setCondition(conditions, prog, s.now, meta.generation);

  // What every Machine must carry now: marks only while actions are allowed; withdrawals always.
  // While CAPI cannot see the workload cluster (and during the grace after), no mark or delete is written on a Machine
  // but the first control-plane one, not even for a request made before: its Node may exist unseen.
  const blind = conn.state.down || conn.state.graceUntil !== undefined;
  const intents = markIntents(requests, ofCluster, { ...intentInput(s, withdrawAll), inScope: new Set(inScope.map((m) => m.uid)) })
    .filter((i) => i.want === 'withdraw' || (canAct && (!blind || i.machine.uid === first?.uid)))
    // Not even a delete asked before the flag was turned off.
    .filter((i) => i.want !== 'delete' || s.allowMachineDelete === true)
    .sort((a, b) => (a.machine.name < b.machine.name ? -1 : a.machine.name > b.machine.name ? 1 : 0));
  // Requests still open under withdraw-all: their Machine is being deleted, or could not be read (not known clean).
  const stillOpen = requests.filter((r) => r.state === 'Open');
  const withdrawing = withdrawAll
    ? {
        left: [...intents.map((i) => i.machine.name), ...stillOpen.filter((r) => anyMachine.get(r.uid)?.deletingSince === undefined).map((r) => `${r.machine} (unreadable)`)],
        deleting: stillOpen.filter((r) => anyMachine.get(r.uid)?.deletingSince !== undefined).map((r) => r.machine),
        ...(deletion ? { note: deletionNote(deletion) } : {}),
      }
    : undefined;
  next.conditions = setCondition(conditions, pausedCondition({ specPaused: settings.paused, cluster, pausedMhcs, verdicts: verdictList, ...(withdrawing ? { withdrawing } : {}) }), s.now, meta.generation);
  if (deletion === undefined) checkMetadata(s, next, check);
  Object.assign(check, finalizerIntent(s.check, deletion, withdrawing?.left ?? [], cluster.paused, s.now));

  // The next moment the plan changes with no event.
  for (const v of verdictList) if (v.state === 'Provisioning' || v.state === 'Joining') wake.push(v.deadline);
  wake.push(conn.state.graceUntil, ms(next.firstControlPlane?.extendedUntil), deletion?.until);
  if (canAct && next.suspicion !== undefined) wake.push(nextCanaryAt(next.suspicion, settings, s.now));
  for (const r of requests) if (r.state === 'Open' && !r.answered && r.markedTime !== undefined) wake.push((ms(r.markedTime) ?? s.now) + (s.unansweredAfterMs ?? UNANSWERED_AFTER_MS));
  const wakeAt = earliestAfter(s.now, wake);
  return {
    verdicts: verdictList,
    settledInScope,
    status: next,
    intents,
    confirm,
    events: canAct ? events : events.filter((e) => e.on === 'Check' && e.reason === 'SuspicionCleared'),
    check,
    ...(probe ? { probe } : {}),
    ...(wakeAt !== undefined ? { wakeAt } : {}),
    memoryNotes: mem.notes,
    view: { readyAt, pending: new Set(verdictList.filter((v) => v.state !== 'Joined' && v.state !== 'Deleting').map((v) => v.uid)) },
  };
}

function intentInput(s: Snapshot, withdrawAll: boolean): IntentInput {
  const { uid, name, deletionTimestamp } = s.check.metadata;
  return {
    nodes: s.workloadNodes, checkName: name, withdrawAll, deleting: deletionTimestamp !== undefined,
    ...(uid !== undefined ? { checkUid: uid } : {}),
    ...(s.checkUids !== undefined ? { liveChecks: s.checkUids } : {}),
    ...(s.unansweredAfterMs !== undefined ? { unansweredAfterMs: s.unansweredAfterMs } : {}),
  };
}

/** Sets an optional status field, or removes it, so absent memory leaves no `undefined` behind. */
function assign<K extends keyof MachineJoinCheckStatus>(status: MachineJoinCheckStatus, key: K, value: MachineJoinCheckStatus[K] | undefined): void {
  if (value === undefined || (Array.isArray(value) && value.length === 0)) delete status[key];
  else status[key] = value;
}
