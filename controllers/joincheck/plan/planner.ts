// The planner: Snapshot -> Plan, pure (no I/O; the Snapshot's `now` is the one clock). What to do is derived each pass
// from the world and the check's persisted memory (validated on read); the Plan's status is the complete next
// status, and its intents say what every Machine must carry now, so a restarted controller plans the same and
// the executor converges whatever failed before. plan() is DESIGN's pass as a pipeline: one PlanState built once
// from the Snapshot (state.ts), then STAGES in order, each returning its own part of it:
//   follow     each request as its Machine shows it now                         (observe.ts, marks.ts)
//   observe    the Cluster, the connection, the first control-plane Machine      (observe.ts)
//   judge      one verdict per Machine; the first control-plane rule in its own step (judge.ts, verdict-rules.ts)
//   remediate  counted failures, paths and guards, the requests made            (remediate.ts, guards.ts)
//   describe   counts, conditions, what every Machine and the check must carry  (describe.ts, conditions.ts)
// No valid spec or no Cluster: follow, then idle (describe.ts). The next wake is folded from each part's wakeAt.
import type { Plan, Snapshot } from '../types.js';
import { describe, idle } from './describe.js';
import { judge } from './judge.js';
import { follow, observe } from './observe.js';
import { remediate } from './remediate.js';
import { isActive, planState, type Parts } from './state.js';

/** The stages of a pass, in order: each reads the state and the parts before it, and returns its own part. */
export const STAGES = [follow, observe, judge, remediate, describe] as const;

export function plan(s: Snapshot): Plan {
  const st = planState(s);
  if (!isActive(st)) {
    Object.assign(st.parts, follow(st));
    return idle(st);
  }
  for (const stage of STAGES) Object.assign(st.parts, stage(st));
  // The Plan, from the parts: every stage's events in stage order; the wake folded with one min.
  const { followed: f, observed: w, judged: j, remediated: r, described: d } = st.parts as Parts;
  const events = [...w.events, ...j.events, ...r.events, ...d.events];
  const wakes = [f.wakeAt, w.wakeAt, j.wakeAt, r.wakeAt].filter((t) => t !== undefined);
  const wakeAt = wakes.length > 0 ? Math.min(...wakes) : undefined;
  const verdicts = j.verdicts;
  return {
    verdicts,
    settledInScope: st.settledInScope,
    status: st.next,
    intents: d.intents,
    confirm: r.confirm,
    events: w.canAct ? events : events.filter((e) => e.on === 'Check' && e.reason === 'SuspicionCleared'),
    check: d.check,
    ...(j.probe ? { probe: j.probe } : {}),
    ...(wakeAt !== undefined ? { wakeAt } : {}),
    memoryNotes: st.memoryNotes,
    view: {
      readyAt: w.ctx.readyAt,
      ...(w.controlPlaneInitializedAt !== undefined ? { controlPlaneInitializedAt: w.controlPlaneInitializedAt } : {}),
      pending: new Set(verdicts.filter((v) => v.state !== 'Joined' && v.state !== 'Deleting').map((v) => v.uid)),
    },
  };
}
