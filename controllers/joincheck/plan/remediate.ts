// The planner's remediate stage (DESIGN: "Guards, in the order they apply"; "How a replacement is asked of CAPI"):
// every Stuck Machine not handled before, oldest deadline first, is counted as a failure once, given its path, and
// put through the guards (guards.ts); what passes is asked, what is held says why — in the words the next plan will
// find. Then the per-Machine memory and the stops whose evidence is state rather than this plan's candidates.
import type { MachineFacts } from '../../../api/capi/model.js';
import type { Hold as HoldWord, MachineObservation, OwnerWindow, RequestRecord } from '../../../api/v1alpha1/types.js';
import { STATUS_LIMITS } from '../../../api/v1alpha1/types.js';
import { guardChain, neverJoinedActive, type GuardResult, type GuardState, type GuardWorld } from '../guards/guards.js';
import { appendHistory, made, newRequest } from '../requests/marks.js';
import { assign, type Followed, type Observed } from './observe.js';
import { iso } from '../time.js';
import { compareText, byName } from '../words.js';
import type { MachineVerdict, Plan, Snapshot } from '../types.js';
import { rolloutSuspect } from '../rules/rollout-suspect.js';
import { HOLD_OF_STOP } from '../report/timed.js';
import { rolloutWorld, type Judged } from './verdicts.js';
import { type PathChoice, choosePath, ownerRef, target } from '../requests/paths.js';
import { countFailure, spendCanary } from '../guards/failures.js';
import { inFlight, recordOwnerRequest, trimWindows, keptFrom, maxInFlightLimit } from '../guards/budgets.js';

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
  held: Map<string, HoldWord>;
  /** Open requests not made yet whose write waits for maxInFlight (a refused one's retry, issue 35, 3). */
  overBudget: Set<string>;
}

type Hold = { m: MachineFacts; v: MachineVerdict; loop: GuardResult & { go: false } };

