// The planner as a whole: a restarted controller decides the same from the persisted status alone, output is
// deterministic whatever the input order, invalid specs and missing Clusters do nothing (but withdraw), malformed
// Machines are mentioned and never acted on, conditions keep their transition times, join durations and wake-ups,
// a moved check restores its memory, and the check's own metadata (owner, clusterctl block-move).
import { expect } from 'chai';
import { plan } from './planner.js';
import {
  HOUR,
  MINUTE,
  SECOND,
  T0,
  bootstrapConfig,
  check,
  clusterFacts,
  configs,
  cpMachine,
  kcpFacts,
  mhcFacts,
  newCluster,
  snapshot,
  withNode,
  worker,
} from '../testing/builders.js';
import { Scenario, cond, eventReasons, intentOf, progressingReason, requested } from '../testing/scenario.js';
import type { Plan, Snapshot } from '../types.js';

/** A snapshot rebuilt from scratch with only the persisted status carried over (a restarted controller). */
function restarted(s: Snapshot): Snapshot {
  const { previous: _lost, ...rest } = s;
  const fresh = JSON.parse(
    JSON.stringify({ ...rest, bootstrapConfigs: [...s.bootstrapConfigs.entries()] }),
  ) as Snapshot & { bootstrapConfigs: [string, never][] };
  return { ...fresh, bootstrapConfigs: new Map(fresh.bootstrapConfigs) };
}

/** What decides (everything but the in-process view and the join durations this process measured). */
function decisions(p: Plan) {
  const { joinDurations: _d, ...status } = JSON.parse(JSON.stringify(p.status)) as Plan['status'];
  return {
    status,
    intents: JSON.parse(JSON.stringify(p.intents)),
    events: p.events,
    wakeAt: p.wakeAt,
    check: p.check,
    probe: p.probe,
  };
}

/** `p` converged, the source paused for clusterctl move: the target's check, with the memory it carried, made at `moved`. */
function movedCheck(sc: Scenario, p: Parameters<Scenario['converge']>[0], moved: number) {
  sc.converge(p);
  sc.with({ cluster: clusterFacts({ paused: true }) }).annotate({
    'clusterctl.cluster.x-k8s.io/block-move': 'joinguard.io',
  });
  const memory = sc.advance(MINUTE).plan().check.carryMemory!;
  const target = check({ annotations: { 'joinguard.io/memory': memory } });
  target.metadata.creationTimestamp = new Date(moved).toISOString();
  return target;
}

