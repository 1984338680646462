// The planner's describe stage (DESIGN: "Status", "What users see"): the counts, the Machines being timed or held
// (timed.ts), the conditions (conditions.ts words them), the event that says a stop began, what every Machine must
// carry now (marks.ts), and what the check itself must carry (finalizer, annotations).
import type { CheckSettings, Condition, Hold, RequestRecord } from '../../../api/v1alpha1/types.js';
import { CONDITION_PROGRESSING, CONDITION_READY, ReadyReason } from '../../../api/v1alpha1/types.js';
import { conditionOf, pausedCondition, progressing, readyCondition, setCondition } from '../report/conditions.js';
import { countVerdicts } from '../report/counts.js';
import { deletionNote, finalizerIntent } from '../requests/deletion.js';
import { made, markIntents, type IntentInput } from '../requests/marks.js';
import { PATHS, selectingMhcs } from '../requests/paths.js';
import { readiness } from '../rules/clocks.js';
import { judgeMachine } from '../rules/verdict-rules.js';
import { checkMetadata } from '../memory/memory.js';
import { timedMachines } from '../report/timed.js';
import { compareText, byName } from '../words.js';
import type { CheckMetadataIntent, MarkIntent, Plan, PlannedEvent, Snapshot } from '../types.js';
import { RESTRICTING } from '../guards/guards.js';
import { maxInFlightLimit } from '../guards/budgets.js';
import { suspicionMessage } from '../guards/failures.js';
import { assign } from './observe.js';
import { part, type ActiveState, type Described, type PlanState } from './state.js';

export function describe(st: ActiveState): { described: Described } {
  const { next, snap: s, cluster, now } = st;
  const meta = s.check.metadata;
  const timed = countAndTime(st);
  const events: PlannedEvent[] = [];
  const conditions = progressAndReady(st, timed.firstHold, events);
  const pausedMhcs = [...part(st, 'remediated').pausedMhcs];
  const wanted = intentsNow(st, pausedMhcs);
  const intents = cluster.paused ? [] : wanted;
  const { paused, left } = pausedNow(st, wanted, pausedMhcs);
  next.conditions = setCondition(conditions, paused, now, meta.generation);
  const check: CheckMetadataIntent = { ...part(st, 'observed').check };
  if (st.deletion === undefined) checkMetadata(s, next, check);
  Object.assign(check, finalizerIntent(s.check, st.deletion, left, cluster.paused, now, unrefused(s, wanted)));
  return { described: { intents, check, events } };
}

/** The counts, and the Machines being timed or held (status.timedMachines). */
function countAndTime(st: ActiveState): { firstHold: Hold | undefined } {
  const { next, settings, cluster } = st;
  const { verdicts } = part(st, 'judged');
  const r = part(st, 'remediated');
  const c = countVerdicts(verdicts);
  // Held: every Machine the list says something holds back (its bounded part shows the nearest).
  const timed = timedMachines({
    inScope: st.inScope,
    verdicts,
    asked: new Set(r.requests.map((x) => x.uid)),
    held: r.held,
    ...(part(st, 'observed').canAct ? {} : { notActing: notActing(settings, cluster, st.withdrawAll) }),
  });
  Object.assign(next, {
    expectedMachines: st.expected,
    joinedMachines: c.joined + st.settledInScope,
    joiningMachines: c.joining,
    stuckMachines: c.stuck,
    heldMachines: timed.held,
  });
  assign(next, 'timedMachines', timed.list);
  next.consecutiveJoinFailures ??= 0;
  next.everJoined ??= false;
  return { firstHold: timed.firstHold };
}

/** Progressing (and the event that a restricting stop began), the held reason, and Ready. */
function progressAndReady(st: ActiveState, firstHold: Hold | undefined, events: PlannedEvent[]): Condition[] {
  const { next, prev, settings, cluster, snap: s, now } = st;
  const w = part(st, 'observed');
  const { verdicts } = part(st, 'judged');
  const r = part(st, 'remediated');
  const prog = progressing({
    stops: r.stops,
    status: next,
    cluster,
    settings: settings as CheckSettings & Record<string, unknown>,
    expected: st.expected,
    verdicts,
    settledJoined: st.settledInScope,
    flying: flyingNames(st, r.flying, r.requests),
    connection: w.connection,
    graceMs: w.graceMs,
    suspicion: (heldBack) => suspicionMessage(next, next.recentFailures ?? [], cluster, settings, heldBack),
    ...(s.refusedWrites !== undefined ? { refused: s.refusedWrites } : {}),
  });
  // Else the first held Machine's hold by name: the caches list Machines in no set order (a field must not flap).
  const heldReason =
    r.stops.first()?.reason ?? (r.deleteNotAllowed.length > 0 ? ReadyReason.MachineDeleteNotAllowed : firstHold);
  assign(next, 'heldReason', next.heldMachines! > 0 ? heldReason : undefined);
  if (
    w.canAct &&
    prog.status === 'False' &&
    RESTRICTING[prog.reason as keyof typeof RESTRICTING] &&
    conditionOf(prev, CONDITION_PROGRESSING)?.reason !== prog.reason
  ) {
    events.push({ on: 'Check', reason: 'RemediationRestricted', message: prog.message, warning: true });
  }
  const ready = readyCondition({
    inScope: st.inScope.length + st.settledInScope,
    ofCluster: st.ofCluster.length + (s.settled?.total ?? 0),
    cluster: cluster.name,
    malformed: s.malformed,
    progressing: prog,
    ...(settings.strategy === 'Delete' && s.allowMachineDelete !== true
      ? { deleteNotAllowed: r.deleteNotAllowed }
      : {}),
    inFlight: { count: r.flying.length, limit: maxInFlightLimit(settings, st.expected) },
  });
  const meta = s.check.metadata;
  return setCondition(setCondition(next.conditions, ready, now, meta.generation), prog, now, meta.generation);
}

