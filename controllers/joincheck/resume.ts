// Resume: the `joinguard.io/resume` annotation on the check, with a value not acted on before, clears the
// suspicion, the consecutive count, the never-joined count, the refused owners, the first control-plane
// stop and the per-owner window (only requests after the resume count). The controller records the value
// and removes the annotation; a value already acted on is ignored, so replanning never resumes twice.
import { ANNOTATION_RESUME } from '../../api/v1alpha1/types.js';
import type { Work } from './context.js';
import { iso } from './time.js';

export function pendingResume(w: Work): string | undefined {
  const value = w.s.check.metadata.annotations?.[ANNOTATION_RESUME];
  if (value === undefined || value === w.prev.lastResume?.value) return undefined;
  return value;
}

export function resume(w: Work): void {
  // A resume never bypasses a pause: it waits until actions are allowed.
  if (!w.canAct) return;
  const value = pendingResume(w);
  if (value === undefined) return;
  const { next } = w;
  const cleared: string[] = [];
  if (next.suspicion !== undefined) {
    cleared.push(`the suspicion raised at ${next.suspicion.since}`);
    w.actions.push({
      type: 'CheckEvent',
      reason: 'SuspicionCleared',
      message: `${ANNOTATION_RESUME}=${value}: the suspicion raised at ${next.suspicion.since} is cleared by hand.`,
      warning: false,
    });
  }
  if ((next.refusedOwners ?? []).length > 0) cleared.push(`refusals by ${(next.refusedOwners ?? []).map((o) => `${o.kind}/${o.name}`).join(', ')}`);
  if (next.firstControlPlaneMisconfigured !== undefined) cleared.push('the first control-plane stop');
  delete next.suspicion;
  delete next.refusedOwners;
  delete next.firstControlPlaneMisconfigured;
  delete next.firstControlPlaneRemediation; // a fresh start: the stop would otherwise be re-detected at once
  next.consecutiveJoinFailures = 0;
  next.failuresSinceResume = 0;
  next.lastResume = { value, time: iso(w.now) };
  w.actions.push({ type: 'RemoveResumeAnnotation', value });
  w.actions.push({
    type: 'CheckEvent',
    reason: 'Resumed',
    message:
      `${ANNOTATION_RESUME}=${value}: failure counters and the per-owner window restart now` +
      (cleared.length > 0 ? `; cleared ${cleared.join(', ')}` : '') +
      '. JoinGuard decides again from the current state.',
    warning: false,
  });
}
