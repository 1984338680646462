// RolloutSuspect: table tests with an injected clock, through the planner (and the rule alone for the KCP case and
// the settled Machines). A MachineDeployment md whose revision 1 (ms-1) joined rolls out revision 2 (ms-2) whose
// Machines a and b never join: at STALL a is rebuilt and b raises the suspicion (consecutiveJoinFailures 2). Fakes:
// MachineFacts and MachineSetFacts built here, no apiserver.
import { expect } from 'chai';
import type { MachineFacts, MachineSetFacts } from '../../../api/capi/model.js';
import type { FailureRecord } from '../../../api/v1alpha1/types.js';
import { ANNOTATION_RESUME } from '../../../api/v1alpha1/types.js';
import {
  HOUR,
  MINUTE,
  NS,
  T0,
  CLUSTER,
  clusterFacts,
  cpMachine,
  kcpFacts,
  snapshot,
  withNode,
  worker,
} from '../testing/builders.js';
import { Scenario, cond, eventReasons, progressingReason, requested } from '../testing/scenario.js';
import { rolloutOver, rolloutSuspect } from './rollout-suspect.js';

const STALL = T0 + 21 * MINUTE;

function machineSet(
  name: string,
  revision: string | undefined,
  infra: string,
  o: Partial<MachineSetFacts> = {},
): MachineSetFacts {
  return {
    name,
    namespace: NS,
    uid: `uid-${name}`,
    clusterName: CLUSTER,
    createdAt: T0 - HOUR,
    deployment: 'md',
    ...(revision !== undefined ? { revision } : {}),
    infrastructureTemplate: `SimMachineTemplate/${infra}`,
    bootstrapTemplate: 'SimBootstrapConfigTemplate/md',
    version: 'v1.36.3',
    ...o,
  };
}

const of = (ms: string, name: string, o: Partial<MachineFacts> = {}): MachineFacts =>
  worker(name, { owner: { kind: 'MachineSet', name: ms, uid: `uid-${ms}`, controlPlane: false }, ...o });

const SETS = [machineSet('ms-1', '1', 'md'), machineSet('ms-2', '2', 'md-r2')];
const OLD = [
  withNode(of('ms-1', 'old-0', { createdAt: T0 - HOUR })),
  withNode(of('ms-1', 'old-1', { createdAt: T0 - HOUR })),
];

function rollout(machines: MachineFacts[], sets: MachineSetFacts[] = SETS): Scenario {
  const sc = new Scenario(snapshot({ settings: { maxPerOwner: 100 }, machines, machineSets: sets }));
  sc.plan();
  return sc;
}

