// Unit test (no apiserver): the per-second apiserver latency read from audit lines.
import { expect } from 'chai';
import { bySecond, completed } from './audit-latency.js';

const line = (o: Record<string, unknown>) => JSON.stringify(o);

describe('audit latency by second', () => {
  it('reads a completed request: when it came, how long the apiserver took, whose it was', () => {
    const r = completed(
      line({
        stage: 'ResponseComplete',
        verb: 'patch',
        user: { username: 'joinguard-bench' },
        requestReceivedTimestamp: '2026-12-04T10:00:00.100000Z',
        stageTimestamp: '2026-12-04T10:00:01.350000Z',
      }),
    );
    expect(r).to.deep.equal({ at: Date.parse('2026-12-04T10:00:00.100Z'), ms: 1250, user: 'joinguard-bench' });
  });

  it("tells a Machine's metadata write from its status write", () => {
    const base = {
      stage: 'ResponseComplete',
      verb: 'patch',
      requestReceivedTimestamp: '2026-12-04T10:00:00Z',
      stageTimestamp: '2026-12-04T10:00:00.05Z',
    };
    const m = (objectRef: object) => completed(line({ ...base, objectRef }))?.machineWrite;
    expect(m({ resource: 'machines', name: 'm1' })).to.deep.equal({ name: 'm1', status: false });
    expect(m({ resource: 'machines', subresource: 'status', name: 'm1' })).to.deep.equal({ name: 'm1', status: true });
    expect(m({ resource: 'machinejoinchecks', subresource: 'status', name: 'c' })).to.equal(undefined);
  });

  it('leaves out watches, other stages and lines that are not JSON', () => {
    const base = { requestReceivedTimestamp: '2026-12-04T10:00:00Z', stageTimestamp: '2026-12-04T10:00:09Z' };
    expect(completed(line({ ...base, stage: 'ResponseComplete', verb: 'watch' }))).to.equal(undefined);
    expect(completed(line({ ...base, stage: 'ResponseStarted', verb: 'get' }))).to.equal(undefined);
    expect(completed('{not json')).to.equal(undefined);
  });

  it("groups by second of the window, the client's requests beside everyone else's", () => {
    const w = { name: 'detection', from: 10_000, to: 13_000 };
    const t = bySecond(
      [
        { at: 10_100, ms: 40, mine: true },
        { at: 10_900, ms: 1200, mine: true },
        { at: 10_500, ms: 900, mine: false },
        { at: 12_000, ms: 5, mine: false },
        { at: 9_999, ms: 7000, mine: true }, // before the window
        { at: 13_000, ms: 7000, mine: true }, // at its end: outside
      ],
      w,
    );
    expect(t.rows).to.deep.equal([
      [0, 2, 40, 1200, 1, 900, 900],
      [2, 0, 0, 0, 1, 5, 5],
    ]);
  });
});
