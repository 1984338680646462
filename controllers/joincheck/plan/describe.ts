// The planner's describe stage (DESIGN: "Status", "What users see"): the counts, the Machines being timed or held
// (timed.ts), the conditions (conditions.ts words them), the event that says a stop began, what every Machine must
// carry now (marks.ts), and what the check itself must carry (finalizer, annotations).
import type { CheckSettings, Hold, RequestRecord } from '../../../api/v1alpha1/types.js';
import { CONDITION_PROGRESSING, ReadyReason } from '../../../api/v1alpha1/types.js';
import { conditionOf, pausedCondition, progressing, readyCondition, setCondition } from '../report/conditions.js';
import { countVerdicts } from '../report/counts.js';
import { deletionNote, finalizerIntent } from '../requests/deletion.js';
import { isProvisioned, judge, readiness } from '../rules/judge.js';
import { made, markIntents, type IntentInput } from '../requests/marks.js';
import { checkMetadata } from '../memory/memory.js';
import { assign, type Followed, type Observed } from './observe.js';
import type { Remediated } from './remediate.js';
import { timedMachines } from '../report/timed.js';
import { compareText, byName } from '../words.js';
import type { MarkIntent, Snapshot } from '../types.js';
import type { Judged } from './verdicts.js';
import { RESTRICTING } from '../guards/guards.js';
import { maxInFlightLimit } from '../guards/budgets.js';
import { suspicionMessage } from '../guards/failures.js';
import { PATHS, selectingMhcs } from '../requests/paths.js';

