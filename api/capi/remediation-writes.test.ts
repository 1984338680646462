import { expect } from 'chai';
import { MalformedObjectError } from './model.js';
import { readMachine } from './machine.js';
import {
  markForRemediation,
  removeJoinGuardCondition,
  setJoinGuardCondition,
  statusPatch,
  withdrawMark,
  WITHDRAW_MESSAGE,
} from './remediation-writes.js';
import { machineV1beta1, machineV1beta2, T1 } from './testdata/fixtures.js';

type Json = Record<string, any>;
const now = new Date('2026-05-01T11:00:00.123Z');
const NOW = '2026-05-01T11:00:00Z'; // metav1.Time precision
const byType = (list: unknown[], type: string) => (list as Json[]).find((c) => c['type'] === type);
const types = (list: unknown[]) => (list as Json[]).map((c) => c['type']);
const mark = (
  m: Json,
  v: 'v1beta2' | 'v1beta1',
  setOwnerRemediated = true,
  kind: 'JoinTimeout' | 'ProvisionTimeout' = 'JoinTimeout',
) =>
  markForRemediation(m, v, { kind, message: 'no Node 20m after the join clock started', now, setOwnerRemediated })
    .conditions;

describe('api/capi remediation writes, v1beta2 (metav1.Condition)', () => {
  it('marks a Machine: HealthCheckSucceeded=False/JoinTimeout and OwnerRemediated=False/WaitingForRemediation, others kept in place', () => {
    const m = machineV1beta2();
    const list = mark(m, 'v1beta2');
    expect(types(list)).to.deep.equal([...types(m['status'].conditions), 'HealthCheckSucceeded', 'OwnerRemediated']);
    expect(list.slice(0, -2)).to.deep.equal(m['status'].conditions);
    expect(byType(list, 'HealthCheckSucceeded')).to.deep.equal({
      type: 'HealthCheckSucceeded',
      status: 'False',
      observedGeneration: 2,
      reason: 'JoinTimeout',
      message: 'no Node 20m after the join clock started',
      lastTransitionTime: NOW,
    });
    expect(byType(list, 'OwnerRemediated')).to.deep.equal({
      type: 'OwnerRemediated',
      status: 'False',
      observedGeneration: 2,
      reason: 'WaitingForRemediation',
      message: 'Waiting for remediation',
      lastTransitionTime: NOW,
    });
    // What the owners will read back.
    m['status'].conditions = list;
    const facts = readMachine(m, 'v1beta2');
    expect(facts.healthCheckSucceeded).to.include({ status: 'False', reason: 'JoinTimeout' });
    expect(facts.ownerRemediated).to.include({ status: 'False', reason: 'WaitingForRemediation' });
  });

  it('ProvisionTimeout is its own reason', () => {
    expect(byType(mark(machineV1beta2(), 'v1beta2', true, 'ProvisionTimeout'), 'HealthCheckSucceeded')).to.include({
      reason: 'ProvisionTimeout',
    });
  });

  it('never re-asserts OwnerRemediated once the owner changed it', () => {
    const m = machineV1beta2();
    const deferred = {
      type: 'OwnerRemediated',
      status: 'False',
      reason: 'RemediationDeferred',
      message: 'preflight checks failing',
      lastTransitionTime: T1,
      observedGeneration: 2,
    };
    m['status'].conditions.push(deferred);
    expect(byType(mark(m, 'v1beta2'), 'OwnerRemediated')).to.deep.equal(deferred);
  });

  it('sets OwnerRemediated again when it is True (a finished remediation), and not at all when not asked', () => {
    const m = machineV1beta2();
    m['status'].conditions.push({
      type: 'OwnerRemediated',
      status: 'True',
      reason: 'Remediated',
      message: '',
      lastTransitionTime: T1,
    });
    expect(byType(mark(m, 'v1beta2'), 'OwnerRemediated')).to.include({
      status: 'False',
      reason: 'WaitingForRemediation',
      lastTransitionTime: NOW,
    });
    expect(byType(mark(machineV1beta2(), 'v1beta2', false), 'OwnerRemediated')).to.equal(undefined);
  });

  it('keeps lastTransitionTime when the status does not change, moves it when it does', () => {
    const m = machineV1beta2();
    m['status'].conditions.push({
      type: 'HealthCheckSucceeded',
      status: 'False',
      reason: 'JoinTimeout',
      message: 'old',
      lastTransitionTime: T1,
      observedGeneration: 1,
    });
    expect(byType(mark(m, 'v1beta2'), 'HealthCheckSucceeded')).to.include({
      lastTransitionTime: T1,
      message: 'no Node 20m after the join clock started',
      observedGeneration: 2,
    });
    const healthy = machineV1beta2();
    healthy['status'].conditions.push({
      type: 'HealthCheckSucceeded',
      status: 'True',
      reason: 'HealthCheckSucceeded',
      message: '',
      lastTransitionTime: T1,
    });
    expect(byType(mark(healthy, 'v1beta2'), 'HealthCheckSucceeded')).to.include({
      status: 'False',
      lastTransitionTime: NOW,
    });
  });

  it('withdraws a mark: HealthCheckSucceeded=True, OwnerRemediated left for the owner to drop', () => {
    const m = machineV1beta2();
    m['status'].conditions = mark(m, 'v1beta2');
    const owner = byType(m['status'].conditions, 'OwnerRemediated');
    const later = new Date('2026-05-01T11:05:00Z');
    const list = withdrawMark(m, 'v1beta2', later).conditions;
    expect(byType(list, 'HealthCheckSucceeded')).to.deep.equal({
      type: 'HealthCheckSucceeded',
      status: 'True',
      observedGeneration: 2,
      reason: 'HealthCheckSucceeded',
      message: WITHDRAW_MESSAGE,
      lastTransitionTime: '2026-05-01T11:05:00Z',
    });
    expect(byType(list, 'OwnerRemediated')).to.deep.equal(owner);
  });

  it('sets and removes JoinGuardJoined', () => {
    const m = machineV1beta2();
    m['status'].conditions = setJoinGuardCondition(m, 'v1beta2', {
      status: 'False',
      reason: 'JoinTimeout',
      message: 'no Node',
      now,
    }).conditions;
    expect(byType(m['status'].conditions, 'JoinGuardJoined')).to.deep.equal({
      type: 'JoinGuardJoined',
      status: 'False',
      observedGeneration: 2,
      reason: 'JoinTimeout',
      message: 'no Node',
      lastTransitionTime: NOW,
    });
    const again = setJoinGuardCondition(m, 'v1beta2', {
      status: 'False',
      reason: 'JoinTimeout',
      message: 'no Node still',
      now: new Date('2026-05-01T12:00:00Z'),
    }).conditions;
    expect(byType(again, 'JoinGuardJoined')).to.include({ lastTransitionTime: NOW, message: 'no Node still' });
    const removed = removeJoinGuardCondition(m, 'v1beta2').conditions;
    expect(types(removed)).to.deep.equal(types(machineV1beta2()['status'].conditions));
  });

  it('builds the /status merge patch guarded by resourceVersion', () => {
    const m = machineV1beta2();
    const w = markForRemediation(m, 'v1beta2', { kind: 'JoinTimeout', message: 'x', now, setOwnerRemediated: true });
    expect(statusPatch(m, w)).to.deep.equal({
      metadata: { resourceVersion: '1001' },
      status: { conditions: w.conditions },
    });
  });

  it('a Machine without conditions gets a list of its own; the input is never changed', () => {
    const m = machineV1beta2();
    delete m['status'].conditions;
    const before = JSON.stringify(m);
    expect(types(mark(m, 'v1beta2'))).to.deep.equal(['HealthCheckSucceeded', 'OwnerRemediated']);
    expect(JSON.stringify(m)).to.equal(before);
  });

  it('refuses to build on a list it cannot understand, naming the field', () => {
    const a = machineV1beta2();
    a['status'].conditions = 'Ready';
    expect(() => mark(a, 'v1beta2'))
      .to.throw(MalformedObjectError)
      .with.property('field', 'status.conditions');
    const b = machineV1beta2();
    b['status'].conditions[4].lastTransitionTime = 'soon';
    expect(() => withdrawMark(b, 'v1beta2', now))
      .to.throw(MalformedObjectError)
      .with.property('field', 'status.conditions[4].lastTransitionTime');
    const c = machineV1beta2();
    delete c['metadata'].resourceVersion;
    expect(() => statusPatch(c, { conditions: [] }))
      .to.throw(MalformedObjectError)
      .with.property('field', 'metadata.resourceVersion');
  });
});

