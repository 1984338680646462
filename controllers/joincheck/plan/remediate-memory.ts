// The remediate stage's bookkeeping around its decisions (remediate.ts): the live reads owed for what was decided
// before it, the per-Machine memory, the stops whose evidence is state, and which requests not made yet wait for
// maxInFlight.
import type { MachineObservation, RequestRecord } from '../../../api/v1alpha1/types.js';
import { STATUS_LIMITS } from '../../../api/v1alpha1/types.js';
import { neverJoinedActive } from '../guards/guards.js';
import type { Stops } from '../report/conditions.js';
import { made } from '../requests/marks.js';
import { target } from '../requests/paths.js';
import type { MachineVerdict, Plan } from '../types.js';
import { compareText, byName } from '../words.js';
import { assign } from './observe.js';
import { part, type ActiveState, type PlanState } from './state.js';

/**
 * Request changes decided before this stage (withdrawn, unanswered) are confirmed live like failures counted in it;
 * a request forgotten because its Machine is not in the caches is confirmed gone by a live read first: a cache that
 * lags (a Machine created after its last event) must not erase a request another process recorded.
 */
export function confirmations(st: PlanState): Plan['confirm'] {
  const { next, prev, byUid } = st;
  const prevState = new Map((prev.requests ?? []).map((r) => [r.uid, r.state]));
  const confirm: Plan['confirm'] = (next.requests ?? [])
    .filter((r) => prevState.get(r.uid) !== r.state && byUid.has(r.uid))
    .map((r) => ({ ...target(byUid.get(r.uid)!), ...(r.withdrawn === 'Joined' ? { byWrite: true as const } : {}) }));
  const kept = new Set((next.requests ?? []).map((r) => r.uid));
  for (const r of prev.requests ?? []) {
    if (r.state === 'Open' && !kept.has(r.uid) && !st.anyMachine.has(r.uid))
      confirm.push({ name: r.machine, namespace: st.snap.check.metadata.namespace, uid: r.uid, resourceVersion: '' });
  }
  return confirm;
}

/**
 * Per-Machine memory, only where no object carries it (see MachineObservation), and every not-joined Machine
 * while there is a count or a suspicion that a join would reset.
 */
export function observations(
  st: ActiveState,
  verdicts: readonly MachineVerdict[],
  failed: ReadonlyMap<string, string>,
  provisionOnly: ReadonlySet<string>,
): void {
  const { next } = st;
  const w = part(st, 'observed');
  const watchAll = (next.consecutiveJoinFailures ?? 0) > 0 || next.suspicion !== undefined;
  const out: MachineObservation[] = [];
  for (const [i, m] of st.inScope.entries()) {
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
  if (st.cluster.paused)
    for (const o of w.prevObs.values()) if (!st.anyMachine.has(o.uid) && !out.some((x) => x.uid === o.uid)) out.push(o);
  out.sort((a, b) => byName({ name: a.machine }, { name: b.machine }));
  assign(next, 'observations', out.length > 0 ? out.slice(0, STATUS_LIMITS.observations) : undefined);
}

/** Stops whose evidence is state, not this plan's candidates. */
export function stateStops(
  st: ActiveState,
  stops: Stops,
  verdicts: readonly MachineVerdict[],
  requests: readonly RequestRecord[],
  wouldAsk: string[],
): void {
  const { next, settings } = st;
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
export function refusedUnmade(st: PlanState, requests: readonly RequestRecord[]): Set<string> {
  const refused = new Set((st.snap.refusedWrites ?? []).filter((x) => x.write !== 'withdraw').map((x) => x.uid));
  return new Set(
    requests.filter((r) => r.state === 'Open' && refused.has(r.uid) && !made(r, st.byUid.get(r.uid))).map((r) => r.uid),
  );
}

/**
 * The open requests not made yet that are not written now: those past maxInFlight once the Machines in flight with a
 * mark are counted, in request order, refused ones last. A request that stopped counting while refused (or one this
 * process no longer remembers as refused, after a restart) waits for the budget like a new one: never more than
 * maxInFlight marks at once.
 */
export function notMadeOverBudget(
  st: PlanState,
  requests: readonly RequestRecord[],
  flying: readonly string[],
  refused: ReadonlySet<string>,
  limit: number,
): Set<string> {
  const notMade = requests
    .filter((r) => r.state === 'Open' && r.path !== 'Report' && !made(r, st.byUid.get(r.uid)))
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
