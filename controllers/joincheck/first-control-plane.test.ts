// The first control-plane Machine: it holds back every other Machine, is replaced only through the
// control-plane provider after an endpoint probe, respects KCP's retry rules, and its replacement must be
// an init Machine whose clock starts once the old Machine is gone. Workers' clocks wait for init.
import { expect } from 'chai';
import type { MachineFacts } from '../../api/capi/model.js';
import { HOUR, MINUTE, SECOND, T0, bootstrapConfig, configs, cpMachine, kcpFacts, mhcFacts, newCluster, snapshot, withNode, worker, type SnapshotOverrides } from './testing/builders.js';
import { Scenario, cond, eventReasons, progressingReason, requested, verdictOf } from './testing/scenario.js';
import { ms } from './time.js';

const DEADLINE = T0 + 21 * MINUTE; // ready at T0+1m, joinTimeout 20m

function creating(o: SnapshotOverrides = {}, machines: MachineFacts[] = []): Scenario {
  return new Scenario(
    snapshot({
      cluster: newCluster(),
      kcp: kcpFacts(),
      bootstrapConfigs: configs(bootstrapConfig('cp-0', false), bootstrapConfig('cp-0b', false), bootstrapConfig('cp-1', true)),
      machines: [cpMachine('cp-0'), worker('w-1'), worker('w-2'), ...machines],
      ...o,
    }),
  );
}

/** Plans at DEADLINE (probe asked), then answers the probe as unreachable and plans again. */
function actOnFirst(sc: Scenario) {
  sc.plan();
  const asked = sc.at(DEADLINE).plan();
  expect(asked.actions.filter((a) => a.type === 'ProbeEndpoint')).to.have.length(1);
  return sc.with({ endpointProbe: { reachable: false, at: DEADLINE } }).plan();
}