/**
 * The Machines in flight, as Progressing names them: the path, unreadable, the owner's answer. WaitingForRemediation is
 * named only where it answers (a MachineHealthCheck handed the request on): on the OwnerRemediated path it is
 * JoinGuard's own mark, so the message says nothing its write-ahead did not (docs/decisions/marked-derived-from-the-mark.md).
 */
function flyingNames(
  st: ActiveState,
  flying: readonly string[],
  requests: readonly { machine: string; path: string; answered?: boolean }[],
): string[] {
  const flyingMachines = new Map(flying.map((name) => [name, st.ofCluster.find((x) => x.name === name)]));
  return [...flying].sort().map((name) => {
    const m = flyingMachines.get(name);
    const req = requests.find((x) => x.machine === name);
    const or = m?.ownerRemediated;
    const says = or?.status === 'False' && or.reason && (or.reason !== WAITING || req?.answered === true);
    return (
      `${name} (${req?.path ?? 'mark'}${m === undefined ? ', unreadable' : ''}` +
      `${says ? `, owner says ${or.reason}` : ''})`
    );
  });
}

const WAITING = 'WaitingForRemediation';

/**
 * What every Machine must carry now: marks only while actions are allowed; withdrawals always — but nothing at all
 * on a paused Cluster's Machines (clusterctl move pauses it, then copies them: a write then is lost or stale; the
 * caller drops them). While CAPI cannot see the workload cluster (and during the grace after), no mark or delete is
 * written on a Machine but the first control-plane one, not even for a request made before: its Node may exist
 * unseen. `pausedMhcs` gains the requests a paused MachineHealthCheck holds.
 */
