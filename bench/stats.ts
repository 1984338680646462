// Percentiles (nearest-rank, as latency reports usually mean them) and small number helpers.
export interface Summary {
  n: number;
  p50?: number;
  p99?: number;
  max?: number;
  min?: number;
}

export function percentile<T>(sorted: T[], p: number): T | undefined {
  if (sorted.length === 0) return undefined;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

export function summarize(values: number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max: s.at(-1), min: s[0] };
}

export const round = (v: number | undefined, digits = 3): number | undefined =>
  v === undefined ? undefined : Math.round(v * 10 ** digits) / 10 ** digits;
export const mib = (kib: number | undefined): number | undefined =>
  kib === undefined ? undefined : round(kib / 1024, 1);

/** Over the runs of one figure: the median (the middle run of an odd count, the mean of the two middle ones of an
 * even count), the lowest and highest, and every run's value in run order. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  runs: number[];
}

export function spread(values: (number | undefined)[], digits = 3): Spread | undefined {
  const runs = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  if (runs.length === 0) return undefined;
  const s = [...runs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median: round(median, digits)!, min: s[0]!, max: s.at(-1)!, runs };
}
