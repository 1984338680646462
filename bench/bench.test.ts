// CI's smoke size of the benchmark: `bench/bench.ts --smoke --machines 40` end to end in a child process
// (four runs at once — JoinGuard alone, the MHC alone, both, and JoinGuard as two shards — each on its own
// control plane with an audit log and leader election on both sides), then what the measurement must hold at
// any size. Latency figures
// are not asserted: CI machines are shared and noisy.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { Results } from './report.js';

const here = path.dirname(fileURLToPath(import.meta.url));

describe('bench (smoke size)', function () {
  this.timeout(240_000);
  let child: ChildProcess | undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-bench-smoke-'));
  const out = path.join(dir, 'results.json');
  let res: Results;

  before(async () => {
    let stderr = '';
    child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(here, 'bench.ts'),
        '--smoke',
        '--machines',
        '40',
        '--runs',
        'joinguard,mhc,both,sharded',
        '--out',
        out,
      ],
      {
        cwd: path.join(here, '..'),
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    child.stderr!.on('data', (d) => (stderr += String(d)));
    const code = await new Promise<number | null>((r) => child!.once('exit', r));
    expect(code, `bench failed:\n${stderr.slice(-6000)}`).to.equal(0);
    res = JSON.parse(fs.readFileSync(out, 'utf8')) as Results;
  });

  after(async () => {
    // On a mocha timeout the bench is still running: SIGINT makes it stop what it started.
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      await new Promise((r) => child!.once('exit', r));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs JoinGuard alone, the MHC alone and both, and every stuck Machine is counted: marked or censored', () => {
    expect(res.run.runs).to.have.members(['joinguard', 'mhc', 'both', 'sharded']);
    const stuck = res.setup.shape.stuck;
    for (const r of Object.values(res.runs)) {
      expect(r.measured?.date, `${r.name}: when it ran`).to.be.a('string');
      expect(r.machines.rows, `${r.name}: per-Machine rows`).to.have.length(stuck);
      for (const d of Object.values(r.detection)) {
        expect(d.stuck).to.equal(stuck);
        expect(d.marked + d.censored, 'censored Machines counted').to.equal(stuck);
        expect(d.falseMarks, 'resting Machines marked').to.deep.equal([]);
        expect(d.early, 'marks before the deadline').to.equal(0);
      }
    }
    expect(res.runs.joinguard!.detection.joinguard!.censored, 'JoinGuard alone left stuck Machines unmarked').to.equal(
      0,
    );
    expect(res.runs.mhc!.detection.mhc!.censored, 'the MHC alone left stuck Machines unmarked').to.equal(0);
    const race = res.runs.both!.race!;
    expect(race.joinguardFirst + race.mhcFirst.length + race.neither.length).to.equal(stuck);
  });

  it('keeps what recomputes the figures: per-Machine deadlines and marks give the published p99', () => {
    const r = res.runs.joinguard!;
    const col = (n: string) => r.machines.columns.indexOf(n);
    const end = r.windows.detection.to;
    const lat = r.machines.rows
      .map((row) => {
        const seen = row[col('joinguardMarkSeenAt')] as number | null;
        const d = row[col('joinguardDeadline')] as number;
        return seen !== null && seen <= end ? { s: (seen - d) / 1000, c: 0 } : { s: (end - d) / 1000, c: 1 };
      })
      .sort((a, b) => a.c - b.c || a.s - b.s);
    const p99 = lat[Math.ceil(0.99 * lat.length) - 1]!;
    expect(res.summary.detectionP99AllS).to.be.closeTo(p99.s, 0.001);
    expect(res.summary.detectionP99AllCensored).to.equal(p99.c === 1);
  });

  it('counts every request: the audit log lost no event in any run', () => {
    for (const r of Object.values(res.runs)) {
      expect(r.audit.integrity.errors, `${r.name}: apiserver_audit_error_total`).to.equal(0);
      expect(r.audit.integrity.lines).to.be.at.least(r.audit.integrity.eventsGenerated);
    }
  });

  it("keeps, per second of detection, the apiserver's time over JoinGuard's requests, and JoinGuard's memory over time", () => {
    const r = res.runs.joinguard!;
    const mine = r.apiserverLatency!.rows.reduce((n, row) => n + row[1]!, 0);
    expect(mine, 'JoinGuard requests in the detection window').to.be.greaterThan(0);
    const marked = r.detection.joinguard!.marked;
    const written = r.joinguardFirstWrites!.rows.filter(([, , statusAt]) => statusAt !== null).length;
    expect(written, 'Machines whose status JoinGuard wrote (the OwnerRemediated mark)').to.be.at.least(marked);
    expect(r.joinguardSeries!.rows.length).to.be.greaterThan(2);
    expect(r.joinguardSeries!.rows.every((row) => row[1]! > 0)).to.equal(true);
  });

  it('runs both sides with leader election, and JoinGuard at rest renews its Lease and nothing else', () => {
    const jg = res.perRun.joinguard!.joinguard!;
    const core = res.perRun.joinguard!.core;
    expect(jg.atRest.otherRequestsPerMin, JSON.stringify(jg.atRest.byVerbResourcePerMin)).to.equal(0);
    expect(jg.atRest.leaseRequestsPerMin, 'JoinGuard renews a Lease').to.be.greaterThan(0);
    expect(core.atRest.leaseRequestsPerMin, "CAPI's core manager renews a Lease").to.be.greaterThan(0);
  });

  it("measures workload-cluster requests (the core manager's are seen; JoinGuard's are counted, not assumed)", () => {
    expect(res.perRun.mhc!.core.atRest.workloadClusterRequestsPerMin).to.be.greaterThan(0);
    expect(res.summary.atRestWorkloadClusterRequestsPerMin).to.be.a('number');
  });

  it('writes the summary the issue asks for, for JoinGuard and under mhc', () => {
    const s = res.summary;
    for (const k of [
      'machines',
      'detectionP99AllS',
      'peakRssMiB',
      'firstReconcileS',
      'requestsPerMark',
      'atRestRequestsPerMin',
    ] as const)
      expect(s[k], k).to.be.a('number');
    for (const k of ['detectionP99AllS', 'peakRssMiB', 'requestsPerMark', 'atRestRequestsPerMin'] as const)
      expect(s.mhc[k], `mhc.${k}`).to.be.a('number');
    expect(res.runs.joinguard!.joinguard!.checks).to.equal(2 * res.setup.shape.clusters);
    expect(res.rebuilds.rows.find((r) => r.guard === 'JoinGuard, defaults')!.rebuilds).to.be.at.most(7);
  });

  it('runs two shards over one fleet: each marks every stuck Machine of its own Clusters and touches nothing of the other', () => {
    const sh = res.sharded!;
    const r = res.runs.sharded!;
    expect(sh.shards.map((s) => s.name)).to.deep.equal(['shard-a', 'shard-b']);
    expect(
      sh.shards.reduce((a, s) => a + s.stuck, 0),
      'every stuck Machine belongs to a shard',
    ).to.equal(res.setup.shape.stuck);
    for (const s of sh.shards) {
      expect(s.clusters, `${s.name}: Clusters of its own`).to.be.greaterThan(0);
      expect(s.stuck, `${s.name}: stuck Machines of its own`).to.be.greaterThan(0);
      expect(s.marked, `${s.name}: marked its stuck Machines`).to.equal(s.stuck);
      expect(s.markedByThisShard, `${s.name}: its marks, in the audit log under its identity`).to.equal(s.stuck);
      expect(s.markedByOtherShard, `${s.name}: Machines marked by the other shard`).to.equal(0);
      expect(s.falseMarks, `${s.name}: resting Machines marked`).to.equal(0);
      expect(s.requests, `${s.name}: requests counted`).to.be.greaterThan(0);
      expect(s.requestsOutsideShard, `${s.name}: ${s.outsideExamples.join('; ')}`).to.equal(0);
      expect(s.unfilteredListsOrWatches, JSON.stringify(s.unfilteredListsOrWatchesByResource)).to.equal(0);
      expect(s.peakRssMiB).to.be.a('number');
      expect(s.memoryLimit, `${s.name}: the limit it ran under, or why none`).to.match(/^(\d+Mi|none \()/);
      expect(s.firstReconcileS).to.be.a('number');
    }
    // Per stuck Machine: the shard owning it and the shards that wrote it.
    const rows = r.shardRows!.rows;
    expect(rows).to.have.length(res.setup.shape.stuck);
    for (const [name, shard, writtenBy] of rows) expect(writtenBy, `${name} of ${shard}`).to.equal(shard);
  });
});
