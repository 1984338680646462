// status.timedMachines through the whole planner, on an injected clock: which Machines are listed and in what order
// (nearest deadline first, no clock last, then by name), the bound, what holds each held one, that the list holds
// nothing that moves with the clock, and that nothing written into it by hand is read back.
import { expect } from 'chai';
import type { MachineJoinCheckStatus, TimedMachine } from '../../../api/v1alpha1/types.js';
import { STATUS_LIMITS } from '../../../api/v1alpha1/types.js';
import { plan } from '../plan/planner.js';
import {
  HOUR,
  MINUTE,
  T0,
  bootstrapConfig,
  check,
  clusterFacts,
  configs,
  cpMachine,
  kcpFacts,
  mhcFacts,
  newCluster,
  provisioning,
  snapshot,
  withNode,
  worker,
  type SnapshotOverrides,
} from '../testing/builders.js';
import { Scenario } from '../testing/scenario.js';
import { iso } from '../time.js';

const list = (o: SnapshotOverrides): TimedMachine[] => plan(snapshot(o)).status.timedMachines ?? [];
/** A worker's join deadline: ready at creation + 1m, joinTimeout 20m. */
const due = (createdAt: number) => iso(createdAt + 21 * MINUTE);
const owned = (name: string) => ({ kind: 'MachineSet' as const, name, uid: `uid-${name}`, controlPlane: false });

