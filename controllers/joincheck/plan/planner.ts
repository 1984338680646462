// The planner: Snapshot -> Plan, pure (no I/O; `s.now` is the one clock). What to do is derived each pass from
// the world and the check's persisted memory (validated on read); the Plan's status is the complete next
// status, and its intents say what every Machine must carry now, so a restarted controller plans the same and
// the executor converges whatever failed before. plan() is DESIGN's pass as a pipeline, one stage per room:
//   follow     the memory, and each request as its Machine shows it now          (observe.ts, marks.ts)
//   observe    the Cluster, the connection, the first control-plane Machine      (observe.ts)
//   judge      one verdict per Machine; the first control-plane rule in its own stage (verdicts.ts)
//   remediate  counted failures, paths and guards, the requests made            (remediate.ts, guards.ts)
//   describe   counts, conditions, what every Machine and the check must carry  (describe.ts, conditions.ts)
//   wake       the next moment the plan changes with no event                    (here)
import { CONDITION_READY, ReadyReason } from '../../../api/v1alpha1/types.js';
import { setCondition } from '../report/conditions.js';
import { finalizerIntent } from '../requests/deletion.js';
import { describe, intentInput } from './describe.js';
import { markIntents, UNANSWERED_AFTER_MS } from '../requests/marks.js';
import { follow, observe, type Followed, type Observed } from './observe.js';
import { remediate, type Remediated } from './remediate.js';
import { earliestAfter, ms } from '../time.js';
import type { Plan, Snapshot } from '../types.js';
import { judgeScope, type Judged } from './verdicts.js';
import { nextCanaryAt } from '../guards/failures.js';

export function plan(s: Snapshot): Plan {
  const f = follow(s);
  if (f.settings === undefined || f.cluster === undefined) return idle(s, f);
  const w = observe(s, f, f.settings, f.cluster);
  const j = judgeScope(s, f, w);
  const r = remediate(s, f, w, j);
  const intents = describe(s, f, w, j, r);
  const wakeAt = wake(s, f, w, j, r);
  const verdicts = j.verdicts;
  return {
    verdicts,
    settledInScope: f.settledInScope,
    status: f.next,
    intents,
    confirm: r.confirm,
    events: w.canAct ? f.events : f.events.filter((e) => e.on === 'Check' && e.reason === 'SuspicionCleared'),
    check: w.check,
    ...(j.probe ? { probe: j.probe } : {}),
    ...(wakeAt !== undefined ? { wakeAt } : {}),
    memoryNotes: f.memoryNotes,
    view: {
      readyAt: w.ctx.readyAt,
      ...(w.controlPlaneInitializedAt !== undefined ? { controlPlaneInitializedAt: w.controlPlaneInitializedAt } : {}),
      pending: new Set(verdicts.filter((v) => v.state !== 'Joined' && v.state !== 'Deleting').map((v) => v.uid)),
    },
  };
}

/** No valid spec or no Cluster: nothing is judged; only JoinGuard's own marks on joined Machines are withdrawn (not on a paused Cluster's). */
function idle(s: Snapshot, f: Followed): Plan {
  const meta = s.check.metadata;
  const why =
    f.settings === undefined
      ? {
          reason: ReadyReason.InvalidSpec,
          message:
            `The spec is invalid: ${s.settingsError ?? 'it could not be read'}. ` +
            `JoinGuard does nothing until it is fixed.`,
        }
      : {
          reason: ReadyReason.ClusterNotFound,
          message:
            `Cluster ${meta.namespace}/${f.settings.clusterName} not ` +
            `found: nothing is judged or changed until it exists.`,
        };
  f.next.conditions = setCondition(
    f.next.conditions,
    { type: CONDITION_READY, status: 'False', ...why },
    s.now,
    meta.generation,
  );
  const wanted = markIntents(f.next.requests ?? [], f.ofCluster, intentInput(s, f.withdrawAll)).filter(
    (i) => i.want === 'withdraw',
  );
  // Nothing at all on a paused Cluster's Machines (describe.ts says why).
  const intents = f.cluster?.paused === true ? [] : wanted;
  const check = finalizerIntent(
    s.check,
    f.deletion,
    wanted.map((i) => i.machine.name),
    f.cluster?.paused === true,
    s.now,
  );
  const wakeAt = f.deletion && f.deletion.until > s.now ? { wakeAt: f.deletion.until } : {};
  const view = { readyAt: new Map<string, number>(), pending: new Set<string>() };
  const base = { verdicts: [], settledInScope: f.settledInScope, events: f.events, memoryNotes: f.memoryNotes, view };
  return { ...base, status: f.next, intents, confirm: [], check, ...wakeAt };
}

/** The next moment the plan changes with no event: a deadline, a grace, an extension, a canary, an unanswered bound. */
function wake(s: Snapshot, f: Followed, w: Observed, j: Judged, r: Remediated): number | undefined {
  const { next, deletion } = f;
  for (const v of j.verdicts) if (v.state === 'Provisioning' || v.state === 'Joining') w.wake.push(v.deadline);
  w.wake.push(w.connection.graceUntil, ms(next.firstControlPlane?.extendedUntil), deletion?.until);
  if (w.canAct && next.suspicion !== undefined) w.wake.push(nextCanaryAt(next.suspicion, w.settings, s.now));
  const unanswered = s.unansweredAfterMs ?? UNANSWERED_AFTER_MS;
  for (const x of r.requests)
    if (x.state === 'Open' && !x.answered && x.markedTime !== undefined)
      w.wake.push((ms(x.markedTime) ?? s.now) + unanswered);
  return earliestAfter(s.now, w.wake);
}
