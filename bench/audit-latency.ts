// Per second of a window, how long the apiserver took over one client's requests and over every other
// client's (requestReceivedTimestamp → stageTimestamp of ResponseComplete; watches left out): a second in which
// the client's marks were slow is then told apart — the apiserver slow for everyone, or the client itself.
import fs from 'node:fs';
import readline from 'node:readline';
import type { AuditWindow } from './audit.js';
import { percentile } from './stats.js';

export const LATENCY_COLUMNS = ['second', 'n', 'p50Ms', 'maxMs', 'otherN', 'otherP50Ms', 'otherMaxMs'] as const;
export interface LatencyBySecond {
  columns: typeof LATENCY_COLUMNS;
  /** One row per second of the window that had a request of either side; second = seconds from the window's start. */
  rows: number[][];
}

interface Line {
  stage?: string;
  verb?: string;
  user?: { username?: string };
  requestReceivedTimestamp?: string;
  stageTimestamp?: string;
}

/** What one audit line says of a completed request: when it came, how long it took, whose it was. */
export function completed(line: string): { at: number; ms: number; user: string } | undefined {
  let e: Line;
  try {
    e = JSON.parse(line) as Line;
  } catch {
    return undefined;
  }
  if (e.stage !== 'ResponseComplete' || e.verb === 'watch') return undefined;
  const at = Date.parse(e.requestReceivedTimestamp ?? '');
  const end = Date.parse(e.stageTimestamp ?? '');
  if (!Number.isFinite(at) || !Number.isFinite(end)) return undefined;
  return { at, ms: end - at, user: e.user?.username ?? '' };
}

export function bySecond(
  requests: Iterable<{ at: number; ms: number; mine: boolean }>,
  window: AuditWindow,
): LatencyBySecond {
  const seconds = new Map<number, { mine: number[]; other: number[] }>();
  for (const r of requests) {
    if (r.at < window.from || r.at >= window.to) continue;
    const s = Math.floor((r.at - window.from) / 1000);
    const b = seconds.get(s) ?? { mine: [], other: [] };
    seconds.set(s, b);
    (r.mine ? b.mine : b.other).push(r.ms);
  }
  const stats = (xs: number[]) => {
    const s = xs.sort((a, b) => a - b);
    return [s.length, percentile(s, 50) ?? 0, s.at(-1) ?? 0];
  };
  const rows = [...seconds.entries()]
    .sort(([a], [b]) => a - b)
    .map(([s, b]) => [s, ...stats(b.mine), ...stats(b.other)]);
  return { columns: LATENCY_COLUMNS, rows };
}

/** Reads the audit log once: the window's requests, the client's (by user) against all others. */
export async function latencyBySecond(
  file: string,
  window: AuditWindow,
  isClient: (user: string) => boolean,
): Promise<LatencyBySecond> {
  const requests: { at: number; ms: number; mine: boolean }[] = [];
  if (fs.existsSync(file)) {
    const rl = readline.createInterface({ input: fs.createReadStream(file, 'utf8'), crlfDelay: Infinity });
    for await (const line of rl) {
      const r = line ? completed(line) : undefined;
      if (r && r.at >= window.from && r.at < window.to) requests.push({ at: r.at, ms: r.ms, mine: isClient(r.user) });
    }
  }
  return bySecond(requests, window);
}