function intentsNow(st: ActiveState, pausedMhcs: string[]): MarkIntent[] {
  const s = st.snap;
  const w = part(st, 'observed');
  const r = part(st, 'remediated');
  const canAct = w.canAct;
  const blind = w.connection.down || w.connection.graceUntil !== undefined;
  const waiting = notDueYet(st, r.requests);
  return (
    markIntents(r.requests, st.ofCluster, {
      ...intentInput(st, st.withdrawAll),
      inScope: new Set(st.inScope.map((m) => m.uid)),
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
      .sort((a, b) => byName(a.machine, b.machine))
  );
}

/** The Paused condition, and the marks left behind under withdraw-all (the finalizer waits for them). */
function pausedNow(st: ActiveState, wanted: readonly MarkIntent[], pausedMhcs: readonly string[]) {
  const { settings, cluster } = st;
  const { requests } = part(st, 'remediated');
  // Requests still open under withdraw-all: their Machine is being deleted, or could not be read (not known clean).
  const stillOpen = requests.filter((x) => x.state === 'Open');
  const isDeleting = (uid: string) => st.anyMachine.get(uid)?.deletingSince !== undefined;
  const withdrawing = st.withdrawAll
    ? {
        left: [
          ...wanted.map((i) => i.machine.name),
          ...stillOpen.filter((x) => !isDeleting(x.uid)).map((x) => `${x.machine} (unreadable)`),
        ],
        deleting: stillOpen.filter((x) => isDeleting(x.uid)).map((x) => x.machine),
        ...(st.deletion ? { note: deletionNote(st.deletion) } : {}),
      }
    : undefined;
  const paused = pausedCondition({
    specPaused: settings.paused,
    cluster,
    // By text, as every list in a message: the same pauses say the same whatever order the caches list Machines in.
    pausedMhcs: [...pausedMhcs].sort(compareText),
    verdicts: part(st, 'judged').verdicts,
    ...(withdrawing ? { withdrawing } : {}),
  });
  return { paused, left: withdrawing?.left ?? [] };
}

/**
 * The requests recorded and not made yet (their mark never seen) whose Machine is not due: decided on the Machine as
 * the caches had it, their write met a 409 whose read shows it was not (DESIGN: "a 409 is a live re-read and a new
 * decision"). Their write waits until the Machine is due — or it joins, and the request is withdrawn. Judged on the
 * times the status keeps, not on this process's memory of earlier ones, so that a restart decides the same.
 */
export function notDueYet(st: ActiveState, requests: readonly RequestRecord[]): Set<string> {
  const w = part(st, 'observed');
  const out = new Set<string>();
  for (const r of requests) {
    // A first control-plane request too: its 409 read may show it provisioned after all (Joining, not due; property
    // seed 8), and once the control plane says initialized no Machine is first (issue 35, 2). The judge applies the
    // first control-plane clocks (from creation) while it is first.
    if (r.state !== 'Open') continue;
    const m = st.byUid.get(r.uid);
    if (m === undefined || made(r, m)) continue;
    // The Machine that initialized the control plane is never marked once it says so, whatever was recorded before
    // (in the selector or not).
    if (w.formerFirst?.uid === m.uid) {
      out.add(r.uid);
      continue;
    }
    const t = st.targets.get(m.uid);
    // Out of the check's scope now (its labels or the selector edited since the request was recorded): not this
    // check's to judge, so not made — it waits, as a Machine not due does, until it is in scope and due, joins or goes
    // (seed 108575863: marked before its deadline after a 409).
    if (t?.inScope !== true) {
      out.add(r.uid);
      continue;
    }
    const ready = t.provisioned ? readiness(m, w.prevObs.get(m.uid), undefined, st.now).at : undefined;
    const ctx = { ...w.ctx, readyAt: new Map(ready !== undefined ? [[m.uid, ready]] : []) };
    if (judgeMachine(m, ctx).state !== 'Stuck') out.add(r.uid);
  }
  return out;
}

export function visibleMark(s: Snapshot, i: Extract<MarkIntent, { want: 'mark' }>): boolean {
  const m = s.machines.find((x) => x.uid === i.machine.uid);
  return m !== undefined && PATHS[i.path].visible(m) && i.marker !== undefined && m.requestedBy !== i.marker;
}

/** "MachineHealthCheck h selects it and is paused" when every MachineHealthCheck that selects the Machine is paused. */
export function pausedMhcOf(s: Snapshot, uid: string): string | undefined {
  const m = s.machines.find((x) => x.uid === uid);
  const sel = m === undefined ? [] : selectingMhcs(m, s.mhcs);
  if (sel.length === 0 || sel.some((h) => !h.paused)) return undefined;
  return `MachineHealthCheck ${sel.map((h) => h.name).join(', ')} selects it and is paused`;
}

/** No valid spec or no Cluster: nothing is judged; only JoinGuard's own marks on joined Machines are withdrawn (not on a paused Cluster's). */
export function idle(st: PlanState): Plan {
  const { next, now, snap: s } = st;
  const meta = s.check.metadata;
  const why =
    st.settings === undefined
      ? {
          reason: ReadyReason.InvalidSpec,
          message:
            `The spec is invalid: ${s.settingsError ?? 'it could not be read'}. ` +
            `JoinGuard does nothing until it is fixed.`,
        }
      : {
          reason: ReadyReason.ClusterNotFound,
          message:
            `Cluster ${meta.namespace}/${st.settings.clusterName} not ` +
            `found: nothing is judged or changed until it exists.`,
        };
  next.conditions = setCondition(
    next.conditions,
    { type: CONDITION_READY, status: 'False', ...why },
    now,
    meta.generation,
  );
  const input = intentInput(st, st.withdrawAll);
  const wanted = markIntents(next.requests ?? [], st.ofCluster, input).filter((i) => i.want === 'withdraw');
  // Nothing at all on a paused Cluster's Machines (describe.ts says why).
  const paused = st.cluster?.paused === true;
  const intents = paused ? [] : wanted;
  const names = wanted.map((i) => i.machine.name);
  const check = finalizerIntent(s.check, st.deletion, names, paused, now, unrefused(s, wanted));
  const wakeAt = st.deletion && st.deletion.until > now ? { wakeAt: st.deletion.until } : {};
  const view = { readyAt: new Map<string, number>(), pending: new Set<string>() };
  const base = { verdicts: [], settledInScope: st.settledInScope, events: [], memoryNotes: st.memoryNotes, view };
  return { ...base, status: next, intents, confirm: [], check, ...wakeAt };
}

/** A withdrawal is wanted on a Machine whose writes the apiserver has not refused (this process's memory). */
function unrefused(s: Snapshot, wanted: readonly MarkIntent[]): boolean {
  const refused = new Set((s.refusedWrites ?? []).map((x) => x.uid));
  return wanted.some((i) => i.want === 'withdraw' && !refused.has(i.machine.uid));
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

export function intentInput(st: PlanState, withdrawAll: boolean): IntentInput {
  const s = st.snap;
  const { uid, name, deletionTimestamp } = s.check.metadata;
  return {
    joined: st.joined,
    checkName: name,
    withdrawAll,
    deleting: deletionTimestamp !== undefined,
    ...(uid !== undefined ? { checkUid: uid } : {}),
    ...(s.checkUids !== undefined ? { liveChecks: s.checkUids } : {}),
    ...(s.unansweredAfterMs !== undefined ? { unansweredAfterMs: s.unansweredAfterMs } : {}),
  };
}
