// The informers' back-off, table-tested with an injected clock and jitter.
import { expect } from 'chai';
import { Backoff, INFORMER_BACKOFF } from './backoff.js';

describe('informer back-off', () => {
  const make = (jitter: number) => {
    let t = 0;
    const b = new Backoff(
      () => t,
      () => jitter,
    );
    return { b, at: (ms: number) => (t = ms) };
  };

  it('doubles from 0.5 s with x1-2 jitter and never waits more than 4 s', () => {
    const lo = make(0);
    expect(Array.from({ length: 8 }, () => lo.b.next())).to.deep.equal([500, 1000, 2000, 2000, 2000, 2000, 2000, 2000]);
    const hi = make(0.999);
    const delays = Array.from({ length: 8 }, () => hi.b.next());
    expect(delays.slice(0, 3)).to.deep.equal([1000, 1999, 3998]);
    expect(Math.max(...delays)).to.be.at.most(INFORMER_BACKOFF.maxDelayMs);
  });

  it('Retry-After replaces the exponential delay (x1-1.25), at least 0.2 s, at most 4 s', () => {
    const { b } = make(0.5);
    for (let i = 0; i < 6; i++) b.next(); // a long streak does not make a 429 wait longer than it asks
    expect(b.next({ retryAfterS: 1 })).to.equal(1125);
    expect(b.next({ retryAfterS: 30 })).to.equal(4000); // a starting apiserver asks up to 30 s
    expect(b.next({ retryAfterS: 0 })).to.equal(200);
  });

  it('a 410 or a silent watch: at once the first time after a quiet spell, then backing off', () => {
    const { b, at } = make(0);
    expect([
      b.next({ immediateFirst: true }),
      b.next({ immediateFirst: true }),
      b.next({ immediateFirst: true }),
      b.next({ immediateFirst: true }),
    ]).to.deep.equal([0, 500, 1000, 2000]);
    at(60_000);
    expect(b.next({ immediateFirst: true })).to.equal(2000); // still the same streak
    at(60_000 + INFORMER_BACKOFF.resetMs + 1);
    expect(b.streak).to.equal(0);
    expect(b.next({ immediateFirst: true })).to.equal(0); // 2 minutes without a failure: a new streak
  });
});