export function remediate(s: Snapshot, f: Followed, w: Observed, j: Judged): Remediated {
  const { next, events, anyMachine } = f;
  const { settings, cluster, stops, inScope } = w;
  const verdicts = j.verdicts;
  const handled = new Set((next.requests ?? []).map((r) => r.uid));
  // A request whose mark or delete the apiserver refuses (this process's memory) was never made: it holds no budget
  // while it is reported and retried (DESIGN: a refused write never holds back another Machine's mark; issue 35, 3).
  const refused = refusedUnmade(s, f, next.requests ?? []);
  const flying = inFlight(
    f.ofCluster,
    (next.requests ?? []).filter((r) => !refused.has(r.uid)),
    f.unreadable,
    s.check.metadata.uid,
  );
  const failed = new Map<string, string>(
    [...w.prevObs].flatMap(([uid, o]) => (o.failedAt !== undefined ? [[uid, o.failedAt]] : [])),
  );
  // Machines whose counted failure was a provision timeout: a join timeout of theirs still counts (once).
  const provisionOnly = new Set(
    [...w.prevObs].flatMap(([uid, o]) =>
      o.failedAt !== undefined && o.failedKind === 'ProvisionTimeout' ? [uid] : [],
    ),
  );
  const candidates = inScope
    .map((m, i) => ({ m, v: verdicts[i]! }))
    .filter(({ m, v }) => v.state === 'Stuck' && !handled.has(m.uid))
    .sort((a, b) => (a.v.deadline ?? 0) - (b.v.deadline ?? 0) || byName(a.m, b.m));
  const requests = [...(next.requests ?? [])];
  const confirm = confirmations(s, f);
  let history = next.remediations ?? [];
  let ownerWindows: OwnerWindow[] = trimWindows(next.ownerWindows, keptFrom(s.now, settings, next.lastResume?.time));
  let canaryTaken = false;
  const wouldAsk: string[] = [];
  const pausedMhcs: string[] = [];
  const deleteNotAllowed: string[] = [];
  const holds: Hold[] = [];
  const held = new Map<string, HoldWord>();
  const kcp = s.kcp;
  const guardWorld: GuardWorld = {
    settings,
    machines: anyMachine,
    ...(kcp ? { kcp } : {}),
    kcpMachines: kcp
      ? f.ofCluster.filter((x) => x.owner.kind === 'KubeadmControlPlane' && x.owner.name === kcp.name).length
      : 0,
    initialized: w.initialized,
    expected: w.expected,
    now: s.now,
  };
  const rollouts = rolloutWorld(s, f);
  const sinceResume = (list: readonly RequestRecord[]) => list.filter((r) => r.time >= (next.lastResume?.time ?? ''));
  for (const { m, v } of w.canAct ? candidates : []) {
    let raisedNow = false;
    const joinAfterProvision = provisionOnly.has(m.uid) && v.failureKind === 'JoinTimeout';
    const fresh = !failed.has(m.uid) || joinAfterProvision;
    if (fresh) {
      confirm.push({ ...target(m), byWrite: true });
      failed.set(m.uid, iso(s.now));
      if (v.failureKind === 'ProvisionTimeout') provisionOnly.add(m.uid);
      else provisionOnly.delete(m.uid);
      raisedNow = countFailure(
        next,
        m,
        v,
        anyMachine,
        settings,
        cluster,
        s.now,
        events,
        (x) => rolloutSuspect(x, rollouts), // [rollout-suspect]
        joinAfterProvision,
      );
    }
    const stuckEvent = (): void => {
      if (fresh)
        events.push({
          on: 'Machine',
          machine: target(m),
          reason: v.failureKind === 'ProvisionTimeout' ? 'ProvisionTimedOut' : 'JoinTimedOut',
          warning: true,
          message: `Machine ${m.name}: ${v.reason}`,
        });
    };
    if (v.firstControlPlane && next.firstControlPlane?.misconfigured !== undefined) {
      stops.add('FirstControlPlaneReplacementMisconfigured', '', m.name);
      held.set(m.uid, 'FirstControlPlaneReplacementMisconfigured');
      stuckEvent();
      continue;
    }
    const choice: PathChoice =
      w.formerFirst?.uid === m.uid
        ? {
            kind: 'report',
            why: 'it initialized the control plane, which now says initialized: it is never marked again',
          }
        : choosePath(m, settings, s.mhcs, s.capi, v.firstControlPlane === true);
    if (choice.kind === 'blocked') {
      pausedMhcs.push(`${choice.why}: ${m.name} is left to it`);
      held.set(m.uid, 'MachineHealthCheckPaused');
      stuckEvent();
      continue;
    }
    // Strategy Delete without --allow-machine-delete: nothing is deleted and nothing recorded, so the Machine is
    // deleted once the flag is on; Ready says why (MachineDeleteNotAllowed).
    if (choice.kind === 'request' && choice.path === 'Delete' && s.allowMachineDelete !== true) {
      deleteNotAllowed.push(m.name);
      held.set(m.uid, 'MachineDeleteNotAllowed');
      stops.wait(`${m.name} is not deleted: JoinGuard runs without --allow-machine-delete (see the Ready condition)`);
      stuckEvent();
      continue;
    }
    if (choice.kind === 'report') {
      const r = newRequest(m, v, 'Report', 'Reported', s.now);
      requests.push(r);
      history = appendHistory(history, r, 'Reported');
      events.push({
        on: 'Machine',
        machine: target(m),
        reason: 'RemediationSkipped',
        warning: true,
        message: `Machine ${m.name}: ${v.reason}. JoinGuard does not remediate it: ${choice.why}. Reported only.`,
      });
      continue;
    }
    const gate = guardChain(
      m,
      v,
      raisedNow,
      { status: next, requests: sinceResume(next.requests ?? []), canaryTaken, flying, ownerWindows },
      guardWorld,
    );
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
    history = appendHistory(history, r, settings.dryRun ? 'DryRun' : 'Requested', m);
    if (settings.dryRun) {
      wouldAsk.push(`${m.name} via ${choice.path}`);
      events.push({
        on: 'Machine',
        machine: target(m),
        reason: 'RemediationSkipped',
        warning: false,
        message:
          `dry run: Machine ${m.name}: ${v.reason}. JoinGuard would ` +
          `ask for its replacement via ${choice.via} (path ${choice.path}).`,
      });
      continue;
    }
    flying.push(m.name);
    ownerWindows = recordOwnerRequest(ownerWindows, ownerRef(m), s.now);
    if (v.firstControlPlane)
      (next.firstControlPlane ??= {}).replaced = { machine: m.name, uid: m.uid, time: iso(s.now) };
  }

  // Why each held Machine waits, as the guards see it once this plan's requests are made (a canary taken, budgets
  // filled): the words the next plan will find, whatever order the Machines were decided in.
  const final: GuardState = { status: next, requests: sinceResume(requests), canaryTaken, flying, ownerWindows };
  for (const h of holds) {
    const g = guardChain(h.m, h.v, false, final, guardWorld);
    const why = g.go ? h.loop : g;
    w.wake.push(why.until);
    // The one gate that waits is KubeadmControlPlane's (its retry period, one remediation at a time).
    const word = 'wait' in why ? 'OwnerBusy' : HOLD_OF_STOP[why.stop];
    if (word !== undefined) held.set(h.m.uid, word);
    if ('wait' in why) stops.wait(why.wait);
    else stops.add(why.stop, why.note, h.m.name);
  }

  assign(next, 'requests', requests);
  assign(next, 'remediations', history);
  assign(next, 'ownerWindows', ownerWindows.length > 0 ? ownerWindows : undefined);
  observations(f, w, verdicts, failed, provisionOnly);
  // An emptied memory is no memory (the next plan reads it back as none: planning twice must change nothing).
  if (next.firstControlPlane !== undefined && Object.keys(next.firstControlPlane).length === 0)
    delete next.firstControlPlane;
  stateStops(f, w, verdicts, requests, wouldAsk);
  const overBudget = notMadeOverBudget(f, requests, flying, refused, maxInFlightLimit(settings, w.expected));
  return { requests, flying, confirm, pausedMhcs, deleteNotAllowed, held, overBudget };
}

