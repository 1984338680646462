// Deleting a check and recognisable marks, through the planner (DESIGN: "Recognisable marks", "Deleting a check"):
// every check carries a finalizer that withdraws every mark it made before the check goes, bounded in time, with a
// condition that says what it waits for; every mark carries joinguard.io/requested-by: <check uid>, so a mark is
// recognised from the Machine alone — a deleted check's mark is withdrawn by the check that now holds the Machine,
// another live check's is never touched.
import { expect } from 'chai';
import { FINALIZER } from '../../../api/v1alpha1/types.js';
import { DELETION_BOUND_MS } from './deletion.js';
import { HOUR, MINUTE, SECOND, T0, clusterFacts, snapshot, withNode, worker } from '../testing/builders.js';
import { Scenario, cond, intentOf, requestOf, requested } from '../testing/scenario.js';
import type { Snapshot } from '../types.js';

const OTHER = 'uid-other-check';
const GONE = 'uid-deleted-check';

/** Two workers of two MachineSets marked at T0+21m (written), the check carrying its finalizer. */
function marked(): Scenario {
  const sc = new Scenario(
    snapshot({
      settings: { maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 },
      machines: [
        withNode(worker('old', { createdAt: T0 - HOUR })),
        worker('a'),
        worker('b', { owner: { kind: 'MachineSet', name: 'ms-b', controlPlane: false } }),
      ],
    }),
  );
  sc.s = {
    ...sc.s,
    check: { ...sc.s.check, metadata: { ...sc.s.check.metadata, finalizers: [FINALIZER] } },
    checkUids: new Set(['uid-mjc']),
  };
  sc.plan();
  sc.converge(sc.at(T0 + 21 * MINUTE).plan());
  return sc;
}

function deleteCheck(sc: Scenario, at: number): Scenario {
  sc.s = {
    ...sc.s,
    check: {
      ...sc.s.check,
      metadata: { ...sc.s.check.metadata, deletionTimestamp: new Date(at).toISOString().replace('.000Z', 'Z') },
    },
  };
  return sc;
}

