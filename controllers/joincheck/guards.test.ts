// Guards in DESIGN's order: paused (nothing at all, status still counted), never-joined (stops at its
// limit), budgets (maxInFlight as a count or percent, maxPerOwner within the window), and the
// RemediationRestricted event when a stop begins.
import { expect } from 'chai';
import type { MachineFacts } from '../../api/capi/model.js';
import { budgetCheck, maxInFlightLimit } from './budget.js';
import { STOP_PRECEDENCE } from './status.js';
import { HOUR, MINUTE, T0, check, clusterFacts, settings, snapshot, withNode, worker } from './testing/builders.js';
import { Scenario, cond, eventReasons, progressingReason, requested } from './testing/scenario.js';

const STUCK = T0 + 21 * MINUTE;

function fleet(n: number, o: Parameters<typeof snapshot>[0] = {}, joinedBefore = true): Scenario {
  const ms: MachineFacts[] = Array.from({ length: n }, (_, i) => worker(`m${i}`, { owner: { kind: 'MachineSet', name: `ms-${i % 2}`, controlPlane: false } }));
  const old = joinedBefore ? [withNode(worker('old', { createdAt: T0 - HOUR }))] : [];
  const sc = new Scenario(snapshot({ machines: [...old, ...ms], ...o }));
  sc.plan();
  return sc;
}

