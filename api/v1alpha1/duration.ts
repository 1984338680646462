// Kubernetes/Go-style durations (`90s`, `20m`, `1h30m`, `1.5h`, `500ms`), the language of Go's
// time.ParseDuration without a sign: the spec's duration fields, CAPI v1beta1's metav1.Duration fields
// and CEL's duration() all speak it, so one parser serves the schema, the controller and the readers.
// Arithmetic is done in integer nanoseconds (BigInt) so `1.1s` is exactly 1100 ms, as in Go.

const UNIT_NS: Record<string, bigint> = {
  ns: 1n,
  us: 1_000n,
  µs: 1_000n, // U+00B5 micro sign, what Go's Duration.String() prints
  μs: 1_000n, // U+03BC Greek mu, also accepted by Go
  ms: 1_000_000n,
  s: 1_000_000_000n,
  m: 60_000_000_000n,
  h: 3_600_000_000_000n,
};

const UNITS_TEXT = 'ns, us, ms, s, m, h';

/** Go's time.Duration is an int64 of nanoseconds. */
const MAX_NS = (1n << 63n) - 1n;

/**
 * The same language as a regular expression, for the CRD schema and CEL (RE2 and JavaScript agree on it).
 * Either `0`, or one or more of: a number (digits, optionally a fraction; or a bare fraction) and a unit.
 */
export const DURATION_PATTERN = '^(0|(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$';

/** Longest duration text the schema admits; bounds CEL's cost estimate and keeps values readable. */
export const DURATION_MAX_LENGTH = 32;

// The same language with at most as many significant digits per unit as keep one term under 100000h, so
// that no text of DURATION_MAX_LENGTH characters (at most 5 such terms) reaches Go's 2562047h limit: CEL's
// duration() fails with a type-conversion error naming no field on a value past it, so the schema calls
// duration() only on text that matches this. Text that matches DURATION_PATTERN and not this one has a term
// of at least 10^6 m (16666h), so it is above any bound below that and refused as "too long".
const term = (digits: number, units: string) => `(0*[0-9]{1,${digits}}(\\.[0-9]*)?|\\.[0-9]+)(${units})`;
export const DURATION_BOUNDED_PATTERN = `^(0|(${[
  term(17, 'ns'),
  term(14, 'us|µs|μs'),
  term(11, 'ms'),
  term(8, 's'),
  term(6, 'm'),
  term(5, 'h'),
].join('|')})+)$`;
/** A duration of DURATION_PATTERN that DURATION_BOUNDED_PATTERN does not admit is at least this (10^6 m). */
export const DURATION_UNBOUNDED_FLOOR_MS = 1_000_000 * 60_000;

export class DurationError extends Error {
  constructor(
    readonly input: string,
    problem: string,
  ) {
    super(`${JSON.stringify(input)} is not a duration: ${problem}`);
    this.name = 'DurationError';
  }
}

const SEGMENT = /([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)?/y;

/** Parses a duration to nanoseconds. Throws DurationError saying what would be accepted. */
export function parseDurationNs(input: string): bigint {
  if (typeof input !== 'string') throw new DurationError(String(input), `it must be a string such as "20m"`);
  const s = input;
  if (/\s/.test(s)) throw new DurationError(input, 'write it without spaces, e.g. "1h30m"');
  if (s === '') {
    throw new DurationError(input, `write a number and a unit (${UNITS_TEXT}), e.g. "90s", "20m" or "1h30m"`);
  }
  if (s === '0') return 0n;
  if (s.startsWith('-')) throw new DurationError(input, 'it must not be negative');
  if (s.startsWith('+')) throw new DurationError(input, 'write it without a sign, e.g. "20m"');
  let total = 0n;
  let at = 0;
  while (at < s.length) {
    SEGMENT.lastIndex = at;
    const m = SEGMENT.exec(s);
    const whole = m?.[1] ?? '';
    const frac = m?.[2];
    const unit = m?.[3];
    if (!m || (whole === '' && (frac === undefined || frac === ''))) {
      throw new DurationError(
        input,
        `expected a number at ${JSON.stringify(s.slice(at))}; write e.g. "90s", "20m" or "1h30m"`,
      );
    }
    if (unit === undefined) {
      const rest = s.slice(at + m[0].length);
      throw new DurationError(
        input,
        rest === ''
          ? `the number ${JSON.stringify(m[0])} needs a unit (${UNITS_TEXT}), e.g. "${m[0]}m"`
          : `unknown unit at ${JSON.stringify(rest)}; the units are ${UNITS_TEXT}`,
      );
    }
    const unitNs = UNIT_NS[unit]!;
    let ns = BigInt(whole === '' ? '0' : whole) * unitNs;
    if (frac) ns += (BigInt(frac) * unitNs) / 10n ** BigInt(frac.length); // truncated, as Go does
    total += ns;
    if (total > MAX_NS) throw new DurationError(input, 'it is out of range (at most 2562047h)');
    at += m[0].length;
  }
  return total;
}

/** Parses a duration to milliseconds (fractional below a millisecond). */
export function parseDuration(input: string): number {
  return Number(parseDurationNs(input)) / 1e6;
}

/** Like parseDuration, without throwing. */
export function tryParseDuration(
  input: unknown,
): { ms: number; error?: undefined } | { ms?: undefined; error: string } {
  if (typeof input !== 'string') return { error: `must be a duration string such as "20m", not ${describe(input)}` };
  try {
    return { ms: parseDuration(input) };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

/**
 * Formats milliseconds the way a user would write them: units from hours down, zero units left out
 * (`5400000` is `1h30m`, `90000` is `1m30s`, `1500` is `1.5s`, `500` is `500ms`, `0` is `0s`).
 * The result parses back to the same value (to the nanosecond).
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new RangeError(`formatDuration: ${ms} is not a finite number of milliseconds`);
  const negative = ms < 0;
  let ns = BigInt(Math.round(Math.abs(ms) * 1e6));
  if (ns === 0n) return '0s';
  const sign = negative ? '-' : '';
  if (ns < UNIT_NS['s']!) {
    if (ns % UNIT_NS['ms']! === 0n) return `${sign}${ns / UNIT_NS['ms']!}ms`;
    if (ns % UNIT_NS['us']! === 0n) return `${sign}${ns / UNIT_NS['us']!}us`;
    return `${sign}${ns}ns`;
  }
  let out = sign;
  const h = ns / UNIT_NS['h']!;
  ns -= h * UNIT_NS['h']!;
  const m = ns / UNIT_NS['m']!;
  ns -= m * UNIT_NS['m']!;
  if (h > 0n) out += `${h}h`;
  if (m > 0n) out += `${m}m`;
  if (ns > 0n) {
    const whole = ns / UNIT_NS['s']!;
    const frac = (ns % UNIT_NS['s']!).toString().padStart(9, '0').replace(/0+$/, '');
    out += frac === '' ? `${whole}s` : `${whole}.${frac}s`;
  }
  return out;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return `the ${typeof v} ${JSON.stringify(v)}`;
}