describe('planner', () => {
  it('a restart (a fresh plan from the persisted status only) decides the same at every step', () => {
    const sc = new Scenario(
      snapshot({
        cluster: newCluster(),
        kcp: kcpFacts(),
        bootstrapConfigs: configs(bootstrapConfig('cp-0', false), bootstrapConfig('cp-0b', false)),
        machines: [cpMachine('cp-0'), worker('w-1'), worker('w-2')],
      }),
    );
    const steps: ((s: Scenario) => void)[] = [
      (s) => s.at(T0 + 21 * MINUTE), // first CP stuck: probe
      (s) => s.with({ endpointProbe: { reachable: false, at: T0 + 21 * MINUTE } }), // act through KCP
      (s) =>
        s
          .remove('cp-0')
          .add(cpMachine('cp-0b', { createdAt: T0 + 23 * MINUTE }))
          .at(T0 + 24 * MINUTE),
      (s) =>
        s
          .update('cp-0b', { nodeName: 'node-cp-0b' })
          .with({
            cluster: newCluster({
              controlPlaneInitialized: { value: true, since: T0 + 40 * MINUTE },
              remoteConnection: { value: true, since: T0 + 40 * MINUTE },
            }),
            kcp: kcpFacts({ initialized: true }),
          })
          .at(T0 + 41 * MINUTE), // grace
      (s) => s.at(T0 + 61 * MINUTE), // workers stuck: first rebuilt, second raises the suspicion
      (s) => s.remove('w-1').at(T0 + 91 * MINUTE), // canary
      (s) => s.update('w-2', { nodeName: 'node-w-2' }).at(T0 + 95 * MINUTE), // a join clears it
    ];
    for (const [i, step] of steps.entries()) {
      step(sc);
      const fresh = plan(restarted(sc.s));
      const p = sc.plan();
      expect(decisions(fresh), `step ${i}`).to.deep.equal(decisions(p));
    }
    const reasons = sc.plans.map(progressingReason);
    expect(reasons).to.deep.equal([
      'AsExpected',
      'Remediating',
      'AsExpected',
      'AsExpected',
      'BootstrapCredentialSuspect',
      'BootstrapCredentialSuspect',
      'AsExpected',
    ]);
    expect(sc.status.suspicion).to.equal(undefined);
  });

  it('is deterministic: the order of the input does not matter', () => {
    const ms = ['d', 'b', 'e', 'a', 'c'].map((n) =>
      worker(n, { owner: { kind: 'MachineSet', name: `ms-${n}`, controlPlane: false } }),
    );
    const base = { settings: { maxInFlight: { count: 2 }, consecutiveJoinFailures: 0 }, now: T0 + HOUR };
    const p1 = plan(snapshot({ ...base, machines: [withNode(worker('old')), ...ms] }));
    const p2 = plan(snapshot({ ...base, machines: [...ms].reverse().concat(withNode(worker('old'))) }));
    expect(decisions(p1)).to.deep.equal(decisions(p2));
    const sorted = (p: Plan) => [...p.verdicts].sort((a, b) => (a.machine < b.machine ? -1 : 1));
    expect(sorted(p1)).to.deep.equal(sorted(p2));
    expect(sorted(p1).map((v) => v.machine)).to.deep.equal(['a', 'b', 'c', 'd', 'e', 'old']);
  });

  it('is deterministic with Machines held for different reasons: heldReason and the message follow names, not input order', () => {
    // Found by the property test's world with a KubeadmControlPlane: the first control-plane Machine held for the
    // endpoint probe and a worker held for it came out in cache order.
    const machines = [cpMachine('cp-0'), worker('w-1')];
    const base = {
      cluster: newCluster(),
      kcp: kcpFacts(),
      bootstrapConfigs: configs(bootstrapConfig('cp-0', false)),
      now: T0 + 21 * MINUTE,
    };
    const p1 = plan(snapshot({ ...base, machines }));
    const p2 = plan(snapshot({ ...base, machines: [...machines].reverse() }));
    expect(p1.status.heldMachines).to.equal(2);
    expect(p1.status.heldReason).to.equal('EndpointProbe'); // cp-0's, the first name
    expect(decisions(p2)).to.deep.equal(decisions(p1));
  });

  it('is deterministic with requests held by a paused MachineHealthCheck: the Paused message follows names, not input order', () => {
    // Found by the property test at PROPERTY_SEED=9: the Paused condition named the held Machines in cache order.
    const machines = [withNode(worker('old', { createdAt: T0 - HOUR })), worker('b'), worker('a')];
    const sc = new Scenario(
      snapshot({
        settings: { maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 },
        mhcs: [mhcFacts('mhc-a')],
        machines,
      }),
    );
    sc.plan();
    expect(sc.at(T0 + 21 * MINUTE).plan().asked).to.have.members(['a', 'b']); // recorded; the marks not written yet
    sc.with({ mhcs: [mhcFacts('mhc-a', { paused: true })] }).advance(MINUTE);
    const p1 = plan(sc.s);
    const p2 = plan({ ...sc.s, machines: [...machines].reverse() });
    expect(cond(p1.status, 'Paused')?.message).to.contain('a is left to it; ');
    expect(cond(p2.status, 'Paused')).to.deep.equal(cond(p1.status, 'Paused'));
    expect(decisions(p2)).to.deep.equal(decisions(p1));
  });

  it('an invalid spec: no actions, Ready=False/InvalidSpec naming it', () => {
    const p = plan(
      snapshot({
        settings: undefined,
        settingsError: 'spec.joinTimeout: "20 minutes" is not a duration',
        machines: [worker('a')],
        now: T0 + HOUR,
      }),
    );
    expect(p.intents).to.deep.equal([]);
    const c = cond(p.status, 'Ready');
    expect(c).to.include({ status: 'False', reason: 'InvalidSpec', observedGeneration: 1 });
    expect(c?.message).to.contain('spec.joinTimeout');
  });

  it('no Cluster: no actions, Ready=False/ClusterNotFound', () => {
    const p = plan(snapshot({ cluster: undefined, machines: [worker('a')], now: T0 + HOUR }));
    expect(p.intents).to.deep.equal([]);
    expect(cond(p.status, 'Ready')).to.include({ status: 'False', reason: 'ClusterNotFound' });
  });

  it("even with an invalid spec or no Cluster, a joined Machine still carrying JoinGuard's mark is withdrawn", () => {
    const m = withNode(worker('a', { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' } }));
    const status = {
      requests: [
        {
          machine: 'a',
          uid: 'uid-a',
          path: 'OwnerRemediated' as const,
          kind: 'JoinTimeout' as const,
          time: '2026-03-01T00:21:00Z',
          state: 'Open' as const,
        },
      ],
    };
    for (const o of [{ settings: undefined, settingsError: 'bad' }, { cluster: undefined }]) {
      const p = plan(snapshot({ ...o, check: check({ status }), machines: [m], now: T0 + HOUR }));
      expect(p.intents.map((i) => [i.machine.name, i.want])).to.deep.equal([['a', 'withdraw']]);
    }
  });

  it('malformed Machines are counted in Ready and never acted on', () => {
    const p = plan(snapshot({ malformed: [{ name: 'bad', error: 'status.nodeRef: not an object' }], now: T0 + HOUR }));
    expect(p.intents).to.deep.equal([]);
    expect(cond(p.status, 'Ready')).to.include({ status: 'True', reason: 'Ready' });
    expect(cond(p.status, 'Ready')?.message)
      .to.contain('1 Machines could not be read')
      .and.contain('bad (status.nodeRef: not an object)');
  });

  it('a Machine that becomes unreadable is not taken for gone: its record stays in flight', () => {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('old')), worker('a')] }));
    sc.plan();
    sc.at(T0 + 21 * MINUTE).plan();
    sc.remove('a').with({ malformed: [{ name: 'a', error: 'bad status' }] });
    const p = sc.advance(MINUTE).plan();
    expect(p.status.remediations?.[0]?.outcome).to.equal('Requested');
    expect(progressingReason(p)).to.equal('Remediating');
  });

  it('the selector and the cluster choose the Machines; expectedMachines leaves deleting ones out', () => {
    const p = plan(
      snapshot({
        settings: { selector: { matchLabels: { pool: 'a' } } },
        machines: [
          worker('in'),
          worker('gone', { deletingSince: T0 }),
          worker('other-pool', { labels: { pool: 'b' } }),
          worker('other-cluster', { clusterName: 'c2' }),
          worker('other-ns', { namespace: 'x' }),
        ],
        now: T0 + 5 * MINUTE,
      }),
    );
    expect(p.verdicts.map((v) => v.machine).sort()).to.deep.equal(['gone', 'in']);
    expect(p.status).to.include({ expectedMachines: 1, joiningMachines: 1 });
  });

  it('conditions: lastTransitionTime moves only when the status does; observedGeneration is the generation', () => {
    const sc = new Scenario(
      snapshot({
        check: check({ generation: 7 }),
        settings: { consecutiveJoinFailures: 0 },
        machines: [withNode(worker('old')), worker('a'), worker('b')],
      }),
    );
    sc.plan();
    sc.at(T0 + 21 * MINUTE).plan(); // a requested, b waits for the budget: Progressing False
    const first = cond(sc.status, 'Progressing');
    expect(first).to.include({
      status: 'False',
      reason: 'RemediationBudgetExhausted',
      observedGeneration: 7,
      lastTransitionTime: '2026-03-01T00:21:00Z',
    });
    // Ready summarises (CAPI v1beta2): b waiting for a maxInFlight of 1 while a is in flight is pacing, not a stall
    // (a stall is False/NotReady with the stall in CAPI's summary form: guards.test.ts, maxPerOwner).
    expect(cond(sc.status, 'Ready')).to.include({ status: 'True', reason: 'Ready' });
    const readySince = cond(sc.status, 'Ready')!.lastTransitionTime;
    sc.remove('a').update('b', { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' } });
    sc.at(T0 + 25 * MINUTE).plan(); // b requested: True/Remediating
    sc.update('b', { nodeName: 'node-b' });
    sc.converge(sc.at(T0 + 26 * MINUTE).plan()); // withdrawn, still Remediating until the mark is gone
    sc.at(T0 + 27 * MINUTE).plan(); // True/AsExpected
    const last = cond(sc.status, 'Progressing');
    expect(last).to.include({ status: 'True', reason: 'AsExpected', lastTransitionTime: '2026-03-01T00:25:00Z' });
    expect(cond(sc.status, 'Ready')).to.include({ status: 'True', reason: 'Ready', lastTransitionTime: readySince });
  });

  it('join durations: count, p50, p95, max and a suggested joinTimeout (1.5 x p95, to the minute, at least 2m)', () => {
    const names = ['a', 'b', 'c', 'd'];
    const sc = new Scenario(snapshot({ machines: names.map((n) => worker(n)) }));
    sc.plan();
    // Ready at T0+1m; they join 2, 4, 6 and 10 minutes later.
    [3, 5, 7, 11].forEach((min, i) => {
      sc.update(names[i] as string, { nodeName: `node-${i}` })
        .at(T0 + min * MINUTE)
        .plan();
    });
    expect(sc.status.joinDurations).to.deep.equal({
      count: 4,
      p50Seconds: 240,
      p95Seconds: 600,
      maxSeconds: 600,
      suggestedJoinTimeout: '15m',
      recentSeconds: [120, 240, 360, 600],
    });
    expect(sc.status.everJoined).to.equal(true);
    expect(sc.status.observations).to.equal(undefined);
  });

  it('fast joins still suggest at least 2m', () => {
    const sc = new Scenario(snapshot({ machines: [worker('a')] }));
    sc.plan();
    sc.update('a', { nodeName: 'n' })
      .at(T0 + MINUTE + 10 * SECOND)
      .plan();
    expect(sc.status.joinDurations?.suggestedJoinTimeout).to.equal('2m');
  });

  it('wakeAt is the nearest future deadline, undefined when nothing is pending', () => {
    const p = plan(
      snapshot({
        machines: [worker('a', { createdAt: T0 }), worker('b', { createdAt: T0 + 5 * MINUTE }), withNode(worker('c'))],
        now: T0 + 2 * MINUTE,
      }),
    );
    expect(p.wakeAt).to.equal(T0 + 21 * MINUTE);
    const q = plan(snapshot({ machines: [withNode(worker('c'))], now: T0 }));
    expect(q.wakeAt).to.equal(undefined);
  });

  it('while CAPI cannot see the workload cluster, the first control-plane Machine still gets its verdict', () => {
    const p = plan(
      snapshot({
        cluster: clusterFacts({ controlPlaneInitialized: { value: false }, remoteConnection: { value: false } }),
        bootstrapConfigs: configs(bootstrapConfig('cp-0', false)),
        machines: [cpMachine('cp-0'), worker('w')],
        now: T0 + 10 * MINUTE,
      }),
    );
    expect(p.verdicts.find((v) => v.machine === 'cp-0')).to.include({
      state: 'Joining',
      firstControlPlane: true,
      clockStart: T0 + MINUTE,
    });
  });

  it('a request made before the workload connection was lost is not written while CAPI cannot see the workload cluster, nor during the grace', () => {
    // Found by the property test's oracle: a Delete asked at 00:31:29, its write crashed, the connection lost at
    // 00:31:44 — the next pass deleted the Machine, whose Node CAPI could no longer see.
    for (const path of ['Delete', 'OwnerRemediated'] as const) {
      const status = {
        requests: [
          {
            machine: 'a',
            uid: 'uid-a',
            owner: { kind: 'MachineSet', name: 'ms-a' },
            path,
            kind: 'JoinTimeout' as const,
            time: '2026-03-01T00:21:00Z',
            state: 'Open' as const,
          },
        ],
      };
      const base = {
        check: check({ status }),
        settings: { strategy: path === 'Delete' ? ('Delete' as const) : ('OwnerRemediated' as const) },
        machines: [worker('a')],
        connectionGraceMs: 2 * MINUTE,
      };
      const down = plan(
        snapshot({ ...base, cluster: clusterFacts({ remoteConnection: { value: false } }), now: T0 + 22 * MINUTE }),
      );
      expect(down.intents, `${path}: connection down`).to.deep.equal([]);
      const grace = plan(
        snapshot({
          ...base,
          cluster: clusterFacts({ remoteConnection: { value: true, since: T0 + 23 * MINUTE } }),
          now: T0 + 24 * MINUTE,
        }),
      );
      expect(grace.intents, `${path}: within the grace`).to.deep.equal([]);
      const back = plan(
        snapshot({
          ...base,
          cluster: clusterFacts({ remoteConnection: { value: true, since: T0 + 23 * MINUTE } }),
          now: T0 + 26 * MINUTE,
        }),
      );
      expect(
        back.intents.map((i) => i.want),
        `${path}: after the grace`,
      ).to.deep.equal([path === 'Delete' ? 'delete' : 'mark']);
    }
  });

  it('a moved check (empty status, memory in joinguard.io/memory) restores its memory: the suspicion still stalls', () => {
    const sc = new Scenario(
      snapshot({ machines: [withNode(worker('old', { createdAt: T0 - HOUR })), worker('a'), worker('b')] }),
    );
    sc.plan();
    sc.at(T0 + 21 * MINUTE).plan();
    expect(sc.status.suspicion).not.to.equal(undefined);
    // clusterctl move pauses the Cluster: the memory goes into the annotation, block-move is released.
    sc.with({ cluster: clusterFacts({ paused: true }) }).annotate({
      'clusterctl.cluster.x-k8s.io/block-move': 'joinguard.io',
    });
    const paused = sc.advance(MINUTE).plan();
    expect(paused.check.carryMemory).to.be.a('string');
    // On the target: the same objects, an empty status, the annotation; the Cluster unpaused.
    const target = plan(
      snapshot({
        check: check({ annotations: { 'joinguard.io/memory': paused.check.carryMemory! } }),
        machines: sc.s.machines.filter((m) => m.name !== 'a'),
        now: T0 + 30 * MINUTE,
      }),
    );
    expect(target.status.suspicion?.since).to.equal(sc.status.suspicion?.since);
    expect(requested(target)).to.deep.equal([]);
    expect(progressingReason(target)).to.equal('BootstrapCredentialSuspect');
    expect(target.check.blockMove).to.equal(true);
  });

  it('clusterctl move re-creates the Machines (new uids and creation times, no status): the open request follows its Machine, nothing is forgotten while the target is paused, and the moved joined Machines do not clear the suspicion', () => {
    const sc = new Scenario(
      snapshot({ machines: [withNode(worker('old', { createdAt: T0 - HOUR })), worker('a'), worker('b')] }),
    );
    sc.plan();
    const p = sc.at(T0 + 21 * MINUTE).plan();
    expect(requested(p)).to.deep.equal(['a']);
    expect(sc.status.suspicion?.machines).to.deep.equal(['a', 'b']);
    // The target: the check first (its Machines not there yet), the Cluster paused; then the Machines, anew.
    const moved = T0 + 30 * MINUTE;
    const target = movedCheck(sc, p, moved);
    const t = new Scenario(
      snapshot({ check: target, cluster: clusterFacts({ paused: true }), machines: [], now: moved }),
    );
    expect(t.plan().status.requests?.map((r) => [r.machine, r.uid, r.state])).to.deep.equal([['a', 'uid-a', 'Open']]);
    const again = (name: string, o: Parameters<typeof worker>[1] = {}) =>
      worker(name, { uid: `uid-${name}-moved`, createdAt: moved + 30_000, ...o });
    const ready = { value: true, since: moved + MINUTE };
    t.with({ cluster: clusterFacts(), machines: [withNode(again('old')), again('a'), again('b')] }).at(
      moved + 2 * MINUTE,
    );
    t.update('a', { infrastructureReady: ready, bootstrapReady: ready });
    const q = t.plan();
    expect(q.status.requests?.map((r) => [r.machine, r.uid, r.state])).to.deep.equal([['a', 'uid-a-moved', 'Open']]);
    expect(q.status.suspicion?.since, 'the suspicion survives the move').to.equal(sc.status.suspicion?.since);
    // a's mark went with the status clusterctl did not copy: it is made again (its request is open); b stays held.
    expect(intentOf(q, 'a')).to.deep.include({ want: 'mark' });
    expect(intentOf(q, 'b')).to.equal(undefined);
  });

  // Seed 225208427's sweep (issue 35): moved in the very second its failures were recorded, the target's check was not
  // taken for a moved one (records older than the check, strictly), and the old Node cleared the suspicion.
  for (const [when, movedAt] of [
    ['', T0 + 30 * MINUTE],
    [', also when moved in the second its failures were recorded', T0 + 21 * MINUTE],
  ] as const)
    it(`clusterctl move strips status: the moved joined Machine seen with no Node (paused, then before CAPI rebuilds it) is no join when its nodeRef comes back, and the held Machines stay held${when}`, () => {
      const sc = new Scenario(
        snapshot({
          machines: [withNode(worker('old', { createdAt: T0 - HOUR })), worker('a'), worker('b'), worker('c')],
        }),
      );
      sc.plan();
      const p = sc.at(T0 + 21 * MINUTE).plan();
      expect(requested(p)).to.deep.equal(['a']);
      expect(sc.status.suspicion?.machines).to.deep.equal(['a', 'b', 'c']);
      const moved = movedAt;
      const target = movedCheck(sc, p, moved);
      // The Machines re-created with no status (clusterctl move): no Node, nothing ready, phase Pending.
      const stripped = (name: string) =>
        worker(name, {
          uid: `uid-${name}-moved`,
          createdAt: moved + 30_000,
          phase: 'Pending',
          infrastructureReady: { value: false },
          bootstrapReady: { value: false },
        });
      const t = new Scenario(
        snapshot({
          check: target,
          cluster: clusterFacts({ paused: true }),
          machines: ['old', 'a', 'b', 'c'].map(stripped),
          now: moved + MINUTE,
        }),
      );
      t.plan();
      // Unpaused: the first pass sees the status not rebuilt yet, and the memory annotation goes (the executor's).
      t.with({ cluster: clusterFacts() }).advance(MINUTE).plan();
      t.annotate({});
      t.advance(MINUTE).plan();
      // CAPI rebuilds the status: old has its Node again; a, b, c are ready again (times of now), with no Node.
      const ready = { value: true, since: t.s.now };
      t.with({
        machines: [
          withNode(stripped('old')),
          ...['a', 'b', 'c'].map((n) => ({
            ...stripped(n),
            phase: 'Provisioned',
            infrastructureReady: ready,
            bootstrapReady: ready,
          })),
        ],
      });
      const q = t.advance(MINUTE).plan();
      expect(q.status.suspicion?.since, 'the Node old had before the move is no join').to.equal(
        sc.status.suspicion?.since,
      );
      expect(eventReasons(q)).not.to.include('SuspicionCleared');
      expect(requested(q), 'the held Machines stay held').to.deep.equal([]);
      expect(intentOf(q, 'b')).to.equal(undefined);
      expect(intentOf(q, 'c')).to.equal(undefined);
    });

  it("the check gets its Cluster as owner (as MachineHealthChecks do) and carries clusterctl's block-move while the Cluster runs", () => {
    const p = plan(snapshot({ now: T0 }));
    expect(p.check.ownerCluster).to.deep.equal({ apiVersion: 'cluster.x-k8s.io/v1beta2', name: 'c1', uid: 'uid-c1' });
    expect(p.check.blockMove).to.equal(true);
    const owned = plan(
      snapshot({
        check: {
          ...check({ annotations: { 'clusterctl.cluster.x-k8s.io/block-move': 'joinguard.io' } }),
          metadata: {
            ...check().metadata,
            finalizers: ['joinguard.io/withdraw-marks'],
            annotations: { 'clusterctl.cluster.x-k8s.io/block-move': 'joinguard.io' },
            ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', name: 'c1', uid: 'uid-c1' }],
          },
        },
        now: T0,
      }),
    );
    expect(owned.check).to.deep.equal({});
  });

  it('bad values in status are never trusted: entries of the wrong shape dropped, times in the future read as now, each noted', () => {
    const status = {
      requests: [
        {
          machine: 'a',
          uid: 'uid-a',
          path: 'Nonsense',
          kind: 'JoinTimeout',
          time: '2026-03-01T00:00:00Z',
          state: 'Open',
        },
        'junk',
      ],
      ownerWindows: [{ kind: 'MachineSet', name: 'ms-a', times: ['2999-01-01T00:00:00Z'] }],
      failuresSinceResume: -4,
    } as unknown as Plan['status'];
    const p = plan(
      snapshot({ check: check({ status }), settings: { neverJoinedLimit: 0 }, machines: [worker('a')], now: T0 }),
    );
    expect(p.status.requests).to.equal(undefined);
    expect(p.status.failuresSinceResume).to.equal(0);
    expect(p.memoryNotes).to.include.members([
      'status.requests[0].path: unknown value "Nonsense", entry ignored',
      'status.requests[1]: an entry of the wrong shape, ignored',
      'status.ownerWindows[0].times: 2999-01-01T00:00:00Z is in the future, read as now',
      'status.failuresSinceResume: -4 is out of range, read as 0',
    ]);
  });
});
