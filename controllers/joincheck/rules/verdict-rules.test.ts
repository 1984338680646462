// How a Machine is judged, as a table: the order (Deleting, Joined, Skipped, Remediating, then the clocks), the
// clocks and which times are trusted, the holds (connection, workload Node without providerID), the grace.
import { expect } from 'chai';
import type { MachineFacts } from '../../../api/capi/model.js';
import { plan } from '../plan/planner.js';
import {
  HOUR,
  MINUTE,
  SECOND,
  T0,
  check,
  clusterFacts,
  provisioning,
  snapshot,
  withNode,
  worker,
  type SnapshotOverrides,
} from '../testing/builders.js';
import { Scenario, cond, intentOf, progressingReason, requested, verdictOf } from '../testing/scenario.js';
import type { MachineVerdict } from '../types.js';

interface Row {
  name: string;
  machine: MachineFacts;
  at: number;
  s?: SnapshotOverrides;
  expect: Partial<MachineVerdict>;
}

const AFTER = T0 + 30 * MINUTE; // past the default join deadline (T0+21m)

const rows: Row[] = [
  {
    name: 'deleting wins over everything',
    machine: withNode(worker('m', { deletingSince: T0 + MINUTE })),
    at: AFTER,
    expect: { state: 'Deleting' },
  },
  { name: 'nodeRef set: Joined', machine: withNode(worker('m')), at: AFTER, expect: { state: 'Joined' } },
  {
    name: 'a workload Node with its providerID: Joined before nodeRef',
    machine: worker('m'),
    at: AFTER,
    s: { workloadNodes: [{ name: 'n1', providerID: 'sim://m' }] },
    expect: { state: 'Joined' },
  },
  {
    name: 'joinguard.io/skip: Skipped',
    machine: worker('m', { skipReason: 'joinguard.io/skip' }),
    at: AFTER,
    expect: { state: 'Skipped' },
  },
  {
    name: 'skip-remediation: Skipped',
    machine: worker('m', { skipReason: 'cluster.x-k8s.io/skip-remediation' }),
    at: AFTER,
    expect: { state: 'Skipped' },
  },
  {
    name: 'paused Cluster: Skipped',
    machine: worker('m'),
    at: AFTER,
    s: { cluster: clusterFacts({ paused: true }) },
    expect: { state: 'Skipped' },
  },
  {
    name: "someone else's mark (HealthCheckSucceeded=False): Remediating",
    machine: worker('m', { healthCheckSucceeded: { status: 'False', reason: 'NodeStartupTimeout' } }),
    at: AFTER,
    expect: { state: 'Remediating' },
  },
  {
    name: 'the remediate annotation: Remediating',
    machine: worker('m', { remediateAnnotation: true }),
    at: AFTER,
    expect: { state: 'Remediating' },
  },
  {
    name: 'infrastructure not ready: Provisioning, clock from creation',
    machine: provisioning('m'),
    at: AFTER,
    expect: { state: 'Provisioning', clockStart: T0 },
  },
  {
    name: 'provisionTimeout passed: Stuck(ProvisionTimeout)',
    machine: provisioning('m'),
    at: T0 + 15 * MINUTE,
    s: { settings: { provisionTimeoutMs: 15 * MINUTE } },
    expect: { state: 'Stuck', failureKind: 'ProvisionTimeout', deadline: T0 + 15 * MINUTE },
  },
  {
    // CAPI's kubeadm bootstrap provider creates no worker data before ControlPlaneInitialized: a pool created with
    // its Cluster is not late because the control plane took a while.
    name: "a worker's provision clock starts at the later of creation and the control plane's initialization",
    machine: provisioning('m'),
    at: T0 + 30 * MINUTE,
    s: {
      settings: { provisionTimeoutMs: 15 * MINUTE },
      cluster: clusterFacts({ controlPlaneInitialized: { value: true, since: T0 + 20 * MINUTE } }),
    },
    expect: { state: 'Provisioning', clockStart: T0 + 20 * MINUTE, deadline: T0 + 35 * MINUTE },
  },
  {
    name: 'a worker still provisioning provisionTimeout after the initialization: Stuck(ProvisionTimeout)',
    machine: provisioning('m'),
    at: T0 + 35 * MINUTE,
    s: {
      settings: { provisionTimeoutMs: 15 * MINUTE },
      cluster: clusterFacts({ controlPlaneInitialized: { value: true, since: T0 + 20 * MINUTE } }),
    },
    expect: {
      state: 'Stuck',
      failureKind: 'ProvisionTimeout',
      clockStart: T0 + 20 * MINUTE,
      deadline: T0 + 35 * MINUTE,
    },
  },
  {
    name: 'ready, no Node, within joinTimeout: Joining',
    machine: worker('m'),
    at: T0 + 20 * MINUTE,
    expect: { state: 'Joining', clockStart: T0 + MINUTE, deadline: T0 + 21 * MINUTE },
  },
  {
    name: 'at the deadline: Stuck(JoinTimeout)',
    machine: worker('m'),
    at: T0 + 21 * MINUTE,
    expect: { state: 'Stuck', failureKind: 'JoinTimeout' },
  },
  {
    name: 'the join clock starts at the latest of creation, infrastructure ready, bootstrap ready, control plane initialized',
    machine: worker('m', {
      infrastructureReady: { value: true, since: T0 + 3 * MINUTE },
      bootstrapReady: { value: true, since: T0 + 5 * MINUTE },
    }),
    at: T0 + 10 * MINUTE,
    s: { cluster: clusterFacts({ controlPlaneInitialized: { value: true, since: T0 + 7 * MINUTE } }) },
    expect: { state: 'Joining', clockStart: T0 + 7 * MINUTE },
  },
  {
    name: 'workers wait for the control plane: Held, no clock',
    machine: worker('m'),
    at: AFTER,
    s: { cluster: clusterFacts({ controlPlaneInitialized: { value: false }, remoteConnection: { value: false } }) },
    expect: { state: 'Held', hold: 'ControlPlaneNotInitialized', deadline: undefined },
  },
  {
    name: 'RemoteConnectionProbe False: Unobservable, even past the deadline',
    machine: worker('m'),
    at: AFTER,
    s: { cluster: clusterFacts({ remoteConnection: { value: false } }) },
    expect: { state: 'Unobservable', hold: 'ConnectionDown', pastDeadline: true },
  },
  {
    name: 'NodeReady ConnectionDown: Unobservable',
    machine: worker('m', { nodeConnectionDown: true }),
    at: AFTER,
    expect: { state: 'Unobservable', pastDeadline: true },
  },
  {
    name: 'connection back less than the grace ago: Held',
    machine: worker('m'),
    at: AFTER,
    s: { cluster: clusterFacts({ remoteConnection: { value: true, since: AFTER - MINUTE } }) },
    expect: { state: 'Held', hold: 'ConnectionGrace', pastDeadline: true },
  },
  {
    name: 'connection back more than the grace ago: judged again',
    machine: worker('m'),
    at: AFTER,
    s: { cluster: clusterFacts({ remoteConnection: { value: true, since: AFTER - 2 * MINUTE } }) },
    expect: { state: 'Stuck' },
  },
  {
    name: 'a workload Node without providerID holds the verdict',
    machine: worker('m'),
    at: AFTER,
    s: { workloadNodes: [{ name: 'fresh' }] },
    expect: { state: 'Held', hold: 'NodeWithoutProviderID' },
  },
];

