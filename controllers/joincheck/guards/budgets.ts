// The budgets (DESIGN: "Guards, in the order they apply", 5b), counted from the world: maxInFlight over the Machines
// in flight, maxPerOwner over each owner's requests within remediation.window.
import { carriesAnyMark, type MachineFacts } from '../../../api/capi/model.js';
import type { CheckSettings, OwnerReference, OwnerWindow, RequestRecord } from '../../../api/v1alpha1/types.js';
import { formatDuration, HOUR, iso, latest, ms } from '../time.js';
import { listNames } from '../words.js';
import { anyMark, causedMarks } from '../requests/paths.js';

export function maxInFlightLimit(settings: CheckSettings, expectedMachines: number): number {
  const m = settings.maxInFlight;
  if ('count' in m) return m.count;
  return Math.max(1, Math.floor((m.percent * expectedMachines) / 100));
}

/**
 * In flight (by name), counted from the world (DESIGN: "Budget"): the Cluster's Machines, in the selector or not (a
 * marked Machine that left it — the selector edited, template labels copied in place — is still replaced by its
 * owner), not gone, that this check asked to replace and has not withdrawn, or that still carry a mark it caused
 * (remembered or not: its marker names this check, or a mark with no marker carries JoinGuard's own reasons); an open
 * request whose Machine cannot be read counts too (it is not gone). Another live check's marks are its own budget.
 */
export function inFlight(
  ofCluster: readonly MachineFacts[],
  requests: readonly RequestRecord[],
  unreadable: ReadonlySet<string>,
  checkUid?: string,
): string[] {
  const byUid = new Map(requests.map((r) => [r.uid, r]));
  const flying = ofCluster.filter((m) => {
    const r = byUid.get(m.uid);
    if (r?.state === 'Open' && r.path !== 'Report') return true;
    if (r?.state === 'Reported' || r?.state === 'DryRun') return false;
    if (r?.path === 'Delete' && m.deletingSince !== undefined) return true; // being deleted because JoinGuard asked
    if (r === undefined && !carriesAnyMark(m)) return false; // most of a fleet
    if (r === undefined && m.requestedBy !== undefined && m.requestedBy !== checkUid) return false;
    return anyMark(causedMarks(m, r?.path));
  });
  const unread = requests.filter((r) => r.state === 'Open' && (unreadable.has(r.uid) || unreadable.has(r.machine)));
  return [...flying.map((m) => m.name), ...unread.map((r) => r.machine)];
}

/** The window of maxPerOwner: starts a window ago, or at the last resume, whichever is later. */
export function windowStart(now: number, settings: CheckSettings, lastResume: string | undefined): number {
  return latest(now - settings.windowMs, ms(lastResume)) as number;
}

/**
 * How long request times are kept at least, whatever the window is now: a window lowered and raised again within a
 * day forgets no request (docs/decisions/never-harm-last-holes.md, "Per-owner windows are exact").
 */
export const OWNER_TIMES_KEPT_MS = 24 * HOUR;

/** From when request times are kept: the longer of the window and a day, and never before the last resume. */
export function keptFrom(now: number, settings: CheckSettings, lastResume: string | undefined): number {
  return latest(now - Math.max(settings.windowMs, OWNER_TIMES_KEPT_MS), ms(lastResume)) as number;
}

/**
 * Request times of each owner kept from `from` on: all of them, whatever maxPerOwner is now (lowered, then raised
 * again, it must still count every request inside the window).
 */
export function trimWindows(windows: readonly OwnerWindow[] | undefined, from: number): OwnerWindow[] {
  const out: OwnerWindow[] = [];
  for (const w of windows ?? []) {
    const times = w.times.filter((t) => (ms(t) ?? 0) >= from);
    if (times.length > 0) out.push({ kind: w.kind, name: w.name, times });
  }
  return out;
}

export function recordOwnerRequest(
  windows: OwnerWindow[],
  owner: OwnerReference | undefined,
  now: number,
): OwnerWindow[] {
  if (owner === undefined) return windows;
  const i = windows.findIndex((w) => w.kind === owner.kind && w.name === owner.name);
  const times = [...(i >= 0 ? windows[i]!.times : []), iso(now)];
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
  windowFrom: number,
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
  const times = (w?.times ?? []).map((t) => ms(t) ?? 0).filter((t) => t >= windowFrom);
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