describe('first control-plane Machine', () => {
  it('holds back every other Machine, whose clocks do not run before the control plane is initialized', () => {
    const sc = creating();
    sc.plan();
    const p = sc.at(T0 + 5 * HOUR).plan();
    expect(verdictOf(p, 'w-1')).to.include({ state: 'Held', hold: 'FirstControlPlane' });
    expect(verdictOf(p, 'w-1').reason).to.contain('cp-0');
    expect(verdictOf(p, 'cp-0').firstControlPlane).to.equal(true);
    expect(requested(p).filter((n) => n.startsWith('w-'))).to.deep.equal([]);
  });

  it("workers' join clocks start when the control plane is initialized", () => {
    const sc = creating();
    sc.plan();
    sc.update('cp-0', { nodeName: 'node-cp-0' }).with({ cluster: newCluster({ controlPlaneInitialized: { value: true, since: T0 + 10 * MINUTE }, remoteConnection: { value: true, since: T0 + 10 * MINUTE } }) });
    const p = sc.at(T0 + 29 * MINUTE).plan();
    expect(verdictOf(p, 'w-1')).to.include({ state: 'Joining', clockStart: T0 + 10 * MINUTE, deadline: T0 + 30 * MINUTE });
    expect(p.wakeAt).to.equal(T0 + 30 * MINUTE);
    expect(verdictOf(sc.at(T0 + 30 * MINUTE).plan(), 'w-1').state).to.equal('Stuck');
  });

  it('without a transition time, the clock starts when the controller first saw the control plane initialized', () => {
    const sc = creating();
    sc.update('cp-0', { nodeName: 'node-cp-0' }).with({ cluster: newCluster({ controlPlaneInitialized: { value: true }, remoteConnection: { value: true, since: T0 } }) });
    sc.at(T0 + 40 * MINUTE).plan();
    expect(sc.status.controlPlaneInitializedSeen).to.equal('2026-03-01T00:40:00Z');
    const p = sc.at(T0 + 50 * MINUTE).plan();
    expect(verdictOf(p, 'w-1')).to.include({ state: 'Joining', clockStart: T0 + 40 * MINUTE });
  });

  it('is never deleted directly, even with strategy Delete: the control-plane provider replaces it', () => {
    const p = actOnFirst(creating({ settings: { strategy: 'Delete' } }));
    const writes = p.actions.filter((a) => a.type !== 'MachineEvent' && a.type !== 'CheckEvent');
    expect(writes.map((a) => a.type)).to.deep.equal(['MarkOwnerRemediated']);
    expect(requested(p)).to.deep.equal(['cp-0']);
    const rec = p.status.remediations?.[0];
    expect(rec).to.include({ machine: 'cp-0', path: 'OwnerRemediated', outcome: 'Requested', firstControlPlane: true });
    expect(p.status.firstControlPlaneRemediation).to.include({ machine: 'cp-0', uid: 'uid-cp-0' });
  });

  it('probes the endpoint before acting, once per minute while unanswered', () => {
    const sc = creating();
    sc.plan();
    const p = sc.at(DEADLINE).plan();
    expect(p.actions).to.deep.equal([{ type: 'ProbeEndpoint', host: '10.0.0.10', port: 6443 }]);
    expect(verdictOf(p, 'cp-0')).to.include({ state: 'Held', hold: 'EndpointProbe' });
    expect(p.status.recentFailures ?? []).to.deep.equal([]);
    expect(p.wakeAt).to.equal(DEADLINE + MINUTE);
    expect(sc.at(DEADLINE + 30 * SECOND).plan().actions).to.deep.equal([]);
    expect(sc.at(DEADLINE + MINUTE).plan().actions.map((a) => a.type)).to.deep.equal(['ProbeEndpoint']);
  });

  it('a control plane that answers gives it one more joinTimeout, then it is acted on without probing', () => {
    const sc = creating();
    sc.plan();
    sc.at(DEADLINE).plan();
    const p = sc.with({ endpointProbe: { reachable: true, at: DEADLINE } }).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(verdictOf(p, 'cp-0')).to.include({ state: 'Held', hold: 'EndpointAnswered', deadline: DEADLINE + 20 * MINUTE });
    expect(verdictOf(sc.at(DEADLINE + 10 * MINUTE).plan(), 'cp-0')).to.include({ state: 'Held', hold: 'EndpointAnswered' });
    expect(ms(p.status.firstControlPlaneExtendedUntil)).to.equal(DEADLINE + 20 * MINUTE);
    expect(p.wakeAt).to.equal(DEADLINE + 20 * MINUTE);
    expect(sc.last?.wakeAt).to.equal(DEADLINE + 20 * MINUTE);
    const q = sc.at(DEADLINE + 20 * MINUTE).plan();
    expect(q.actions.some((a) => a.type === 'ProbeEndpoint')).to.equal(false);
    expect(requested(q)).to.deep.equal(['cp-0']);
  });

  it('firstControlPlane: Report only reports it', () => {
    const sc = creating({ settings: { firstControlPlane: 'Report' } });
    sc.plan();
    const p = sc.at(DEADLINE).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['JoinTimedOut', 'RemediationSkipped']);
    expect(p.status.remediations?.[0]).to.include({ machine: 'cp-0', path: 'Report', outcome: 'Reported' });
    expect(sc.plan().actions).to.deep.equal([]);
  });

  it('with strategy Auto and an MHC that selects it, the remediate annotation is used', () => {
    const p = actOnFirst(creating({ mhcs: [mhcFacts('cp-mhc', { selector: { matchExpressions: [{ key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' }] } })] }));
    expect(p.actions.filter((a) => a.type === 'AnnotateRemediate').map((a) => ('machine' in a ? a.machine.name : ''))).to.deep.equal(['cp-0']);
  });

  it("does not ask what KCP would refuse (maxRetry used up): RemediationRefusedByOwner with KCP's reason", () => {
    const kcp = kcpFacts({ remediation: { maxRetry: 1 }, remediationInProgress: { machine: 'cp-old', timestamp: T0, retryCount: 1 } });
    const p = actOnFirst(creating({ kcp }));
    expect(requested(p)).to.deep.equal([]);
    const c = cond(p.status, 'Progressing');
    expect(c?.reason).to.equal('RemediationRefusedByOwner');
    expect(c?.message).to.contain("can't remediate this machine because the operation already failed 1 times (MaxRetry 1)");
    expect(c?.message).to.contain('docs/runbook.md#remediationrefusedbyowner');
    expect(p.wakeAt).to.equal(T0 + HOUR); // a new retry sequence after minHealthyPeriodSeconds
  });

  it("waits for KCP's retryPeriodSeconds and wakes then", () => {
    const kcp = kcpFacts({ remediation: { retryPeriodSeconds: 1800 }, remediationInProgress: { machine: 'cp-old', timestamp: T0 + 10 * MINUTE, retryCount: 0 } });
    const p = actOnFirst(creating({ kcp }));
    expect(requested(p)).to.deep.equal([]);
    expect(p.wakeAt).to.equal(T0 + 40 * MINUTE);
    expect(cond(p.status, 'Progressing')?.message).to.contain('retryPeriodSeconds');
    expect(requested(sc2(p, T0 + 40 * MINUTE, kcp))).to.deep.equal(['cp-0']);
  });

  it("the replacement's join clock starts no earlier than the moment the old first Machine was gone", () => {
    const sc = creating();
    actOnFirst(sc);
    // KCP deletes cp-0; the controller sees it gone at T0+30m; the replacement was ready at T0+27m.
    sc.remove('cp-0').add(cpMachine('cp-0b', { createdAt: T0 + 26 * MINUTE }));
    const p = sc.at(T0 + 30 * MINUTE).plan();
    expect(p.status.remediations?.[0]).to.include({ outcome: 'Replaced', finishedTime: '2026-03-01T00:30:00Z' });
    expect(verdictOf(p, 'cp-0b')).to.include({ state: 'Joining', clockStart: T0 + 30 * MINUTE, firstControlPlane: true });
    expect(verdictOf(p, 'w-1').hold).to.equal('FirstControlPlane');
  });

  it('a replacement while the old first Machine is still there is held', () => {
    const sc = creating();
    actOnFirst(sc);
    sc.update('cp-0', { deletingSince: DEADLINE + MINUTE }).add(cpMachine('cp-0b', { createdAt: T0 + 23 * MINUTE }));
    const p = sc.at(T0 + 24 * MINUTE).plan();
    expect(verdictOf(p, 'cp-0b')).to.include({ state: 'Held', hold: 'PreviousFirstControlPlane' });
  });

  it('a replacement that would join a control plane stops first-CP remediation: FirstControlPlaneReplacementMisconfigured', () => {
    const sc = creating();
    actOnFirst(sc);
    sc.remove('cp-0').add(cpMachine('cp-1', { createdAt: T0 + 26 * MINUTE }));
    const p = sc.at(T0 + 27 * MINUTE).plan();
    const c = cond(p.status, 'Progressing');
    expect(c?.reason).to.equal('FirstControlPlaneReplacementMisconfigured');
    expect(c?.message).to.contain('cp-1').and.contain('KubeadmConfig/cp-1').and.contain('joinConfiguration.controlPlane');
    expect(c?.message).to.contain('docs/runbook.md#firstcontrolplanereplacementmisconfigured');
    expect(p.status.firstControlPlaneMisconfigured).not.to.equal(undefined);
  });

  it('the Cluster reporting initialized with no control-plane Machine left after the remediation: misconfigured', () => {
    const sc = creating();
    actOnFirst(sc);
    sc.remove('cp-0').with({ cluster: newCluster({ controlPlaneInitialized: { value: true, since: DEADLINE + MINUTE } }) });
    const p = sc.at(T0 + 25 * MINUTE).plan();
    expect(progressingReason(p)).to.equal('FirstControlPlaneReplacementMisconfigured');
    expect(cond(p.status, 'Progressing')?.message).to.contain('no control-plane Machine is left');
  });

  it('once initialized, no Machine is first again: a stuck control-plane Machine goes to KCP without a probe', () => {
    const sc = new Scenario(
      snapshot({ kcp: kcpFacts({ initialized: true }), bootstrapConfigs: configs(bootstrapConfig('cp-0', false)), machines: [withNode(worker('old')), cpMachine('cp-0')] }),
    );
    sc.plan();
    const p = sc.at(DEADLINE).plan();
    expect(verdictOf(p, 'cp-0').firstControlPlane).to.equal(undefined);
    expect(p.actions.some((a) => a.type === 'ProbeEndpoint')).to.equal(false);
    expect(p.actions.filter((a) => a.type === 'MarkOwnerRemediated')).to.have.length(1);
  });
});

/** Replans the KCP-wait scenario at `t` from the persisted status of plan `p`. */
function sc2(p: ReturnType<Scenario['plan']>, t: number, kcp: ReturnType<typeof kcpFacts>) {
  const sc = creating({ kcp, endpointProbe: { reachable: false, at: DEADLINE } });
  sc.with({ check: { ...sc.s.check, status: JSON.parse(JSON.stringify(p.status)) } });
  return sc.at(t).plan();
}
