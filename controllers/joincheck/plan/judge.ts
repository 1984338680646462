// The planner's judge stage: one verdict per Machine in scope (the per-Machine rules are rules/verdict-rules.ts),
// the first control-plane Machine's in its own step (rules/first-control-plane.ts), and what the joins seen mean
// for the failure memory (a join resets the count and clears the suspicion) and for the join durations.
import type { MachineFacts } from '../../../api/capi/model.js';
import { addJoinDuration } from '../report/conditions.js';
import { judgeFirstControlPlane } from '../rules/first-control-plane.js';
import { joinClockStart } from '../rules/clocks.js';
import { judgeMachine } from '../rules/verdict-rules.js';
import { clearRolloutIfOver, type RolloutWorld } from '../rules/rollout-suspect.js';
import { MOVED_WITH_CHECK_MS } from '../memory/memory.js';
import { earliestAfter, ms, trusted } from '../time.js';
import type { MachineVerdict, Plan, PlannedEvent } from '../types.js';
import { joinSeen } from '../guards/failures.js';
import { byName } from '../words.js';
import { part, type ActiveState, type Judged, type PlanState } from './state.js';

export function judge(st: ActiveState): { judged: Judged } {
  const { next, inScope } = st;
  const w = part(st, 'observed');
  const first = w.first !== undefined && inScope.includes(w.first) ? w.first : undefined;
  let probe: Plan['probe'];
  const waits: string[] = [];
  const wakes: (number | undefined)[] = [];
  const verdicts = inScope.map((m) => {
    if (m !== first) return judgeMachine(m, w.ctx);
    const handled = (next.requests ?? []).some((r) => r.uid === m.uid);
    const j = judgeFirstControlPlane(m, w.ctx, {
      act: w.canAct,
      handled,
      memory: () => (next.firstControlPlane ??= {}),
      probe: st.snap.endpointProbe,
    });
    probe = j.probe;
    wakes.push(j.retryAt);
    if (j.wait !== undefined) waits.push(j.wait);
    return j.verdict;
  });
  if (first === undefined && next.firstControlPlane?.probeRequested !== undefined)
    delete next.firstControlPlane.probeRequested;
  const events: PlannedEvent[] = [];
  countJoins(st, verdicts, events);
  for (const v of verdicts) if (v.state === 'Provisioning' || v.state === 'Joining') wakes.push(v.deadline);
  wakes.push(ms(next.firstControlPlane?.extendedUntil));
  const wakeAt = earliestAfter(st.now, wakes);
  return { judged: { verdicts, ...(probe ? { probe } : {}), waits, events, wakeAt } };
}

/** Join events: everJoined, the consecutive count, the suspicion, and the join durations of the joins seen happen. */
function countJoins(st: ActiveState, verdicts: readonly MachineVerdict[], events: PlannedEvent[]): void {
  const { next, prev } = st;
  const w = part(st, 'observed');
  const joinedNow = st.inScope.filter((_, i) => verdicts[i]!.state === 'Joined');
  if (joinedNow.length > 0 || st.settledInScope > 0) next.everJoined = true;
  const newestFailure = Math.max(...(prev.recentFailures ?? []).map((x) => ms(x.time) ?? 0), 0);
  const somethingToReset = (next.consecutiveJoinFailures ?? 0) > 0 || next.suspicion !== undefined;
  // A joined Machine created after the newest failure joined while no controller looked. Not one created with the
  // check: a check created after its own newest failure came with its memory (clusterctl move re-creates the check,
  // then its Machines, each with a new creationTimestamp), and its Machines within MOVED_WITH_CHECK_MS are the moved
  // ones — a join among them is no evidence that Machines can join again.
  const checkCreated = ms(st.snap.check.metadata.creationTimestamp);
  const after =
    checkCreated !== undefined && checkCreated >= newestFailure ? checkCreated + MOVED_WITH_CHECK_MS : newestFailure;
  const joinEvents = joinedNow.filter(
    (m) => w.prevObs.has(m.uid) || (somethingToReset && newestFailure > 0 && m.createdAt > after),
  );
  if (joinEvents.length > 0 && somethingToReset)
    joinSeen(
      next,
      joinEvents.map((m) => m.name),
      events,
    );
  // [rollout-suspect] a RolloutSuspect clears once its revision is rolled back.
  clearRolloutIfOver(next, rolloutWorld(st), events);
  // Join durations of the joins seen happen (by this process, or remembered as not joined).
  // By name: the samples kept must not depend on the order the caches list Machines in.
  const timed: MachineFacts[] = joinedNow
    .filter((m) => joinEvents.includes(m) || st.snap.previous?.pending.has(m.uid) === true)
    .sort(byName);
  for (const m of timed) addJoinSample(st, m, w.controlPlaneInitializedAt);
}

function addJoinSample(st: ActiveState, m: MachineFacts, cpInitAt: number | undefined): void {
  const now = st.now;
  const readyAt = Math.max(
    trusted(m.infrastructureReady.since, now) ?? m.createdAt,
    trusted(m.bootstrapReady.since, now) ?? m.createdAt,
  );
  const start = joinClockStart(m, {
    firstControlPlane: m.controlPlane,
    readyAt,
    ...(cpInitAt !== undefined ? { controlPlaneInitializedAt: cpInitAt } : {}),
  });
  st.next.joinDurations = addJoinDuration(st.next.joinDurations, Math.max(0, Math.round((now - start) / 1000)));
}

/** What the rollout rule reads of the world (rollout-suspect.ts). */
export function rolloutWorld(st: PlanState): RolloutWorld {
  const s = st.snap;
  return {
    machines: [...st.ofCluster],
    ...(s.settled ? { settled: s.settled } : {}),
    ...(s.machineSets ? { machineSets: s.machineSets } : {}),
    ...(s.kcp ? { kcp: s.kcp } : {}),
  };
}
