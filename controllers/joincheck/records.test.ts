// Write-ahead records and what follows them: the record is in the very plan that makes the request;
// outcomes follow what the Machine shows (Marked, Deferred, Refused, Replaced); a refusal stops that owner
// until a resume; a marked Machine that joins before its owner deletes it is withdrawn.
import { expect } from 'chai';
import { MACHINE_WRITES } from './types.js';
import { HOUR, MINUTE, SECOND, T0, snapshot, withNode, worker } from './testing/builders.js';
import { Scenario, cond, eventReasons, progressingReason, requested } from './testing/scenario.js';

function marked(o: Parameters<typeof snapshot>[0] = {}): Scenario {
  const sc = new Scenario(
    snapshot({ settings: { maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 }, machines: [withNode(worker('old', { createdAt: T0 - HOUR })), worker('a'), worker('b', { owner: { kind: 'MachineSet', name: 'ms-b', controlPlane: false } })], ...o }),
  );
  sc.plan();
  sc.at(T0 + 21 * MINUTE).plan();
  // The executor's writes, as the next snapshot shows them.
  if (sc.status.remediations?.[0]?.path === 'OwnerRemediated') {
    for (const n of ['a', 'b']) sc.update(n, { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' }, ownerRemediated: { status: 'False', reason: 'WaitingForRemediation' } });
  }
  return sc;
}

describe('remediation records', () => {
  it('every request is recorded in the plan that makes it, before any Machine write', () => {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('old')), worker('a')] }));
    sc.plan();
    const p = sc.at(T0 + 21 * MINUTE).plan();
    const writes = p.actions.filter((a) => MACHINE_WRITES.has(a.type));
    expect(writes).to.have.length(1);
    expect(p.status.remediations).to.deep.equal([
      { machine: 'a', uid: 'uid-a', owner: { kind: 'MachineSet', name: 'ms-a' }, time: '2026-03-01T00:21:00Z', path: 'OwnerRemediated', outcome: 'Requested', kind: 'JoinTimeout' },
    ]);
    expect(p.status.recentFailures?.[0]).to.include({ machine: 'a', kind: 'JoinTimeout', bootstrapConfig: 'KubeadmConfig/a', dataSecretName: 'a' });
  });

  it('outcomes follow what is seen: Marked, Deferred (with the owner message), still in flight while deleting, Replaced', () => {
    const sc = marked();
    expect(sc.advance(MINUTE).plan().status.remediations?.[0]?.outcome).to.equal('Marked');
    sc.update('a', { ownerRemediated: { status: 'False', reason: 'RemediationDeferred', message: 'MachineDeployment maxInFlight reached' } });
    const d = sc.advance(MINUTE).plan();
    expect(d.status.remediations?.[0]).to.include({ outcome: 'Deferred', ownerReason: 'RemediationDeferred', ownerMessage: 'MachineDeployment maxInFlight reached' });
    expect(cond(d.status, 'Progressing')?.message).to.contain('MachineDeployment maxInFlight reached');
    sc.update('a', { deletingSince: sc.s.now, ownerRemediated: { status: 'False', reason: 'MachineDeleting' } });
    const del = sc.advance(MINUTE).plan();
    expect(del.status.remediations?.[0]).to.include({ outcome: 'Deferred', ownerReason: 'MachineDeleting' });
    expect(del.status.remediations?.[0]?.finishedTime).to.equal(undefined);
    expect(progressingReason(del)).to.equal('Remediating');
    sc.remove('a');
    const gone = sc.advance(MINUTE).plan();
    expect(gone.status.remediations?.[0]).to.include({ outcome: 'Replaced', finishedTime: '2026-03-01T00:25:00Z' });
  });

  it('a recorded request whose write never showed (a crash after the status write) is made again, a minute apart', () => {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('old')), worker('a')] }));
    sc.plan();
    sc.at(T0 + 21 * MINUTE).plan();
    const early = sc.at(T0 + 21 * MINUTE + 30 * SECOND).plan();
    expect(early.actions).to.deep.equal([]);
    expect(early.wakeAt).to.equal(T0 + 22 * MINUTE);
    const again = sc.at(T0 + 22 * MINUTE).plan();
    expect(again.actions.map((a) => a.type)).to.deep.equal(['MarkOwnerRemediated']);
    expect(again.status.remediations).to.have.length(1);
    expect(again.status.remediations?.[0]).to.include({ outcome: 'Requested', lastAttempt: '2026-03-01T00:22:00Z', time: '2026-03-01T00:21:00Z' });
    sc.update('a', { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' } });
    const seen = sc.at(T0 + 30 * MINUTE).plan();
    expect(seen.actions).to.deep.equal([]);
    expect(seen.status.remediations?.[0]?.outcome).to.equal('Marked');
  });

  it('CannotBeRemediated: Refused, the owner is asked nothing more until a resume; the others still are', () => {
    const sc = marked();
    sc.update('a', { ownerRemediated: { status: 'False', reason: 'CannotBeRemediated', message: 'old revision' } });
    sc.add(worker('a2', { createdAt: T0 + 22 * MINUTE }), worker('b2', { createdAt: T0 + 22 * MINUTE, owner: { kind: 'MachineSet', name: 'ms-b', controlPlane: false } }));
    const p = sc.advance(MINUTE).plan();
    expect(p.status.remediations?.find((r) => r.machine === 'a')?.outcome).to.equal('Refused');
    expect(p.status.refusedOwners).to.deep.equal([{ kind: 'MachineSet', name: 'ms-a' }]);
    expect(eventReasons(p)).to.include('RemediationRestricted');
    const q = sc.at(T0 + 43 * MINUTE).plan();
    expect(requested(q)).to.deep.equal(['b2']);
    const c = cond(q.status, 'Progressing');
    expect(c?.reason).to.equal('RemediationRefusedByOwner');
    expect(c?.message).to.contain('MachineSet/ms-a').and.contain('docs/runbook.md#remediationrefusedbyowner');
    sc.with({ check: { ...sc.s.check, metadata: { ...sc.s.check.metadata, annotations: { 'joinguard.io/resume': 'x' } } } });
    sc.update('b2', { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' } });
    const r = sc.advance(MINUTE).plan();
    expect(r.status.refusedOwners).to.equal(undefined);
    expect(requested(r)).to.deep.equal(['a2']);
  });

  it('a marked Machine that joins before its owner deletes it is withdrawn, once', () => {
    const sc = marked();
    sc.update('a', { ownerRemediated: { status: 'False', reason: 'RemediationDeferred' }, nodeName: 'node-a' });
    const p = sc.advance(MINUTE).plan();
    expect(p.actions.filter((a) => a.type === 'Withdraw')).to.deep.equal([
      { type: 'Withdraw', machine: { name: 'a', namespace: 'default', uid: 'uid-a', resourceVersion: '1' }, path: 'OwnerRemediated' },
    ]);
    expect(eventReasons(p)).to.include('RemediationWithdrawn');
    expect(p.status.remediations?.[0]).to.include({ outcome: 'Withdrawn', finishedTime: '2026-03-01T00:22:00Z' });
    expect(sc.plan().actions).to.deep.equal([]);
  });

  it('a Machine that is deleting when it joins is not withdrawn (a remediation stays in flight until it is gone)', () => {
    const sc = marked();
    sc.update('a', { nodeName: 'node-a', deletingSince: T0 + 22 * MINUTE });
    const p = sc.at(T0 + 23 * MINUTE).plan();
    expect(p.actions.filter((a) => a.type === 'Withdraw')).to.deep.equal([]);
    expect(p.status.remediations?.[0]?.finishedTime).to.equal(undefined);
  });

  it('a Delete request that the Machine outran is withdrawn without a write', () => {
    const sc = marked({ settings: { strategy: 'Delete', maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 } });
    expect(sc.status.remediations?.[0]?.path).to.equal('Delete');
    sc.update('a', { nodeName: 'node-a' });
    const p = sc.advance(MINUTE).plan();
    expect(p.actions.filter((a) => a.type === 'Withdraw')).to.deep.equal([]);
    expect(eventReasons(p)).to.include('RemediationWithdrawn');
    expect(p.status.remediations?.[0]?.outcome).to.equal('Withdrawn');
  });

  it("a Machine already marked by someone else is never acted on twice", () => {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('old')), worker('a', { healthCheckSucceeded: { status: 'False', reason: 'NodeStartupTimeout' } })] }));
    sc.plan();
    const p = sc.at(T0 + 2 * HOUR).plan();
    expect(p.actions).to.deep.equal([]);
    expect(p.status.stuckMachines).to.equal(1);
  });
});
