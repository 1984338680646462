// Budgets: at most maxInFlight remediations at once (a count, or a percent of expectedMachines rounded
// down, at least 1) and maxPerOwner requests per owner within the window. A resume restarts the window:
// only requests after it count. Reports and dry runs ask nothing of CAPI and count for neither.
import type { CheckSettings, OwnerReference, RemediationRecord } from '../../api/v1alpha1/types.js';
import { listNames } from './messages.js';
import { isInFlight, isRequest, sameOwner } from './records.js';
import { formatDuration, iso, latest, ms } from './time.js';

export function maxInFlightLimit(settings: CheckSettings, expectedMachines: number): number {
  const m = settings.maxInFlight;
  if ('count' in m) return m.count;
  return Math.max(1, Math.floor((m.percent * expectedMachines) / 100));
}

export function windowStart(now: number, settings: CheckSettings, lastResumeTime: string | undefined): number {
  return latest(now - settings.windowMs, ms(lastResumeTime)) as number;
}

export type BudgetCheck =
  | { ok: true }
  | { ok: false; which: 'maxInFlight' | 'maxPerOwner'; frees?: number; message: string };

export function budgetCheck(
  records: RemediationRecord[],
  owner: OwnerReference | undefined,
  settings: CheckSettings,
  expectedMachines: number,
  now: number,
  lastResumeTime: string | undefined,
): BudgetCheck {
  const limit = maxInFlightLimit(settings, expectedMachines);
  const flying = records.filter(isInFlight);
  if (flying.length >= limit) {
    return {
      ok: false,
      which: 'maxInFlight',
      message:
        `maxInFlight ${limit} reached: ${listNames(flying.map((r) => r.machine))} in flight; ` +
        `it frees when one of their old Machines is gone`,
    };
  }
  if (owner === undefined) return { ok: true };
  const start = windowStart(now, settings, lastResumeTime);
  const times = records
    .filter((r) => isRequest(r) && sameOwner(r.owner, owner))
    .map((r) => ms(r.time))
    .filter((t): t is number => t !== undefined && t >= start)
    .sort((a, b) => a - b);
  if (times.length >= settings.maxPerOwner) {
    // It frees when enough of the oldest requests have left the window.
    const oldest = times[times.length - settings.maxPerOwner];
    const frees = oldest === undefined ? undefined : oldest + settings.windowMs;
    return {
      ok: false,
      which: 'maxPerOwner',
      ...(frees !== undefined ? { frees } : {}),
      message:
        `remediation.maxPerOwner ${settings.maxPerOwner} reached for ${owner.kind}/${owner.name} within ` +
        `remediation.window ${formatDuration(settings.windowMs)}` +
        (frees !== undefined ? `; it frees at ${iso(frees)}` : ''),
    };
  }
  return { ok: true };
}