describe('judge: how a Machine is judged', () => {
  for (const r of rows) {
    it(r.name, () => {
      const p = plan(
        snapshot({ machines: [withNode(worker('old', { createdAt: T0 - HOUR })), r.machine], now: r.at, ...r.s }),
      );
      const v = verdictOf(p, 'm');
      for (const [k, want] of Object.entries(r.expect))
        expect((v as unknown as Record<string, unknown>)[k], k).to.equal(want);
    });
  }

  it('a missing transition time falls back to the first time the controller saw the state, kept in status', () => {
    const m = worker('m', { infrastructureReady: { value: true }, bootstrapReady: { value: true } });
    const sc = new Scenario(snapshot({ machines: [m], now: T0 + 5 * MINUTE }));
    const p = sc.plan();
    expect(p.status.observations?.[0]).to.deep.equal({ machine: 'm', uid: 'uid-m', readySeen: '2026-03-01T00:05:00Z' });
    expect(verdictOf(p, 'm')).to.include({ state: 'Joining', clockStart: T0 + 5 * MINUTE });
    expect(p.wakeAt).to.equal(T0 + 25 * MINUTE);
    const q = sc.at(T0 + 25 * MINUTE).plan();
    expect(verdictOf(q, 'm')).to.include({ state: 'Stuck', clockStart: T0 + 5 * MINUTE });
  });

  it('seen for the first time long after it was ready, with no transition times: its clock starts now', () => {
    const m = worker('m', { infrastructureReady: { value: true }, bootstrapReady: { value: true } });
    const p = plan(snapshot({ machines: [m], now: T0 + 5 * HOUR }));
    expect(verdictOf(p, 'm')).to.include({ state: 'Joining', clockStart: T0 + 5 * HOUR });
  });

  it('Progressing=False/ControlPlaneEndpointUnreachable only when a verdict is actually held', () => {
    const down = { cluster: clusterFacts({ remoteConnection: { value: false } }) };
    const early = plan(snapshot({ machines: [worker('m')], now: T0 + 5 * MINUTE, ...down }));
    expect(progressingReason(early)).to.equal('AsExpected');
    const late = plan(snapshot({ machines: [worker('m')], now: AFTER, ...down }));
    const c = cond(late.status, 'Progressing');
    expect(c?.reason).to.equal('ControlPlaneEndpointUnreachable');
    expect(c?.message)
      .to.contain('10.0.0.10:6443')
      .and.contain('RemoteConnectionProbe')
      .and.contain('/docs/runbook.md#controlplaneendpointunreachable');
    expect(late.intents).to.deep.equal([]);
  });

  it('without a probe transition time, the grace starts when the controller saw the connection back', () => {
    const sc = new Scenario(
      snapshot({
        cluster: clusterFacts({ remoteConnection: undefined }),
        machines: [worker('m', { nodeConnectionDown: true })],
        now: AFTER,
        connectionGraceMs: 30 * SECOND,
      }),
    );
    sc.plan();
    expect(sc.status.connectionDownSeen).to.equal('2026-03-01T00:30:00Z');
    sc.update('m', { nodeConnectionDown: false });
    const p = sc.at(AFTER + MINUTE).plan();
    expect(verdictOf(p, 'm')).to.include({ state: 'Held', hold: 'ConnectionGrace' });
    expect(p.wakeAt).to.equal(AFTER + MINUTE + 30 * SECOND);
    expect(p.status.connectionRestoredSeen).to.equal('2026-03-01T00:31:00Z');
    const q = sc.at(AFTER + MINUTE + 30 * SECOND).plan();
    expect(verdictOf(q, 'm').state).to.equal('Stuck');
    expect(requested(q)).to.deep.equal(['m']);
    expect(intentOf(q, 'm')?.want).to.equal('mark');
    expect(q.status.connectionRestoredSeen).to.equal(undefined);
  });

  it('before the control plane is initialized the connection is not a reason for anything', () => {
    const p = plan(
      snapshot({
        check: check(),
        cluster: clusterFacts({ controlPlaneInitialized: { value: false }, remoteConnection: { value: false } }),
        machines: [worker('m')],
        now: AFTER,
      }),
    );
    expect(progressingReason(p)).to.equal('AsExpected');
  });

  it('no per-Machine memory while the conditions carry trustworthy times', () => {
    const p = plan(snapshot({ machines: [worker('a'), worker('b'), withNode(worker('c'))], now: T0 + 5 * MINUTE }));
    expect(p.status.observations).to.equal(undefined);
  });

  it('a condition time in the future (year 2999) is not trusted: the first time seen stands, and the Machine is judged', () => {
    const future = Date.parse('2999-01-01T00:00:00Z');
    const sc = new Scenario(
      snapshot({
        machines: [worker('m', { infrastructureReady: { value: true, since: future } })],
        now: T0 + 5 * MINUTE,
      }),
    );
    const p = sc.plan();
    expect(verdictOf(p, 'm')).to.include({ state: 'Joining', clockStart: T0 + 5 * MINUTE });
    expect(p.status.observations?.[0]).to.include({ uid: 'uid-m', readySeen: '2026-03-01T00:05:00Z' });
    expect(verdictOf(sc.at(T0 + 25 * MINUTE).plan(), 'm').state).to.equal('Stuck');
  });

  it('a time a little ahead of the controller clock (skew under a minute) is believed', () => {
    const p = plan(
      snapshot({
        machines: [worker('m', { infrastructureReady: { value: true, since: T0 + 5 * MINUTE + 30 * SECOND } })],
        now: T0 + 5 * MINUTE,
      }),
    );
    expect(verdictOf(p, 'm').clockStart).to.equal(T0 + 5 * MINUTE + 30 * SECOND);
    expect(p.status.observations).to.equal(undefined);
  });

  it('a flicker (InfrastructureReady briefly not True, flag still true) does not move the deadline, during or after', () => {
    const sc = new Scenario(snapshot({ machines: [worker('m')], now: T0 + 5 * MINUTE }));
    expect(verdictOf(sc.plan(), 'm').deadline).to.equal(T0 + 21 * MINUTE);
    sc.update('m', { infrastructureReady: { value: true } }); // condition False: no time while the flag holds
    const during = sc.at(T0 + 10 * MINUTE).plan();
    expect(verdictOf(during, 'm').deadline).to.equal(T0 + 21 * MINUTE);
    sc.update('m', { infrastructureReady: { value: true, since: T0 + 11 * MINUTE } }); // True again, a new time
    const after = sc.at(T0 + 12 * MINUTE).plan();
    expect(verdictOf(after, 'm').deadline).to.equal(T0 + 21 * MINUTE);
    expect(verdictOf(sc.at(T0 + 21 * MINUTE).plan(), 'm').state).to.equal('Stuck');
  });

  it('a moved time, once seen, is kept in status: a restarted controller keeps the first deadline', () => {
    const sc = new Scenario(snapshot({ machines: [worker('m')], now: T0 + 5 * MINUTE }));
    sc.plan();
    sc.update('m', { infrastructureReady: { value: true, since: T0 + 11 * MINUTE } });
    sc.at(T0 + 12 * MINUTE).plan();
    const restarted = plan({ ...sc.s, previous: undefined });
    expect(verdictOf(restarted, 'm').deadline).to.equal(T0 + 21 * MINUTE);
  });

  it("the Cluster's ControlPlaneInitialized time that moves later while it stays True is not trusted: the first time seen stands, kept across a restart", () => {
    const sc = new Scenario(snapshot({ machines: [worker('m')], now: T0 + 5 * MINUTE }));
    expect(verdictOf(sc.plan(), 'm').deadline).to.equal(T0 + 21 * MINUTE);
    // The Cluster's status rebuilt (a restore, a controller that recomputes it): its condition now says T0+15m.
    sc.with({ cluster: clusterFacts({ controlPlaneInitialized: { value: true, since: T0 + 15 * MINUTE } }) });
    expect(verdictOf(sc.at(T0 + 16 * MINUTE).plan(), 'm').deadline).to.equal(T0 + 21 * MINUTE);
    expect(sc.status.controlPlaneInitializedSeen).to.equal('2026-02-28T23:00:00Z');
    const restarted = plan({ ...sc.s, previous: undefined, now: T0 + 22 * MINUTE });
    expect(verdictOf(restarted, 'm').state).to.equal('Stuck');
  });

  it("the Cluster's ControlPlaneInitialized time in the future falls back to the first time seen", () => {
    const future = Date.parse('2999-01-01T00:00:00Z');
    const p = plan(
      snapshot({
        cluster: clusterFacts({ controlPlaneInitialized: { value: true, since: future } }),
        machines: [worker('m')],
        now: T0 + 5 * MINUTE,
      }),
    );
    expect(verdictOf(p, 'm').clockStart).to.equal(T0 + 5 * MINUTE);
    expect(p.status.controlPlaneInitializedSeen).to.equal('2026-03-01T00:05:00Z');
  });

  it('a RemoteConnectionProbe transition time in the future does not hold verdicts forever', () => {
    const future = Date.parse('2999-01-01T00:00:00Z');
    const sc = new Scenario(
      snapshot({ cluster: clusterFacts({ remoteConnection: { value: false } }), machines: [worker('m')], now: AFTER }),
    );
    sc.plan();
    sc.with({ cluster: clusterFacts({ remoteConnection: { value: true, since: future } }) });
    expect(verdictOf(sc.at(AFTER + MINUTE).plan(), 'm').hold).to.equal('ConnectionGrace');
    expect(verdictOf(sc.at(AFTER + 4 * MINUTE).plan(), 'm').state).to.equal('Stuck');
  });
});
