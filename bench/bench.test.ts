// CI's smoke size of the benchmark: `bench/bench.ts --smoke --machines 40` end to end, as four invocations at once,
// each on a control plane and a fleet of its own (audit log, leader election on both sides), each running some of
// the phases one after another: JoinGuard alone and as two shards; the MHC alone and both; JoinGuard under the
// Deployment's CPU request and a burst of deadlines; two replicas with a failover and a re-list. Then what the
// measurement must hold at any size. Latency figures are not asserted: CI machines are shared and noisy.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { fromLatencies } from './latency.js';
import type { PhaseSummary } from './phase-summary.js';
import type { Results } from './report.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const GROUPS = { alone: 'joinguard,sharded', mhc: 'mhc,both', cases: 'cpu,burst', replicas: 'replicas' } as const;
type Group = keyof typeof GROUPS;

describe('bench (smoke size)', function () {
  this.timeout(600_000);
  const children: ChildProcess[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-bench-smoke-'));
  const res = {} as Record<Group, Results>;
  const raw = {} as Record<Group, any>;
  const phase = (g: Group, kind: string): PhaseSummary => res[g].phases.find((p) => p.kind === kind)!;

  before(async () => {
    const run = async (g: Group) => {
      let stderr = '';
      const out = path.join(dir, `${g}.json`);
      const rawFile = path.join(dir, `${g}.raw.json`);
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          path.join(here, 'bench.ts'),
          '--smoke',
          '--machines',
          '40',
          '--phases',
          GROUPS[g],
          '--out',
          out,
          '--raw',
          rawFile,
        ],
        { cwd: path.join(here, '..'), stdio: ['ignore', 'ignore', 'pipe'] },
      );
      children.push(child);
      child.stderr.on('data', (d) => (stderr += String(d)));
      const code = await new Promise<number | null>((r) => child.once('exit', r));
      expect(code, `bench ${g} failed:\n${stderr.slice(-6000)}`).to.equal(0);
      res[g] = JSON.parse(fs.readFileSync(out, 'utf8')) as Results;
      raw[g] = JSON.parse(fs.readFileSync(rawFile, 'utf8'));
    };
    await Promise.all((Object.keys(GROUPS) as Group[]).map(run));
  });

  after(async () => {
    // On a mocha timeout the benches still run: SIGINT makes each stop what it started.
    for (const child of children)
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGINT');
        await new Promise((r) => child.once('exit', r));
      }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('counts every stuck Machine of every phase: marked or censored, none before its deadline, no resting one', () => {
    for (const r of Object.values(res)) {
      expect(r.phases.map((p) => p.error).filter(Boolean)).to.deep.equal([]);
      for (const p of r.phases)
        for (const [side, d] of Object.entries(p.detection)) {
          expect(d!.marked + d!.censored, `${p.id} ${side}: censored Machines counted`).to.equal(d!.stuck);
          expect(d!.falseMarks, `${p.id} ${side}: resting Machines marked`).to.equal(0);
          expect(d!.early, `${p.id} ${side}: marks before the deadline`).to.equal(0);
        }
    }
    expect(
      phase('alone', 'joinguard').detection.joinguard!.censored,
      'JoinGuard alone left Machines unmarked',
    ).to.equal(0);
    expect(phase('mhc', 'mhc').detection.mhc!.censored, 'the MHC alone left Machines unmarked').to.equal(0);
    const both = phase('mhc', 'both');
    const race = both.race!;
    expect(race.joinguardFirst + race.mhcFirst + race.neither).to.equal(both.detection.joinguard!.stuck);
  });

  it("has a live owner answer JoinGuard's mark in each parked phase, and counts JoinGuard's closing write", () => {
    for (const r of Object.values(res))
      for (const p of r.phases.filter((x) => x.kind !== 'burst' && x.kind !== 'replicas'))
        expect(p.owners?.live, `${p.id}: a Machine of a live MachineSet`).to.equal(1);
    const o = phase('alone', 'joinguard').owners!;
    expect(o.answered, 'the live MachineSet deleted the Machine JoinGuard marked').to.equal(1);
    expect(o.closingWrites, "JoinGuard's closing write, within the window requestsPerMark counts").to.equal(1);
  });

  it('keeps what recomputes the figures: each latency, and every stuck Machine in the raw file', () => {
    const p = phase('alone', 'joinguard');
    const d = p.detection.joinguard!;
    const p99 = fromLatencies(d.latenciesMs, d.censored, 99)!;
    expect(d.p99AllS).to.be.closeTo(p99.s, 0.001);
    expect(res.alone.summary.detectionP99AllS, 'a median of one run is that run').to.equal(d.p99AllS);
    expect(res.alone.summary.runs.detectionP99AllS).to.deep.equal([d.p99AllS]);
    const rows = raw.alone.phases.find((x: any) => x.id === p.id).machineRows.rows;
    expect(rows).to.have.length(d.stuck);
  });

  it('counts every request: the audit log lost no event in any invocation', () => {
    for (const r of Object.values(res)) {
      expect(r.setup.auditIntegrity!.errors).to.equal(0);
      expect(r.setup.auditIntegrity!.lines).to.be.at.least(r.setup.auditIntegrity!.eventsGenerated);
    }
  });

  it("keeps JoinGuard's first writes of each Machine, and its memory as the process and as its cgroup see it", () => {
    const p = phase('alone', 'joinguard');
    const writes = raw.alone.phases.find((x: any) => x.id === p.id).joinguardFirstWrites.rows;
    const written = writes.filter(([, meta, status]: [string, number | null, number | null]) => meta ?? status).length;
    expect(written, 'Machines JoinGuard wrote (its marks)').to.be.at.least(p.detection.joinguard!.marked);
    const proc = p.joinguard!.processes[0]!;
    expect(proc.peakRssMiB).to.be.a('number');
    if (/Mi$/.test(proc.memoryLimit)) expect(proc.memoryPeakMiB, 'memory.peak of its cgroup').to.be.a('number');
  });

  it('runs both sides with leader election, and JoinGuard at rest renews its Lease and nothing else', () => {
    const p = phase('alone', 'joinguard');
    expect(
      p.joinguard!.atRest!.otherRequestsPerMin,
      JSON.stringify(p.joinguard!.atRest!.byVerbResourcePerMin),
    ).to.equal(0);
    expect(p.joinguard!.atRest!.leaseRequestsPerMin, 'JoinGuard renews a Lease').to.be.greaterThan(0);
    expect(p.core.atRest!.leaseRequestsPerMin, "CAPI's core manager renews a Lease").to.be.greaterThan(0);
    // Counted, not required above 0: in the smoke's short quiet window CAPI's ClusterCache probes were sometimes not
    // seen (0 in one of the merged tree's CI runs, and 2 of 2 with a BenchMachineTemplate CRD); cause not established.
    expect(p.core.atRest!.workloadClusterRequestsPerMin, "the core manager's workload requests are counted").to.be.a(
      'number',
    );
  });

  it('writes the summary as medians, the MHC from the same invocation, and the objects of every case', () => {
    const s = res.alone.summary;
    for (const k of [
      'detectionP99AllS',
      'peakRssMiB',
      'firstReconcileS',
      'requestsPerMark',
      'atRestRequestsPerMin',
    ] as const)
      expect(s[k], k).to.be.a('number');
    expect(res.mhc.summary.mhc!.detectionP99AllS).to.be.a('number');
    expect(res.mhc.summary.mhc!.coreRequestsPerMark).to.be.a('number');
    expect(res.mhc.summary.both!.joinguard.detectionP99AllS).to.be.a('number');
    expect(phase('alone', 'joinguard').joinguard!.processes[0]!.checks).to.equal(2 * res.alone.setup.shape.clusters);
    for (const k of ['cpuLimited', 'burst', 'replicas', 'relist', 'failover', 'sharded', 'sharded100k'] as const)
      expect(res.alone, k).to.have.property(k);
    expect(res.alone.rebuilds.rows.find((r) => r.guard === 'JoinGuard, defaults')!.rebuilds).to.be.at.most(7);
  });

  it('runs two shards over one fleet: each marks every stuck Machine of its own Clusters and touches nothing of the other', () => {
    const shards = phase('alone', 'sharded').shards!;
    expect(shards.map((s) => s.name)).to.deep.equal(['shard-a', 'shard-b']);
    expect(
      shards.reduce((a, s) => a + s.stuck!, 0),
      'every stuck Machine belongs to a shard',
    ).to.equal(res.alone.setup.shape.stuck);
    for (const s of shards) {
      expect(s.clusters, `${s.name}: Clusters of its own`).to.be.greaterThan(0);
      expect(s.marked, `${s.name}: marked its stuck Machines`).to.equal(s.stuck);
      expect(s.markedByThisShard, `${s.name}: its marks, in the audit log under its identity`).to.equal(s.stuck);
      expect(s.markedByOtherShard, `${s.name}: Machines marked by the other shard`).to.equal(0);
      expect(s.requestsOutsideShard, `${s.name}: ${s.outsideExamples?.join('; ')}`).to.equal(0);
      expect(s.unfilteredListsOrWatches, JSON.stringify(s.unfilteredListsOrWatchesByResource)).to.equal(0);
      expect(s.memoryLimit, `${s.name}: the limit it ran under, or why none`).to.match(/^(\d+Mi|none \()/);
      expect(s.firstReconcileS).to.be.a('number');
      for (const [m, w] of Object.entries(s.writers!)) expect(w, `${m} written by`).to.deep.equal([s.name]);
    }
  });

  it("runs JoinGuard under the Deployment's CPU request: the quota it ran under, how often it was throttled", () => {
    const c = res.cases.cpuLimited!;
    const proc = phase('cases', 'cpu').joinguard!.processes[0]!;
    expect(proc.cpuLimit, 'the quota, or why none').to.match(/^(\d+m|none \()/);
    if (/m$/.test(proc.cpuLimit)) expect(proc.throttling!.periods, 'CFS periods of its cgroup').to.be.greaterThan(0);
    expect(c.firstReconcileS).to.be.a('number');
  });

  it('brings the deadlines of a burst within a second, and times the last mark', () => {
    const b = phase('cases', 'burst');
    expect(b.burst!.machines).to.equal(10);
    expect(b.burst!.distinctDeadlineSeconds, 'deadlines fall in at most two whole seconds').to.be.at.most(2);
    expect(b.burst!.graceHeld, "no Cluster's connection grace reached past its deadline").to.deep.equal([]);
    const d = b.detection.joinguard!;
    expect(d.marked + d.censored).to.equal(10);
    if (d.censored === 0) expect(b.burst!.lastMarkedAfterS).to.be.a('number');
    expect(res.cases.burst!.detectionP99AllS).to.be.a('number');
  });

  it('runs two replicas: the standby takes over when the leader is killed, and both re-list when every watch expires', () => {
    const p = phase('replicas', 'replicas');
    const { leaderAtStart, standbyAtStart, hwmAtEventsStartMiB } = p.replicas!;
    expect(leaderAtStart).to.not.equal(standbyAtStart);
    expect(hwmAtEventsStartMiB[standbyAtStart], 'the warm standby holds a cache').to.be.a('number');
    const f = p.failover!;
    expect(f.killed).to.equal(leaderAtStart);
    expect(f.takeoverS, 'the standby took the Lease').to.be.a('number');
    expect(f.detection!.marked + f.detection!.censored).to.equal(f.detection!.stuck);
    expect(f.firstMarkAfterS, 'marks flowed again after the failover').to.be.a('number');
    const r = p.relist!;
    expect(
      Object.values(r.watchesExpired!).every((n) => n > 0),
      'open watches of each replica expired',
    ).to.equal(true);
    expect(r.firstMarkAfterS, 'marks flowed again after the re-list').to.be.a('number');
    expect(Object.keys(r.replicas)).to.have.length.at.least(2);
    expect(res.replicas.failover!.takeoverS).to.be.a('number');
    expect(res.replicas.relist!.watchesExpired).to.be.greaterThan(0);
  });
});
