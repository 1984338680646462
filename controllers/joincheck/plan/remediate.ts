// The planner's remediate stage (DESIGN: "Guards, in the order they apply"; "How a replacement is asked of CAPI"):
// every Stuck Machine not handled before, oldest deadline first, is counted as a failure once, given its path, and
// put through the guards (guards.ts); what passes is asked, what is held says why — in the words the next plan will
// find. Then the per-Machine memory (remediate-memory.ts) and the stops whose evidence is state.
import type { MachineFacts } from '../../../api/capi/model.js';
import type { Hold as HoldWord, OwnerWindow, RemediationRecord, RequestRecord } from '../../../api/v1alpha1/types.js';
import { guardChain, type GuardResult, type GuardState } from '../guards/guards.js';
import { appendHistory, newRequest } from '../requests/marks.js';
import { earliestAfter, iso, ms } from '../time.js';
import { byName } from '../words.js';
import type { MachineVerdict, Plan, PlannedEvent } from '../types.js';
import { rolloutSuspect } from '../rules/rollout-suspect.js';
import { HOLD_OF_STOP } from '../report/timed.js';
import { Stops } from '../report/conditions.js';
import { UNANSWERED_AFTER_MS } from '../requests/marks.js';
import { rolloutWorld } from './judge.js';
import { type PathChoice, choosePath, ownerRef, target } from '../requests/paths.js';
import { countFailure, nextCanaryAt, spendCanary } from '../guards/failures.js';
import { inFlight, recordOwnerRequest, trimWindows, keptFrom, maxInFlightLimit } from '../guards/budgets.js';
import { assign } from './observe.js';
import { part, type ActiveState, type Remediated } from './state.js';
import { confirmations, notMadeOverBudget, observations, refusedUnmade, stateStops } from './remediate-memory.js';

type Hold = { m: MachineFacts; v: MachineVerdict; loop: GuardResult & { go: false } };

/** The running decisions of one remediate stage, Machine by Machine (what the guards see as `asked`). */
interface Round {
  requests: RequestRecord[];
  history: RemediationRecord[];
  ownerWindows: OwnerWindow[];
  canaryTaken: boolean;
  flying: string[];
  confirm: Plan['confirm'];
  failed: Map<string, string>;
  /** Machines whose counted failure was a provision timeout: a join timeout of theirs still counts (once). */
  provisionOnly: Set<string>;
  wouldAsk: string[];
  pausedMhcs: string[];
  deleteNotAllowed: string[];
  holds: Hold[];
  held: Map<string, HoldWord>;
  stops: Stops;
  events: PlannedEvent[];
  wakes: (number | undefined)[];
}

export function remediate(st: ActiveState): { remediated: Remediated } {
  const { next, settings } = st;
  const w = part(st, 'observed');
  const { verdicts } = part(st, 'judged');
  // A request whose mark or delete the apiserver refuses (this process's memory) was never made: it holds no budget
  // while it is reported and retried (DESIGN: a refused write never holds back another Machine's mark; issue 35, 3).
  const refused = refusedUnmade(st, next.requests ?? []);
  const rd = newRound(st, refused);
  const handled = new Set((next.requests ?? []).map((r) => r.uid));
  const candidates = st.inScope
    .map((m, i) => ({ m, v: verdicts[i]! }))
    .filter(({ m, v }) => v.state === 'Stuck' && !handled.has(m.uid))
    .sort((a, b) => (a.v.deadline ?? 0) - (b.v.deadline ?? 0) || byName(a.m, b.m));
  for (const { m, v } of w.canAct ? candidates : []) decide(st, rd, m, v);
  settleHolds(st, rd);
  assign(next, 'requests', rd.requests);
  assign(next, 'remediations', rd.history);
  assign(next, 'ownerWindows', rd.ownerWindows.length > 0 ? rd.ownerWindows : undefined);
  observations(st, verdicts, rd.failed, rd.provisionOnly);
  // An emptied memory is no memory (the next plan reads it back as none: planning twice must change nothing).
  if (next.firstControlPlane !== undefined && Object.keys(next.firstControlPlane).length === 0)
    delete next.firstControlPlane;
  stateStops(st, rd.stops, verdicts, rd.requests, rd.wouldAsk);
  const limit = maxInFlightLimit(settings, st.expected);
  const overBudget = notMadeOverBudget(st, rd.requests, rd.flying, refused, limit);
  const { requests, flying, confirm, pausedMhcs, deleteNotAllowed, held, stops, events } = rd;
  const wakeAt = earliestAfter(st.now, [...rd.wakes, ...laterWakes(st, w.canAct, requests)]);
  return {
    remediated: { requests, flying, confirm, pausedMhcs, deleteNotAllowed, held, overBudget, stops, events, wakeAt },
  };
}