describe('RolloutSuspect: a rollout that cannot join', () => {
  it('fires: the failures in a row all come from revision 2, which never joined, while revision 1 did', () => {
    const sc = rollout([...OLD, of('ms-2', 'a'), of('ms-2', 'b'), of('ms-2', 'c', { createdAt: T0 + 5 * MINUTE })]);
    const p = sc.at(STALL).plan();
    expect(requested(p), 'the first failure is rebuilt, the one that reaches the threshold is not').to.deep.equal([
      'a',
    ]);
    expect(progressingReason(p)).to.equal('RolloutSuspect');
    const s = p.status.suspicion!;
    expect(s).to.deep.include({ reason: 'RolloutSuspect', machines: ['a', 'b'], canariesSpent: 0 });
    expect(s.rollout).to.deep.equal({
      owner: { kind: 'MachineDeployment', name: 'md' },
      revision: '2',
      machineSet: 'ms-2',
      previousRevision: '1',
      previousMachineSet: 'ms-1',
      changes: ['spec.template.spec.infrastructureRef: SimMachineTemplate/md -> SimMachineTemplate/md-r2'],
    });
    const msg = cond(p.status, 'Progressing')!.message;
    for (const piece of [
      'revision 2 of MachineDeployment md (MachineSet ms-2)',
      'a, b',
      'revision 1 (MachineSet ms-1)',
      'SimMachineTemplate/md -> SimMachineTemplate/md-r2',
      'roll back',
      'Fix the template',
      '/docs/runbook.md#rolloutsuspect',
    ]) {
      expect(msg).to.contain(piece);
    }
    expect(eventReasons(p)).to.include('RolloutSuspect').and.not.include('SuspicionRaised');
    expect(p.events.find((e) => e.reason === 'RolloutSuspect')?.message).to.contain(
      'revision 2 of MachineDeployment md',
    );
    // Held like the suspicion: c times out later and is not rebuilt, nor is b.
    sc.remove('a');
    const later = sc.at(STALL + 10 * MINUTE).plan();
    expect(requested(later)).to.deep.equal([]);
    expect(later.status.suspicion?.machines).to.deep.equal(['a', 'b', 'c']);
    expect(progressingReason(later)).to.equal('RolloutSuspect');
    expect(later.wakeAt).to.equal(STALL + 30 * MINUTE);
  });

  it('one canary after probeInterval, as for the suspicion, and it stays RolloutSuspect', () => {
    const sc = rollout([...OLD, of('ms-2', 'a'), of('ms-2', 'b'), of('ms-2', 'c')]);
    sc.at(STALL).plan();
    sc.remove('a');
    expect(requested(sc.at(STALL + 30 * MINUTE - 1).plan())).to.deep.equal([]);
    const p = sc.at(STALL + 30 * MINUTE).plan();
    expect(requested(p)).to.deep.equal(['b']);
    expect(p.status.suspicion).to.deep.include({ reason: 'RolloutSuspect', canariesSpent: 1 });
    expect(progressingReason(p)).to.equal('RolloutSuspect');
  });

  it('does not fire when a Machine of that revision joined: BootstrapCredentialSuspect as before', () => {
    const sc = rollout([
      ...OLD,
      withNode(of('ms-2', 'n0', { createdAt: T0 - HOUR })),
      of('ms-2', 'a'),
      of('ms-2', 'b'),
    ]);
    const p = sc.at(STALL).plan();
    expect(progressingReason(p)).to.equal('BootstrapCredentialSuspect');
    expect(p.status.suspicion?.rollout).to.equal(undefined);
    expect(eventReasons(p)).to.include('SuspicionRaised');
  });

  it('does not fire when the previous revision never joined', () => {
    // Something else in scope joined (so not NeverJoined), but no Machine of ms-1.
    const elsewhere = withNode(
      worker('other', {
        createdAt: T0 - HOUR,
        owner: { kind: 'MachineSet', name: 'other-ms', uid: 'u-o', controlPlane: false },
      }),
    );
    const sc = rollout(
      [elsewhere, of('ms-1', 'old-0'), of('ms-2', 'a'), of('ms-2', 'b')].map((m) =>
        m.name === 'old-0' ? { ...m, createdAt: T0 + 30 * MINUTE } : m,
      ),
    );
    expect(progressingReason(sc.at(STALL).plan())).to.equal('BootstrapCredentialSuspect');
  });

  it('does not fire when the failures span revisions', () => {
    const sc = rollout([...OLD, of('ms-1', 'a'), of('ms-2', 'b')]);
    const p = sc.at(STALL).plan();
    expect(p.status.suspicion?.machines).to.deep.equal(['a', 'b']);
    expect(progressingReason(p)).to.equal('BootstrapCredentialSuspect');
  });

  it('does not fire when the revision is not the one being rolled out, nor without MachineSets', () => {
    const newer = [...SETS, machineSet('ms-3', '3', 'md-r3')];
    expect(
      progressingReason(
        rollout([...OLD, of('ms-2', 'a'), of('ms-2', 'b')], newer)
          .at(STALL)
          .plan(),
      ),
    ).to.equal('BootstrapCredentialSuspect');
    const sc = new Scenario(snapshot({ machines: [...OLD, of('ms-2', 'a'), of('ms-2', 'b')] }));
    sc.plan();
    expect(progressingReason(sc.at(STALL).plan())).to.equal('BootstrapCredentialSuspect');
  });

  it('a rollback clears it: the old MachineSet becomes revision 3, SuspicionCleared, the count restarts', () => {
    const sc = rollout([...OLD, of('ms-2', 'a'), of('ms-2', 'b')]);
    sc.at(STALL).plan();
    sc.remove('a');
    sc.with({ machineSets: [machineSet('ms-1', '3', 'md'), machineSet('ms-2', '2', 'md-r2')] });
    // Rolled back, but b (of revision 2) is still there: held until ms-2 scales it away, never asked for.
    const waiting = sc.advance(MINUTE).plan();
    expect(progressingReason(waiting)).to.equal('RolloutSuspect');
    expect(requested(waiting)).to.deep.equal([]);
    sc.update('b', { deletingSince: T0 + 23 * MINUTE, phase: 'Deleting' });
    const p = sc.advance(MINUTE).plan();
    expect(requested(p)).to.deep.equal([]);
    expect(p.status.suspicion).to.equal(undefined);
    expect(p.status.consecutiveJoinFailures).to.equal(0);
    expect(progressingReason(p)).to.not.equal('RolloutSuspect');
    const cleared = p.events.find((e) => e.reason === 'SuspicionCleared');
    expect(cleared?.message).to.contain(
      'MachineDeployment md now rolls out revision 3 (MachineSet ms-1), not revision 2',
    );
  });

  it('a new revision (the template fixed) clears it too; the MachineSet gone as well', () => {
    const sc = rollout([...OLD, of('ms-2', 'a'), of('ms-2', 'b')]);
    sc.at(STALL).plan();
    sc.with({ machineSets: [SETS[0]!] })
      .remove('a')
      .remove('b');
    const p = sc.advance(MINUTE).plan();
    expect(p.events.find((e) => e.reason === 'SuspicionCleared')?.message).to.contain(
      'MachineSet ms-2 of revision 2 is gone',
    );
  });

  it('resume clears it like the suspicion', () => {
    const sc = rollout([...OLD, of('ms-2', 'a'), of('ms-2', 'b')]);
    sc.at(STALL).plan();
    sc.remove('a');
    const p = sc
      .annotate({ [ANNOTATION_RESUME]: 'now' })
      .advance(MINUTE)
      .plan();
    expect(p.status.suspicion).to.equal(undefined);
    expect(eventReasons(p)).to.include('SuspicionCleared').and.include('Resumed');
  });

  it('a Machine of the new revision that joins clears it as it clears the suspicion', () => {
    const sc = rollout([...OLD, of('ms-2', 'a'), of('ms-2', 'b'), of('ms-2', 'c', { createdAt: T0 + 10 * MINUTE })]);
    sc.at(STALL).plan();
    sc.update('c', { nodeName: 'node-c', phase: 'Running' });
    const p = sc.advance(MINUTE).plan();
    expect(p.status.suspicion).to.equal(undefined);
    expect(eventReasons(p)).to.include('SuspicionCleared');
  });
});

