// JoinGuard's own families: labelled by namespace, check and cluster; counters that count transitions between
// the status read and the status written (so a restart does not count the history again); the condition gauge;
// the time past deadline read at scrape time; every series of a deleted check dropped. Unit tests.
import { expect } from 'chai';
import { Registry } from 'prom-client';
import type { Condition, MachineJoinCheckStatus, RemediationRecord } from '../../../api/v1alpha1/types.js';
import { JoinGuardMetrics } from './metrics.js';

const ref = { namespace: 'ns1', check: 'workers', cluster: 'prod' };
const L = 'cluster_namespace="ns1",check="workers",cluster_name="prod"';
const rec = (uid: string, outcome: RemediationRecord['outcome']): RemediationRecord => ({
  machine: uid,
  uid,
  time: '2026-01-01T00:00:00Z',
  path: 'OwnerRemediated',
  outcome,
  kind: 'JoinTimeout',
});
const cond = (type: string, status: Condition['status'], reason: string): Condition => ({
  type,
  status,
  reason,
  message: '',
  lastTransitionTime: '2026-01-01T00:00:00Z',
});

describe('JoinGuardMetrics', () => {
  let registry: Registry;
  let m: JoinGuardMetrics;
  beforeEach(() => {
    registry = new Registry();
    m = new JoinGuardMetrics(registry);
  });
  const text = () => registry.metrics();

  it('counts each remediation outcome once, from what the status write adds', async () => {
    const empty: MachineJoinCheckStatus = {};
    const requested: MachineJoinCheckStatus = { remediations: [rec('m1', 'Requested')] };
    const marked: MachineJoinCheckStatus = { remediations: [{ ...rec('m1', 'Marked') }, rec('m2', 'Requested')] };
    m.observe(ref, [], empty, requested, 0);
    m.observe(ref, [], requested, requested, 0); // nothing changed: nothing counted
    m.observe(ref, [], requested, marked, 0);
    // A restart reads the written status back as `prev`: the history is not counted again.
    const fresh = new JoinGuardMetrics(new Registry());
    fresh.observe(ref, [], marked, marked, 0);
    const t = await text();
    expect(t).to.include(`joinguard_remediations_total{${L},path="OwnerRemediated",outcome="Requested"} 2`);
    expect(t).to.include(`joinguard_remediations_total{${L},path="OwnerRemediated",outcome="Marked"} 1`);
    expect(await fresh.remediations.get()).to.have.nested.property('values.length', 0);
    expect(t).to.match(/# TYPE joinguard_remediations_total counter/);
  });

  it('counts a suspicion when it is raised, not while it stays', async () => {
    const raised: MachineJoinCheckStatus = {
      suspicion: {
        reason: 'BootstrapCredentialSuspect',
        since: '2026-01-01T00:00:00Z',
        canariesSpent: 0,
        machines: [],
      },
    };
    m.observe(ref, [], {}, raised, 0);
    m.observe(ref, [], raised, raised, 0);
    expect(await text()).to.include(`joinguard_suspicions_raised_total{${L}} 1`);
  });

  it('sets Machines by state, zeroing a state that emptied', async () => {
    m.observe(
      ref,
      [
        { uid: 'a', state: 'Joining' },
        { uid: 'b', state: 'Stuck' },
        { uid: 'c', state: 'Stuck' },
      ],
      {},
      {},
      0,
    );
    m.observe(ref, [{ uid: 'a', state: 'Joined' }], {}, {}, 0);
    const t = await text();
    expect(t).to.include(`joinguard_machines{${L},state="Joined",verdict="Joined"} 1`);
    expect(t).to.include(`joinguard_machines{${L},state="Stuck",verdict="Stuck"} 0`);
    expect(t).to.include(`joinguard_machines{${L},state="Joining",verdict="Joining"} 0`);
  });

  it('observes join durations of Machines seen joining, per check', async () => {
    m.observe(ref, [{ uid: 'a', state: 'Joining', clockStart: 1_000 }], {}, {}, 5_000);
    m.observe(ref, [{ uid: 'a', state: 'Joined' }], {}, {}, 91_000);
    m.observe(ref, [{ uid: 'b', state: 'Joined' }], {}, {}, 91_000); // never seen joining: not observed
    const t = await text();
    expect(t).to.include(`joinguard_join_duration_seconds_count{${L}} 1`);
    expect(t).to.include(`joinguard_join_duration_seconds_sum{${L}} 90`);
  });

  it('reads the time past deadline at scrape, from the stuck Machine furthest past it', async () => {
    const now = 1_000_000;
    m.observe(
      ref,
      [
        { uid: 'a', state: 'Stuck', deadline: now - 30_000 },
        { uid: 'b', state: 'Stuck', deadline: now - 5_000 },
        { uid: 'c', state: 'Joining', deadline: now - 90_000 },
      ],
      {},
      {},
      now,
    );
    const first = Number((await text()).match(new RegExp(`joinguard_past_deadline_seconds\\{${L}\\} ([0-9.]+)`))![1]);
    expect(first).to.be.within(30, 31);
    await new Promise((r) => setTimeout(r, 120));
    const later = Number((await text()).match(new RegExp(`joinguard_past_deadline_seconds\\{${L}\\} ([0-9.]+)`))![1]);
    expect(later - first).to.be.within(0.1, 1);
    m.observe(ref, [{ uid: 'a', state: 'Remediating' }], {}, {}, now);
    expect(await text()).to.include(`joinguard_past_deadline_seconds{${L}} 0`);
  });

  it('keeps one series per current condition, dropping the one it replaced', async () => {
    m.observe(
      ref,
      [],
      {},
      { conditions: [cond('Progressing', 'True', 'Watching'), cond('Ready', 'True', 'AsExpected')] },
      0,
    );
    m.observe(
      ref,
      [],
      {},
      { conditions: [cond('Progressing', 'False', 'BootstrapCredentialSuspect'), cond('Ready', 'True', 'AsExpected')] },
      0,
    );
    const t = await text();
    expect(t).to.include(
      `joinguard_check_condition{${L},type="Progressing",status="False",reason="BootstrapCredentialSuspect"} 1`,
    );
    expect(t).to.include(`joinguard_check_condition{${L},type="Ready",status="True",reason="AsExpected"} 1`);
    expect(t).not.to.include('reason="Watching"');
  });

  it("forgets every series of a deleted check and none of another check's", async () => {
    const other = { ...ref, check: 'cp' };
    for (const r of [ref, other]) {
      m.observe(
        r,
        [{ uid: `${r.check}-a`, state: 'Stuck', deadline: 0 }],
        {},
        { remediations: [rec(`${r.check}-a`, 'Marked')], conditions: [cond('Ready', 'True', 'AsExpected')] },
        1_000,
      );
      m.refused(r, [{ write: 'mark' }]);
    }
    m.forget({ namespace: 'ns1', check: 'workers' });
    const t = await text();
    expect(t).not.to.include('check="workers"');
    expect(t).to.include('check="cp"');
  });

  it('says how many Machines of a check have a write refused now, a refused withdrawal apart from a refused mark', async () => {
    m.refused(ref, [{ write: 'mark' }, { write: 'withdraw' }, { write: 'mark' }]);
    let t = await text();
    expect(t).to.include(`joinguard_write_refused_machines{${L},write="mark"} 2`);
    expect(t).to.include(`joinguard_write_refused_machines{${L},write="withdraw"} 1`);
    expect(t).to.include(`joinguard_write_refused_machines{${L},write="delete"} 0`);
    m.refused(ref, []);
    t = await text();
    for (const w of ['mark', 'withdraw', 'delete'])
      expect(t).to.include(`joinguard_write_refused_machines{${L},write="${w}"} 0`);
  });

  it('says when the latest remediation finished, from status (0 when none has): pacing told apart from a stall', async () => {
    m.observe(ref, [], {}, { remediations: [rec('m1', 'Marked')] }, 0);
    expect(await text()).to.include(`joinguard_last_remediation_finished_timestamp_seconds{${L}} 0`);
    const done = (uid: string, at: string) => ({ ...rec(uid, 'Replaced'), finishedTime: at });
    m.observe(
      ref,
      [],
      {},
      { remediations: [done('m1', '2026-01-01T00:10:00Z'), done('m2', '2026-01-01T00:05:00Z'), rec('m3', 'Marked')] },
      0,
    );
    expect(await text()).to.include(
      `joinguard_last_remediation_finished_timestamp_seconds{${L}} ${Date.parse('2026-01-01T00:10:00Z') / 1000}`,
    );
  });

  it("exports the status's join figures (p50, p95, max) as quantiles, and none before a join", async () => {
    m.observe(ref, [], {}, { joinDurations: { count: 0 } }, 0);
    expect(await text()).not.to.include('joinguard_recent_join_duration_seconds{');
    const joinDurations = { count: 4, p50Seconds: 120, p95Seconds: 600, maxSeconds: 610, recentSeconds: [] };
    m.observe(ref, [], {}, { joinDurations }, 0);
    const t = await text();
    expect(t).to.include(`joinguard_recent_join_duration_seconds{${L},quantile="0.5"} 120`);
    expect(t).to.include(`joinguard_recent_join_duration_seconds{${L},quantile="0.95"} 600`);
    expect(t).to.include(`joinguard_recent_join_duration_seconds{${L},quantile="1"} 610`);
  });

  it('exports since when each current condition holds, dropping the one it replaced', async () => {
    const at = (c: Condition, t: string) => ({ ...c, lastTransitionTime: t });
    m.observe(ref, [], {}, { conditions: [at(cond('Progressing', 'True', 'AsExpected'), '2026-01-01T00:00:00Z')] }, 0);
    m.observe(
      ref,
      [],
      {},
      { conditions: [at(cond('Progressing', 'False', 'NeverJoined'), '2026-01-01T01:00:00Z')] },
      0,
    );
    const t = await text();
    expect(t).to.include(
      `joinguard_check_condition_last_transition_timestamp_seconds{${L},type="Progressing",status="False",reason="NeverJoined"} ${Date.parse('2026-01-01T01:00:00Z') / 1000}`,
    );
    expect(t).not.to.include('reason="AsExpected"');
  });

  it('counts writes and watch restarts, unlabelled by check', async () => {
    m.write('status', 'conflict');
    m.write('status', 'conflict');
    m.watchRestart('machines');
    const t = await text();
    expect(t).to.include('joinguard_api_writes_total{write="status",result="conflict"} 2');
    expect(t).to.include('joinguard_watch_restarts_total{informer="machines"} 1');
    expect(t).to.match(/# TYPE joinguard_watch_restarts_total counter/);
  });
});
