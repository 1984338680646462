// The first control-plane Machine: it holds back every other Machine, is replaced only through the
// control-plane provider after an endpoint probe, respects KCP's retry rules, and its replacement must be
// an init Machine whose clock starts once the old Machine is gone. Workers' clocks wait for init.
import { expect } from 'chai';
import type { MachineFacts } from '../../../api/capi/model.js';
import {
  HOUR,
  MINUTE,
  SECOND,
  T0,
  bootstrapConfig,
  configs,
  cpMachine,
  kcpFacts,
  mhcFacts,
  newCluster,
  snapshot,
  withNode,
  worker,
  type SnapshotOverrides,
} from '../testing/builders.js';
import {
  Scenario,
  cond,
  eventReasons,
  intentOf,
  progressingReason,
  requested,
  verdictOf,
} from '../testing/scenario.js';
import { ms } from '../time.js';

const DEADLINE = T0 + 21 * MINUTE; // ready at T0+1m, joinTimeout 20m

function creating(o: SnapshotOverrides = {}, machines: MachineFacts[] = []): Scenario {
  return new Scenario(
    snapshot({
      cluster: newCluster(),
      kcp: kcpFacts(),
      bootstrapConfigs: configs(
        bootstrapConfig('cp-0', false),
        bootstrapConfig('cp-0b', false),
        bootstrapConfig('cp-1', true),
      ),
      machines: [cpMachine('cp-0'), worker('w-1'), worker('w-2'), ...machines],
      ...o,
    }),
  );
}

