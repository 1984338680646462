// Per second of a window, how long the apiserver took over one client's requests and over every other
// client's (requestReceivedTimestamp → stageTimestamp of ResponseComplete; watches left out): a second in which
// the client's marks were slow is then told apart — the apiserver slow for everyone, or the client itself.
// And when the client first wrote each Machine (its metadata, its status): a mark seen late by the bench's watch
// is then told apart from a mark written late.
import type { AuditConsumer, AuditEvent, AuditWindow } from './audit.js';
import { percentile } from './stats.js';

export const LATENCY_COLUMNS = ['second', 'n', 'p50Ms', 'maxMs', 'otherN', 'otherP50Ms', 'otherMaxMs'] as const;
export interface LatencyBySecond {
  columns: typeof LATENCY_COLUMNS;
  /** One row per second of the window that had a request of either side; second = seconds from the window's start. */
  rows: number[][];
}

/** What one audit event says of a completed request: when it came, how long it took, whose it was. */
export interface Completed {
  at: number;
  ms: number;
  user: string;
  /** A write of a Machine: which one, and whether of its metadata or its status. */
  machineWrite?: { name: string; status: boolean };
}

export function completed(e: AuditEvent): Completed | undefined {
  if (e.stage !== 'ResponseComplete' || e.verb === 'watch') return undefined;
  const at = Date.parse(e.requestReceivedTimestamp ?? '');
  const end = Date.parse(e.stageTimestamp ?? '');
  if (!Number.isFinite(at) || !Number.isFinite(end)) return undefined;
  const r: Completed = { at, ms: end - at, user: e.user?.username ?? '' };
  const o = e.objectRef;
  if (e.verb === 'patch' && o?.resource === 'machines' && o.name)
    r.machineWrite = { name: o.name, status: o.subresource === 'status' };
  return r;
}

/** Per Machine, when the client first wrote its metadata and its status (ms since epoch, null: never). */
export interface FirstWrites {
  columns: ['name', 'metadataAt', 'statusAt'];
  rows: [string, number | null, number | null][];
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

/** The window's requests, the client's (by user) against all others', and the client's first write of each Machine. */
export class LatencyReader implements AuditConsumer {
  private readonly requests: { at: number; ms: number; mine: boolean }[] = [];
  private readonly writes = new Map<string, [number | null, number | null]>();

  constructor(
    private readonly window: AuditWindow,
    private readonly isClient: (user: string) => boolean,
  ) {}

  take(e: AuditEvent): void {
    const r = completed(e);
    if (!r || r.at < this.window.from || r.at >= this.window.to) return;
    const mine = this.isClient(r.user);
    this.requests.push({ at: r.at, ms: r.ms, mine });
    if (!mine || !r.machineWrite) return;
    const w = this.writes.get(r.machineWrite.name) ?? [null, null];
    const i = r.machineWrite.status ? 1 : 0;
    w[i] = Math.min(w[i] ?? Infinity, r.at);
    this.writes.set(r.machineWrite.name, w);
  }

  result(): { latency: LatencyBySecond; firstWrites: FirstWrites } {
    const rows = [...this.writes.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([n, w]) => [n, ...w] as FirstWrites['rows'][number]);
    return {
      latency: bySecond(this.requests, this.window),
      firstWrites: { columns: ['name', 'metadataAt', 'statusAt'], rows },
    };
  }
}
