// Unit test (no apiserver): the per-second apiserver latency read from audit lines, and the one pass over the log.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { AuditCounter, readAudit } from './audit.js';
import { bySecond, completed, LatencyReader } from './audit-latency.js';

describe('audit latency by second', () => {
  it('reads a completed request: when it came, how long the apiserver took, whose it was', () => {
    const r = completed({
      stage: 'ResponseComplete',
      verb: 'patch',
      user: { username: 'joinguard-bench' },
      requestReceivedTimestamp: '2026-12-04T10:00:00.100000Z',
      stageTimestamp: '2026-12-04T10:00:01.350000Z',
    });
    expect(r).to.deep.equal({ at: Date.parse('2026-12-04T10:00:00.100Z'), ms: 1250, user: 'joinguard-bench' });
  });

  it("tells a Machine's metadata write from its status write", () => {
    const base = {
      stage: 'ResponseComplete',
      verb: 'patch',
      requestReceivedTimestamp: '2026-12-04T10:00:00Z',
      stageTimestamp: '2026-12-04T10:00:00.05Z',
    };
    const m = (objectRef: object) => completed({ ...base, objectRef })?.machineWrite;
    expect(m({ resource: 'machines', name: 'm1' })).to.deep.equal({ name: 'm1', status: false });
    expect(m({ resource: 'machines', subresource: 'status', name: 'm1' })).to.deep.equal({ name: 'm1', status: true });
    expect(m({ resource: 'machinejoinchecks', subresource: 'status', name: 'c' })).to.equal(undefined);
  });

  it('leaves out watches and other stages', () => {
    const base = { requestReceivedTimestamp: '2026-12-04T10:00:00Z', stageTimestamp: '2026-12-04T10:00:09Z' };
    expect(completed({ ...base, stage: 'ResponseComplete', verb: 'watch' })).to.equal(undefined);
    expect(completed({ ...base, stage: 'ResponseStarted', verb: 'get' })).to.equal(undefined);
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

describe('the audit log read once', () => {
  it('hands each event to every reader and counts every non-empty line, JSON or not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'audit-read-'));
    const file = path.join(dir, 'audit.log');
    const ev = (o: Record<string, unknown>) =>
      JSON.stringify({
        requestReceivedTimestamp: '2026-12-04T10:00:00.500Z',
        stageTimestamp: '2026-12-04T10:00:00.520Z',
        user: { username: 'joinguard-bench' },
        userAgent: 'joinguard/v0.2 (linux)',
        ...o,
      });
    fs.writeFileSync(
      file,
      [
        ev({ stage: 'ResponseComplete', verb: 'patch', objectRef: { resource: 'machines', name: 'm1' } }),
        ev({ stage: 'ResponseStarted', verb: 'watch', objectRef: { resource: 'machines' } }),
        ev({ stage: 'ResponseStarted', verb: 'patch', objectRef: { resource: 'machines', name: 'm1' } }),
        '{not json',
        '',
      ].join('\n'),
    );
    const w = { name: 'all', from: Date.parse('2026-12-04T10:00:00Z'), to: Date.parse('2026-12-04T10:00:01Z') };
    const counter = new AuditCounter([w]);
    const latency = new LatencyReader(w, (u) => u.startsWith('joinguard'));
    try {
      expect(await readAudit(file, [counter, latency])).to.equal(4);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    expect(counter.counts.all!['joinguard-bench:joinguard']).to.deep.include({ requests: 1, watches: 1 });
    const r = latency.result();
    expect(r.latency.rows).to.deep.equal([[0, 1, 20, 20, 0, 0, 0]]);
    expect(r.firstWrites.rows).to.deep.equal([['m1', Date.parse('2026-12-04T10:00:00.500Z'), null]]);
  });
});
