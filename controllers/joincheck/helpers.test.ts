// The small pure helpers the rules are built from: label selectors, durations, percentiles, KCP's retry
// chain, in-flight accounting, bounded lists.
import { expect } from 'chai';
import type { FailureRecord, RemediationRecord } from '../../api/v1alpha1/types.js';
import { appendFailure } from './failures.js';
import { kcpGate } from './kcp.js';
import { addJoinDuration, percentile, suggestedJoinTimeout } from './joins.js';
import { boundRecords, isInFlight, isOpen } from './records.js';
import { matchesSelector } from './scope.js';
import { HOUR, MINUTE, T0, kcpFacts } from './testing/builders.js';
import { formatDuration, iso, ms } from './time.js';

const rec = (o: Partial<RemediationRecord>): RemediationRecord => ({
  machine: 'm',
  uid: 'u',
  time: iso(T0),
  path: 'OwnerRemediated',
  outcome: 'Requested',
  kind: 'JoinTimeout',
  ...o,
});

describe('helpers', () => {
  it('label selectors follow Kubernetes semantics', () => {
    const l = { pool: 'a', tier: 'gpu' };
    const table: [Parameters<typeof matchesSelector>[1], boolean][] = [
      [{}, true],
      [{ matchLabels: { pool: 'a' } }, true],
      [{ matchLabels: { pool: 'b' } }, false],
      [{ matchExpressions: [{ key: 'tier', operator: 'In', values: ['gpu', 'cpu'] }] }, true],
      [{ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['gpu'] }] }, false],
      [{ matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['x'] }] }, true],
      [{ matchExpressions: [{ key: 'zone', operator: 'Exists' }] }, false],
      [{ matchExpressions: [{ key: 'zone', operator: 'DoesNotExist' }] }, true],
      [{ matchLabels: { pool: 'a' }, matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] }, false],
    ];
    for (const [sel, want] of table) expect(matchesSelector(l, sel), JSON.stringify(sel)).to.equal(want);
  });

  it('durations print Kubernetes-style and times keep whole seconds', () => {
    expect([90_000, 20 * MINUTE, 90 * MINUTE, 2 * HOUR, 0].map(formatDuration)).to.deep.equal(['1m30s', '20m', '1h30m', '2h', '0s']);
    expect(iso(T0 + 1500)).to.equal('2026-03-01T00:00:01Z');
    expect(ms('not a time')).to.equal(undefined);
  });

  it('percentiles are nearest-rank; the suggested joinTimeout is 1.5 x p95 to the minute, at least 2m', () => {
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50)).to.equal(5);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95)).to.equal(10);
    expect(suggestedJoinTimeout(30)).to.equal('2m');
    expect(suggestedJoinTimeout(601)).to.equal('16m');
    let d = addJoinDuration(undefined, 10);
    for (let i = 0; i < 60; i++) d = addJoinDuration(d, 100 + i);
    expect(d.count).to.equal(61);
    expect(d.recentSeconds).to.have.length(50);
    expect(d.maxSeconds).to.equal(159);
  });

  it("KCP's retry chain: a new sequence after minHealthyPeriod, a wait within retryPeriod, a refusal past maxRetry", () => {
    const kcp = kcpFacts({ remediation: { maxRetry: 1, retryPeriodSeconds: 600 } });
    const mine = (t: number) => rec({ owner: { kind: 'KubeadmControlPlane', name: 'kcp' }, time: iso(t) });
    expect(kcpGate(kcp, [], T0).kind).to.equal('ok');
    expect(kcpGate(kcp, [mine(T0)], T0 + 5 * MINUTE)).to.include({ kind: 'wait', until: T0 + 10 * MINUTE });
    expect(kcpGate(kcp, [mine(T0)], T0 + 10 * MINUTE).kind).to.equal('ok'); // the first retry
    expect(kcpGate(kcp, [mine(T0), mine(T0 + 20 * MINUTE)], T0 + 40 * MINUTE)).to.include({ kind: 'refused', until: T0 + 80 * MINUTE });
    expect(kcpGate(kcp, [mine(T0), mine(T0 + 20 * MINUTE)], T0 + 81 * MINUTE).kind).to.equal('ok');
    expect(kcpGate(kcp, [mine(T0), rec({ owner: { kind: 'KubeadmControlPlane', name: 'kcp' }, time: iso(T0 + 20 * MINUTE), outcome: 'DryRun' })], T0 + 40 * MINUTE).kind).to.equal('ok');
  });

  it('in flight: open requests, not refusals, reports or dry runs', () => {
    expect(isInFlight(rec({}))).to.equal(true);
    expect(isInFlight(rec({ outcome: 'Deferred' }))).to.equal(true);
    expect(isInFlight(rec({ outcome: 'Refused' }))).to.equal(false);
    expect(isOpen(rec({ outcome: 'Refused' }))).to.equal(true);
    expect(isInFlight(rec({ outcome: 'Reported', path: 'Report' }))).to.equal(false);
    expect(isInFlight(rec({ outcome: 'DryRun' }))).to.equal(false);
    expect(isInFlight(rec({ outcome: 'Replaced', finishedTime: iso(T0) }))).to.equal(false);
  });

  it('bounded lists drop finished records and records of gone Machines first', () => {
    const records = Array.from({ length: 21 }, (_, i) => rec({ uid: `u${i}`, ...(i === 5 ? { outcome: 'Replaced' as const, finishedTime: iso(T0) } : {}) }));
    const bounded = boundRecords(records);
    expect(bounded).to.have.length(20);
    expect(bounded.some((r) => r.uid === 'u5')).to.equal(false);
    const f = (uid: string): FailureRecord => ({ machine: uid, uid, kind: 'JoinTimeout', time: iso(T0) });
    let list: FailureRecord[] = [];
    for (let i = 0; i < 20; i++) list = appendFailure(list, f(`u${i}`), new Set(Array.from({ length: 21 }, (_, j) => `u${j}`).filter((u) => u !== 'u7')));
    list = appendFailure(list, f('u20'), new Set(Array.from({ length: 21 }, (_, j) => `u${j}`).filter((u) => u !== 'u7')));
    expect(list).to.have.length(20);
    expect(list.some((x) => x.uid === 'u7')).to.equal(false);
    expect(list[0]?.uid).to.equal('u0');
  });
});