describe('api/capi remediation writes, v1beta1 (CAPI v1beta1 Condition, CAPI v1.8-v1.10)', () => {
  it('marks with severity Warning and no empty reason or message, as MachineHealthCheck does', () => {
    const m = machineV1beta1();
    const list = mark(m, 'v1beta1');
    expect(list.slice(0, -2)).to.deep.equal(m['status'].conditions);
    expect(byType(list, 'HealthCheckSucceeded')).to.deep.equal({
      type: 'HealthCheckSucceeded',
      status: 'False',
      severity: 'Warning',
      reason: 'JoinTimeout',
      message: 'no Node 20m after the join clock started',
      lastTransitionTime: NOW,
    });
    expect(byType(list, 'OwnerRemediated')).to.deep.equal({
      type: 'OwnerRemediated',
      status: 'False',
      severity: 'Warning',
      reason: 'WaitingForRemediation',
      lastTransitionTime: NOW,
    });
    m['status'].conditions = list;
    expect(readMachine(m, 'v1beta1').ownerRemediated).to.include({ status: 'False', reason: 'WaitingForRemediation' });
  });

  it('moves lastTransitionTime when reason, severity or message change, as v1beta1 conditions.Set does', () => {
    const m = machineV1beta1();
    m['status'].conditions.push({
      type: 'HealthCheckSucceeded',
      status: 'False',
      severity: 'Warning',
      reason: 'JoinTimeout',
      message: 'no Node 20m after the join clock started',
      lastTransitionTime: T1,
    });
    expect(byType(mark(m, 'v1beta1'), 'HealthCheckSucceeded')).to.include({ lastTransitionTime: T1 });
    m['status'].conditions[m['status'].conditions.length - 1].message = 'older message';
    expect(byType(mark(m, 'v1beta1'), 'HealthCheckSucceeded')).to.include({ lastTransitionTime: NOW });
  });

  it('withdraws with HealthCheckSucceeded=True, no reason or severity', () => {
    const m = machineV1beta1();
    m['status'].conditions = mark(m, 'v1beta1');
    const list = withdrawMark(m, 'v1beta1', now).conditions;
    expect(byType(list, 'HealthCheckSucceeded')).to.deep.equal({
      type: 'HealthCheckSucceeded',
      status: 'True',
      message: WITHDRAW_MESSAGE,
      lastTransitionTime: NOW,
    });
    expect(byType(list, 'OwnerRemediated')).to.include({ status: 'False', reason: 'WaitingForRemediation' });
  });

  it('writes JoinGuardJoined without observedGeneration', () => {
    const list = setJoinGuardCondition(machineV1beta1(), 'v1beta1', {
      status: 'True',
      reason: 'Joined',
      message: '',
      now,
    }).conditions;
    expect(byType(list, 'JoinGuardJoined')).to.deep.equal({
      type: 'JoinGuardJoined',
      status: 'True',
      reason: 'Joined',
      lastTransitionTime: NOW,
    });
  });
});