export function describe(s: Snapshot, f: Followed, w: Observed, j: Judged, r: Remediated): MarkIntent[] {
  const { next, prev, ofCluster } = f;
  const { settings, cluster, stops, canAct } = w;
  const { verdicts } = j;
  const { requests, flying } = r;
  const meta = s.check.metadata;
  const c = countVerdicts(verdicts);
  // Held: every Machine the list says something holds back (its bounded part shows the nearest).
  const timed = timedMachines({
    inScope: w.inScope,
    verdicts,
    asked: new Set(requests.map((x) => x.uid)),
    held: r.held,
    ...(canAct ? {} : { notActing: notActing(settings, cluster, f.withdrawAll) }),
  });
  Object.assign(next, {
    expectedMachines: w.expected,
    joinedMachines: c.joined + f.settledInScope,
    joiningMachines: c.joining,
    stuckMachines: c.stuck,
    heldMachines: timed.held,
  });
  assign(next, 'timedMachines', timed.list);
  next.consecutiveJoinFailures ??= 0;
  next.everJoined ??= false;
  const flyingMachines = new Map(flying.map((name) => [name, ofCluster.find((x) => x.name === name)]));
  const flyingNames = [...flying].sort().map((name) => {
    const m = flyingMachines.get(name);
    const req = requests.find((x) => x.machine === name);
    const or = m?.ownerRemediated;
    return (
      `${name} (${req?.path ?? 'mark'}${m === undefined ? ', unreadable' : ''}` +
      `${or?.status === 'False' && or.reason ? `, owner says ${or.reason}` : ''})`
    );
  });
  const prog = progressing({
    stops,
    status: next,
    cluster,
    settings: settings as CheckSettings & Record<string, unknown>,
    expected: w.expected,
    verdicts,
    settledJoined: f.settledInScope,
    flying: flyingNames,
    connection: w.connection,
    graceMs: w.graceMs,
    suspicion: (heldBack) => suspicionMessage(next, next.recentFailures ?? [], cluster, settings, heldBack),
    ...(s.refusedWrites !== undefined ? { refused: s.refusedWrites } : {}),
  });
  // Else the first held Machine's hold by name: the caches list Machines in no set order (a field must not flap).
  const heldReason =
    stops.first()?.reason ?? (r.deleteNotAllowed.length > 0 ? ReadyReason.MachineDeleteNotAllowed : timed.firstHold);
  assign(next, 'heldReason', next.heldMachines! > 0 ? heldReason : undefined);
  if (
    canAct &&
    prog.status === 'False' &&
    RESTRICTING[prog.reason as keyof typeof RESTRICTING] &&
    conditionOf(prev, CONDITION_PROGRESSING)?.reason !== prog.reason
  ) {
    f.events.push({ on: 'Check', reason: 'RemediationRestricted', message: prog.message, warning: true });
  }
  const ready = readyCondition({
    inScope: w.inScope.length + f.settledInScope,
    ofCluster: ofCluster.length + (s.settled?.total ?? 0),
    cluster: cluster.name,
    malformed: s.malformed,
    progressing: prog,
    ...(settings.strategy === 'Delete' && s.allowMachineDelete !== true
      ? { deleteNotAllowed: r.deleteNotAllowed }
      : {}),
    inFlight: { count: flying.length, limit: maxInFlightLimit(settings, w.expected) },
  });
  const conditions = setCondition(
    setCondition(next.conditions, ready, s.now, meta.generation),
    prog,
    s.now,
    meta.generation,
  );

  // What every Machine must carry now: marks only while actions are allowed; withdrawals always — but nothing at all
  // on a paused Cluster's Machines (clusterctl move pauses it, then copies them: a write then is lost or stale).
  // While CAPI cannot see the workload cluster (and during the grace after), no mark or delete is written on a Machine
  // but the first control-plane one, not even for a request made before: its Node may exist unseen.
  const blind = w.connection.down || w.connection.graceUntil !== undefined;
  const pausedMhcs = [...r.pausedMhcs];
  const waiting = notDueYet(s, f, w, requests);
  const wanted = markIntents(requests, ofCluster, {
    ...intentInput(s, f.withdrawAll),
    inScope: new Set(w.inScope.map((m) => m.uid)),
  })
    .filter(
      (i) =>
        i.want === 'withdraw' ||
        (canAct && (!blind || i.machine.uid === w.first?.uid)) ||
        // A mark already on the Machine whose marker names another uid (clusterctl move): only the marker follows
        // the check; nothing is asked.
        (i.want === 'mark' && visibleMark(s, i)),
    )
    // Not even a delete asked before the flag was turned off.
    .filter((i) => i.want !== 'delete' || s.allowMachineDelete === true)
    // A request not made yet is written only while its Machine is due, and within maxInFlight.
    .filter((i) => i.want === 'withdraw' || !waiting.has(i.machine.uid))
    .filter((i) => i.want === 'withdraw' || !r.overBudget.has(i.machine.uid))
    // Nothing asked through a paused MachineHealthCheck, not even a request recorded before it was paused; a marker
    // that follows a moved check onto a mark already there asks nothing, and goes on (seed 191426148).
    .filter((i) => {
      const asks = i.want === 'mark' && i.path === 'RemediateAnnotation' && !visibleMark(s, i);
      const why = asks ? pausedMhcOf(s, i.machine.uid) : undefined;
      if (why !== undefined) pausedMhcs.push(`${why}: ${i.machine.name} is left to it`);
      return why === undefined;
    })
    .sort((a, b) => byName(a.machine, b.machine));
  const intents = cluster.paused ? [] : wanted;
  // Requests still open under withdraw-all: their Machine is being deleted, or could not be read (not known clean).
  const stillOpen = requests.filter((x) => x.state === 'Open');
  const isDeleting = (uid: string) => f.anyMachine.get(uid)?.deletingSince !== undefined;
  const withdrawing = f.withdrawAll
    ? {
        left: [
          ...wanted.map((i) => i.machine.name),
          ...stillOpen.filter((x) => !isDeleting(x.uid)).map((x) => `${x.machine} (unreadable)`),
        ],
        deleting: stillOpen.filter((x) => isDeleting(x.uid)).map((x) => x.machine),
        ...(f.deletion ? { note: deletionNote(f.deletion) } : {}),
      }
    : undefined;
  const paused = pausedCondition({
    specPaused: settings.paused,
    cluster,
    // By text, as every list in a message: the same pauses say the same whatever order the caches list Machines in.
    pausedMhcs: [...pausedMhcs].sort(compareText),
    verdicts,
    ...(withdrawing ? { withdrawing } : {}),
  });
  next.conditions = setCondition(conditions, paused, s.now, meta.generation);
  if (f.deletion === undefined) checkMetadata(s, next, w.check);
  Object.assign(w.check, finalizerIntent(s.check, f.deletion, withdrawing?.left ?? [], cluster.paused, s.now));
  return intents;
}

