// The planner's judge stage: one verdict per Machine in scope (judge.ts), the first control-plane Machine's in
// its own stage (first-control-plane.ts), and what the joins seen mean for the failure memory (a join resets the
// count and clears the suspicion) and for the join durations.
import type { MachineFacts } from '../../../api/capi/model.js';
import { addJoinDuration } from '../report/conditions.js';
import { judgeFirstControlPlane } from '../rules/first-control-plane.js';
import { joinClockStart, judge } from '../rules/judge.js';
import type { Followed, Observed } from './observe.js';
import { clearRolloutIfOver, type RolloutWorld } from '../rules/rollout-suspect.js';
import { MOVED_WITH_CHECK_MS } from '../memory/memory.js';
import { ms, trusted } from '../time.js';
import type { MachineVerdict, Plan, Snapshot } from '../types.js';
import { joinSeen } from '../guards/failures.js';
import { byName } from '../words.js';

export interface Judged {
  /** By index of `inScope`. */
  verdicts: MachineVerdict[];
  probe?: Plan['probe'];
}

export function judgeScope(s: Snapshot, f: Followed, w: Observed): Judged {
  const { next } = f;
  const first = w.first !== undefined && w.inScope.includes(w.first) ? w.first : undefined;
  let probe: Plan['probe'];
  const verdicts = w.inScope.map((m) => {
    if (m !== first) return judge(m, w.ctx);
    const handled = (next.requests ?? []).some((r) => r.uid === m.uid);
    const j = judgeFirstControlPlane(m, w.ctx, {
      act: w.canAct,
      handled,
      memory: () => (next.firstControlPlane ??= {}),
      probe: s.endpointProbe,
    });
    probe = j.probe;
    w.wake.push(j.retryAt);
    if (j.wait !== undefined) w.stops.wait(j.wait);
    return j.verdict;
  });
  if (first === undefined && next.firstControlPlane?.probeRequested !== undefined)
    delete next.firstControlPlane.probeRequested;
  countJoins(s, f, w, verdicts);
  return { verdicts, ...(probe ? { probe } : {}) };
}

/** Join events: everJoined, the consecutive count, the suspicion, and the join durations of the joins seen happen. */
function countJoins(s: Snapshot, f: Followed, w: Observed, verdicts: readonly MachineVerdict[]): void {
  const { next, prev } = f;
  const joinedNow = w.inScope.filter((_, i) => verdicts[i]!.state === 'Joined');
  if (joinedNow.length > 0 || f.settledInScope > 0) next.everJoined = true;
  const newestFailure = Math.max(...(prev.recentFailures ?? []).map((x) => ms(x.time) ?? 0), 0);
  const somethingToReset = (next.consecutiveJoinFailures ?? 0) > 0 || next.suspicion !== undefined;
  // A joined Machine created after the newest failure joined while no controller looked. Not one created with the
  // check: a check created after its own newest failure came with its memory (clusterctl move re-creates the check,
  // then its Machines, each with a new creationTimestamp), and its Machines within MOVED_WITH_CHECK_MS are the moved
  // ones — a join among them is no evidence that Machines can join again.
  const checkCreated = ms(s.check.metadata.creationTimestamp);
  const after =
    checkCreated !== undefined && checkCreated >= newestFailure ? checkCreated + MOVED_WITH_CHECK_MS : newestFailure;
  const joinEvents = joinedNow.filter(
    (m) => w.prevObs.has(m.uid) || (somethingToReset && newestFailure > 0 && m.createdAt > after),
  );
  if (joinEvents.length > 0 && somethingToReset)
    joinSeen(
      next,
      joinEvents.map((m) => m.name),
      f.events,
    );
  // [rollout-suspect] a RolloutSuspect clears once its revision is rolled back.
  clearRolloutIfOver(next, rolloutWorld(s, f), f.events);
  // Join durations of the joins seen happen (by this process, or remembered as not joined).
  // By name: the samples kept must not depend on the order the caches list Machines in.
  const timed: MachineFacts[] = joinedNow
    .filter((m) => joinEvents.includes(m) || s.previous?.pending.has(m.uid) === true)
    .sort(byName);
  const cpInitAt = w.controlPlaneInitializedAt;
  for (const m of timed) {
    const readyAt = Math.max(
      trusted(m.infrastructureReady.since, s.now) ?? m.createdAt,
      trusted(m.bootstrapReady.since, s.now) ?? m.createdAt,
    );
    const start = joinClockStart(m, {
      firstControlPlane: m.controlPlane,
      readyAt,
      ...(cpInitAt !== undefined ? { controlPlaneInitializedAt: cpInitAt } : {}),
    });
    next.joinDurations = addJoinDuration(next.joinDurations, Math.max(0, Math.round((s.now - start) / 1000)));
  }
}

/** What the rollout rule reads of the world (rollout-suspect.ts). */
export function rolloutWorld(s: Snapshot, f: Followed): RolloutWorld {
  return {
    machines: f.ofCluster,
    ...(s.settled ? { settled: s.settled } : {}),
    ...(s.machineSets ? { machineSets: s.machineSets } : {}),
    ...(s.kcp ? { kcp: s.kcp } : {}),
  };
}
