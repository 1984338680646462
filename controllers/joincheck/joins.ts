// Join events and join durations. A join event is proof that Machines can join (credential and network
// path work): it resets the consecutive-failure counter and clears a suspicion. It is a Machine seen not
// joined before (status.observations) that is now joined, or, to cover a join that happened while the
// controller was down, a joined Machine created after the newest failure while there is something to
// reset. A Machine already joined at first sight only proves that some Machine joined once (everJoined).
// A Node that appeared and went bad is MHC's business: it is still joined and resets nothing.
import type { MachineFacts } from '../../api/capi/model.js';
import type { JoinDurationsStatus, MachineJoinCheckStatus, MachineObservation } from '../../api/v1alpha1/types.js';
import { STATUS_LIMITS } from '../../api/v1alpha1/types.js';
import { joinClockStart } from './clocks.js';
import type { Work } from './context.js';
import { newestFailureTime } from './failures.js';
import { MINUTE, SECOND, formatDuration, ms } from './time.js';

export interface JoinedMachine {
  machine: MachineFacts;
  /** Its join clock start, for the join duration. */
  clockStart: number;
}

export interface JoinEventInput {
  joined: JoinedMachine[];
  /** UIDs the previous status saw not joined. */
  seenNotJoined: ReadonlySet<string>;
  newestFailureTime?: number;
  /** Something to reset: a consecutive count above 0 or a suspicion. */
  somethingToReset: boolean;
  durations?: JoinDurationsStatus;
  now: number;
}

export interface JoinEventResult {
  /** Machines whose join is a join event, by name. */
  events: string[];
  durations?: JoinDurationsStatus;
}

export function joinEvents(input: JoinEventInput): JoinEventResult {
  const events: string[] = [];
  let durations = input.durations;
  for (const { machine: m, clockStart } of input.joined) {
    const seen = input.seenNotJoined.has(m.uid);
    const afterFailure =
      !seen && input.somethingToReset && input.newestFailureTime !== undefined && m.createdAt > input.newestFailureTime;
    if (!seen && !afterFailure) continue;
    events.push(m.name);
    durations = addJoinDuration(durations, Math.max(0, Math.round((input.now - clockStart) / SECOND)));
  }
  return { events, durations };
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1] as number;
}

/** A joinTimeout that the observed joins fit in: 1.5 × p95, rounded up to a minute, at least 2m. */
export function suggestedJoinTimeout(p95Seconds: number): string {
  const minutes = Math.max(2, Math.ceil((1.5 * p95Seconds * SECOND) / MINUTE));
  return formatDuration(minutes * MINUTE);
}

export function addJoinDuration(prev: JoinDurationsStatus | undefined, seconds: number): JoinDurationsStatus {
  const recentSeconds = [...(prev?.recentSeconds ?? []), seconds].slice(-STATUS_LIMITS.joinDurationSamples);
  const sorted = [...recentSeconds].sort((a, b) => a - b);
  const p95 = percentile(sorted, 95);
  return {
    count: (prev?.count ?? 0) + 1,
    p50Seconds: percentile(sorted, 50),
    p95Seconds: p95,
    maxSeconds: Math.max(prev?.maxSeconds ?? 0, seconds),
    suggestedJoinTimeout: suggestedJoinTimeout(p95),
    recentSeconds,
  };
}

/**
 * Applies this plan's join events to the next status: everJoined, the consecutive count reset, the
 * suspicion cleared (with its event), the join durations. `seenBefore` is the previous plan's observations.
 */
export function applyJoins(
  w: Work,
  seenBefore: ReadonlyMap<string, MachineObservation>,
  clocks: { controlPlaneInitializedAt?: number; previousFirst?: MachineJoinCheckStatus['firstControlPlaneRemediation'] },
): void {
  const { next } = w;
  const joined: JoinedMachine[] = w.inScope
    .filter((m) => w.verdicts.get(m.uid)?.state === 'Joined')
    .map((m) => {
      const o = seenBefore.get(m.uid);
      const wasFirst = o?.firstControlPlane === true;
      const prevFirst = clocks.previousFirst;
      const notBefore = wasFirst && prevFirst !== undefined && prevFirst.uid !== m.uid ? ms(prevFirst.finishedTime) : undefined;
      const start = joinClockStart(m, { firstControlPlane: wasFirst, controlPlaneInitializedAt: clocks.controlPlaneInitializedAt, readySeen: ms(o?.readySeen), notBefore });
      return { machine: m, clockStart: start };
    });
  if (joined.length > 0) next.everJoined = true;
  const r = joinEvents({
    joined,
    seenNotJoined: new Set(seenBefore.keys()),
    newestFailureTime: newestFailureTime(w.prev.recentFailures),
    somethingToReset: (next.consecutiveJoinFailures ?? 0) > 0 || next.suspicion !== undefined,
    durations: next.joinDurations,
    now: w.now,
  });
  if (r.durations !== undefined) next.joinDurations = r.durations;
  if (r.events.length === 0) return;
  next.consecutiveJoinFailures = 0;
  if (next.suspicion !== undefined) {
    w.actions.push({
      type: 'CheckEvent',
      reason: 'SuspicionCleared',
      message: `Machine ${r.events.join(', ')} joined: Machines can join again, so the suspicion raised at ${next.suspicion.since} is cleared.`,
      warning: false,
    });
    delete next.suspicion;
  }
}
