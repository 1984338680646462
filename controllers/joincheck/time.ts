// Time helpers for the planner. Status times are RFC 3339 strings with whole seconds, as metav1.Time
// serializes them, so a value read back after a restart compares equal to the one the planner wrote.

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;

/** Epoch ms -> RFC 3339, truncated to the second (what the API server would store). */
export function iso(ms: number): string {
  return new Date(Math.floor(ms / SECOND) * SECOND).toISOString().replace('.000Z', 'Z');
}

/** RFC 3339 -> epoch ms; undefined for an absent or unreadable value (never throws: status is user-editable). */
export function ms(time: string | undefined): number | undefined {
  if (time === undefined) return undefined;
  const t = Date.parse(time);
  return Number.isNaN(t) ? undefined : t;
}

/** Kubernetes-style duration: 90s -> "1m30s", 20m -> "20m", 5400s -> "1h30m". */
export function formatDuration(durationMs: number): string {
  let s = Math.max(0, Math.round(durationMs / SECOND));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  let out = '';
  if (h > 0) out += `${h}h`;
  if (m > 0) out += `${m}m`;
  if (s > 0 || out === '') out += `${s}s`;
  return out;
}

/** The largest of the defined values, or undefined when none is. */
export function latest(...values: (number | undefined)[]): number | undefined {
  let best: number | undefined;
  for (const v of values) if (v !== undefined && (best === undefined || v > best)) best = v;
  return best;
}

/** The earliest value strictly after `now`, or undefined. */
export function earliestAfter(now: number, values: Iterable<number | undefined>): number | undefined {
  let best: number | undefined;
  for (const v of values) if (v !== undefined && v > now && (best === undefined || v < best)) best = v;
  return best;
}

/** Clocks of CAPI's controllers and JoinGuard's differ a little: a time this far ahead is still believed. */
export const CLOCK_SKEW_MS = 60 * SECOND;

/** A condition time JoinGuard believes: present and not ahead of its own clock by more than the skew. */
export function trusted(since: number | undefined, now: number): number | undefined {
  return since !== undefined && since <= now + CLOCK_SKEW_MS ? since : undefined;
}
