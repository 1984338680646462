import { expect } from 'chai';
import fc from 'fast-check';
import {
  DURATION_BOUNDED_PATTERN,
  DURATION_MAX_LENGTH,
  DURATION_PATTERN,
  DURATION_UNBOUNDED_FLOOR_MS,
  DurationError,
  formatDuration,
  parseDuration,
  parseDurationNs,
  tryParseDuration,
} from './duration.js';

describe('api/v1alpha1 duration', () => {
  const ok: [string, number][] = [
    ['0', 0],
    ['0s', 0],
    ['90s', 90_000],
    ['20m', 1_200_000],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
    ['500ms', 500],
    ['1.1s', 1100],
    ['1h0m0s', 3_600_000], // Go's Duration.String() form, as CAPI v1beta1 objects carry it
    ['20m0s', 1_200_000],
    ['1.h', 3_600_000],
    ['.5m', 30_000],
    ['1500us', 1.5],
    ['1500µs', 1.5],
    ['1500μs', 1.5],
    ['2000000ns', 2],
    ['1h1h', 7_200_000],
  ];
  for (const [s, ms] of ok) {
    it(`parses ${s} to ${ms} ms, as the schema pattern admits it`, () => {
      expect(parseDuration(s)).to.equal(ms);
      expect(new RegExp(DURATION_PATTERN).test(s)).to.equal(true);
    });
  }

  const bad: [string, RegExp][] = [
    ['', /number and a unit/],
    ['20', /needs a unit .* e\.g\. "20m"/],
    ['1d', /unknown unit at "d"/],
    ['5 m', /without spaces/],
    [' 5m', /without spaces/],
    ['-5m', /negative/],
    ['+5m', /without a sign/],
    ['h', /expected a number/],
    ['.h', /expected a number/],
    ['1h30', /needs a unit/],
    ['1.2.3s', /unknown unit|expected a number/],
    ['9999999h', /out of range/],
  ];
  for (const [s, msg] of bad) {
    it(`refuses ${JSON.stringify(s)} saying ${msg}`, () => {
      expect(() => parseDuration(s)).to.throw(DurationError, msg);
      expect(tryParseDuration(s).error).to.match(msg);
      // The pattern agrees, except for what only a parser can see (range).
      if (!/out of range/.test(String(msg))) expect(new RegExp(DURATION_PATTERN).test(s)).to.equal(false);
    });
  }

  it('names what it was given when it is not a string', () => {
    expect(tryParseDuration(20).error).to.match(/duration string .* not the number 20/);
    expect(tryParseDuration(null).error).to.match(/not null/);
  });

  it('accepts the largest Go duration and nothing beyond', () => {
    expect(parseDurationNs('2562047h47m16.854775807s')).to.equal((1n << 63n) - 1n);
    expect(() => parseDurationNs('2562047h47m16.854775808s')).to.throw(/out of range/);
  });

  const fmt: [number, string][] = [
    [0, '0s'],
    [500, '500ms'],
    [1500, '1.5s'],
    [90_000, '1m30s'],
    [1_200_000, '20m'],
    [3_600_000, '1h'],
    [5_400_000, '1h30m'],
    [3_601_500, '1h1.5s'],
    [86_400_000, '24h'],
    [1.5, '1500us'],
    [-60_000, '-1m'],
  ];
  for (const [ms, s] of fmt) {
    it(`formats ${ms} ms as ${s}, which parses back`, () => {
      expect(formatDuration(ms)).to.equal(s);
      if (ms >= 0) expect(parseDuration(s)).to.equal(ms);
    });
  }

  it('refuses to format what is not a number', () => {
    expect(() => formatDuration(Number.NaN)).to.throw(RangeError);
  });

  describe('the bounded pattern (what the CRD lets CEL convert with duration())', () => {
    const full = new RegExp(DURATION_PATTERN);
    const bounded = new RegExp(DURATION_BOUNDED_PATTERN);
    const examples: [string, boolean][] = [
      ['99999h', true],
      ['100000h', false],
      ['0000099999h', true],
      ['999999m', true],
      ['1000000m', false],
      ['99999999s', true],
      ['1000000ms', true],
      ['9999999h', false],
      ['99999h99999h99999h99999h99999h', true],
    ];
    for (const [s, ok] of examples)
      it(`${s}: ${ok ? 'bounded' : 'not bounded'}`, () => expect(bounded.test(s)).to.equal(ok));

    // Random texts of the full language up to DURATION_MAX_LENGTH: a bounded one never overflows Go's
    // int64 of nanoseconds, and one that is not bounded is at least DURATION_UNBOUNDED_FLOOR_MS.
    it('never overflows, and what it leaves out is at least 10^6 m (fast-check, seeded)', () => {
      const seed = 20261;
      const digits = fc.stringMatching(/^[0-9]{1,20}$/);
      const termArb = fc
        .tuple(
          digits,
          fc.option(fc.stringMatching(/^[0-9]{0,4}$/), { nil: undefined }),
          fc.constantFrom('ns', 'us', 'µs', 'μs', 'ms', 's', 'm', 'h'),
        )
        .map(([w, f, u]) => `${w}${f === undefined ? '' : `.${f}`}${u}`);
      const text = fc
        .array(termArb, { minLength: 1, maxLength: 6 })
        .map((t) => t.join(''))
        .filter((t) => t.length <= DURATION_MAX_LENGTH);
      let boundedSeen = 0;
      let unboundedSeen = 0;
      fc.assert(
        fc.property(text, (t) => {
          expect(full.test(t), t).to.equal(true);
          if (bounded.test(t)) {
            boundedSeen++;
            expect(tryParseDuration(t).error, t).to.equal(undefined);
          } else {
            unboundedSeen++;
            const r = tryParseDuration(t);
            if (r.error === undefined) expect(r.ms, t).to.be.at.least(DURATION_UNBOUNDED_FLOOR_MS);
          }
        }),
        { seed, numRuns: 5000 },
      );
      console.log(`      seed ${seed}: 5000 texts, ${boundedSeen} bounded, ${unboundedSeen} not`);
      expect(boundedSeen).to.be.greaterThan(100);
      expect(unboundedSeen).to.be.greaterThan(100);
    });
  });
});