function newRound(st: ActiveState, refused: ReadonlySet<string>): Round {
  const { next, settings, now } = st;
  const prevObs = part(st, 'observed').prevObs;
  const stops = new Stops();
  for (const x of [...part(st, 'observed').waits, ...part(st, 'judged').waits]) stops.wait(x);
  const flying = inFlight(
    st.ofCluster,
    (next.requests ?? []).filter((r) => !refused.has(r.uid)),
    st.unreadable,
    st.snap.check.metadata.uid,
  );
  return {
    requests: [...(next.requests ?? [])],
    history: next.remediations ?? [],
    ownerWindows: trimWindows(next.ownerWindows, keptFrom(now, settings, next.lastResume?.time)),
    canaryTaken: false,
    flying,
    confirm: confirmations(st),
    failed: new Map<string, string>(
      [...prevObs].flatMap(([uid, o]) => (o.failedAt !== undefined ? [[uid, o.failedAt]] : [])),
    ),
    provisionOnly: new Set(
      [...prevObs].flatMap(([uid, o]) =>
        o.failedAt !== undefined && o.failedKind === 'ProvisionTimeout' ? [uid] : [],
      ),
    ),
    wouldAsk: [],
    pausedMhcs: [],
    deleteNotAllowed: [],
    holds: [],
    held: new Map(),
    stops,
    events: [],
    wakes: [],
  };
}

/** What the guards see of the round: its requests since the last resume, the canary, the budgets. */
function asked(st: ActiveState, rd: Round, requests: readonly RequestRecord[]): GuardState {
  const { next } = st;
  const sinceResume = requests.filter((r) => r.time >= (next.lastResume?.time ?? ''));
  const { canaryTaken, flying, ownerWindows } = rd;
  return { status: next, requests: sinceResume, canaryTaken, flying, ownerWindows };
}

/** One Stuck Machine: its failure counted once, its path, the guards; asked, reported or held. */
function decide(st: ActiveState, rd: Round, m: MachineFacts, v: MachineVerdict): void {
  const { next, settings, now, snap: s } = st;
  const { fresh, raisedNow } = countOnce(st, rd, m, v);
  const held = (word: HoldWord): void => {
    rd.held.set(m.uid, word);
    if (fresh) rd.events.push(stuckEvent(m, v));
  };
  if (v.firstControlPlane && next.firstControlPlane?.misconfigured !== undefined) {
    rd.stops.add('FirstControlPlaneReplacementMisconfigured', '', m.name);
    return held('FirstControlPlaneReplacementMisconfigured');
  }
  const choice: PathChoice =
    part(st, 'observed').formerFirst?.uid === m.uid
      ? {
          kind: 'report',
          why: 'it initialized the control plane, which now says initialized: it is never marked again',
        }
      : choosePath(m, settings, s.mhcs, s.capi, v.firstControlPlane === true);
  if (choice.kind === 'blocked') {
    rd.pausedMhcs.push(`${choice.why}: ${m.name} is left to it`);
    return held('MachineHealthCheckPaused');
  }
  // Strategy Delete without --allow-machine-delete: nothing is deleted and nothing recorded, so the Machine is
  // deleted once the flag is on; Ready says why (MachineDeleteNotAllowed).
  if (choice.kind === 'request' && choice.path === 'Delete' && s.allowMachineDelete !== true) {
    rd.deleteNotAllowed.push(m.name);
    rd.stops.wait(`${m.name} is not deleted: JoinGuard runs without --allow-machine-delete (see the Ready condition)`);
    return held('MachineDeleteNotAllowed');
  }
  if (choice.kind === 'report') return reportOnly(st, rd, m, v, choice.why);
  const gate = guardChain(st, { m, v, raisedNow, asked: asked(st, rd, next.requests ?? []) });
  if (!gate.go) {
    rd.holds.push({ m, v, loop: gate });
    if (fresh) rd.events.push(stuckEvent(m, v));
    return;
  }
  if (gate.canary) rd.canaryTaken = true;
  // Spent in a dry run too: it shows the cadence the real thing would keep (one would-be canary per interval).
  if (gate.canary && next.suspicion !== undefined) next.suspicion = spendCanary(next.suspicion, settings, now);
  ask(st, rd, m, v, choice, gate.canary);
}