/**
 * Request changes decided before this stage (withdrawn, unanswered) are confirmed live like failures counted in it;
 * a request forgotten because its Machine is not in the caches is confirmed gone by a live read first: a cache that
 * lags (a Machine created after its last event) must not erase a request another process recorded.
 */
function confirmations(s: Snapshot, f: Followed): Plan['confirm'] {
  const { next, prev, byUid } = f;
  const prevState = new Map((prev.requests ?? []).map((r) => [r.uid, r.state]));
  const confirm: Plan['confirm'] = (next.requests ?? [])
    .filter((r) => prevState.get(r.uid) !== r.state && byUid.has(r.uid))
    .map((r) => ({ ...target(byUid.get(r.uid)!), ...(r.withdrawn === 'Joined' ? { byWrite: true as const } : {}) }));
  const kept = new Set((next.requests ?? []).map((r) => r.uid));
  for (const r of prev.requests ?? []) {
    if (r.state === 'Open' && !kept.has(r.uid) && !f.anyMachine.has(r.uid))
      confirm.push({ name: r.machine, namespace: s.check.metadata.namespace, uid: r.uid, resourceVersion: '' });
  }
  return confirm;
}

/**
 * Per-Machine memory, only where no object carries it (see MachineObservation), and every not-joined Machine
 * while there is a count or a suspicion that a join would reset.
 */
