// How a replacement is asked of CAPI: the path per strategy and owner (a table); then, through the planner, the
// life of a request, level-triggered — the mark is kept on while the request is open and written only where the
// Machine carries no mark; a Machine that joins (or is opted out, or whose request nobody answers) loses every
// mark JoinGuard caused, on every pass, until none remains, whatever write failed before; each path's marks.
import { expect } from 'chai';
import type { MachineFacts } from '../../../api/capi/model.js';
import type { RemediationStrategy, RequestRecord } from '../../../api/v1alpha1/types.js';
import { needsWrite } from '../act/machine-writes.js';
import {
  HOUR,
  MINUTE,
  SECOND,
  T0,
  check,
  clusterFacts,
  cpMachine,
  mhcFacts,
  settings,
  snapshot,
  withNode,
  worker,
} from '../testing/builders.js';
import {
  Scenario,
  cond,
  eventReasons,
  intentOf,
  progressingReason,
  requestOf,
  requested,
} from '../testing/scenario.js';
import type { CapiInfo } from '../types.js';
import { choosePath, causedMarks, MARK_KINDS, type CausedMarks, type PathChoice } from './paths.js';
import { markedFrom } from './marks.js';
import { iso } from '../time.js';

/** Every mark kind, false but those given: a mark kind added later is asserted absent here too. */
const marksOf = (on: Partial<CausedMarks>): CausedMarks =>
  Object.fromEntries(MARK_KINDS.map((k) => [k, on[k] ?? false])) as CausedMarks;

const v14: CapiInfo = { apiVersion: 'v1beta2', minor: 14 };
const ms = worker('m');
const cp = cpMachine('cp');
const orphan = worker('o', { owner: { kind: 'None', controlPlane: false } });
const pool = worker('p', { owner: { kind: 'MachinePool', name: 'mp', controlPlane: false }, machinePool: true });
const other = worker('x', { owner: { kind: 'Other', rawKind: 'FooSet', name: 'foo', controlPlane: false } });
const otherCp = cpMachine('y', {
  owner: { kind: 'Other', rawKind: 'AcmeControlPlane', name: 'acme', controlPlane: true },
});
const mhc = mhcFacts('mhc-a');

interface Row {
  name: string;
  m: MachineFacts;
  strategy: RemediationStrategy;
  mhcs?: ReturnType<typeof mhcFacts>[];
  capi?: CapiInfo;
  first?: boolean;
  want: Partial<PathChoice> & { kind: PathChoice['kind'] };
}