describe('status.timedMachines', () => {
  it('lists the Machines on a clock, nearest deadline first, with when each started and is due', () => {
    const got = list({
      settings: { provisionTimeoutMs: 30 * MINUTE },
      machines: [
        worker('late', { createdAt: T0 + 5 * MINUTE }),
        worker('early'),
        withNode(worker('joined')),
        worker('gone', { deletingSince: T0 + MINUTE }),
        worker('skipped', { skipReason: 'joinguard.io/skip' }),
        provisioning('booting', { createdAt: T0 + 2 * MINUTE }),
      ],
      now: T0 + 10 * MINUTE,
    });
    expect(got).to.deep.equal([
      { machine: 'early', phase: 'Joining', since: iso(T0 + MINUTE), until: due(T0) },
      { machine: 'late', phase: 'Joining', since: iso(T0 + 6 * MINUTE), until: due(T0 + 5 * MINUTE) },
      { machine: 'booting', phase: 'Provisioning', since: iso(T0 + 2 * MINUTE), until: iso(T0 + 32 * MINUTE) },
    ]);
  });

  it('leaves out a provisioning Machine with no provisionTimeout (on no clock), and ties go by name', () => {
    const got = list({ machines: [worker('b'), provisioning('p'), worker('a')], now: T0 + 10 * MINUTE });
    expect(got.map((e) => e.machine)).to.deep.equal(['a', 'b']);
  });

  it(`is bounded at ${STATUS_LIMITS.timedMachines}: the nearest deadlines; HELD counts past the bound`, () => {
    const machines = Array.from({ length: 25 }, (_, i) =>
      worker(`w-${String(24 - i).padStart(2, '0')}`, { createdAt: T0 + (24 - i) * MINUTE }),
    );
    const hour = { joinTimeoutMs: HOUR };
    const p = plan(snapshot({ settings: hour, machines: [...machines].reverse(), now: T0 + 30 * MINUTE }));
    const got = p.status.timedMachines ?? [];
    expect(got).to.have.length(STATUS_LIMITS.timedMachines);
    expect(got[0]).to.deep.include({ machine: 'w-00', until: iso(T0 + 61 * MINUTE) });
    expect(got.at(-1)).to.deep.include({ machine: 'w-19', until: iso(T0 + 80 * MINUTE) });
    expect(p.status.heldMachines).to.equal(0);
    const inOrder = plan(snapshot({ settings: hour, machines, now: T0 + 30 * MINUTE }));
    expect(inOrder.status.timedMachines).to.deep.equal(got);
    const paused = plan(snapshot({ settings: { paused: true }, machines, now: T0 + 2 * HOUR }));
    expect(paused.status.heldMachines).to.equal(25);
    expect(paused.status.timedMachines).to.have.length(STATUS_LIMITS.timedMachines);
  });

  it('puts held Machines with no clock last (waiting for the first control-plane Machine)', () => {
    const got = list({
      cluster: newCluster(),
      kcp: kcpFacts(),
      bootstrapConfigs: configs(bootstrapConfig('cp-0', false)),
      machines: [provisioning('w-1'), cpMachine('cp-0')],
      now: T0 + 5 * MINUTE,
    });
    expect(got).to.deep.equal([
      { machine: 'cp-0', phase: 'Joining', since: iso(T0 + MINUTE), until: due(T0) },
      { machine: 'w-1', phase: 'Provisioning', onHold: 'FirstControlPlane' },
    ]);
  });

  // One Machine past its deadline, and what holds it back; `absent` when it is asked for (see remediations).
  const stuckAt = T0 + 22 * MINUTE;
  const holds: { name: string; o: SnapshotOverrides; machine: string; onHold: string | undefined }[] = [
    { name: 'nothing: it is asked for, and is in remediations', o: {}, machine: 'w-1', onHold: undefined },
    {
      name: 'the connection down',
      o: { cluster: clusterFacts({ remoteConnection: { value: false, since: T0 + 10 * MINUTE } }) },
      machine: 'w-1',
      onHold: 'ConnectionDown',
    },
    {
      name: 'the grace after the connection came back',
      o: { cluster: clusterFacts({ remoteConnection: { value: true, since: stuckAt - 30_000 } }) },
      machine: 'w-1',
      onHold: 'ConnectionGrace',
    },
    { name: 'spec.paused', o: { settings: { paused: true } }, machine: 'w-1', onHold: 'Paused' },
    {
      name: 'joinguard.io/withdraw-all',
      o: { check: check({ annotations: { 'joinguard.io/withdraw-all': '' } }) },
      machine: 'w-1',
      onHold: 'WithdrawingMarks',
    },
    {
      name: 'the Cluster being deleted',
      o: { cluster: clusterFacts({ deleting: true }) },
      machine: 'w-1',
      onHold: 'ClusterDeleting',
    },
    {
      name: 'a paused MachineHealthCheck on the Auto path',
      o: { mhcs: [mhcFacts('mhc', { paused: true })] },
      machine: 'w-1',
      onHold: 'MachineHealthCheckPaused',
    },
    {
      name: 'strategy Delete without --allow-machine-delete',
      o: { settings: { strategy: 'Delete' }, allowMachineDelete: false },
      machine: 'w-1',
      onHold: 'MachineDeleteNotAllowed',
    },
    {
      name: 'the budget (maxInFlight 1, another Machine in flight)',
      o: {
        settings: { consecutiveJoinFailures: 0 },
        machines: [worker('w-0', { createdAt: T0 - MINUTE }), worker('w-1')],
      },
      machine: 'w-1',
      onHold: 'RemediationBudgetExhausted',
    },
    {
      name: 'the suspicion (the second failure in a row)',
      o: {
        settings: { maxInFlight: { count: 5 } },
        machines: [worker('w-0', { createdAt: T0 - MINUTE, owner: owned('ms-0') }), worker('w-1')],
        check: check({ status: { everJoined: true } }),
      },
      machine: 'w-1',
      onHold: 'BootstrapCredentialSuspect',
    },
    {
      name: 'never joined (neverJoinedLimit failures)',
      o: { settings: { neverJoinedLimit: 1, consecutiveJoinFailures: 0 } },
      machine: 'w-1',
      onHold: 'NeverJoined',
    },
    {
      name: "its KubeadmControlPlane remediating another Machine (KCP's one at a time)",
      o: {
        kcp: kcpFacts({ initialized: true, remediationInProgress: { machine: 'cp-9' } }),
        machines: [cpMachine('w-1'), withNode(cpMachine('cp-8')), withNode(cpMachine('cp-9'))],
      },
      machine: 'w-1',
      onHold: 'OwnerBusy',
    },
    {
      name: 'its owner answered CannotBeRemediated for another of its Machines',
      o: {
        settings: { maxInFlight: { count: 5 } },
        machines: [
          worker('w-0', {
            createdAt: T0 - MINUTE,
            healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' },
            ownerRemediated: { status: 'False', reason: 'CannotBeRemediated', message: 'no' },
          }),
          worker('w-1'),
        ],
        check: check({
          status: {
            everJoined: true,
            requests: [
              {
                machine: 'w-0',
                uid: 'uid-w-0',
                owner: { kind: 'MachineSet', name: 'ms-a' },
                path: 'OwnerRemediated',
                kind: 'JoinTimeout',
                time: iso(T0 + 20 * MINUTE),
                state: 'Open',
                marked: true,
                markedTime: iso(T0 + 20 * MINUTE),
                answered: true,
              },
            ],
          },
        }),
      },
      machine: 'w-1',
      onHold: 'RemediationRefusedByOwner',
    },
    {
      name: 'a mark someone else made (a MachineHealthCheck)',
      o: { machines: [worker('w-1', { healthCheckSucceeded: { status: 'False', reason: 'NodeStartupTimeout' } })] },
      machine: 'w-1',
      onHold: 'AlreadyMarked',
    },
  ];
  for (const h of holds) {
    it(`past its deadline, held by ${h.name}`, () => {
      const p = plan(snapshot({ machines: [worker('w-1')], now: stuckAt, ...h.o }));
      const e = (p.status.timedMachines ?? []).find((x) => x.machine === h.machine);
      if (h.onHold === undefined) {
        expect(e, JSON.stringify(p.status.timedMachines)).to.equal(undefined);
        expect(p.status.remediations?.find((x) => x.machine === h.machine)).to.include({ outcome: 'Requested' });
        return;
      }
      expect(e, JSON.stringify(p.status)).to.not.equal(undefined);
      expect(e!.onHold).to.equal(h.onHold);
      expect(p.status.heldMachines).to.be.at.least(1);
      expect(p.status.heldReason, 'HELD BY').to.be.a('string');
    });
  }

  it('holds no countdown: at rest the list is the same at every moment, and changes only as Machines come and go', () => {
    const sc = new Scenario(snapshot({ machines: [worker('a'), withNode(worker('b'))], now: T0 + 2 * MINUTE }));
    const first = sc.plan().status;
    for (const t of [3, 9, 15, 20]) {
      const next = sc.at(T0 + t * MINUTE).plan().status;
      expect(next, `at ${t}m`).to.deep.equal(first);
    }
    sc.add(worker('c', { createdAt: T0 + 20 * MINUTE })).at(T0 + 20 * MINUTE + 30_000);
    expect(sc.plan().status.timedMachines?.map((e) => e.machine)).to.deep.equal(['a', 'c']);
    sc.update('a', { nodeName: 'node-a' }).at(T0 + 20 * MINUTE + 40_000);
    expect(sc.plan().status.timedMachines?.map((e) => e.machine)).to.deep.equal(['c']);
  });

  it('is never read back: a hand-written list is replaced and decides nothing', () => {
    const machines = [worker('a'), worker('b', { createdAt: T0 + MINUTE })];
    const written: MachineJoinCheckStatus = {
      everJoined: true,
      timedMachines: [
        { machine: 'zzz', phase: 'Joining', until: iso(T0 - HOUR), onHold: 'Paused' },
        { bogus: true } as never,
      ],
    };
    const clean = plan(snapshot({ machines, check: check({ status: { everJoined: true } }), now: T0 + 22 * MINUTE }));
    const edited = plan(snapshot({ machines, check: check({ status: written }), now: T0 + 22 * MINUTE }));
    expect(edited.status).to.deep.equal(clean.status);
    expect(edited.intents).to.deep.equal(clean.intents);
    expect(edited.memoryNotes).to.deep.equal(clean.memoryNotes);
    expect(edited.status.timedMachines?.map((e) => e.machine)).to.deep.equal(['b']);
  });

  it("the marks in flight are remediations' (with the owner's answer), not repeated here", () => {
    const sc = new Scenario(snapshot({ machines: [worker('a'), worker('b', { createdAt: T0 + HOUR })] }));
    sc.at(T0 + 22 * MINUTE).plan();
    expect(sc.last!.asked).to.deep.equal(['a']);
    sc.update('a', {
      healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' },
      ownerRemediated: { status: 'False', reason: 'RemediationDeferred', message: 'MachineDeployment md paused' },
    }).advance(10_000);
    const s = sc.plan().status;
    expect(s.timedMachines?.map((e) => e.machine)).to.deep.equal(['b']);
    expect(s.remediations).to.have.length(1);
    expect(s.remediations![0]).to.include({ machine: 'a', outcome: 'Deferred', ownerReason: 'RemediationDeferred' });
    expect(s.remediations![0]!.finishedTime).to.equal(undefined);
  });
});