/** Why nothing is asked now (observe.ts's `canAct` is false), in the list's words. */
function notActing(
  settings: CheckSettings,
  cluster: { paused: boolean; deleting: boolean },
  withdrawAll: boolean,
): Hold {
  if (settings.paused || cluster.paused) return 'Paused';
  if (cluster.deleting) return 'ClusterDeleting';
  return withdrawAll ? 'WithdrawingMarks' : 'Paused';
}

/**
 * The requests recorded and not made yet (their mark never seen) whose Machine is not due: decided on the Machine as
 * the caches had it, their write met a 409 whose read shows it was not (DESIGN: "a 409 is a live re-read and a new
 * decision"). Their write waits until the Machine is due — or it joins, and the request is withdrawn. Judged on the
 * times the status keeps, not on this process's memory of earlier ones, so that a restart decides the same.
 */
function notDueYet(s: Snapshot, f: Followed, w: Observed, requests: readonly RequestRecord[]): Set<string> {
  const out = new Set<string>();
  for (const r of requests) {
    // A first control-plane request too: its 409 read may show it provisioned after all (Joining, not due; property
    // seed 8), and once the control plane says initialized no Machine is first (issue 35, 2). The judge applies the
    // first control-plane clocks (from creation) while it is first.
    if (r.state !== 'Open') continue;
    const m = f.byUid.get(r.uid);
    if (m === undefined || made(r, m)) continue;
    // The Machine that initialized the control plane is never marked once it says so, whatever was recorded before
    // (in the selector or not).
    if (w.formerFirst?.uid === m.uid) {
      out.add(r.uid);
      continue;
    }
    if (!w.inScope.includes(m)) continue;
    const ready = isProvisioned(m) ? readiness(m, w.prevObs.get(m.uid), undefined, s.now).at : undefined;
    const ctx = { ...w.ctx, readyAt: new Map(ready !== undefined ? [[m.uid, ready]] : []) };
    if (judge(m, ctx).state !== 'Stuck') out.add(r.uid);
  }
  return out;
}

function visibleMark(s: Snapshot, i: Extract<MarkIntent, { want: 'mark' }>): boolean {
  const m = s.machines.find((x) => x.uid === i.machine.uid);
  return m !== undefined && PATHS[i.path].visible(m) && i.marker !== undefined && m.requestedBy !== i.marker;
}

/** "MachineHealthCheck h selects it and is paused" when every MachineHealthCheck that selects the Machine is paused. */
function pausedMhcOf(s: Snapshot, uid: string): string | undefined {
  const m = s.machines.find((x) => x.uid === uid);
  const sel = m === undefined ? [] : selectingMhcs(m, s.mhcs);
  if (sel.length === 0 || sel.some((h) => !h.paused)) return undefined;
  return `MachineHealthCheck ${sel.map((h) => h.name).join(', ')} selects it and is paused`;
}

export function intentInput(s: Snapshot, withdrawAll: boolean): IntentInput {
  const { uid, name, deletionTimestamp } = s.check.metadata;
  return {
    nodes: s.workloadNodes,
    checkName: name,
    withdrawAll,
    deleting: deletionTimestamp !== undefined,
    ...(uid !== undefined ? { checkUid: uid } : {}),
    ...(s.checkUids !== undefined ? { liveChecks: s.checkUids } : {}),
    ...(s.unansweredAfterMs !== undefined ? { unansweredAfterMs: s.unansweredAfterMs } : {}),
  };
}