/** Counted as a failure once (a join timeout after a counted provision timeout once more). */
function countOnce(
  st: ActiveState,
  rd: Round,
  m: MachineFacts,
  v: MachineVerdict,
): { fresh: boolean; raisedNow: boolean } {
  const joinAfterProvision = rd.provisionOnly.has(m.uid) && v.failureKind === 'JoinTimeout';
  const fresh = !rd.failed.has(m.uid) || joinAfterProvision;
  if (!fresh) return { fresh, raisedNow: false };
  rd.confirm.push({ ...target(m), byWrite: true });
  rd.failed.set(m.uid, iso(st.now));
  if (v.failureKind === 'ProvisionTimeout') rd.provisionOnly.add(m.uid);
  else rd.provisionOnly.delete(m.uid);
  const rollouts = rolloutWorld(st);
  const raisedNow = countFailure(
    st.next,
    m,
    v,
    st.anyMachine,
    st.settings,
    st.cluster,
    st.now,
    rd.events,
    (x) => rolloutSuspect(x, rollouts), // [rollout-suspect]
    joinAfterProvision,
  );
  return { fresh, raisedNow };
}

function stuckEvent(m: MachineFacts, v: MachineVerdict): PlannedEvent {
  return {
    on: 'Machine',
    machine: target(m),
    reason: v.failureKind === 'ProvisionTimeout' ? 'ProvisionTimedOut' : 'JoinTimedOut',
    warning: true,
    message: `Machine ${m.name}: ${v.reason}`,
  };
}

function reportOnly(st: ActiveState, rd: Round, m: MachineFacts, v: MachineVerdict, why: string): void {
  const r = newRequest(m, v, 'Report', 'Reported', st.now);
  rd.requests.push(r);
  rd.history = appendHistory(rd.history, r, 'Reported');
  rd.events.push({
    on: 'Machine',
    machine: target(m),
    reason: 'RemediationSkipped',
    warning: true,
    message: `Machine ${m.name}: ${v.reason}. JoinGuard does not remediate it: ${why}. Reported only.`,
  });
}

/** Past the guards: the request recorded (a dry run's too), and what it fills. */
function ask(
  st: ActiveState,
  rd: Round,
  m: MachineFacts,
  v: MachineVerdict,
  choice: Extract<PathChoice, { kind: 'request' }>,
  canary: boolean,
): void {
  const { settings, now, next } = st;
  const r = newRequest(m, v, choice.path, settings.dryRun ? 'DryRun' : 'Open', now, canary);
  rd.requests.push(r);
  rd.history = appendHistory(rd.history, r, settings.dryRun ? 'DryRun' : 'Requested', m);
  if (settings.dryRun) {
    rd.wouldAsk.push(`${m.name} via ${choice.path}`);
    rd.events.push({
      on: 'Machine',
      machine: target(m),
      reason: 'RemediationSkipped',
      warning: false,
      message:
        `dry run: Machine ${m.name}: ${v.reason}. JoinGuard would ` +
        `ask for its replacement via ${choice.via} (path ${choice.path}).`,
    });
    return;
  }
  rd.flying.push(m.name);
  rd.ownerWindows = recordOwnerRequest(rd.ownerWindows, ownerRef(m), now);
  if (v.firstControlPlane) (next.firstControlPlane ??= {}).replaced = { machine: m.name, uid: m.uid, time: iso(now) };
}

/**
 * Why each held Machine waits, as the guards see it once this plan's requests are made (a canary taken, budgets
 * filled): the words the next plan will find, whatever order the Machines were decided in.
 */
function settleHolds(st: ActiveState, rd: Round): void {
  const final = asked(st, rd, rd.requests);
  for (const h of rd.holds) {
    const g = guardChain(st, { m: h.m, v: h.v, raisedNow: false, asked: final });
    const why = g.go ? h.loop : g;
    rd.wakes.push(why.until);
    // The one gate that waits is KubeadmControlPlane's (its retry period, one remediation at a time).
    const word = 'wait' in why ? 'OwnerBusy' : HOLD_OF_STOP[why.stop];
    if (word !== undefined) rd.held.set(h.m.uid, word);
    if ('wait' in why) rd.stops.wait(why.wait);
    else rd.stops.add(why.stop, why.note, h.m.name);
  }
}

/** The next canary, and each open request's unanswered bound. */
function laterWakes(st: ActiveState, canAct: boolean, requests: readonly RequestRecord[]): (number | undefined)[] {
  const { next, now, snap: s } = st;
  const out: (number | undefined)[] = [];
  if (canAct && next.suspicion !== undefined) out.push(nextCanaryAt(next.suspicion, st.settings, now));
  const unanswered = s.unansweredAfterMs ?? UNANSWERED_AFTER_MS;
  for (const x of requests)
    if (x.state === 'Open' && !x.answered && x.markedTime !== undefined)
      out.push((ms(x.markedTime) ?? now) + unanswered);
  return out;
}
