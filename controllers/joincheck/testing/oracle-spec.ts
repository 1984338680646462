// What the oracle reads of the check's spec, as the user wrote it (test-only, no product import): the budgets and
// the pause in force at the moment of each write, so changes of maxInFlight, maxPerOwner, window and paused in the
// middle of a history are judged by the rule in force. DESIGN's defaults where a field is absent.
import type { Json } from './objects.js';

export interface SpecAt {
  maxInFlight: number;
  maxPerOwner: number;
  windowMs: number;
  paused: boolean;
}

const UNIT_MS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000 };

/** A Kubernetes duration of hours, minutes and seconds (`1h30m`, `90s`): what the world writes. */
export function durationMs(text: string): number {
  let total = 0;
  const parts = [...text.matchAll(/(\d+)([hms])/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== text) throw new Error(`oracle: duration ${text}`);
  for (const p of parts) total += Number(p[1]) * UNIT_MS[p[2]!]!;
  return total;
}

export function specAt(spec: Json | undefined): SpecAt {
  const r = spec?.remediation ?? {};
  const inFlight = spec?.maxInFlight;
  if (typeof inFlight === 'string') throw new Error('oracle: the world writes maxInFlight as a count');
  return {
    maxInFlight: typeof inFlight === 'number' ? inFlight : 1,
    maxPerOwner: typeof r.maxPerOwner === 'number' ? r.maxPerOwner : 5,
    windowMs: durationMs(typeof r.window === 'string' ? r.window : '24h'),
    paused: spec?.paused === true,
  };
}
