// Suspicion and canaries: the stall, the canary cadence (doubling, capped), provision timeouts while
// suspected, the resume annotation, and the switch that turns it off.
import { expect } from 'chai';
import { canaryDelay } from './suspicion.js';
import { HOUR, MINUTE, SECOND, T0, check, provisioning, settings, snapshot, withNode, worker } from './testing/builders.js';
import { Scenario, eventReasons, progressingReason, requested } from './testing/scenario.js';
import { ms } from './time.js';

const STALL = T0 + 21 * MINUTE;

/** A pool that worked; a..h ready at T0+1m with no Node; at STALL a is rebuilt and b raises the suspicion. */
function stalled(extra: Partial<Parameters<typeof settings>[0]> = {}): Scenario {
  const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
  const sc = new Scenario(
    snapshot({ settings: { maxPerOwner: 100, ...extra }, machines: [withNode(worker('old', { createdAt: T0 - HOUR })), ...names.map((n) => worker(n))] }),
  );
  sc.plan();
  const p = sc.at(STALL).plan();
  expect(requested(p)).to.deep.equal(['a']);
  expect(progressingReason(p)).to.equal('BootstrapCredentialSuspect');
  sc.remove('a'); // its owner replaced it (the replacement is not modelled)
  return sc;
}

describe('suspicion: canaries', () => {
  it('canaryDelay doubles from probeInterval and caps at maxProbeInterval', () => {
    const s = settings();
    expect([0, 1, 2, 3, 4, 5, 6].map((n) => canaryDelay(s, n) / MINUTE)).to.deep.equal([30, 60, 120, 240, 480, 480, 480]);
  });

  it('with defaults, canaries at 30m, 1h30m, 3h30m, 7h30m, 15h30m, 23h30m after the stall, one at a time', () => {
    const sc = stalled();
    // The oldest stuck join-timeout Machine first: b, which raised the suspicion and was not rebuilt.
    const canaries = ['b', 'c', 'd', 'e', 'f', 'g'];
    const offsets = [30 * MINUTE, 90 * MINUTE, 210 * MINUTE, 450 * MINUTE, 930 * MINUTE, 1410 * MINUTE];
    let previous: string | undefined;
    canaries.forEach((name, i) => {
      const at = STALL + (offsets[i] as number);
      if (previous !== undefined) sc.remove(previous);
      const before = sc.at(at - SECOND).plan();
      expect(requested(before), `nothing before canary ${i + 1}`).to.deep.equal([]);
      expect(before.wakeAt, `wakes for canary ${i + 1}`).to.equal(at);
      const p = sc.at(at).plan();
      expect(requested(p), `canary ${i + 1}`).to.deep.equal([name]);
      expect(p.status.suspicion?.canariesSpent).to.equal(i + 1);
      const rec = p.status.remediations?.find((r) => r.machine === name);
      expect(rec?.canary).to.equal(true);
      expect(progressingReason(p)).to.equal('BootstrapCredentialSuspect');
      previous = name;
    });
    expect(ms(sc.status.suspicion?.nextCanaryTime)).to.equal(STALL + 1410 * MINUTE + 8 * HOUR);
  });

  it('a canary waits for the in-flight budget and is not spent meanwhile', () => {
    const sc = stalled();
    // a's old Machine is not gone yet (marked, still in flight).
    sc.add(worker('a', { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' } }));
    const p = sc.at(STALL + 30 * MINUTE).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(p.status.suspicion?.canariesSpent).to.equal(0);
    expect(progressingReason(p)).to.equal('BootstrapCredentialSuspect');
    sc.remove('a');
    expect(requested(sc.plan())).to.deep.equal(['b']);
  });

  it('a failed canary adds to the evidence without raising again', () => {
    const sc = stalled();
    sc.at(STALL + 30 * MINUTE).plan(); // b rebuilt
    sc.remove('b').add(worker('c2', { createdAt: STALL + 31 * MINUTE }));
    sc.at(STALL + 31 * MINUTE).plan();
    const p = sc.at(STALL + 52 * MINUTE).plan();
    expect(eventReasons(p)).to.deep.equal(['JoinTimedOut']);
    expect(p.status.suspicion?.machines).to.include('c2');
    expect(p.status.consecutiveJoinFailures).to.equal(9); // a..h timed out together, then c2
  });

  it('provision timeouts are still remediated while suspected, and neither count nor reset', () => {
    const sc = stalled({ provisionTimeoutMs: 10 * MINUTE, maxInFlight: { count: 5 } });
    sc.add(provisioning('p', { createdAt: STALL }));
    sc.at(STALL + 1 * MINUTE).plan();
    const p = sc.at(STALL + 10 * MINUTE - SECOND).plan();
    expect(requested(p)).to.deep.equal([]);
    const q = sc.at(STALL + 10 * MINUTE).plan();
    expect(requested(q), 'p, not a canary (none due)').to.deep.equal(['p']);
    expect(q.status.remediations?.find((r) => r.machine === 'p')?.canary).to.equal(undefined);
    expect(q.status.consecutiveJoinFailures).to.equal(8); // a..h; p's provision timeout does not count
    expect(q.status.recentFailures?.find((f) => f.machine === 'p')?.kind).to.equal('ProvisionTimeout');
    expect(q.status.suspicion).not.to.equal(undefined);
  });

  it('joinguard.io/resume clears the suspicion and the count, once, and removes the annotation', () => {
    const sc = stalled();
    sc.with({ check: { ...sc.s.check, metadata: { ...sc.s.check.metadata, annotations: { 'joinguard.io/resume': '1' } } } });
    const p = sc.at(STALL + 5 * MINUTE).plan();
    expect(p.status.suspicion).to.equal(undefined);
    expect(p.status.consecutiveJoinFailures).to.equal(0);
    expect(p.status.lastResume?.value).to.equal('1');
    expect(p.actions.filter((a) => a.type === 'RemoveResumeAnnotation')).to.have.length(1);
    expect(eventReasons(p)).to.include.members(['SuspicionCleared', 'Resumed']);
    // b, stalled, is replaced at once (a is gone, the budget is free).
    expect(requested(p)).to.deep.equal(['b']);
    // The annotation still there (the removal not seen yet): nothing again.
    const q = sc.plan();
    expect(q.actions).to.deep.equal([]);
  });

  it('consecutiveJoinFailures 0 turns the suspicion off', () => {
    const sc = new Scenario(
      snapshot({ settings: { consecutiveJoinFailures: 0, maxInFlight: { count: 5 } }, machines: [withNode(worker('old')), worker('a'), worker('b'), worker('c')] }),
    );
    sc.plan();
    const p = sc.at(STALL).plan();
    expect(requested(p)).to.deep.equal(['a', 'b', 'c']);
    expect(p.status.suspicion).to.equal(undefined);
  });

  it('a Machine already joined at first sight sets everJoined but resets nothing', () => {
    const s = snapshot({
      check: check({ status: { everJoined: true, consecutiveJoinFailures: 1, recentFailures: [{ machine: 'x', uid: 'uid-x', kind: 'JoinTimeout', time: '2026-03-01T00:30:00Z' }] } }),
      machines: [withNode(worker('n', { createdAt: T0 }))],
      now: T0 + HOUR,
    });
    const sc = new Scenario(s);
    const p = sc.plan();
    expect(p.status.everJoined).to.equal(true);
    expect(p.status.consecutiveJoinFailures).to.equal(1);
    expect(p.status.joinDurations).to.equal(undefined);
  });

  it('a joined Machine created after the newest failure is a join event (it joined while the controller was down)', () => {
    const s = snapshot({
      check: check({ status: { everJoined: true, consecutiveJoinFailures: 1, recentFailures: [{ machine: 'x', uid: 'uid-x', kind: 'JoinTimeout', time: '2026-03-01T00:30:00Z' }] } }),
      machines: [withNode(worker('n', { createdAt: T0 + 40 * MINUTE }))],
      now: T0 + HOUR,
    });
    const sc = new Scenario(s);
    const p = sc.plan();
    expect(p.status.consecutiveJoinFailures).to.equal(0);
    expect(p.status.joinDurations?.count).to.equal(1);
    expect(sc.plan().status.joinDurations?.count, 'counted once').to.equal(1);
  });
});