/** Plans at DEADLINE (probe asked), then answers the probe as unreachable and plans again. */
function actOnFirst(sc: Scenario) {
  sc.plan();
  const asked = sc.at(DEADLINE).plan();
  expect(asked.probe).to.deep.equal({ host: '10.0.0.10', port: 6443 });
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
    sc.update('cp-0', { nodeName: 'node-cp-0' }).with({
      cluster: newCluster({
        controlPlaneInitialized: { value: true, since: T0 + 10 * MINUTE },
        remoteConnection: { value: true, since: T0 + 10 * MINUTE },
      }),
    });
    const p = sc.at(T0 + 29 * MINUTE).plan();
    expect(verdictOf(p, 'w-1')).to.include({
      state: 'Joining',
      clockStart: T0 + 10 * MINUTE,
      deadline: T0 + 30 * MINUTE,
    });
    expect(p.wakeAt).to.equal(T0 + 30 * MINUTE);
    expect(verdictOf(sc.at(T0 + 30 * MINUTE).plan(), 'w-1').state).to.equal('Stuck');
  });

  it('without a transition time, the clock starts when the controller first saw the control plane initialized', () => {
    const sc = creating();
    sc.update('cp-0', { nodeName: 'node-cp-0' }).with({
      cluster: newCluster({ controlPlaneInitialized: { value: true }, remoteConnection: { value: true, since: T0 } }),
    });
    sc.at(T0 + 40 * MINUTE).plan();
    expect(sc.status.controlPlaneInitializedSeen).to.equal('2026-03-01T00:40:00Z');
    const p = sc.at(T0 + 50 * MINUTE).plan();
    expect(verdictOf(p, 'w-1')).to.include({ state: 'Joining', clockStart: T0 + 40 * MINUTE });
  });

  it('is never deleted directly, even with strategy Delete: the control-plane provider replaces it', () => {
    const p = actOnFirst(creating({ settings: { strategy: 'Delete' } }));
    expect(p.intents.map((i) => [i.machine.name, i.want, i.want === 'mark' ? i.path : ''])).to.deep.equal([
      ['cp-0', 'mark', 'OwnerRemediated'],
    ]);
    expect(requested(p)).to.deep.equal(['cp-0']);
    const rec = p.status.remediations?.[0];
    expect(rec).to.include({ machine: 'cp-0', path: 'OwnerRemediated', outcome: 'Requested', firstControlPlane: true });
    expect(p.status.firstControlPlane?.replaced).to.include({ machine: 'cp-0', uid: 'uid-cp-0' });
  });

  it('probes the endpoint before acting, once per minute while unanswered', () => {
    const sc = creating();
    sc.plan();
    const p = sc.at(DEADLINE).plan();
    expect(p.probe).to.deep.equal({ host: '10.0.0.10', port: 6443 });
    expect(p.intents).to.deep.equal([]);
    expect(verdictOf(p, 'cp-0')).to.include({ state: 'Held', hold: 'EndpointProbe' });
    expect(p.status.recentFailures ?? []).to.deep.equal([]);
    expect(p.wakeAt).to.equal(DEADLINE + MINUTE);
    expect(sc.at(DEADLINE + 30 * SECOND).plan().probe).to.equal(undefined);
    expect(sc.at(DEADLINE + MINUTE).plan().probe).to.deep.equal({ host: '10.0.0.10', port: 6443 });
  });

  it('a control plane that answers gives it one more joinTimeout, then it is acted on without probing', () => {
    const sc = creating();
    sc.plan();
    sc.at(DEADLINE).plan();
    const p = sc.with({ endpointProbe: { reachable: true, at: DEADLINE } }).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(verdictOf(p, 'cp-0')).to.include({
      state: 'Held',
      hold: 'EndpointAnswered',
      deadline: DEADLINE + 20 * MINUTE,
    });
    expect(verdictOf(sc.at(DEADLINE + 10 * MINUTE).plan(), 'cp-0')).to.include({
      state: 'Held',
      hold: 'EndpointAnswered',
    });
    expect(ms(p.status.firstControlPlane?.extendedUntil)).to.equal(DEADLINE + 20 * MINUTE);
    expect(p.wakeAt).to.equal(DEADLINE + 20 * MINUTE);
    expect(sc.last?.wakeAt).to.equal(DEADLINE + 20 * MINUTE);
    const q = sc.at(DEADLINE + 20 * MINUTE).plan();
    expect(q.probe).to.equal(undefined);
    expect(requested(q)).to.deep.equal(['cp-0']);
  });

  it('firstControlPlane: Report only reports it', () => {
    const sc = creating({ settings: { firstControlPlane: 'Report' } });
    sc.plan();
    const p = sc.at(DEADLINE).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['RemediationSkipped']);
    expect(p.status.remediations?.[0]).to.include({ machine: 'cp-0', path: 'Report', outcome: 'Reported' });
    expect(sc.plan().intents).to.deep.equal([]);
  });

  it('with strategy Auto and an MHC that selects it, the remediate annotation is used', () => {
    const p = actOnFirst(
      creating({
        mhcs: [
          mhcFacts('cp-mhc', {
            selector: { matchExpressions: [{ key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' }] },
          }),
        ],
      }),
    );
    expect(intentOf(p, 'cp-0')).to.include({ want: 'mark', path: 'RemediateAnnotation' });
  });

  it('does not ask what KCP would refuse (its remediation-for says maxRetry is used up): RemediationRefusedByOwner, until KCP would act again', () => {
    const sc = creating({ kcp: kcpFacts({ remediation: { maxRetry: 1 } }) });
    sc.update('cp-0', { remediationFor: { machine: 'cp-old', timestamp: T0, retryCount: 1 } });
    const p = actOnFirst(sc);
    expect(requested(p)).to.deep.equal([]);
    const c = cond(p.status, 'Progressing');
    expect(c?.reason).to.equal('RemediationRefusedByOwner');
    expect(c?.message)
      .to.contain('already failed 1 times (maxRetry 1)')
      .and.contain('acts again after minHealthyPeriodSeconds, at 2026-03-01T01:00:00Z');
    expect(c?.message).to.contain('/docs/runbook.md#remediationrefusedbyowner');
    expect(p.wakeAt).to.equal(T0 + HOUR);
    // Past minHealthyPeriodSeconds KCP starts a new retry sequence: JoinGuard asks then.
    expect(requested(sc.at(T0 + HOUR).plan())).to.deep.equal(['cp-0']);
  });

  it('a retry within maxRetry is asked (KCP counts it as retry 1 of 2)', () => {
    const sc = creating({ kcp: kcpFacts({ remediation: { maxRetry: 2 } }) });
    sc.update('cp-0', { remediationFor: { machine: 'cp-old', timestamp: T0, retryCount: 1 } });
    expect(requested(actOnFirst(sc))).to.deep.equal(['cp-0']);
  });

  it("waits for KCP's retryPeriodSeconds (from the replacement's remediation-for) and wakes then", () => {
    const sc = creating({ kcp: kcpFacts({ remediation: { retryPeriodSeconds: 1800 } }) });
    sc.update('cp-0', { remediationFor: { machine: 'cp-old', timestamp: T0 + 10 * MINUTE, retryCount: 0 } });
    const p = actOnFirst(sc);
    expect(requested(p)).to.deep.equal([]);
    expect(p.wakeAt).to.equal(T0 + 40 * MINUTE);
    expect(cond(p.status, 'Progressing')?.message).to.contain('retryPeriodSeconds');
    expect(requested(sc.at(T0 + 40 * MINUTE).plan())).to.deep.equal(['cp-0']);
  });

  it('while KCP remediates another Machine (remediation-in-progress), JoinGuard waits', () => {
    const sc = creating({ kcp: kcpFacts({ remediationInProgress: { machine: 'cp-x', timestamp: T0 } }) });
    const p = actOnFirst(sc);
    expect(requested(p)).to.deep.equal([]);
    expect(cond(p.status, 'Progressing')?.message).to.contain('is remediating cp-x');
  });

  it("the replacement's join clock starts no earlier than the moment the old first Machine was gone", () => {
    const sc = creating();
    actOnFirst(sc);
    // KCP deletes cp-0; the controller sees it gone at T0+30m; the replacement was ready at T0+27m.
    sc.remove('cp-0').add(cpMachine('cp-0b', { createdAt: T0 + 26 * MINUTE }));
    const p = sc.at(T0 + 30 * MINUTE).plan();
    expect(p.status.remediations?.[0]).to.include({ outcome: 'Replaced', finishedTime: '2026-03-01T00:30:00Z' });
    expect(p.status.firstControlPlane?.replaced?.goneTime).to.equal('2026-03-01T00:30:00Z');
    expect(verdictOf(p, 'cp-0b')).to.include({
      state: 'Joining',
      clockStart: T0 + 30 * MINUTE,
      firstControlPlane: true,
    });
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
    expect(c?.message)
      .to.contain('cp-1')
      .and.contain('KubeadmConfig/cp-1')
      .and.contain('joinConfiguration.controlPlane');
    expect(c?.message).to.contain('/docs/runbook.md#firstcontrolplanereplacementmisconfigured');
    expect(p.status.firstControlPlane?.misconfigured).not.to.equal(undefined);
  });

  it('a resume clears the misconfiguration stop but keeps the wait for the old Machine (its VIP may still be there)', () => {
    const sc = creating();
    actOnFirst(sc);
    sc.update('cp-0', { deletingSince: DEADLINE + MINUTE }).add(cpMachine('cp-1', { createdAt: T0 + 26 * MINUTE }));
    sc.with({ cluster: newCluster({ controlPlaneInitialized: { value: true, since: T0 + 26 * MINUTE } }) })
      .remove('cp-1')
      .remove('cp-0');
    expect(sc.at(T0 + 27 * MINUTE).plan().status.firstControlPlane?.misconfigured).not.to.equal(undefined);
    // Back to not initialized with the old Machine still deleting: resume.
    const fresh = creating();
    actOnFirst(fresh);
    fresh.update('cp-0', { deletingSince: DEADLINE + MINUTE }).add(cpMachine('cp-0b', { createdAt: T0 + 23 * MINUTE }));
    fresh.annotate({ 'joinguard.io/resume': 'go' });
    const p = fresh.at(T0 + 24 * MINUTE).plan();
    expect(p.status.lastResume?.value).to.equal('go');
    expect(p.status.firstControlPlane?.replaced).to.include({ machine: 'cp-0' });
    expect(verdictOf(p, 'cp-0b')).to.include({ state: 'Held', hold: 'PreviousFirstControlPlane' });
  });

  it('the Cluster reporting initialized with no control-plane Machine left after the remediation: misconfigured', () => {
    const sc = creating();
    actOnFirst(sc);
    sc.remove('cp-0').with({
      cluster: newCluster({ controlPlaneInitialized: { value: true, since: DEADLINE + MINUTE } }),
    });
    const p = sc.at(T0 + 25 * MINUTE).plan();
    expect(progressingReason(p)).to.equal('FirstControlPlaneReplacementMisconfigured');
    expect(cond(p.status, 'Progressing')?.message).to.contain('no control-plane Machine is left');
  });

  it('once initialized, no Machine is first again (no probe), and the Machine that initialized it is never marked: reported', () => {
    // DESIGN: once the Cluster (or the KCP) says initialized, the first control-plane Machine is never marked again
    // (property test seed 5 on ddf2bdd: the init Machine, still without a Node, was asked of KCP after initialization).
    const sc = new Scenario(
      snapshot({
        kcp: kcpFacts({ initialized: true }),
        bootstrapConfigs: configs(bootstrapConfig('cp-0', false)),
        machines: [withNode(worker('old')), withNode(cpMachine('cp-a')), cpMachine('cp-0')],
      }),
    );
    sc.plan();
    const p = sc.at(DEADLINE).plan();
    expect(verdictOf(p, 'cp-0').firstControlPlane).to.equal(undefined);
    expect(p.probe).to.equal(undefined);
    expect(intentOf(p, 'cp-0'), 'the Machine that initialized the control plane').to.equal(undefined);
    expect(requested(p), 'nothing asked of KCP').to.deep.equal([]);
    expect(p.status.requests?.find((r) => r.machine === 'cp-0')).to.include({ path: 'Report', state: 'Reported' });
  });

  it('an initialized KubeadmControlPlane of one Machine cannot remediate it: not asked, RemediationRefusedByOwner', () => {
    const sc = new Scenario(
      snapshot({
        kcp: kcpFacts({ initialized: true }),
        // A joining Machine: the one that initialized the control plane is never marked at all (test above).
        bootstrapConfigs: configs(bootstrapConfig('cp-0', true)),
        machines: [withNode(worker('old')), cpMachine('cp-0')],
      }),
    );
    sc.plan();
    const p = sc.at(DEADLINE).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(cond(p.status, 'Progressing')?.message).to.contain(
      "can't remediate if current replicas are less or equal to 1",
    );
  });

  it('a first control-plane Machine that is only reported after the probe leaves no empty memory behind (planning twice changes nothing)', () => {
    // Found by the property test (CAPI v1.10, strategy MachineCondition: reported, never asked): the probe's memory
    // was emptied into firstControlPlane: {}, which the next plan read back as no memory.
    const sc = creating({ settings: { strategy: 'MachineCondition' }, capi: { apiVersion: 'v1beta1', minor: 10 } });
    const p = actOnFirst(sc); // Scenario replans each step and fails on any status change
    expect(requested(p)).to.deep.equal([]);
    expect(p.status.firstControlPlane).to.equal(undefined);
  });

  // issue 35, 2: the request was recorded (write-ahead) while it was the first control-plane Machine; its mark did not
  // land (a refusal, a 500, a crash). Once the Cluster (or the KCP) says initialized it is never marked as first again:
  // the rule is decided again at write time, like any request not made yet ("written only while due").
  for (const [what, change] of [
    [
      'the Cluster',
      {
        cluster: newCluster({
          controlPlaneInitialized: { value: true, since: DEADLINE + MINUTE },
          remoteConnection: { value: true, since: T0 },
        }),
      },
    ],
    [
      'the KubeadmControlPlane',
      {
        kcp: kcpFacts({ initialized: true }),
        cluster: newCluster({ remoteConnection: { value: true, since: T0 } }),
      },
    ],
  ] as const)
    it(`a first control-plane request recorded but not made is not written once ${what} reports initialized`, () => {
      const sc = creating();
      const p = actOnFirst(sc);
      expect(intentOf(p, 'cp-0')).to.include({ want: 'mark', path: 'OwnerRemediated' }); // its write did not land
      const q = sc
        .with(change)
        .at(DEADLINE + 2 * MINUTE)
        .plan();
      expect(q.intents.filter((i) => i.want !== 'withdraw').map((i) => i.machine.name)).to.deep.equal([]);
    });

  // Found by the property test (PROPERTY_SEED=8; testing/regressions.json first-control-plane-provisioned-at-its-provision-deadline):
  // the caches still showed it provisioning at its provision deadline, the request was recorded (write-ahead) and its
  // mark met a real 409 whose read showed it provisioned at that very moment. DESIGN: "a 409 is a live re-read and a
  // new decision"; a Machine that has provisioned is Joining, its join clock starting then.
  it('a first control-plane request recorded on a stale view (still provisioning at its provision deadline) is not written once the 409 read shows it provisioned: it is Joining', () => {
    const PROVISIONED = T0 + 30 * MINUTE; // exactly its provision deadline
    const stale = cpMachine('cp-0', {
      phase: 'Provisioning',
      infrastructureReady: { value: false },
      bootstrapReady: { value: false },
    });
    const sc = creating({
      settings: { provisionTimeoutMs: 30 * MINUTE },
      machines: [stale, worker('w-1'), worker('w-2')],
    });
    sc.plan();
    // Still provisioning (no endpoint to probe yet): asked at once, on the stale view.
    const p = sc.at(PROVISIONED).plan();
    expect(intentOf(p, 'cp-0')).to.include({ want: 'mark', path: 'OwnerRemediated' }); // its write met a 409
    // The 409's live read: infrastructure and bootstrap data ready at the provision deadline.
    const q = sc
      .update('cp-0', {
        phase: 'Provisioned',
        infrastructureReady: { value: true, since: PROVISIONED },
        bootstrapReady: { value: true, since: PROVISIONED },
      })
      .plan();
    expect(q.intents.filter((i) => i.want !== 'withdraw').map((i) => i.machine.name)).to.deep.equal([]);
    // It joins before its join deadline (PROVISIONED + joinTimeout): the request is withdrawn, never made.
    const r = sc
      .update('cp-0', { nodeName: 'cp-0' })
      .at(PROVISIONED + 10 * MINUTE)
      .plan();
    expect(r.intents.filter((i) => i.want !== 'withdraw').map((i) => i.machine.name)).to.deep.equal([]);
    expect(r.status.remediations?.[0]).to.include({ outcome: 'Cancelled' });
  });
});