describe('guards', () => {
  it('paused: no actions at all, Paused=True/SpecPaused, counts still updated', () => {
    const sc = fleet(2, { settings: { paused: true } });
    const p = sc.at(STUCK).plan();
    expect(p.actions).to.deep.equal([]);
    expect(cond(p.status, 'Paused')).to.include({ status: 'True', reason: 'SpecPaused' });
    expect(p.status).to.include({ expectedMachines: 3, joinedMachines: 1, stuckMachines: 2 });
    expect(p.status.recentFailures ?? []).to.deep.equal([]);
  });

  it('a paused Cluster: everything Skipped, Paused=True/ClusterPaused', () => {
    const sc = fleet(1, { cluster: clusterFacts({ paused: true }) });
    const p = sc.at(STUCK).plan();
    expect(p.actions).to.deep.equal([]);
    expect(p.verdicts.find((v) => v.machine === 'm0')?.state).to.equal('Skipped');
    expect(cond(p.status, 'Paused')?.reason).to.equal('ClusterPaused');
  });

  it('skip annotations: left alone, named in the Paused message', () => {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('old')), worker('s', { skipReason: 'joinguard.io/skip' })] }));
    sc.plan();
    const p = sc.at(STUCK).plan();
    expect(p.actions).to.deep.equal([]);
    expect(cond(p.status, 'Paused')).to.include({ status: 'False', reason: 'NotPaused' });
    expect(cond(p.status, 'Paused')?.message).to.contain('s (annotation joinguard.io/skip)');
  });

  it('never joined: the failure that reaches neverJoinedLimit, and all later ones, are not rebuilt', () => {
    const sc = fleet(1, { settings: { consecutiveJoinFailures: 0 } }, false);
    const rebuilt: string[] = [];
    let t = STUCK;
    for (let i = 0; i < 4; i++) {
      const p = sc.at(t).plan();
      rebuilt.push(...requested(p));
      // The owner replaces each rebuilt Machine with a new one that fails the same way.
      for (const name of requested(p)) sc.remove(name).add(worker(`r${i + 1}`, { createdAt: t }));
      sc.advance(MINUTE).plan();
      t += 21 * MINUTE;
    }
    expect(rebuilt).to.deep.equal(['m0', 'r1']);
    const c = cond(sc.last?.status, 'Progressing');
    expect(c?.reason).to.equal('NeverJoined');
    expect(c?.message).to.contain('neverJoinedLimit 3').and.contain('r2 (').and.contain('docs/runbook.md#neverjoined');
    expect(sc.status.failuresSinceResume).to.equal(3);
    expect(sc.plans.flatMap(eventReasons).filter((r) => r === 'RemediationRestricted')).to.have.length(1);
  });

  it('never joined does not apply once a Machine in scope joined', () => {
    const sc = fleet(3, { settings: { consecutiveJoinFailures: 0, maxInFlight: { count: 5 } } });
    expect(requested(sc.at(STUCK).plan())).to.deep.equal(['m0', 'm1', 'm2']);
  });

  it('maxInFlight: one at a time by default; RemediationBudgetExhausted names it, the next goes when the first is gone', () => {
    const sc = fleet(2, { settings: { consecutiveJoinFailures: 0 } });
    const p = sc.at(STUCK).plan();
    expect(requested(p)).to.deep.equal(['m0']);
    const c = cond(p.status, 'Progressing');
    expect(c?.reason).to.equal('RemediationBudgetExhausted');
    expect(c?.message).to.contain('maxInFlight 1').and.contain('m0 in flight').and.contain('docs/runbook.md#remediationbudgetexhausted');
    expect(eventReasons(p)).to.include('RemediationRestricted');
    expect(eventReasons(sc.advance(MINUTE).plan())).to.deep.equal([]);
    sc.remove('m0');
    expect(requested(sc.advance(MINUTE).plan())).to.deep.equal(['m1']);
  });

  it('maxInFlight as a percent of expectedMachines, rounded down, at least 1', () => {
    expect(maxInFlightLimit(settings({ maxInFlight: { percent: 50 } }), 5)).to.equal(2);
    expect(maxInFlightLimit(settings({ maxInFlight: { percent: 10 } }), 5)).to.equal(1);
    const sc = fleet(5, { settings: { consecutiveJoinFailures: 0, maxInFlight: { percent: 50 } } });
    expect(requested(sc.at(STUCK).plan())).to.deep.equal(['m0', 'm1', 'm2']); // 50% of 6 expected
  });

  it('maxPerOwner within the window: says when it frees, wakes then, and a resume restarts the window', () => {
    const sc = fleet(1, { settings: { consecutiveJoinFailures: 0, maxPerOwner: 2, maxInFlight: { count: 5 } } });
    let t = STUCK;
    for (let i = 0; i < 3; i++) {
      sc.at(t).plan();
      sc.remove(i === 0 ? 'm0' : `r${i}`).add(worker(`r${i + 1}`, { createdAt: t, owner: { kind: 'MachineSet', name: 'ms-0', controlPlane: false } }));
      t += 21 * MINUTE;
    }
    const p = sc.at(t).plan();
    expect(requested(p)).to.deep.equal([]);
    const c = cond(p.status, 'Progressing');
    expect(c?.reason).to.equal('RemediationBudgetExhausted');
    expect(c?.message).to.contain('remediation.maxPerOwner 2 reached for MachineSet/ms-0').and.contain('frees at 2026-03-02T00:21:00Z');
    expect(p.wakeAt).to.equal(STUCK + 24 * HOUR);
    sc.with({ check: { ...sc.s.check, metadata: { ...sc.s.check.metadata, annotations: { 'joinguard.io/resume': 'go' } } } });
    expect(requested(sc.advance(MINUTE).plan())).to.deep.equal(['r3']);
  });

  it('budgetCheck ignores reports, dry runs and records from before the resume', () => {
    const rec = (time: string, outcome: 'Requested' | 'Reported' | 'DryRun' | 'Replaced') => ({
      machine: 'x',
      uid: `u-${time}-${outcome}`,
      owner: { kind: 'MachineSet', name: 'ms' },
      time,
      path: outcome === 'Reported' ? ('Report' as const) : ('OwnerRemediated' as const),
      outcome,
      kind: 'JoinTimeout' as const,
      ...(outcome === 'Replaced' ? { finishedTime: time } : {}),
    });
    const records = [rec('2026-03-01T01:00:00Z', 'Replaced'), rec('2026-03-01T02:00:00Z', 'Reported'), rec('2026-03-01T03:00:00Z', 'DryRun'), rec('2026-03-01T04:00:00Z', 'Replaced')];
    const s = settings({ maxPerOwner: 2 });
    expect(budgetCheck(records, { kind: 'MachineSet', name: 'ms' }, s, 3, T0 + 5 * HOUR, undefined).ok).to.equal(false);
    expect(budgetCheck(records, { kind: 'MachineSet', name: 'ms' }, s, 3, T0 + 5 * HOUR, '2026-03-01T01:30:00Z').ok).to.equal(true);
  });

  it('dry run: decides and reports everything, writes nothing, Progressing=False/DryRun says what it would do', () => {
    const sc = fleet(1, { settings: { dryRun: true } });
    const p = sc.at(STUCK).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['JoinTimedOut', 'RemediationSkipped']);
    expect(p.status.remediations?.[0]).to.include({ machine: 'm0', path: 'OwnerRemediated', outcome: 'DryRun' });
    const c = cond(p.status, 'Progressing');
    expect(c).to.include({ status: 'False', reason: 'DryRun' });
    expect(c?.message).to.contain('m0 via OwnerRemediated').and.contain('docs/runbook.md#dryrun');
    expect(sc.advance(MINUTE).plan().actions).to.deep.equal([]);
    // Dry run off: the Machine is now asked for for real.
    sc.with({ settings: settings({ dryRun: false }) });
    expect(requested(sc.advance(MINUTE).plan())).to.deep.equal(['m0']);
  });

  it('the Cluster being deleted: nothing is asked', () => {
    const sc = fleet(1, { cluster: clusterFacts({ deleting: true }) });
    expect(sc.at(STUCK).plan().actions).to.deep.equal([]);
  });

  it('a restriction announces itself once, when it begins', () => {
    const sc = fleet(3, { settings: { consecutiveJoinFailures: 0 } });
    sc.at(STUCK).plan();
    sc.advance(MINUTE).plan();
    sc.advance(MINUTE).plan();
    expect(sc.plans.flatMap(eventReasons).filter((r) => r === 'RemediationRestricted')).to.have.length(1);
    expect(progressingReason(sc.last!)).to.equal('RemediationBudgetExhausted');
  });

  it('Progressing precedence: the highest stop met is the reason', () => {
    expect(STOP_PRECEDENCE).to.deep.equal([
      'FirstControlPlaneReplacementMisconfigured',
      'ControlPlaneEndpointUnreachable',
      'NeverJoined',
      'BootstrapCredentialSuspect',
      'RemediationRefusedByOwner',
      'RemediationBudgetExhausted',
      'DryRun',
    ]);
    // A suspicion in a dry run: the suspicion is what the user must see.
    const sc = fleet(3, { settings: { dryRun: true } });
    expect(progressingReason(sc.at(STUCK).plan())).to.equal('BootstrapCredentialSuspect');
    // Never joined beats the budget.
    const nj = fleet(4, { settings: { consecutiveJoinFailures: 0, neverJoinedLimit: 2 } }, false);
    expect(progressingReason(nj.at(STUCK).plan())).to.equal('NeverJoined');
  });

  it('a resume while paused waits until actions are allowed', () => {
    const sc = fleet(1, { settings: { paused: true }, check: check({ annotations: { 'joinguard.io/resume': 'now' } }) });
    const p = sc.at(STUCK).plan();
    expect(p.actions).to.deep.equal([]);
    expect(p.status.lastResume).to.equal(undefined);
    sc.with({ settings: settings() });
    const q = sc.advance(MINUTE).plan();
    expect(q.status.lastResume?.value).to.equal('now');
    expect(q.actions.map((a) => a.type)).to.include('RemoveResumeAnnotation');
  });

  it('a large fleet keeps its messages and status bounded', () => {
    const sc = fleet(500, { settings: { consecutiveJoinFailures: 0 } });
    const p = sc.at(STUCK).plan();
    expect(requested(p)).to.deep.equal(['m0']);
    const c = cond(p.status, 'Progressing');
    expect(c?.reason).to.equal('RemediationBudgetExhausted');
    expect(c?.message.length).to.be.below(1000);
    expect(c?.message).to.contain('and 494 more');
    expect(p.status.recentFailures).to.have.length(20);
    expect(JSON.stringify(p.status).length).to.be.below(200_000);
  });

  it('a check without previous status and no Machines is AsExpected', () => {
    const p = new Scenario(snapshot({ check: check() })).plan();
    expect(progressingReason(p)).to.equal('AsExpected');
    expect(p.wakeAt).to.equal(undefined);
  });
});
