// CapiVersionWatch with a fake discovery and a fake clock: asked at start, again only when stale, sooner
// after a failure; an admission waits for a first answer only briefly; a failed refresh keeps what was known.
import { expect } from 'chai';
import { CapiVersionWatch, type CapiVersionFacts } from './capi-version.js';

const v14: CapiVersionFacts = { apiVersion: 'v1beta2', minor: 14, version: 'v1.14.2', source: 'test' };

function fakeDiscovery(answers: (() => Promise<CapiVersionFacts>)[]) {
  let calls = 0;
  return {
    discover: () => answers[Math.min(calls++, answers.length - 1)]!(),
    calls: () => calls,
  };
}

/** Moves the fake clock, asks, and lets a refresh started by the ask settle. */
async function askAt(w: CapiVersionWatch, setNow: (t: number) => void, t: number): Promise<void> {
  setNow(t);
  await w.get();
  await new Promise((r) => setImmediate(r));
}

describe('webhooks/capi-version: CapiVersionWatch', () => {
  it('asks once at start and not again until refreshMs has passed', async () => {
    let now = 0;
    const d = fakeDiscovery([async () => v14]);
    const w = new CapiVersionWatch(d.discover, { refreshMs: 600_000, now: () => now });
    await w.start();
    expect(await w.get()).to.deep.equal({ facts: v14 });
    await askAt(w, (t) => (now = t), 599_999);
    expect(d.calls()).to.equal(1);
    await askAt(w, (t) => (now = t), 600_000);
    expect(d.calls()).to.equal(2);
  });

  it('keeps the known release when a refresh fails, says why, and retries after retryMs', async () => {
    let now = 0;
    const d = fakeDiscovery([
      async () => v14,
      async () => Promise.reject(new Error('apiserver down')),
      async () => ({ ...v14, minor: 15 }),
    ]);
    const w = new CapiVersionWatch(d.discover, { refreshMs: 1000, retryMs: 100, now: () => now });
    await w.start();
    await askAt(w, (t) => (now = t), 1000); // starts the failing refresh
    expect(await w.get()).to.deep.equal({ facts: v14, error: 'apiserver down' });
    await askAt(w, (t) => (now = t), 1099);
    expect(d.calls()).to.equal(2);
    await askAt(w, (t) => (now = t), 1100);
    expect(await w.get()).to.deep.equal({ facts: { ...v14, minor: 15 } });
  });

  it('waits at most waitMs for a first answer, then judges with nothing known', async () => {
    let release!: (f: CapiVersionFacts) => void;
    const w = new CapiVersionWatch(() => new Promise((r) => (release = r)), { waitMs: 50 });
    void w.start();
    const t0 = Date.now();
    expect(await w.get()).to.deep.equal({});
    expect(Date.now() - t0).to.be.within(40, 1000);
    release(v14);
    await new Promise((r) => setImmediate(r));
    expect(await w.get()).to.deep.equal({ facts: v14 });
  });

  it('reports a change once, and a failure each time', async () => {
    let now = 0;
    const changes: CapiVersionFacts[] = [];
    const errors: string[] = [];
    const d = fakeDiscovery([async () => v14, async () => v14, async () => Promise.reject(new Error('x'))]);
    const w = new CapiVersionWatch(d.discover, {
      refreshMs: 10,
      now: () => now,
      onChange: (f) => changes.push(f),
      onError: (e) => errors.push(e),
    });
    await w.start();
    for (const t of [10, 20]) await askAt(w, (x) => (now = x), t);
    expect(changes).to.deep.equal([v14]);
    expect(errors).to.deep.equal(['x']);
  });
});
