// The budgets (DESIGN: "Guards, in the order they apply", 5b), counted from the world: maxInFlight over the Machines
// in flight, maxPerOwner over each owner's requests within remediation.window.
import { carriesAnyMark, type MachineFacts } from '../../api/capi/model.js';
import type { CheckSettings, OwnerReference, OwnerWindow, RequestRecord } from '../../api/v1alpha1/types.js';
import { anyMark, causedMarks } from './marks.js';
import { formatDuration, iso, latest, ms } from './time.js';
import { listNames } from './words.js';

export function maxInFlightLimit(settings: CheckSettings, expectedMachines: number): number {
  const m = settings.maxInFlight;
  if ('count' in m) return m.count;
  return Math.max(1, Math.floor((m.percent * expectedMachines) / 100));
}

/**
 * In flight (by name): Machines in scope, not gone, that JoinGuard asked to replace and has not withdrawn, or that
 * still carry a mark JoinGuard caused (remembered or not: a mark only JoinGuard writes counts even without memory);
 * an open request whose Machine cannot be read counts too (it is not gone).
 */
export function inFlight(
  inScope: readonly MachineFacts[],
  requests: readonly RequestRecord[],
  unreadable: ReadonlySet<string>,
): string[] {
  const byUid = new Map(requests.map((r) => [r.uid, r]));
  const flying = inScope.filter((m) => {
    const r = byUid.get(m.uid);
    if (r?.state === 'Open' && r.path !== 'Report') return true;
    if (r?.state === 'Reported' || r?.state === 'DryRun') return false;
    if (r?.path === 'Delete' && m.deletingSince !== undefined) return true; // being deleted because JoinGuard asked
    if (r === undefined && !carriesAnyMark(m)) return false; // most of a fleet
    return anyMark(causedMarks(m, r?.path));
  });
  const unread = requests.filter((r) => r.state === 'Open' && (unreadable.has(r.uid) || unreadable.has(r.machine)));
  return [...flying.map((m) => m.name), ...unread.map((r) => r.machine)];
}

/** The window of maxPerOwner: starts a window ago, or at the last resume, whichever is later. */
export function windowStart(now: number, settings: CheckSettings, lastResume: string | undefined): number {
  return latest(now - settings.windowMs, ms(lastResume)) as number;
}

/** Request times of each owner still inside the window (the newest maxPerOwner of them: all that can matter). */
export function trimWindows(windows: readonly OwnerWindow[] | undefined, start: number, keep: number): OwnerWindow[] {
  const out: OwnerWindow[] = [];
  for (const w of windows ?? []) {
    const times = w.times.filter((t) => (ms(t) ?? 0) >= start).slice(-Math.max(keep, 1));
    if (times.length > 0) out.push({ kind: w.kind, name: w.name, times });
  }
  return out;
}

export function recordOwnerRequest(
  windows: OwnerWindow[],
  owner: OwnerReference | undefined,
  now: number,
  keep: number,
): OwnerWindow[] {
  if (owner === undefined) return windows;
  const i = windows.findIndex((w) => w.kind === owner.kind && w.name === owner.name);
  const times = [...(i >= 0 ? windows[i]!.times : []), iso(now)].slice(-Math.max(keep, 1));
  const out = windows.filter((_, j) => j !== i);
  out.push({ kind: owner.kind, name: owner.name, times });
  return out.sort((a, b) => (`${a.kind}/${a.name}` < `${b.kind}/${b.name}` ? -1 : 1));
}

export type BudgetGate = { ok: true } | { ok: false; frees?: number; message: string };

export function budgetGate(
  flying: readonly string[],
  windows: readonly OwnerWindow[],
  owner: OwnerReference | undefined,
  settings: CheckSettings,
  expected: number,
): BudgetGate {
  const limit = maxInFlightLimit(settings, expected);
  if (flying.length >= limit) {
    return {
      ok: false,
      message:
        `maxInFlight ${limit} reached: ${listNames([...flying].sort())} ` +
        `in flight; it frees when one of their old Machines is gone`,
    };
  }
  if (owner === undefined) return { ok: true };
  const w = windows.find((x) => x.kind === owner.kind && x.name === owner.name);
  const times = (w?.times ?? []).map((t) => ms(t) ?? 0);
  if (times.length < settings.maxPerOwner) return { ok: true };
  const frees = times[times.length - settings.maxPerOwner]! + settings.windowMs;
  return {
    ok: false,
    frees,
    message:
      `remediation.maxPerOwner ${settings.maxPerOwner} reached ` +
      `for ${owner.kind}/${owner.name} within remediation.window ` +
      `${formatDuration(settings.windowMs)}; it frees at ${iso(frees)}`,
  };
}
