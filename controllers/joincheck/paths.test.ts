// Which remediation path, per strategy and owner, as a table; then through the planner: an MHC over the
// same Machine switches Auto to the annotation, a paused MHC means nothing happens (Paused says so),
// reports are never written, and OwnerRemediated is never re-asserted.
import { expect } from 'chai';
import type { MachineFacts } from '../../api/capi/model.js';
import type { RemediationStrategy } from '../../api/v1alpha1/types.js';
import { choosePath, type PathChoice } from './paths.js';
import { HOUR, MINUTE, T0, cpMachine, mhcFacts, settings, snapshot, withNode, worker } from './testing/builders.js';
import { Scenario, cond, eventReasons, requested } from './testing/scenario.js';
import type { CapiInfo } from './types.js';

const v14: CapiInfo = { apiVersion: 'v1beta2', minor: 14 };
const ms = worker('m');
const cp = cpMachine('cp');
const orphan = worker('o', { owner: { kind: 'None', controlPlane: false } });
const pool = worker('p', { owner: { kind: 'MachinePool', name: 'mp', controlPlane: false }, machinePool: true });
const other = worker('x', { owner: { kind: 'Other', rawKind: 'FooSet', name: 'foo', controlPlane: false } });
const otherCp = cpMachine('y', { owner: { kind: 'Other', rawKind: 'AcmeControlPlane', name: 'acme', controlPlane: true } });
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
  { name: 'OwnerRemediated: MachineSet Machine is marked', m: ms, strategy: 'OwnerRemediated', want: { kind: 'request', path: 'OwnerRemediated', action: 'MarkOwnerRemediated' } },
  { name: 'OwnerRemediated: KCP Machine is marked', m: cp, strategy: 'OwnerRemediated', want: { kind: 'request', path: 'OwnerRemediated' } },
  { name: 'Auto without an MHC: OwnerRemediated', m: ms, strategy: 'Auto', want: { kind: 'request', path: 'OwnerRemediated' } },
  { name: 'Auto with an MHC selecting it: the remediate annotation', m: ms, strategy: 'Auto', mhcs: [mhc], want: { kind: 'request', path: 'RemediateAnnotation', action: 'AnnotateRemediate' } },
  { name: 'Auto with an MHC of another cluster: OwnerRemediated', m: ms, strategy: 'Auto', mhcs: [mhcFacts('other', { clusterName: 'c2' })], want: { kind: 'request', path: 'OwnerRemediated' } },
  { name: 'Auto with an MHC whose selector does not match: OwnerRemediated', m: ms, strategy: 'Auto', mhcs: [mhcFacts('b', { selector: { matchLabels: { pool: 'b' } } })], want: { kind: 'request', path: 'OwnerRemediated' } },
  { name: 'Auto with only paused MHCs selecting it: blocked', m: ms, strategy: 'Auto', mhcs: [mhcFacts('mhc-a', { paused: true })], want: { kind: 'blocked' } },
  { name: 'Auto with a paused and an active MHC: the annotation', m: ms, strategy: 'Auto', mhcs: [mhcFacts('a-paused', { paused: true }), mhcFacts('b-active')], want: { kind: 'request', path: 'RemediateAnnotation' } },
  { name: 'Delete: a MachineSet Machine is deleted', m: ms, strategy: 'Delete', want: { kind: 'request', path: 'Delete', action: 'DeleteMachine' } },
  { name: 'Delete: never a control-plane Machine (OwnerRemediated)', m: cp, strategy: 'Delete', want: { kind: 'request', path: 'OwnerRemediated' } },
  { name: 'Delete: the first control-plane Machine goes through its provider', m: cp, strategy: 'Delete', first: true, want: { kind: 'request', path: 'OwnerRemediated' } },
  { name: 'MachineCondition on CAPI v1.12+: JoinGuard condition', m: ms, strategy: 'MachineCondition', want: { kind: 'request', path: 'MachineCondition', action: 'SetJoinGuardCondition' } },
  { name: 'MachineCondition on CAPI v1.10: reported, says why', m: ms, strategy: 'MachineCondition', capi: { apiVersion: 'v1beta1', minor: 10 }, want: { kind: 'report' } },
  { name: 'MachineCondition, CAPI minor unknown: JoinGuard condition', m: ms, strategy: 'MachineCondition', capi: { apiVersion: 'v1beta2' }, want: { kind: 'request', path: 'MachineCondition' } },
  { name: 'no owner: reported', m: orphan, strategy: 'Auto', want: { kind: 'report' } },
  { name: 'MachinePool Machine: reported', m: pool, strategy: 'Delete', want: { kind: 'report' } },
  { name: 'another kind of owner: reported', m: other, strategy: 'OwnerRemediated', want: { kind: 'report' } },
  { name: 'a non-kubeadm control-plane provider: marked', m: otherCp, strategy: 'OwnerRemediated', want: { kind: 'request', path: 'OwnerRemediated' } },
  { name: 'firstControlPlane Report: reported', m: cp, strategy: 'Auto', first: true, want: { kind: 'report' } },
];