const rows: Row[] = [
  {
    name: 'OwnerRemediated: MachineSet Machine is marked',
    m: ms,
    strategy: 'OwnerRemediated',
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  {
    name: 'OwnerRemediated: KCP Machine is marked',
    m: cp,
    strategy: 'OwnerRemediated',
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  {
    name: 'Auto without an MHC: OwnerRemediated',
    m: ms,
    strategy: 'Auto',
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  {
    name: 'Auto with an MHC selecting it: the remediate annotation',
    m: ms,
    strategy: 'Auto',
    mhcs: [mhc],
    want: { kind: 'request', path: 'RemediateAnnotation' },
  },
  {
    name: 'Auto with an MHC of another cluster: OwnerRemediated',
    m: ms,
    strategy: 'Auto',
    mhcs: [mhcFacts('other', { clusterName: 'c2' })],
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  {
    name: 'Auto with an MHC whose selector does not match: OwnerRemediated',
    m: ms,
    strategy: 'Auto',
    mhcs: [mhcFacts('b', { selector: { matchLabels: { pool: 'b' } } })],
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  {
    name: 'Auto with only paused MHCs selecting it: blocked',
    m: ms,
    strategy: 'Auto',
    mhcs: [mhcFacts('mhc-a', { paused: true })],
    want: { kind: 'blocked' },
  },
  {
    name: 'Auto with a paused and an active MHC: the annotation',
    m: ms,
    strategy: 'Auto',
    mhcs: [mhcFacts('a-paused', { paused: true }), mhcFacts('b-active')],
    want: { kind: 'request', path: 'RemediateAnnotation' },
  },
  {
    name: 'Delete: a MachineSet Machine is deleted',
    m: ms,
    strategy: 'Delete',
    want: { kind: 'request', path: 'Delete' },
  },
  {
    name: 'Delete: never a control-plane Machine (OwnerRemediated)',
    m: cp,
    strategy: 'Delete',
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  {
    name: 'Delete: the first control-plane Machine goes through its provider',
    m: cp,
    strategy: 'Delete',
    first: true,
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  {
    name: 'MachineCondition on CAPI v1.12+: JoinGuard condition',
    m: ms,
    strategy: 'MachineCondition',
    want: { kind: 'request', path: 'MachineCondition' },
  },
  {
    name: 'MachineCondition on CAPI v1.10: reported, says why',
    m: ms,
    strategy: 'MachineCondition',
    capi: { apiVersion: 'v1beta1', minor: 10 },
    want: { kind: 'report' },
  },
  {
    name: 'MachineCondition, CAPI minor unknown: JoinGuard condition',
    m: ms,
    strategy: 'MachineCondition',
    capi: { apiVersion: 'v1beta2' },
    want: { kind: 'request', path: 'MachineCondition' },
  },
  { name: 'no owner: reported', m: orphan, strategy: 'Auto', want: { kind: 'report' } },
  { name: 'MachinePool Machine: reported', m: pool, strategy: 'Delete', want: { kind: 'report' } },
  { name: 'another kind of owner: reported', m: other, strategy: 'OwnerRemediated', want: { kind: 'report' } },
  {
    name: 'a non-kubeadm control-plane provider: marked',
    m: otherCp,
    strategy: 'OwnerRemediated',
    want: { kind: 'request', path: 'OwnerRemediated' },
  },
  { name: 'firstControlPlane Report: reported', m: cp, strategy: 'Auto', first: true, want: { kind: 'report' } },
];

describe('marks: the path per strategy and owner', () => {
  for (const r of rows) {
    it(r.name, () => {
      const s = settings({
        strategy: r.strategy,
        ...(r.name.startsWith('firstControlPlane Report') ? { firstControlPlane: 'Report' as const } : {}),
      });
      const got = choosePath(r.m, s, r.mhcs ?? [], r.capi ?? v14, r.first === true);
      expect(got).to.include(r.want);
      if (got.kind === 'report') expect(got.why).to.be.a('string').and.not.equal('');
    });
  }
});

function stuck(o: Parameters<typeof snapshot>[0] = {}, m = worker('a')): Scenario {
  const sc = new Scenario(snapshot({ machines: [withNode(worker('old', { createdAt: T0 - HOUR })), m], ...o }));
  sc.plan();
  sc.at(T0 + 21 * MINUTE);
  return sc;
}

/** Two Machines of two MachineSets marked at T0+21m, the marks written (converged). */
function marked(o: Parameters<typeof snapshot>[0] = {}): Scenario {
  const sc = new Scenario(
    snapshot({
      settings: { maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 },
      machines: [
        withNode(worker('old', { createdAt: T0 - HOUR })),
        worker('a'),
        worker('b', { owner: { kind: 'MachineSet', name: 'ms-b', controlPlane: false } }),
      ],
      ...o,
    }),
  );
  sc.plan();
  sc.converge(sc.at(T0 + 21 * MINUTE).plan());
  return sc;
}

describe('marks: requests through the planner', () => {
  it('every request is recorded in the plan that makes it, with the mark it must carry', () => {
    const p = stuck().plan();
    expect(p.status.requests).to.deep.equal([
      {
        machine: 'a',
        uid: 'uid-a',
        owner: { kind: 'MachineSet', name: 'ms-a' },
        path: 'OwnerRemediated',
        kind: 'JoinTimeout',
        time: '2026-03-01T00:21:00Z',
        state: 'Open',
      },
    ]);
    expect(p.status.remediations).to.deep.equal([
      {
        machine: 'a',
        uid: 'uid-a',
        owner: { kind: 'MachineSet', name: 'ms-a' },
        time: '2026-03-01T00:21:00Z',
        path: 'OwnerRemediated',
        outcome: 'Requested',
        kind: 'JoinTimeout',
      },
    ]);
    expect(intentOf(p, 'a')).to.deep.include({ want: 'mark', path: 'OwnerRemediated', kind: 'JoinTimeout' });
    expect(intentOf(p, 'a')?.event.reason).to.equal('RemediationRequested');
    expect(p.status.recentFailures?.[0]).to.include({
      machine: 'a',
      kind: 'JoinTimeout',
      bootstrapConfig: 'KubeadmConfig/a',
      dataSecretName: 'a',
    });
  });

  it('a new request on a Machine that already carries OwnerRemediated (left by an earlier request) is recorded as the next plan reads it', () => {
    // Found by the property test (a check deleted and created again, CAPI v1.10): the MachineHealthCheck's
    // OwnerRemediated of the old check's request was still there in the same second; the new request was recorded
    // unanswered and the next plan marked it answered (planning twice changed the status).
    const stale = worker('a', {
      ownerRemediated: { status: 'False', reason: 'WaitingForRemediation', since: T0 + 21 * MINUTE },
    });
    const sc = new Scenario(
      snapshot({
        settings: { strategy: 'Auto' },
        mhcs: [mhcFacts('mhc', { selector: {} })],
        machines: [stale],
        now: T0 + 21 * MINUTE,
      }),
    );
    const p = sc.plan(); // the Scenario plans again and fails on any status change
    expect(requestOf(p, 'a')).to.include({ state: 'Open', path: 'RemediateAnnotation', answered: true });
    // An OwnerRemediated from before the request is no answer to it.
    const older = new Scenario(
      snapshot({
        settings: { strategy: 'Auto' },
        mhcs: [mhcFacts('mhc', { selector: {} })],
        machines: [{ ...stale, ownerRemediated: { status: 'False', reason: 'WaitingForRemediation', since: T0 } }],
        now: T0 + 21 * MINUTE,
      }),
    );
    expect(requestOf(older.plan(), 'a')?.answered).to.equal(undefined);
  });

  it("a new request on a Machine that still shows an owner's deferral shows it at once in the history", () => {
    // Found by the property test (seed 868460432: a check deleted and created again): the history entry said
    // Requested, and the next plan Deferred with the owner's message (planning twice changed the status).
    const message = 'Waiting because there are already too many remediations in progress';
    const deferred = worker('a', {
      ownerRemediated: { status: 'False', reason: 'RemediationDeferred', message, since: T0 },
    });
    const sc = new Scenario(
      snapshot({ settings: { strategy: 'OwnerRemediated' }, machines: [deferred], now: T0 + 21 * MINUTE }),
    );
    const p = sc.plan(); // the Scenario plans again and fails on any status change
    expect(p.status.remediations?.find((h) => h.machine === 'a')).to.include({
      outcome: 'Deferred',
      ownerReason: 'RemediationDeferred',
      ownerMessage: message,
    });
  });

  it('an open request keeps its mark on every pass (a lost write is made again at once), never asked twice', () => {
    const sc = stuck();
    sc.plan();
    const again = sc.advance(SECOND).plan();
    expect(requested(again)).to.deep.equal([]);
    expect(intentOf(again, 'a')?.want).to.equal('mark');
    expect(again.status.requests).to.have.length(1);
  });

  it('outcomes follow what is seen: Marked, Deferred (with the owner message), still in flight while deleting, Replaced', () => {
    const sc = marked();
    expect(sc.advance(MINUTE).plan().status.remediations?.[0]?.outcome).to.equal('Marked');
    sc.update('a', {
      ownerRemediated: {
        status: 'False',
        reason: 'RemediationDeferred',
        message: 'MachineDeployment maxInFlight reached',
      },
    });
    const d = sc.advance(MINUTE).plan();
    expect(d.status.remediations?.[0]).to.include({
      outcome: 'Deferred',
      ownerReason: 'RemediationDeferred',
      ownerMessage: 'MachineDeployment maxInFlight reached',
    });
    expect(cond(d.status, 'Progressing')?.message).to.contain('owner says RemediationDeferred');
    sc.update('a', { deletingSince: sc.s.now, ownerRemediated: { status: 'False', reason: 'MachineDeleting' } });
    const del = sc.advance(MINUTE).plan();
    expect(del.status.remediations?.[0]?.finishedTime).to.equal(undefined);
    expect(intentOf(del, 'a')).to.equal(undefined);
    expect(progressingReason(del)).to.equal('Remediating');
    sc.remove('a');
    const gone = sc.advance(MINUTE).plan();
    expect(gone.status.remediations?.[0]).to.include({ outcome: 'Replaced', finishedTime: '2026-03-01T00:25:00Z' });
    expect(requestOf(gone, 'a')).to.equal(undefined);
  });

  it('CannotBeRemediated: that owner is asked nothing more while the refused Machine is there; the others still are; a resume asks again', () => {
    const sc = marked();
    sc.update('a', { ownerRemediated: { status: 'False', reason: 'CannotBeRemediated', message: 'old revision' } });
    sc.update('b', { ownerRemediated: { status: 'False', reason: 'RemediationDeferred' } });
    sc.add(
      worker('a2', { createdAt: T0 + 22 * MINUTE }),
      worker('b2', { createdAt: T0 + 22 * MINUTE, owner: { kind: 'MachineSet', name: 'ms-b', controlPlane: false } }),
    );
    const p = sc.advance(MINUTE).plan();
    expect(p.status.remediations?.find((r) => r.machine === 'a')?.outcome).to.equal('Refused');
    const q = sc.at(T0 + 43 * MINUTE).plan();
    expect(requested(q)).to.deep.equal(['b2']);
    const c = cond(q.status, 'Progressing');
    expect(c?.reason).to.equal('RemediationRefusedByOwner');
    expect(c?.message)
      .to.contain('MachineSet/ms-a answered CannotBeRemediated for a: old revision')
      .and.contain('/docs/runbook.md#remediationrefusedbyowner');
    expect(sc.plans.flatMap(eventReasons)).to.include('RemediationRestricted');
    sc.annotate({ 'joinguard.io/resume': 'x' });
    expect(requested(sc.advance(MINUTE).plan())).to.deep.equal(['a2']);
  });

  it('a marked Machine that joins before its owner deletes it is withdrawn, and again on every pass until no mark remains', () => {
    const sc = marked();
    sc.update('a', { ownerRemediated: { status: 'False', reason: 'RemediationDeferred' }, nodeName: 'node-a' });
    const p = sc.advance(MINUTE).plan();
    expect(intentOf(p, 'a')).to.deep.include({ want: 'withdraw', path: 'OwnerRemediated' });
    expect(intentOf(p, 'a')?.event.reason).to.equal('RemediationWithdrawn');
    expect(p.status.remediations?.[0]).to.include({ outcome: 'Withdrawn', finishedTime: '2026-03-01T00:22:00Z' });
    expect(requestOf(p, 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Joined' });
    // The withdrawal write failed (5xx, crash, lost leadership): the next pass withdraws again.
    const q = sc.advance(MINUTE).plan();
    expect(intentOf(q, 'a')?.want).to.equal('withdraw');
    expect(q.events).to.deep.equal([]);
    // Written: HealthCheckSucceeded=True; the request is forgotten, nothing more to do.
    sc.converge(q);
    const r = sc.advance(MINUTE).plan();
    expect(intentOf(r, 'a')).to.equal(undefined);
    expect(requestOf(r, 'a')).to.equal(undefined);
  });

  it('a Machine joined before the mark was ever written (a 409 on the mark): nothing to withdraw, no event, Cancelled', () => {
    const sc = stuck();
    sc.plan();
    sc.update('a', { nodeName: 'node-a' });
    const p = sc.advance(SECOND).plan();
    expect(intentOf(p, 'a')).to.equal(undefined);
    expect(p.events).to.deep.equal([]);
    expect(p.status.remediations?.[0]?.outcome).to.equal('Cancelled');
  });

  it('a Machine being deleted when it joins is left alone (a remediation stays in flight until it is gone)', () => {
    const sc = marked();
    sc.update('a', { nodeName: 'node-a', deletingSince: T0 + 22 * MINUTE });
    const p = sc.at(T0 + 23 * MINUTE).plan();
    expect(intentOf(p, 'a')).to.equal(undefined);
    expect(p.status.remediations?.[0]?.finishedTime).to.equal(undefined);
  });

  it('a joined Machine carrying a mark only JoinGuard writes is withdrawn even with no memory of asking (status lost)', () => {
    const m = withNode(
      worker('a', {
        healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' },
        ownerRemediated: { status: 'False', reason: 'RemediationDeferred' },
      }),
    );
    const p = new Scenario(snapshot({ machines: [m] })).plan();
    expect(intentOf(p, 'a')).to.deep.include({ want: 'withdraw', path: 'OwnerRemediated' });
  });

  it("another controller's mark on a joined Machine is not JoinGuard's to withdraw", () => {
    const m = withNode(worker('a', { healthCheckSucceeded: { status: 'False', reason: 'NodeStartupTimeout' } }));
    expect(new Scenario(snapshot({ machines: [m] })).plan().intents).to.deep.equal([]);
  });

  it('a skip annotation added after the request withdraws the mark (the Machine was opted out)', () => {
    const sc = marked();
    sc.update('a', { skipReason: 'joinguard.io/skip' });
    const p = sc.advance(MINUTE).plan();
    expect(requestOf(p, 'a')).to.include({ state: 'Withdrawn', withdrawn: 'OptedOut' });
    expect(intentOf(p, 'a')?.want).to.equal('withdraw');
  });

  it('joinguard.io/withdraw-all (before an uninstall): nothing asked, every mark withdrawn (joined or not, remembered or not), never asked again', () => {
    const sc = marked();
    // A mark of JoinGuard's own reason whose record was lost (status wiped): withdrawn too.
    sc.add(
      worker('lost', { createdAt: T0 + MINUTE, healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' } }),
    );
    sc.add(worker('c', { createdAt: T0 + MINUTE }));
    sc.annotate({ 'joinguard.io/withdraw-all': '' });
    const p = sc.advance(MINUTE).plan();
    expect(requested(p), 'nothing new is asked').to.deep.equal([]);
    expect(requestOf(p, 'a')).to.include({ state: 'Withdrawn', withdrawn: 'WithdrawAll' });
    expect(p.intents.map((i) => `${i.want} ${i.machine.name}`).sort()).to.deep.equal([
      'withdraw a',
      'withdraw b',
      'withdraw lost',
    ]);
    expect(intentOf(p, 'a')?.event.message).to.contain('joinguard.io/withdraw-all');
    expect(cond(p.status, 'Paused')).to.include({ status: 'True', reason: 'WithdrawingMarks' });
    expect(cond(p.status, 'Paused')?.message).to.contain('a, b, lost');
    sc.converge(p);
    const q = sc.advance(MINUTE).plan();
    expect(q.intents).to.deep.equal([]);
    expect(cond(q.status, 'Paused')?.reason).to.equal('MarksWithdrawn');
    // The annotation removed: Machines withdrawn stay withdrawn (never asked twice); a new stuck one is asked.
    sc.annotate({});
    const r = sc.at(T0 + 60 * MINUTE).plan();
    expect(requested(r)).to.not.include.members(['a', 'b']);
    expect(requested(r)).to.include('c');
  });

  it('a request nobody answers within 15m is withdrawn, reported, releases its slot, and its owner is not asked again', () => {
    const sc = marked({ settings: { maxInFlight: { count: 1 }, consecutiveJoinFailures: 0 } });
    expect(sc.status.requests?.map((r) => r.machine)).to.deep.equal(['a']); // b waits for the slot
    sc.plan(); // the mark seen at once (T0+21m): the unanswered clock starts
    sc.add(worker('a3', { createdAt: T0 + MINUTE }));
    const wait = sc.at(T0 + 30 * MINUTE).plan();
    expect(wait.wakeAt).to.equal(T0 + 36 * MINUTE);
    expect(requested(wait)).to.deep.equal([]);
    const p = sc.at(T0 + 36 * MINUTE).plan();
    expect(requestOf(p, 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
    expect(intentOf(p, 'a')).to.deep.include({ want: 'withdraw' });
    expect(intentOf(p, 'a')?.event.message).to.contain('nobody acted on');
    expect(p.status.remediations?.find((r) => r.machine === 'a')?.outcome).to.equal('Unanswered');
    // Its mark holds the slot until the withdrawal is written; then b (another owner) is asked and a3 (a's
    // owner) is not, and Progressing says why.
    expect(requested(p)).to.deep.equal([]);
    sc.converge(p);
    const q = sc.advance(MINUTE).plan();
    expect(requested(q)).to.deep.equal(['b']);
    expect(cond(q.status, 'Progressing')?.message).to.contain('nobody acted on the request for a');
    expect(intentOf(q, 'a')).to.equal(undefined);
    expect(requestOf(q, 'a')?.state).to.equal('Withdrawn'); // remembered: never asked twice
  });

  it('"unanswered" is timed from when the mark became visible on the Machine, not from the request', () => {
    const sc = stuck();
    sc.plan(); // recorded at T0+21m; its write refused, no mark on the Machine
    expect(sc.at(T0 + 31 * MINUTE).plan().wakeAt, 'no unanswered clock without a mark').to.not.equal(T0 + 36 * MINUTE);
    sc.converge(); // the write goes through at T0+31m
    sc.advance(SECOND).plan();
    const p = sc.at(T0 + 40 * MINUTE).plan(); // 19m after the request, 9m after the mark
    expect(requestOf(p, 'a')?.state).to.equal('Open');
    expect(p.wakeAt).to.equal(T0 + 46 * MINUTE + SECOND);
    const q = sc.at(T0 + 46 * MINUTE + SECOND).plan();
    expect(requestOf(q, 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
  });

  // issue 35, 9a: the owner's clock a second behind JoinGuard's (both in whole seconds): its answer is still one.
  it('an owner whose clock is a second behind: its answer (deferred) still answers the request, never unanswered', () => {
    const sc = marked();
    sc.update('a', {
      ownerRemediated: { status: 'False', reason: 'RemediationDeferred', since: T0 + 21 * MINUTE - SECOND },
    });
    sc.at(T0 + 22 * MINUTE).plan(); // the mark seen: the unanswered clock starts
    const p = sc.at(T0 + 5 * HOUR).plan();
    expect(requestOf(p, 'a')).to.include({ state: 'Open', answered: true });
  });

  // issue 35, 9b (shown, not changed): the workload's Nodes are listed once per reconcile, so a Node that registers
  // between that list and the mark is not seen and the mark goes out. That is the race DESIGN's withdrawal covers (a
  // Node registering just after the mark looks the same): the next pass, with the Node in its list, withdraws the mark
  // at once, counts it as a join, and asks nothing more.
  it('a Node that registered between the Node list and the mark: the next pass sees it, withdraws the mark, asks nothing', () => {
    const sc = marked({ workloadNodes: [] });
    expect(requestOf(sc.last!, 'a')).to.include({ state: 'Open' });
    const p = sc
      .with({ workloadNodes: [{ name: 'node-a', providerID: 'sim://a' }] })
      .advance(SECOND)
      .plan();
    expect(intentOf(p, 'a')).to.include({ want: 'withdraw' });
    expect(requestOf(p, 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Joined' });
    expect(p.asked, 'no new request').to.deep.equal([]);
  });

  // issue 35, 9c (shown, not changed): on the condition paths the marker is inside the mark's condition message, so
  // after clusterctl move (the check gets a new uid) the mark keeps naming the check before the move. The request
  // moved with the check's memory: the mark is still this check's — not taken for a deleted check's, not asked again,
  // its open request counted in flight (budgets.ts) — and when the Machine joins it is withdrawn with that marker.
  it("a condition-path mark whose marker names the check's uid before a move: still this check's, withdrawn on join", () => {
    const sc = marked();
    expect(sc.machine('a').requestedBy).to.equal('uid-mjc');
    const meta = sc.s.check.metadata;
    sc.with({ check: { ...sc.s.check, metadata: { ...meta, uid: 'uid-moved' } }, checkUids: new Set(['uid-moved']) });
    const p = sc.advance(SECOND).plan();
    expect(requestOf(p, 'a')).to.include({ state: 'Open' });
    expect(
      p.intents.filter((i) => i.machine.name === 'a').map((i) => i.want),
      'not withdrawn',
    ).to.deep.equal(['mark']);
    expect(needsWrite(intentOf(p, 'a')!, sc.machine('a')), 'not marked again').to.equal(false);
    expect(p.asked).to.deep.equal([]);
    sc.update('a', { nodeName: 'node-a' });
    const q = sc.advance(SECOND).plan();
    expect(intentOf(q, 'a')).to.include({ want: 'withdraw', marker: 'uid-mjc' });
    expect(needsWrite(intentOf(q, 'a')!, sc.machine('a'))).to.equal(true);
  });

  it('a request the owner answered (deferred) is not unanswered, however long it waits', () => {
    const sc = marked();
    sc.update('a', { ownerRemediated: { status: 'False', reason: 'RemediationDeferred' } });
    const p = sc.at(T0 + 5 * HOUR).plan();
    expect(requestOf(p, 'a')?.state).to.equal('Open');
  });
});

// Issue 37 item 3: what only displays a mark (marked, markedTime, Marked) is derived from the Machine's own mark, a time
// that does not depend on the pass that reads it — so it is never written alone. Anyone may write a Machine: the time
// is clamped, never before the request as JoinGuard recorded it, never after now (the injected clock).
describe("marks: the mark's own time (markedFrom)", () => {
  const asked = T0 + 21 * MINUTE;
  const now = asked + 10 * MINUTE;
  const rec = (path: RequestRecord['path'], o: Partial<RequestRecord> = {}): RequestRecord => ({
    machine: 'a',
    uid: 'uid-a',
    path,
    kind: 'JoinTimeout',
    time: iso(asked),
    state: 'Open',
    ...o,
  });
  const hc = (since?: number) => ({
    healthCheckSucceeded: {
      status: 'False' as const,
      reason: 'JoinTimeout',
      ...(since !== undefined ? { since } : {}),
    },
  });
  const rows: { name: string; r: RequestRecord; m: Partial<MachineFacts>; want: number | undefined }[] = [
    {
      name: "OwnerRemediated: its condition's lastTransitionTime",
      r: rec('OwnerRemediated'),
      m: hc(asked + 3 * SECOND),
      want: asked + 3 * SECOND,
    },
    {
      name: "a time before the request (a user's edit, an older False): the request's time",
      r: rec('OwnerRemediated'),
      m: hc(asked - HOUR),
      want: asked,
    },
    {
      name: "a time after now (a clock ahead, a user's edit): now",
      r: rec('OwnerRemediated'),
      m: hc(now + HOUR),
      want: now,
    },
    {
      name: 'no lastTransitionTime: none (the first pass that sees it)',
      r: rec('OwnerRemediated'),
      m: hc(),
      want: undefined,
    },
    {
      name: 'HealthCheckSucceeded True (no mark): none',
      r: rec('OwnerRemediated'),
      m: { healthCheckSucceeded: { status: 'True', since: asked } },
      want: undefined,
    },
    {
      name: "MachineCondition: JoinGuardJoined's lastTransitionTime",
      r: rec('MachineCondition'),
      m: { joinGuardJoined: { status: 'False', reason: 'JoinTimeout', since: asked + MINUTE } },
      want: asked + MINUTE,
    },
    {
      name: "Delete: the deletion's timestamp",
      r: rec('Delete'),
      m: { deletingSince: asked + 2 * SECOND },
      want: asked + 2 * SECOND,
    },
    {
      name: 'the annotation carries no time: none',
      r: rec('RemediateAnnotation'),
      m: { remediateAnnotation: true },
      want: undefined,
    },
    {
      name: 'a record that already says marked (its clock restarted after a pause or a move): none',
      r: rec('OwnerRemediated', { marked: true }),
      m: hc(asked),
      want: undefined,
    },
    {
      name: 'a record that holds its time already: none',
      r: rec('OwnerRemediated', { marked: true, markedTime: iso(asked) }),
      m: hc(asked),
      want: undefined,
    },
    {
      name: 'a request time nobody can read (status is user-writable): none',
      r: rec('OwnerRemediated', { time: 'soon' }),
      m: hc(asked),
      want: undefined,
    },
    { name: 'reported only: none', r: rec('Report', { state: 'Reported' }), m: hc(asked), want: undefined },
  ];
  for (const row of rows)
    it(row.name, () => expect(markedFrom(row.r, { ...worker('a'), ...row.m }, now)).to.equal(row.want));

  it("the unanswered clock runs from the mark's own time, the same in every pass that reads it (a restart too)", () => {
    const sc = stuck();
    sc.converge(sc.plan()); // recorded and marked at T0+21m
    sc.update('a', hc(T0 + 21 * MINUTE + 2 * SECOND));
    const p = sc.at(T0 + 25 * MINUTE).plan(); // first seen 4 minutes later: timed from the mark
    expect(requestOf(p, 'a')).to.include({ marked: true, markedTime: iso(T0 + 21 * MINUTE + 2 * SECOND) });
    expect(p.wakeAt).to.equal(T0 + 36 * MINUTE + 2 * SECOND);
    expect(requestOf(sc.at(T0 + 36 * MINUTE + SECOND).plan(), 'a')?.state).to.equal('Open');
    expect(requestOf(sc.at(T0 + 36 * MINUTE + 2 * SECOND).plan(), 'a')).to.include({
      state: 'Withdrawn',
      withdrawn: 'Unanswered',
    });
  });

  it("after a pause the bound runs from the unpause, not from the mark's own time", () => {
    const sc = stuck();
    sc.converge(sc.plan());
    sc.update('a', hc(T0 + 21 * MINUTE));
    sc.with({ cluster: clusterFacts({ paused: true }) });
    const paused = sc.at(T0 + 22 * MINUTE).plan(); // never timed: marked, its time dropped
    expect(requestOf(paused, 'a')).to.include({ marked: true }).and.not.have.property('markedTime');
    sc.with({ cluster: clusterFacts() });
    const p = sc.at(T0 + 40 * MINUTE).plan();
    expect(requestOf(p, 'a')).to.include({ state: 'Open', markedTime: iso(T0 + 40 * MINUTE) });
    expect(requestOf(sc.at(T0 + 55 * MINUTE - SECOND).plan(), 'a')?.state).to.equal('Open');
    expect(requestOf(sc.at(T0 + 55 * MINUTE).plan(), 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
  });
});

describe('marks: the unanswered clock stops while nobody can answer', () => {
  it('time while the Cluster is paused does not count: the first pass after the unpause withdraws nothing, and the bound runs from the unpause', () => {
    const sc = marked();
    sc.plan(); // the mark seen at T0+21m: the clock starts
    sc.with({ cluster: clusterFacts({ paused: true }) });
    sc.at(T0 + 25 * MINUTE).plan();
    sc.at(T0 + 40 * MINUTE).plan(); // 19m after the mark, paused: nobody can answer
    sc.with({ cluster: clusterFacts() });
    const p = sc.at(T0 + 45 * MINUTE).plan();
    expect(requestOf(p, 'a')?.state, 'the first pass after the unpause').to.equal('Open');
    expect(intentOf(p, 'a')?.want).to.not.equal('withdraw');
    expect(p.wakeAt).to.equal(T0 + 60 * MINUTE);
    expect(requestOf(sc.at(T0 + 59 * MINUTE).plan(), 'a')?.state).to.equal('Open');
    expect(requestOf(sc.at(T0 + 60 * MINUTE).plan(), 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
  });

  it('time while the acting MachineHealthCheck is paused does not count (the annotation path)', () => {
    const sc = stuck({ mhcs: [mhcFacts('mhc-a')] });
    sc.converge(sc.plan());
    sc.advance(SECOND).plan(); // the annotation seen: the clock starts
    sc.with({ mhcs: [mhcFacts('mhc-a', { paused: true })] });
    sc.at(T0 + 30 * MINUTE).plan();
    sc.at(T0 + 50 * MINUTE).plan();
    sc.with({ mhcs: [mhcFacts('mhc-a')] });
    const p = sc.at(T0 + 51 * MINUTE).plan();
    expect(requestOf(p, 'a')?.state, 'the first pass after the MHC resumed').to.equal('Open');
    expect(requestOf(sc.at(T0 + 66 * MINUTE).plan(), 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
  });

  it("an answer wiped by clusterctl move is waited for again: the moved request's clock restarts on the target", () => {
    const sc = marked();
    sc.plan(); // the mark seen at T0+21m
    sc.with({ cluster: clusterFacts({ paused: true }) }).annotate({
      'clusterctl.cluster.x-k8s.io/block-move': 'joinguard.io',
    });
    const memory = sc.at(T0 + 30 * MINUTE).plan().check.carryMemory!;
    // The target's first pass comes after the unpause (its JoinGuard started late): new uids, the answer gone.
    const moved = sc.s.machines.map((m) => ({ ...m, uid: `${m.uid}-moved`, ownerRemediated: undefined }));
    const t = new Scenario(
      snapshot({
        check: check({ annotations: { 'joinguard.io/memory': memory } }),
        settings: { maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 },
        machines: moved,
        now: T0 + 40 * MINUTE,
      }),
    );
    const p = t.plan();
    expect(requestOf(p, 'a')).to.include({ state: 'Open', uid: 'uid-a-moved' });
    expect(requestOf(t.at(T0 + 54 * MINUTE).plan(), 'a')?.state).to.equal('Open');
    expect(requestOf(t.at(T0 + 55 * MINUTE).plan(), 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
  });

  it('an answer wiped by clusterctl move, the memory carried with its clock (an older release wrote it): the clock restarts on the target', () => {
    const sc = marked();
    sc.plan(); // the mark seen at T0+21m: markedTime in the status, as a release before the paused-clock rule carried it
    expect(requestOf(sc.last!, 'a')?.markedTime).to.equal('2026-03-01T00:21:00Z');
    const moved = sc.s.machines.map((m) => ({ ...m, uid: `${m.uid}-moved`, ownerRemediated: undefined }));
    const t = new Scenario(
      snapshot({
        check: check({ annotations: { 'joinguard.io/memory': JSON.stringify(sc.status) } }),
        settings: { maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 },
        machines: moved,
        now: T0 + 40 * MINUTE,
      }),
    );
    expect(requestOf(t.plan(), 'a')).to.include({ state: 'Open', uid: 'uid-a-moved' });
    expect(requestOf(t.at(T0 + 55 * MINUTE).plan(), 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
  });

  it('joinguard.io/resume clears the stop an unanswered request put on its owner', () => {
    const sc = marked({ settings: { maxInFlight: { count: 1 }, consecutiveJoinFailures: 0 } });
    sc.plan();
    sc.add(worker('a3', { createdAt: T0 + MINUTE }));
    const p = sc.at(T0 + 36 * MINUTE).plan();
    expect(requestOf(p, 'a')).to.include({ state: 'Withdrawn', withdrawn: 'Unanswered' });
    sc.converge(p);
    sc.converge(sc.advance(MINUTE).plan()); // b asked (another owner); a3 held: its owner left a unanswered
    sc.remove('b');
    const q = sc.advance(MINUTE).plan();
    expect(requested(q)).to.deep.equal([]);
    expect(cond(q.status, 'Progressing')?.message).to.contain('nobody acted on the request for a');
    sc.annotate({ 'joinguard.io/resume': 'now' });
    const r = sc.advance(MINUTE).plan();
    expect(requested(r)).to.deep.equal(['a3']);
  });
});

describe('marks: each path, marked and withdrawn', () => {
  it('Auto with an MHC: the annotation; withdrawn, it is removed and the MHC-written HealthCheckSucceeded=False undone', () => {
    const sc = stuck({ mhcs: [mhcFacts('mhc-a')] });
    const p = sc.plan();
    expect(intentOf(p, 'a')).to.deep.include({ want: 'mark', path: 'RemediateAnnotation' });
    sc.converge(p).update('a', {
      healthCheckSucceeded: { status: 'False', reason: 'HasRemediateAnnotation' },
      ownerRemediated: { status: 'False', reason: 'RemediationDeferred' },
      nodeName: 'node-a',
    });
    expect(causedMarks(sc.machine('a'), 'RemediateAnnotation')).to.deep.equal(
      marksOf({ healthCheck: true, annotation: true }),
    );
    const q = sc.advance(MINUTE).plan();
    expect(intentOf(q, 'a')).to.deep.include({ want: 'withdraw', path: 'RemediateAnnotation' });
    sc.converge(q);
    expect(sc.machine('a')).to.deep.include({
      remediateAnnotation: false,
      healthCheckSucceeded: { status: 'True', reason: 'HealthCheckSucceeded' },
    });
  });

  it("an annotation the user set (no memory of asking) is not JoinGuard's", () => {
    expect(causedMarks(worker('a', { remediateAnnotation: true }), undefined)).to.deep.equal(marksOf({}));
  });

  it('MachineCondition: JoinGuardJoined=False; withdrawn, JoinGuardJoined=True and the MHC HealthCheckSucceeded=False it caused undone', () => {
    const sc = stuck({
      settings: { strategy: 'MachineCondition' },
      mhcs: [mhcFacts('mhc-a', { watchesJoinGuardCondition: true })],
    });
    const p = sc.plan();
    expect(intentOf(p, 'a')).to.deep.include({ want: 'mark', path: 'MachineCondition' });
    const mhcMessage =
      'Health check failed:\n  * Condition JoinGuardJoined on Machine is reporting status False with reason JoinTimeout for more than 0s';
    sc.converge(p).update('a', {
      healthCheckSucceeded: { status: 'False', reason: 'UnhealthyMachine', message: mhcMessage },
      nodeName: 'node-a',
    });
    expect(causedMarks(sc.machine('a'), 'MachineCondition')).to.deep.equal(
      marksOf({ healthCheck: true, condition: true }),
    );
    // Another failed check in the same message: that False is the MHC's own.
    const mixed = `${mhcMessage}\n  * Condition Foo on Machine is reporting status False`;
    expect(
      causedMarks(
        worker('m', { healthCheckSucceeded: { status: 'False', reason: 'UnhealthyMachine', message: mixed } }),
        'MachineCondition',
      ).healthCheck,
    ).to.equal(false);
    const q = sc.advance(MINUTE).plan();
    expect(intentOf(q, 'a')).to.deep.include({ want: 'withdraw', path: 'MachineCondition' });
  });

  it('Delete: a delete intent while open; a Machine that outran it is left alone', () => {
    const sc = marked({ settings: { strategy: 'Delete', maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 } });
    expect(sc.status.requests?.[0]?.path).to.equal('Delete');
    sc.update('a', { deletingSince: undefined, nodeName: 'node-a' });
    const p = sc.advance(MINUTE).plan();
    expect(intentOf(p, 'a')).to.equal(undefined);
    expect(p.status.remediations?.[0]?.outcome).to.equal('Cancelled');
  });

  it('Delete without --allow-machine-delete: nothing deleted or recorded, Ready=False/MachineDeleteNotAllowed names the flag; with it, deleted', () => {
    const sc = stuck({ settings: { strategy: 'Delete', consecutiveJoinFailures: 0 }, allowMachineDelete: false });
    const p = sc.plan();
    expect(p.intents).to.deep.equal([]);
    expect(p.status.requests ?? []).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['JoinTimedOut']);
    const ready = cond(p.status, 'Ready');
    expect(ready).to.include({ status: 'False', reason: 'MachineDeleteNotAllowed' });
    expect(ready?.message)
      .to.contain('--allow-machine-delete')
      .and.contain('JOINGUARD_ALLOW_MACHINE_DELETE=true')
      .and.contain('Held back: a.');
    expect(cond(p.status, 'Progressing')?.message).to.contain(
      'a is not deleted: JoinGuard runs without --allow-machine-delete',
    );
    expect(p.status).to.include({ stuckMachines: 1, heldMachines: 1, heldReason: 'MachineDeleteNotAllowed' }); // kubectl get mjc: HELD BY
    // Even before any Machine is stuck, Ready says the strategy cannot act here.
    const early = new Scenario(snapshot({ settings: { strategy: 'Delete' }, allowMachineDelete: false })).plan();
    expect(cond(early.status, 'Ready')).to.include({ status: 'False', reason: 'MachineDeleteNotAllowed' });
    // The flag turned on (a restart with it): the same Machine is deleted, nothing remembered stood in the way.
    const q = sc.with({ allowMachineDelete: true }).advance(MINUTE).plan();
    expect(intentOf(q, 'a')).to.deep.include({ want: 'delete' });
    expect(cond(q.status, 'Ready')).to.include({ status: 'True', reason: 'Ready' });
    // And turned off again with the delete still open: no delete is attempted.
    const r = sc.with({ allowMachineDelete: false }).advance(MINUTE).plan();
    expect(r.intents.filter((i) => i.want === 'delete')).to.deep.equal([]);
  });

  it('a paused MHC: nothing happens, Paused=True/Paused names it; unpaused, it is asked', () => {
    const sc = stuck({ mhcs: [mhcFacts('mhc-a', { paused: true })] });
    const p = sc.plan();
    expect(requested(p)).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['JoinTimedOut']);
    const c = cond(p.status, 'Paused');
    expect(c).to.include({ status: 'True', reason: 'Paused' });
    expect(c?.message).to.contain('mhc-a').and.contain('a is left to it');
    const q = sc.with({ mhcs: [mhcFacts('mhc-a')] }).plan();
    expect(requested(q)).to.deep.equal(['a']);
    expect(cond(q.status, 'Paused')?.reason).to.equal('NotPaused');
  });

  it('a Machine with no owner is reported (event and status), never written, once', () => {
    const sc = stuck({}, orphan);
    const p = sc.plan();
    expect(requested(p)).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['RemediationSkipped']);
    expect(p.status.remediations?.[0]).to.include({ machine: 'o', path: 'Report', outcome: 'Reported' });
    expect(sc.plan().intents).to.deep.equal([]);
  });

  it('MachineCondition on an old CAPI says why in the event', () => {
    const p = stuck({ settings: { strategy: 'MachineCondition' }, capi: { apiVersion: 'v1beta1', minor: 10 } }).plan();
    expect(p.events.find((e) => e.reason === 'RemediationSkipped')?.message)
      .to.contain('CAPI v1.12 or later')
      .and.contain('v1.10');
  });

  it('a withdrawal is made even while the check is paused: the harm it prevents does not pause', () => {
    const sc = marked();
    sc.with({ settings: settings({ paused: true, maxInFlight: { count: 5 }, consecutiveJoinFailures: 0 }) });
    sc.update('a', { nodeName: 'node-a' });
    const p = sc.advance(MINUTE).plan();
    expect(intentOf(p, 'a')?.want).to.equal('withdraw');
    expect(intentOf(p, 'b')).to.equal(undefined); // marks are not re-made while paused
  });
  it('a paused Cluster: no write at all to its Machines, not even a withdrawal (clusterctl move copies them meanwhile); unpaused, the withdrawal goes', () => {
    const sc = marked();
    sc.update('a', { nodeName: 'node-a' });
    sc.with({ cluster: clusterFacts({ paused: true }) });
    expect(sc.advance(MINUTE).plan().intents).to.deep.equal([]);
    sc.with({ cluster: clusterFacts() });
    expect(intentOf(sc.advance(MINUTE).plan(), 'a')?.want).to.equal('withdraw');
  });

  it('a MachineHealthCheck paused after the request was recorded: its annotation is not written until it is unpaused', () => {
    const sc = stuck({ mhcs: [mhcFacts('mhc-a')] });
    const p = sc.plan();
    expect(intentOf(p, 'a')).to.deep.include({ want: 'mark', path: 'RemediateAnnotation' });
    // The mark's write failed; the MHC is paused before the next pass: nothing is asked through it.
    sc.with({ mhcs: [mhcFacts('mhc-a', { paused: true })] });
    const q = sc.advance(MINUTE).plan();
    expect(intentOf(q, 'a')).to.equal(undefined);
    expect(cond(q.status, 'Paused')?.message).to.contain('mhc-a');
    sc.with({ mhcs: [mhcFacts('mhc-a')] });
    expect(intentOf(sc.advance(MINUTE).plan(), 'a')).to.deep.include({ want: 'mark', path: 'RemediateAnnotation' });
  });
});
