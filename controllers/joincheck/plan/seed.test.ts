// The user reports' test shape (seeds): consecutive join timeouts with no Node stall rebuilds with
// BootstrapCredentialSuspect; a single one is still replaced; a Machine with a Node is not JoinGuard's
// business; a join clears the suspicion.
import { expect } from 'chai';
import { HOUR, MINUTE, T0, cpMachine, kcpFacts, snapshot, withNode, worker } from '../testing/builders.js';
import {
  Scenario,
  cond,
  eventReasons,
  intentOf,
  progressingReason,
  requested,
  verdictOf,
} from '../testing/scenario.js';

/** A pool that worked (one Machine joined), plus `names` Machines ready at T0+1m with no Node. */
function pool(...names: string[]): Scenario {
  return new Scenario(
    snapshot({ machines: [withNode(worker('old', { createdAt: T0 - HOUR })), ...names.map((n) => worker(n))] }),
  );
}

describe('seed: bootstrap credential suspicion', () => {
  it('one JoinTimeout failure with no Node: still replaced', () => {
    const sc = pool('a');
    sc.plan();
    const p = sc.at(T0 + 21 * MINUTE).plan();
    expect(verdictOf(p, 'a').state).to.equal('Stuck');
    expect(requested(p)).to.deep.equal(['a']);
    expect(intentOf(p, 'a')?.event.reason).to.equal('RemediationRequested');
    expect(p.status.consecutiveJoinFailures).to.equal(1);
    expect(p.status.suspicion).to.equal(undefined);
    expect(progressingReason(p)).to.equal('Remediating');
  });

  it('two JoinTimeout failures in a row with no Node: the second stalls with BootstrapCredentialSuspect', () => {
    const sc = pool('a');
    sc.plan();
    sc.at(T0 + 21 * MINUTE).plan(); // a replaced
    // a's owner deletes it; its replacement b never joins either.
    sc.remove('a').add(worker('b', { createdAt: T0 + 25 * MINUTE }));
    sc.plan();
    const p = sc.at(T0 + 25 * MINUTE + 21 * MINUTE).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(p.status.consecutiveJoinFailures).to.equal(2);
    expect(p.status.suspicion?.machines).to.deep.equal(['a', 'b']);
    expect(p.status.suspicion?.canariesSpent).to.equal(0);
    expect(eventReasons(p)).to.include.members(['JoinTimedOut', 'SuspicionRaised', 'RemediationRestricted']);
    const c = cond(p.status, 'Progressing');
    expect(c?.status).to.equal('False');
    expect(c?.reason).to.equal('BootstrapCredentialSuspect');
    for (const evidence of [
      'a (',
      'b (',
      'spec.bootstrap.configRef KubeadmConfig/b',
      'dataSecretName b',
      '10.0.0.10:6443',
      'CAPI itself still reaches',
      '/docs/runbook.md#bootstrapcredentialsuspect',
    ]) {
      expect(c?.message).to.contain(evidence);
    }
    expect(c?.message).not.to.contain('#13221');
  });

  it('two stuck at once: the first is rebuilt, the one that reaches the threshold is not', () => {
    const sc = pool('a', 'b');
    sc.plan();
    const p = sc.at(T0 + 21 * MINUTE).plan();
    expect(requested(p)).to.deep.equal(['a']);
    expect(p.status.suspicion?.machines).to.deep.equal(['a', 'b']);
    expect(progressingReason(p)).to.equal('BootstrapCredentialSuspect');
  });

  it('a failure with a Node present (even NotReady) is not JoinGuard business', () => {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('a'))] }));
    sc.plan();
    const p = sc.at(T0 + 5 * HOUR).plan();
    expect(verdictOf(p, 'a').state).to.equal('Joined');
    expect(p.intents).to.deep.equal([]);
    expect(p.status.recentFailures ?? []).to.deep.equal([]);
    expect(p.status.consecutiveJoinFailures).to.equal(0);
  });

  it('a join clears the suspicion and resets the count; the stalled Machine is then replaced', () => {
    const sc = pool('a', 'b');
    sc.plan();
    sc.at(T0 + 21 * MINUTE).plan(); // a rebuilt, b stalls
    sc.remove('a').add(worker('c', { createdAt: T0 + 22 * MINUTE }));
    sc.at(T0 + 23 * MINUTE).plan();
    sc.update('c', { nodeName: 'node-c' });
    const p = sc.at(T0 + 30 * MINUTE).plan();
    expect(p.status.suspicion).to.equal(undefined);
    expect(p.status.consecutiveJoinFailures).to.equal(0);
    expect(eventReasons(p)).to.include('SuspicionCleared');
    expect(requested(p)).to.deep.equal(['b']);
    expect(p.status.joinDurations?.count).to.equal(1);
  });

  it('control-plane failures also name the leftover etcd member cause (cluster-api #13221)', () => {
    const sc = new Scenario(
      snapshot({
        kcp: kcpFacts({ initialized: true }),
        machines: [withNode(cpMachine('cp-0', { createdAt: T0 - HOUR })), cpMachine('cp-1'), cpMachine('cp-2')],
      }),
    );
    sc.plan();
    const p = sc.at(T0 + 21 * MINUTE).plan();
    expect(progressingReason(p)).to.equal('BootstrapCredentialSuspect');
    expect(cond(p.status, 'Progressing')?.message).to.contain('cluster-api #13221');
  });
});