describe('deleting a check: its finalizer withdraws every mark it made', () => {
  it('every check carries the finalizer, added by the first plan; not while its Cluster is paused (clusterctl move deletes the source)', () => {
    expect(new Scenario(snapshot()).plan().check.addFinalizer).to.equal(true);
    expect(new Scenario(snapshot({ cluster: clusterFacts({ paused: true }) })).plan().check.addFinalizer).to.equal(
      undefined,
    );
    const sc = marked();
    expect(sc.plan().check.addFinalizer).to.equal(undefined);
  });

  it('a deleted check asks nothing, withdraws every mark it made (joined or not), says what it waits for, then lets go', () => {
    const sc = marked();
    sc.update('b', { ownerRemediated: { status: 'False', reason: 'RemediationDeferred' } });
    sc.add(worker('c', { createdAt: T0 + MINUTE }));
    deleteCheck(sc, T0 + 30 * MINUTE);
    const p = sc.at(T0 + 30 * MINUTE).plan();
    expect(requested(p), 'nothing new is asked').to.deep.equal([]);
    expect(p.intents.map((i) => `${i.want} ${i.machine.name}`).sort()).to.deep.equal(['withdraw a', 'withdraw b']);
    expect(requestOf(p, 'b')).to.include({ state: 'Withdrawn', withdrawn: 'WithdrawAll' });
    const paused = cond(p.status, 'Paused');
    expect(paused).to.include({ status: 'True', reason: 'WithdrawingMarks' });
    expect(paused?.message)
      .to.contain('being deleted')
      .and.contain('a, b')
      .and.contain(new Date(T0 + 30 * MINUTE + DELETION_BOUND_MS).toISOString().replace('.000Z', 'Z'));
    expect(p.check.removeFinalizer, 'not while a mark is left').to.equal(undefined);
    expect(p.wakeAt).to.be.at.most(T0 + 30 * MINUTE + DELETION_BOUND_MS);
    sc.converge(p);
    const q = sc.advance(SECOND).plan();
    expect(q.intents).to.deep.equal([]);
    expect(q.check.removeFinalizer).to.equal(true);
    expect(q.check.marksLeftBehind ?? []).to.deep.equal([]);
  });

  it('a Machine already being deleted at its request is not waited for (it cannot be unasked)', () => {
    const sc = marked();
    sc.update('a', { deletingSince: T0 + 25 * MINUTE }).update('b', { deletingSince: T0 + 25 * MINUTE });
    const p = deleteCheck(sc, T0 + 30 * MINUTE)
      .at(T0 + 30 * MINUTE)
      .plan();
    expect(p.intents).to.deep.equal([]);
    expect(p.check.removeFinalizer).to.equal(true);
  });

  it('bounded in time: past the bound the finalizer goes, naming the marks it could not withdraw', () => {
    const sc = marked();
    deleteCheck(sc, T0 + 30 * MINUTE);
    expect(sc.at(T0 + 30 * MINUTE + DELETION_BOUND_MS - SECOND).plan().check.removeFinalizer).to.equal(undefined);
    // Not refused (a 409, or not tried yet: the bound ran out during a move's pause): the finalizer waits (seed
    // 220707176).
    expect(sc.at(T0 + 30 * MINUTE + DELETION_BOUND_MS).plan().check.removeFinalizer).to.equal(undefined);
    refuseAll(sc, ['a', 'b']); // the withdrawals were refused all along
    const p = sc.at(T0 + 30 * MINUTE + DELETION_BOUND_MS).plan();
    expect(p.check.removeFinalizer).to.equal(true);
    expect(p.check.marksLeftBehind).to.deep.equal(['a', 'b']);
  });

  it('with its Cluster gone, a deleted check still withdraws its marks, lets go, and never wakes in the past', () => {
    const sc = marked();
    deleteCheck(sc, T0 + 30 * MINUTE);
    const { cluster: _gone, ...noCluster } = sc.s;
    sc.s = noCluster;
    const p = sc.at(T0 + 30 * MINUTE).plan();
    expect(p.intents.map((i) => i.want)).to.deep.equal(['withdraw', 'withdraw']);
    expect(p.check.removeFinalizer).to.equal(undefined);
    expect(p.wakeAt).to.equal(T0 + 30 * MINUTE + DELETION_BOUND_MS);
    refuseAll(sc, ['a', 'b']);
    const late = sc.at(T0 + 31 * MINUTE + DELETION_BOUND_MS).plan();
    expect(late.check).to.deep.include({ removeFinalizer: true, marksLeftBehind: ['a', 'b'] });
    expect(late.wakeAt).to.equal(undefined);
  });
});

/** Every write on these Machines refused by the apiserver (this process's memory of refusals). */
function refuseAll(sc: { s: Snapshot }, names: string[]): void {
  const refusedWrites = sc.s.machines
    .filter((m) => names.includes(m.name))
    .map((m) => ({
      uid: m.uid,
      machine: m.name,
      write: 'withdraw' as const,
      code: 403,
      message: 'denied',
      since: T0,
      attempts: 3,
      retryAt: T0 + MINUTE,
    }));
  sc.s = { ...sc.s, refusedWrites };
}