describe('paths', () => {
  for (const r of rows) {
    it(r.name, () => {
      const s = settings({ strategy: r.strategy, ...(r.name.startsWith('firstControlPlane Report') ? { firstControlPlane: 'Report' as const } : {}) });
      const got = choosePath(r.m, { settings: s, mhcs: r.mhcs ?? [], capi: r.capi ?? v14, firstControlPlane: r.first === true });
      expect(got).to.include(r.want);
      if (got.kind === 'report') expect(got.why).to.be.a('string').and.not.equal('');
    });
  }

  function stuck(o: Parameters<typeof snapshot>[0] = {}, m = worker('a')): Scenario {
    const sc = new Scenario(snapshot({ machines: [withNode(worker('old', { createdAt: T0 - HOUR })), m], ...o }));
    sc.plan();
    sc.at(T0 + 21 * MINUTE);
    return sc;
  }

  it('an MHC over the same Machine switches Auto to the annotation path', () => {
    const p = stuck({ mhcs: [mhc] }).plan();
    expect(p.actions.filter((a) => a.type === 'AnnotateRemediate')).to.have.length(1);
    expect(p.status.remediations?.[0]).to.include({ path: 'RemediateAnnotation', outcome: 'Requested' });
  });

  it('a paused MHC: nothing happens, Paused=True/MachineHealthCheckPaused names it; unpaused, it is asked', () => {
    const sc = stuck({ mhcs: [mhcFacts('mhc-a', { paused: true })] });
    const p = sc.plan();
    expect(requested(p)).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['JoinTimedOut']);
    const c = cond(p.status, 'Paused');
    expect(c).to.include({ status: 'True', reason: 'MachineHealthCheckPaused' });
    expect(c?.message).to.contain('mhc-a').and.contain('a is left to it');
    const q = sc.with({ mhcs: [mhc] }).plan();
    expect(requested(q)).to.deep.equal(['a']);
    expect(cond(q.status, 'Paused')?.reason).to.equal('NotPaused');
  });

  it('a Machine with no owner is reported (event and status), never written, once', () => {
    const sc = stuck({}, orphan);
    const p = sc.plan();
    expect(requested(p)).to.deep.equal([]);
    expect(eventReasons(p)).to.deep.equal(['JoinTimedOut', 'RemediationSkipped']);
    expect(p.status.remediations?.[0]).to.include({ machine: 'o', path: 'Report', outcome: 'Reported' });
    expect(sc.plan().actions).to.deep.equal([]);
  });

  it('MachineCondition on an old CAPI says why in the event', () => {
    const p = stuck({ settings: { strategy: 'MachineCondition' }, capi: { apiVersion: 'v1beta1', minor: 10 } }).plan();
    const ev = p.actions.find((a) => a.type === 'MachineEvent' && a.reason === 'RemediationSkipped');
    expect(ev && 'message' in ev ? ev.message : '').to.contain('CAPI v1.12 or later').and.contain('v1.10');
  });

  it('OwnerRemediated is set only when absent or True (never re-asserted over an owner)', () => {
    const a = stuck({}, worker('a', { ownerRemediated: { status: 'True' } })).plan();
    const b = stuck({}, worker('a', { ownerRemediated: { status: 'False', reason: 'RemediationDeferred' } })).plan();
    const c = stuck({}).plan();
    const flag = (p: typeof a) => p.actions.flatMap((x) => (x.type === 'MarkOwnerRemediated' ? [x.setOwnerRemediated] : []));
    expect([flag(a), flag(b), flag(c)]).to.deep.equal([[true], [false], [true]]);
  });
});