describe('RolloutSuspect: the rule alone', () => {
  const fail = (machine: string, owner: { kind: string; name: string }, version?: string): FailureRecord => ({
    machine,
    uid: `uid-${machine}`,
    owner,
    kind: 'JoinTimeout',
    time: new Date(STALL).toISOString(),
    ...(version ? { version } : {}),
  });
  const ms2 = { kind: 'MachineSet', name: 'ms-2' };

  it('a joined Machine of the previous revision found only among the settled Machines counts', () => {
    const failures = [fail('a', ms2), fail('b', ms2)];
    expect(rolloutSuspect(failures, { machines: [], machineSets: SETS })).to.equal(undefined);
    const settled = { find: (p: (m: MachineFacts) => boolean) => OLD.find(p) };
    expect(rolloutSuspect(failures, { machines: [], machineSets: SETS, settled })?.revision).to.equal('2');
    // ...and a settled joined Machine of the new revision vetoes it.
    const joinedNew = withNode(of('ms-2', 'n'));
    expect(
      rolloutSuspect(failures, {
        machines: [],
        machineSets: SETS,
        settled: {
          find: (p) =>
            [...OLD, joinedNew].find((m) => m.nodeName !== undefined && p(m) && m.owner.name === 'ms-2') ?? OLD.find(p),
        },
      }),
    ).to.equal(undefined);
  });

  it('a KubeadmControlPlane upgrade: the failures of version v2 while v1 Machines joined name the versions', () => {
    const kcp = { kind: 'KubeadmControlPlane', name: 'kcp' };
    const machines = [withNode(cpMachine('cp-0', { version: 'v1.35.0' })), cpMachine('cp-a', { version: 'v1.36.3' })];
    const w = { machines, kcp: kcpFacts({ version: 'v1.36.3', initialized: true }) };
    expect(rolloutSuspect([fail('cp-a', kcp, 'v1.36.3'), fail('cp-b', kcp, 'v1.36.3')], w)).to.deep.equal({
      owner: kcp,
      revision: 'v1.36.3',
      previousRevision: 'v1.35.0',
      changes: ['spec.version: v1.35.0 -> v1.36.3'],
    });
    expect(rolloutSuspect([fail('cp-a', kcp, 'v1.35.0'), fail('cp-b', kcp, 'v1.36.3')], w), 'two versions').to.equal(
      undefined,
    );
    expect(
      rolloutSuspect([fail('cp-a', kcp, 'v1.36.3'), fail('cp-b', kcp, 'v1.36.3')], {
        ...w,
        kcp: kcpFacts({ version: 'v1.37.0' }),
      }),
      'not the version rolled out',
    ).to.equal(undefined);
    expect(
      rolloutSuspect([fail('cp-a', kcp, 'v1.36.3'), fail('cp-b', kcp, 'v1.36.3')], {
        ...w,
        machines: [cpMachine('cp-0', { version: 'v1.35.0' })],
      }),
      'v1 never joined',
    ).to.equal(undefined);
    const e = rolloutSuspect([fail('cp-a', kcp, 'v1.36.3'), fail('cp-b', kcp, 'v1.36.3')], w)!;
    expect(rolloutOver(e, w)).to.equal(undefined);
    const rolledBack = { ...w, kcp: kcpFacts({ version: 'v1.35.0' }) };
    expect(rolloutOver(e, rolledBack), 'cp-a of v1.36.3 still there').to.equal(undefined);
    expect(rolloutOver(e, { ...rolledBack, machines: [machines[0]!] })).to.contain('now rolls out version v1.35.0');
  });

  it('a MachineSet without a revision, or not of a MachineDeployment, is no rollout', () => {
    const failures = [fail('a', ms2), fail('b', ms2)];
    const bare = [SETS[0]!, machineSet('ms-2', undefined, 'md-r2')];
    expect(rolloutSuspect(failures, { machines: OLD, machineSets: bare })).to.equal(undefined);
    const { deployment: _d, ...orphanFields } = machineSet('ms-2', '2', 'md-r2');
    expect(rolloutSuspect(failures, { machines: OLD, machineSets: [SETS[0]!, orphanFields] })).to.equal(undefined);
    expect(rolloutSuspect(failures, { machines: OLD, machineSets: SETS, kcp: kcpFacts() })?.machineSet).to.equal(
      'ms-2',
    );
    void clusterFacts;
  });
});