function observations(
  f: Followed,
  w: Observed,
  verdicts: readonly MachineVerdict[],
  failed: ReadonlyMap<string, string>,
  provisionOnly: ReadonlySet<string>,
): void {
  const { next } = f;
  const watchAll = (next.consecutiveJoinFailures ?? 0) > 0 || next.suspicion !== undefined;
  const out: MachineObservation[] = [];
  for (const [i, m] of w.inScope.entries()) {
    if (m.deletingSince !== undefined || verdicts[i]!.state === 'Joined') continue;
    const pin = w.pins.get(m.uid);
    const failedAt = failed.get(m.uid);
    // A moved Machine the carried memory did not watch had joined (the memory watched every not-joined one): its
    // stripped status (no Node until CAPI rebuilds it) is not remembered as not joined, or its Node would be a join.
    const unwatched = !watchAll || (w.movedWithCheck(m) && !w.prevObs.has(m.uid));
    if (pin === undefined && failedAt === undefined && unwatched) continue;
    out.push({
      machine: m.name,
      uid: m.uid,
      ...(pin !== undefined ? { readySeen: pin } : {}),
      ...(failedAt !== undefined ? { failedAt } : {}),
      ...(failedAt !== undefined && provisionOnly.has(m.uid) ? { failedKind: 'ProvisionTimeout' as const } : {}),
    });
  }
  // While the Cluster is paused, a Machine not there is not gone (clusterctl move may be copying it): kept.
  if (w.cluster.paused)
    for (const o of w.prevObs.values()) if (!f.anyMachine.has(o.uid) && !out.some((x) => x.uid === o.uid)) out.push(o);
  out.sort((a, b) => byName({ name: a.machine }, { name: b.machine }));
  assign(next, 'observations', out.length > 0 ? out.slice(0, STATUS_LIMITS.observations) : undefined);
}

/** Stops whose evidence is state, not this plan's candidates. */
function stateStops(
  f: Followed,
  w: Observed,
  verdicts: readonly MachineVerdict[],
  requests: readonly RequestRecord[],
  wouldAsk: string[],
): void {
  const { next } = f;
  const { stops, settings } = w;
  if (next.firstControlPlane?.misconfigured !== undefined)
    stops.add('FirstControlPlaneReplacementMisconfigured', next.firstControlPlane.misconfigured.message);
  for (const v of verdicts)
    if ((v.hold === 'ConnectionDown' || v.hold === 'ConnectionGrace') && v.pastDeadline)
      stops.add('ControlPlaneEndpointUnreachable', '', v.machine);
  if (neverJoinedActive(next, settings)) stops.add('NeverJoined', '');
  if (next.suspicion !== undefined) stops.add(next.suspicion.reason, ''); // [rollout-suspect] either suspicion
  if (settings.dryRun) {
    const stuck = new Set(verdicts.filter((v) => v.state === 'Stuck').map((v) => v.uid));
    for (const r of requests)
      if (r.state === 'DryRun' && stuck.has(r.uid) && !wouldAsk.includes(`${r.machine} via ${r.path}`))
        wouldAsk.push(`${r.machine} via ${r.path}`);
    stops.add('DryRun', '');
    for (const x of wouldAsk) stops.add('DryRun', x);
  }
}

/** The open requests not made yet whose mark or delete the apiserver refused (Snapshot.refusedWrites). */
function refusedUnmade(s: Snapshot, f: Followed, requests: readonly RequestRecord[]): Set<string> {
  const refused = new Set((s.refusedWrites ?? []).filter((x) => x.write !== 'withdraw').map((x) => x.uid));
  return new Set(
    requests.filter((r) => r.state === 'Open' && refused.has(r.uid) && !made(r, f.byUid.get(r.uid))).map((r) => r.uid),
  );
}

/**
 * The open requests not made yet that are not written now: those past maxInFlight once the Machines in flight with a
 * mark are counted, in request order, refused ones last. A request that stopped counting while refused (or one this
 * process no longer remembers as refused, after a restart) waits for the budget like a new one: never more than
 * maxInFlight marks at once.
 */
function notMadeOverBudget(
  f: Followed,
  requests: readonly RequestRecord[],
  flying: readonly string[],
  refused: ReadonlySet<string>,
  limit: number,
): Set<string> {
  const notMade = requests
    .filter((r) => r.state === 'Open' && r.path !== 'Report' && !made(r, f.byUid.get(r.uid)))
    .sort(
      (a, b) =>
        Number(refused.has(a.uid)) - Number(refused.has(b.uid)) ||
        compareText(a.time, b.time) ||
        compareText(a.machine, b.machine),
    );
  const names = new Set(notMade.map((r) => r.machine));
  let room = limit - flying.filter((n) => !names.has(n)).length;
  const out = new Set<string>();
  for (const r of notMade) {
    if (room > 0) room--;
    else out.add(r.uid);
  }
  return out;
}
