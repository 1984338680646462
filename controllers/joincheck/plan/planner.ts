// The planner: Snapshot -> Plan, pure (no I/O; the Snapshot's `now` is the one clock). What to do is derived each pass
// from the world and the check's persisted memory (validated on read); the Plan's status is the complete next
// status, and its intents say what every Machine must carry now, so a restarted controller plans the same and
// the executor converges whatever failed before. plan() is DESIGN's pass as a pipeline: one PlanState built once
// from the Snapshot (state.ts), then STAGES in order, each returning its own part of it:
//   follow     each request as its Machine shows it now                         (follow.ts, marks.ts)
//   observe    the Cluster, the connection, the first control-plane Machine      (observe.ts)
//   judge      one verdict per Machine; the first control-plane rule in its own step (judge.ts, verdict-rules.ts)
//   remediate  counted failures, paths and guards, the requests made            (remediate.ts, guards.ts)
//   describe   counts, conditions, what every Machine and the check must carry  (describe.ts, conditions.ts)
// The next wake is folded from the moments each part names (the earliest still to come).
import { CONDITION_READY, ReadyReason } from '../../../api/v1alpha1/types.js';
import { setCondition } from '../report/conditions.js';
import { finalizerIntent } from '../requests/deletion.js';
import { markIntents } from '../requests/marks.js';
import { earliestAfter } from '../time.js';
import type { Plan, Snapshot } from '../types.js';
import { describe, intentInput } from './describe.js';
import { follow } from './follow.js';
import { judge } from './judge.js';
import { observe } from './observe.js';
import { remediate } from './remediate.js';
import { isActive, part, planState, type ActiveState, type PlanState } from './state.js';

/** The stages of a pass, in order: each reads the state and the parts before it, and returns its own part. */
export const STAGES = [follow, observe, judge, remediate, describe] as const;

export function plan(s: Snapshot): Plan {
  const st = planState(s);
  if (!isActive(st)) {
    Object.assign(st.parts, follow(st));
    return idle(st);
  }
  for (const stage of STAGES) Object.assign(st.parts, stage(st));
  return assemble(st);
}

/** The Plan, from the parts: the events of every stage in stage order, the wake folded from every part's moments. */
function assemble(st: ActiveState): Plan {
  const [f, w, j, r, d] = [
    part(st, 'followed'),
    part(st, 'observed'),
    part(st, 'judged'),
    part(st, 'remediated'),
    part(st, 'described'),
  ];
  const events = [...w.events, ...j.events, ...r.events, ...d.events];
  const wakeAt = earliestAfter(st.now, [...f.wakes, ...w.wakes, ...j.wakes, ...r.wakes]);
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

/** No valid spec or no Cluster: nothing is judged; only JoinGuard's own marks on joined Machines are withdrawn (not on a paused Cluster's). */
function idle(st: PlanState): Plan {
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
  const wanted = markIntents(next.requests ?? [], st.ofCluster, intentInput(st, st.withdrawAll)).filter(
    (i) => i.want === 'withdraw',
  );
  // Nothing at all on a paused Cluster's Machines (describe.ts says why).
  const paused = st.cluster?.paused === true;
  const intents = paused ? [] : wanted;
  const names = wanted.map((i) => i.machine.name);
  const check = finalizerIntent(s.check, st.deletion, names, paused, now);
  const wakeAt = st.deletion && st.deletion.until > now ? { wakeAt: st.deletion.until } : {};
  const view = { readyAt: new Map<string, number>(), pending: new Set<string>() };
  const base = { verdicts: [], settledInScope: st.settledInScope, events: [], memoryNotes: st.memoryNotes, view };
  return { ...base, status: next, intents, confirm: [], check, ...wakeAt };
}