describe('recognisable marks: joinguard.io/requested-by on the Machine', () => {
  it("every mark JoinGuard writes carries its check's uid", () => {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('old', { createdAt: T0 - HOUR })), worker('a')] }));
    sc.plan();
    const p = sc.at(T0 + 21 * MINUTE).plan();
    expect(intentOf(p, 'a')).to.deep.include({ want: 'mark', marker: 'uid-mjc' });
  });

  it('a mark whose check is gone (its uid names no live check) is withdrawn by the check that holds the Machine, joined or not; then judged anew', () => {
    const left = {
      healthCheckSucceeded: { status: 'False' as const, reason: 'JoinTimeout' },
      ownerRemediated: { status: 'False' as const, reason: 'RemediationDeferred' },
      requestedBy: GONE,
    };
    const sc = new Scenario(
      snapshot({
        machines: [withNode(worker('old', { createdAt: T0 - HOUR })), worker('a', left), withNode(worker('j', left))],
        checkUids: new Set(['uid-mjc', OTHER]),
        now: T0 + 30 * MINUTE,
      }),
    );
    const p = sc.plan();
    expect(requested(p)).to.deep.equal([]);
    expect(intentOf(p, 'a')).to.deep.include({ want: 'withdraw', marker: GONE });
    expect(intentOf(p, 'j')).to.deep.include({ want: 'withdraw', marker: GONE });
    sc.converge(p).update('a', { ownerRemediated: undefined }); // the owner drops OwnerRemediated once HealthCheckSucceeded is True
    expect(sc.machine('a').requestedBy).to.equal(undefined);
    // Unmarked now, a is judged by this check: past its deadline, it is asked for again (by this check).
    expect(intentOf(sc.advance(SECOND).plan(), 'a')).to.deep.include({ want: 'mark', marker: 'uid-mjc' });
  });

  it("a deleted check's mark on a joined Machine outside this check's scope is withdrawn too; on an unjoined one it is left", () => {
    const left = { healthCheckSucceeded: { status: 'False' as const, reason: 'JoinTimeout' }, requestedBy: GONE };
    const out = { labels: { pool: 'b' } };
    const p = new Scenario(
      snapshot({
        settings: { selector: { matchLabels: { pool: 'a' } } },
        machines: [withNode(worker('j', { ...left, ...out })), worker('u', { ...left, ...out })],
        checkUids: new Set(['uid-mjc']),
        now: T0 + 30 * MINUTE,
      }),
    ).plan();
    // No live check holds j, and a joined Machine never keeps a mark: any check of its Cluster withdraws it.
    expect(intentOf(p, 'j')).to.deep.include({ want: 'withdraw', marker: GONE });
    expect(intentOf(p, 'u'), 'not joined: left to the check whose scope holds it').to.equal(undefined);
  });

  it("a deleted check's annotation-path withdrawal cut after the annotation is finished: the MachineHealthCheck's answer goes with the marker", () => {
    // The withdrawal removes the annotation first; a crash (or the deletion bound) before the conditions leaves the
    // MachineHealthCheck's HealthCheckSucceeded=False (its answer to JoinGuard's annotation) and the marker. The check
    // that now holds the Machine has no record of it: the marker and the annotation's reason say whose it is
    // (seed 153840468).
    const left = {
      healthCheckSucceeded: { status: 'False' as const, reason: 'HasRemediateMachineAnnotation' },
      requestedBy: GONE,
    };
    const sc = new Scenario(
      snapshot({ machines: [worker('a', left)], checkUids: new Set(['uid-mjc']), now: T0 + 30 * MINUTE }),
    );
    const p = sc.plan();
    expect(intentOf(p, 'a')).to.deep.include({ want: 'withdraw', marker: GONE, path: 'RemediateAnnotation' });
    sc.converge(p);
    expect(sc.machine('a').healthCheckSucceeded?.status, 'the answer to a withdrawn annotation').to.not.equal('False');
    expect(sc.machine('a').requestedBy).to.equal(undefined);
  });

  it("another live check's mark is never touched, even on a joined Machine", () => {
    const theirs = withNode(
      worker('t', { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' }, requestedBy: OTHER }),
    );
    const p = new Scenario(
      snapshot({ machines: [theirs], checkUids: new Set(['uid-mjc', OTHER]), now: T0 + 30 * MINUTE }),
    ).plan();
    expect(intentOf(p, 't')).to.equal(undefined);
    // Not knowing which checks live, a mark of another uid is taken for another check's.
    const q = new Scenario(snapshot({ machines: [theirs], now: T0 + 30 * MINUTE })).plan();
    expect(intentOf(q, 't')).to.equal(undefined);
  });

  it('a marker left without its mark (a write lost between the two) is removed', () => {
    const p = new Scenario(
      snapshot({ machines: [withNode(worker('m', { requestedBy: 'uid-mjc' }))], checkUids: new Set(['uid-mjc']) }),
    ).plan();
    expect(intentOf(p, 'm')).to.deep.include({ want: 'withdraw', marker: 'uid-mjc' });
  });
});
