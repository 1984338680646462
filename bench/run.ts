// One run of the benchmark, on a control plane and a fleet of its own, built afresh:
//   joinguard  JoinGuard alone (MachineJoinChecks, no MachineHealthCheck)
//   mhc        CAPI's MachineHealthCheck alone (MachineHealthChecks, no JoinGuard)
//   both       both, on the same Machines
//   sharded    JoinGuard as two shards over one fleet: the Clusters split in halves, each half's objects labelled
//              cluster.x-k8s.io/watch-filter=<shard> (docs/install.md, Sharding); one process per shard, each
//              with --watch-filter and its own Lease, its own client identity so the audit log tells them apart
// Phases: control plane (audit log, leader election on) → fleet → JoinGuard started, its first complete
// reconcile → a quiet window (nothing changes; every request is a request at rest) → stuck Machines added
// at a steady pace, detection window closed at a fixed time after the last deadline (what is unmarked by
// then is censored) → everything stopped, the audit log counted and checked complete.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  AuditCounter,
  checkAuditComplete,
  readAudit,
  ShardAuditor,
  type AuditCounts,
  type AuditIntegrity,
  type AuditWindow,
  type ShardAudit,
} from './audit.js';
import { LatencyReader, type FirstWrites, type LatencyBySecond } from './audit-latency.js';
import { JOINGUARD_LEASE_NAMESPACE, JoinGuardProcess } from './controller-process.js';
import { installBenchCrds } from './crds.js';
import { startBenchEnv, USER_JOINGUARD, type BenchEnv } from './env.js';
import {
  clusterTimes,
  createChecks,
  createClusters,
  createMachine,
  createNamespace,
  NAMESPACE,
  pool,
  restingMachines,
  shardOfName,
  stuckMachines,
  WATCH_FILTER,
  type ClusterTimes,
  type FleetShape,
} from './fleet.js';
import { deadline, detection, machineRows, race, type SideDetection } from './latency.js';
import { ProcSampler, type ProcSample } from './proc.js';
import { parseMetrics, scrape, type Sample } from './prom.js';
import { CheckWatcher, MachineWatcher, type MachineRecord, type Side } from './watch.js';

export type RunName = 'joinguard' | 'mhc' | 'both' | 'sharded';
export const RUN_SIDES: Record<RunName, Side[]> = {
  joinguard: ['joinguard'],
  mhc: ['mhc'],
  both: ['joinguard', 'mhc'],
  sharded: ['joinguard'],
};
/** The shards of run `sharded`, each the owner of a consecutive half of the Clusters. */
export const SHARDS = ['shard-a', 'shard-b'];
/** A shard's client identity (its own certificate): the audit log attributes each request to one shard. */
export const shardUser = (shard: string) => `joinguard-${shard}`;
const MAX_PENDING = 200;
const STALL_MS = 300_000;
const processAlive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export interface RunTiming {
  joinTimeoutS: number;
  quietMs: number;
  stuckSpreadMs: number;
  /** The detection window closes this long after the last stuck Machine's deadline. */
  tailMs: number;
  /** JoinGuard's --connection-grace; undefined = its default (2m). */
  connectionGraceMs?: number;
  /** Before JoinGuard starts: no Machine changed for this long (CAPI's follow-up reconciles are over). */
  settleMs: number;
}

export interface RunOptions {
  name: RunName;
  shape: FleetShape;
  timing: RunTiming;
  /** NODE_OPTIONS for JoinGuard. */
  nodeOptions: string;
  /** hack/testenv/build.sh's bin folder. */
  binDir: string;
  log: (line: string) => void;
}

/** What is sampled at each window edge. */
export interface Edge {
  at: number;
  /** The machine's 1/5/15-minute load averages: others' work on the shared cores shows here. */
  loadavg: number[];
  proc: Record<string, ProcSample | undefined>;
  /** Selected metrics of CAPI's core manager and of JoinGuard. */
  core?: Sample[];
  joinguard?: Sample[];
}

export interface RunResult {
  name: RunName;
  /** When and on which commit this run was measured (set by bench.ts; older results files lack it). */
  measured?: { date: string; commit: string };
  sides: Side[];
  phasesS: Record<string, number>;
  windows: Record<'startup' | 'quiet' | 'detection', AuditWindow>;
  edges: Record<'quietStart' | 'quietEnd' | 'detectionStart' | 'detectionEnd', Edge>;
  peakRssKiB: Record<string, number>;
  joinguard?: ProcessTimes & { nodeOptions: string; memoryLimit?: string };
  audit: { counts: AuditCounts; userAgents: Record<string, string>; integrity: AuditIntegrity };
  apiserverRequestTotalLabels: string[];
  detection: Partial<Record<Side, SideDetection>>;
  race?: ReturnType<typeof race>;
  machines: ReturnType<typeof machineRows>;
  clusters: Record<string, ClusterTimes>;
  /** Run `sharded`: per shard, its process and every request it made, checked against its own Clusters. */
  shards?: ShardRun[];
  /** Detection window, per second: the apiserver's time over JoinGuard's requests and over everyone else's. */
  apiserverLatency?: LatencyBySecond;
  /** Detection window: per Machine, when JoinGuard first wrote its metadata (the marker) and its status (the mark). */
  joinguardFirstWrites?: FirstWrites;
  /** JoinGuard's resident memory and CPU every 5 s from its start (run joinguard, both). */
  joinguardSeries?: { columns: string[]; rows: number[][] };
  /** Run `sharded`: per stuck Machine, the shard that owns it and the shards that wrote it (the audit log). */
  shardRows?: { columns: string[]; rows: (string | null)[][] };
}

/** One JoinGuard process of a run: when it started, was ready and had reconciled every check; how it ended. */
export interface ProcessTimes {
  spawnedAt: number;
  readyAt: number;
  firstReconcileAt: number;
  checks: number;
  logLines: number;
  exit: string;
}

export interface ShardRun extends ProcessTimes {
  name: string;
  user: string;
  lease: string;
  clusters: number;
  peakRssKiB: number;
  /** The memory limit the shard's process ran under (the Deployment's), or "none (why)". */
  memoryLimit?: string;
  detection: SideDetection;
  /** Stuck Machines of this shard written (marked) by the other shard's process. */
  markedByOtherShard: string[];
  /** Stuck Machines this shard marked, per the audit log (its own and, if any, the other's). */
  markedByThisShard: number;
  audit: ShardAudit;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// Only the families the report reads are kept (a full scrape of the core manager is thousands of lines).
const KEEP =
  /^(controller_runtime_reconcile_(total|time_seconds_sum)|process_cpu_seconds_total|process_resident_memory_bytes|nodejs_heap_size_(used|total)_bytes|nodejs_external_memory_bytes|nodejs_gc_duration_seconds_(sum|count)|go_memstats_heap_inuse_bytes)$/;
const keep = (s: Sample[] | undefined) => s?.filter((x) => KEEP.test(x.name));

export async function runOne(o: RunOptions): Promise<RunResult> {
  const { timing, log } = o;
  const sides = RUN_SIDES[o.name];
  const shards = o.name === 'sharded' ? SHARDS : [];
  // A shard needs Clusters of its own: at the smoke size (one Cluster) the sharded fleet has one per shard.
  const shape: FleetShape = shards.length
    ? { ...o.shape, clusters: Math.max(o.shape.clusters, shards.length), shards }
    : o.shape;
  const phasesS: Record<string, number> = {};
  const phase = (name: string, since: number) => (phasesS[name] = Math.round((Date.now() - since) / 100) / 10);
  let bench: BenchEnv | undefined;
  let jg: JoinGuardProcess | undefined;
  // Run `sharded`: one process per shard (jg stays undefined).
  const shardProcs = new Map<string, JoinGuardProcess>();
  const watchers: { stop(): void }[] = [];
  const samplers: ProcSampler[] = [];
  try {
    let t = Date.now();
    bench = await startBenchEnv((l) => log(`testenv: ${l}`), o.binDir, shards.map(shardUser));
    const kube = bench.driver;
    const labelsLine =
      (await kube.send('GET', '/metrics')).body.split('\n').find((l) => l.startsWith('apiserver_request_total{')) ?? '';
    const apiserverRequestTotalLabels = [...labelsLine.matchAll(/(\w+)="/g)].map((m) => m[1]!);
    await installBenchCrds(kube);
    await createNamespace(kube);
    await createNamespace(kube, JOINGUARD_LEASE_NAMESPACE);
    phase('controlPlaneS', t);

    t = Date.now();
    const w = new MachineWatcher(kube, NAMESPACE);
    watchers.push(w);
    await w.start();
    const checks = new CheckWatcher(kube, NAMESPACE);
    const msUids = await createClusters(kube, shape, new URL(bench.env.server), bench.workloadKubeconfigYaml);
    await createChecks(kube, shape, sides);
    if (sides.includes('joinguard')) {
      watchers.push(checks);
      await checks.start();
    }
    await waitFor('every Cluster initialized and connected', 180_000, async () =>
      [...(await clusterTimes(kube)).values()].every((c) => c.ready),
    );
    const resting = restingMachines(shape);
    let created = 0;
    const progress = setInterval(
      () => log(`created ${created}/${resting.length} resting Machines; Provisioned ${w.provisionedCount}`),
      30_000,
    );
    // Back-pressure: no more than MAX_PENDING Machines ahead of CAPI. Flooding CAPI's Machine controller on
    // 2 cores lags its cache, and its status patches then conflict (409) in a storm that feeds itself.
    // A stall fails the run instead of waiting forever: under overload (load average 15 on 2 cores, 2026-12-04) CAPI's
    // core manager missed its Lease renewal deadline and exited ("leader election lost"), as a pod would before
    // its restart; the bench does not restart it.
    let lastProgress = { at: Date.now(), provisioned: 0 };
    await pool(resting, 16, async (m) => {
      while (created - w.provisionedCount >= MAX_PENDING) {
        if (w.provisionedCount !== lastProgress.provisioned)
          lastProgress = { at: Date.now(), provisioned: w.provisionedCount };
        else if (Date.now() - lastProgress.at > STALL_MS)
          throw new Error(
            `no Machine became Provisioned for ${STALL_MS / 1000} s (${w.provisionedCount} of ${created}); CAPI's core manager ${bench!.env.pids['capi-core'] && processAlive(bench!.env.pids['capi-core']) ? 'runs' : 'has exited (see its log)'}`,
          );
        await sleep(100);
      }
      created++;
      await createMachine(kube, m, msUids);
    }).finally(() => clearInterval(progress));
    await w.until(`${shape.resting} Machines Provisioned`, () => w.provisionedCount >= shape.resting, 600_000);
    phase('fleetS', t);
    log(`fleet ready in ${phasesS.fleetS} s`);
    const pids = bench.env.pids;
    const watched: Record<string, number> = {
      'capi-core': pids['capi-core']!,
      'kube-apiserver': pids['kube-apiserver']!,
      etcd: pids['etcd']!,
    };
    for (const [name, pid] of Object.entries(watched)) samplers.push(new ProcSampler(pid, 1000, name));
    log(`settled after ${Math.round((await w.settle(timing.settleMs, 300_000)) / 1000)} s without a Machine change`);

    const startup: AuditWindow = { name: 'startup', from: Date.now(), to: 0 };
    if (shards.length) {
      // Started as run joinguard starts its one process (the Deployment's flags and runtime), at the same moment.
      for (const shard of shards) {
        const p = await JoinGuardProcess.start({
          kubeconfig: bench.kubeconfigs[shardUser(shard)]!,
          webhookCertDir: path.join(bench.env.runDir, 'pki', 'webhook'),
          logFile: path.join(bench.dir, `joinguard-${shard}.log`),
          nodeOptions: o.nodeOptions,
          extraFlags: [
            `--watch-filter=${shard}`,
            `--leader-elect-resource-name=joinguard-leader-${shard}`,
            ...(timing.connectionGraceMs !== undefined
              ? [`--connection-grace=${timing.connectionGraceMs / 1000}s`]
              : []),
          ],
          pgidFile: path.join(bench.env.runDir, 'pgids'),
          label: `joinguard-${shard}`,
        });
        shardProcs.set(shard, p);
        samplers.push(p.sampler);
      }
      startup.from = Math.min(...[...shardProcs.values()].map((p) => p.spawnedAt));
      await Promise.all([...shardProcs.values()].map((p) => p.waitReady(180_000)));
      const all = () => checks.names.size > 0 && [...checks.names].every((n) => checks.firstStatusAt.has(n));
      await checks.until("each shard's first status on every check of its own", all, 180_000);
      for (const [shard, p] of shardProcs) {
        const mine = [...checks.firstStatusAt].filter(([n]) => shardOfName(shape, n) === shard).map(([, at]) => at);
        log(
          `JoinGuard ${shard}: ready ${(p.readyAt! - p.spawnedAt) / 1000} s, its ${mine.length} checks reconciled ${(Math.max(...mine) - p.spawnedAt) / 1000} s after spawn`,
        );
      }
      await sleep(3000);
    } else if (sides.includes('joinguard')) {
      jg = await JoinGuardProcess.start({
        kubeconfig: bench.kubeconfigs[USER_JOINGUARD],
        webhookCertDir: path.join(bench.env.runDir, 'pki', 'webhook'),
        logFile: path.join(bench.dir, 'joinguard.log'),
        nodeOptions: o.nodeOptions,
        ...(timing.connectionGraceMs !== undefined
          ? { extraFlags: [`--connection-grace=${timing.connectionGraceMs / 1000}s`] }
          : {}),
        pgidFile: path.join(bench.env.runDir, 'pgids'),
      });
      samplers.push(jg.sampler);
      startup.from = jg.spawnedAt;
      await jg.waitReady(180_000);
      const all = () => checks.names.size > 0 && [...checks.names].every((n) => checks.firstStatusAt.has(n));
      await checks.until("JoinGuard's first status on every check", all, 180_000);
      log(
        `JoinGuard: ready ${(jg.readyAt! - jg.spawnedAt) / 1000} s, every check reconciled ${(Math.max(...checks.firstStatusAt.values()) - jg.spawnedAt) / 1000} s after spawn`,
      );
      await sleep(3000);
    }
    startup.to = Date.now();

    const edge = async (): Promise<Edge> => ({
      at: Date.now(),
      loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
      proc: Object.fromEntries(samplers.map((s) => [s.label, s.take()])),
      core: keep(await scrape(bench!.coreMetricsUrl)),
      ...(jg ? { joinguard: keep(await jg.metrics()) } : {}),
    });
    const quietStart = await edge();
    const quiet: AuditWindow = { name: 'quiet', from: Date.now(), to: 0 };
    log(`quiet for ${timing.quietMs / 1000} s`);
    await sleep(timing.quietMs);
    quiet.to = Date.now();
    const quietEnd = await edge();

    // No deadline may fall within JoinGuard's connection grace (MHC has none), or the latency measured would be the grace.
    let graceEnd = 0;
    const grace = timing.connectionGraceMs ?? 120_000;
    for (const c of (await clusterTimes(kube)).values())
      graceEnd = Math.max(graceEnd, (c.remoteConnectionAt ?? 0) + grace + 1000);
    const graceWait = graceEnd - timing.joinTimeoutS * 1000 - Date.now();
    if (graceWait > 0) {
      log(`waiting ${Math.ceil(graceWait / 1000)} s so that no deadline falls within JoinGuard's connection grace`);
      await sleep(graceWait);
    }

    // Stuck Machines arrive at a steady pace; the window closes a fixed time after the last deadline.
    t = Date.now();
    const detectionStart = await edge();
    const detect: AuditWindow = { name: 'detection', from: Date.now(), to: 0 };
    const stuck = stuckMachines(shape);
    const gap = timing.stuckSpreadMs / stuck.length;
    let next = 0;
    await pool(stuck, 16, async (s) => {
      const due = t + gap * next++;
      if (due > Date.now()) await sleep(due - Date.now());
      await createMachine(kube, s, msUids);
    });
    await w.until(
      'every stuck Machine Provisioned',
      () => w.provisionedCount >= shape.machines,
      timing.joinTimeoutS * 1000 + 300_000,
    );
    const clusters = await clusterTimes(kube);
    let lastDeadline = 0;
    for (const r of w.machines.values()) {
      if (!r.pool.endsWith('-watch')) continue;
      for (const side of sides)
        lastDeadline = Math.max(
          lastDeadline,
          deadline(side, r, clusters.get(r.pool.replace(/-watch$/, '')), timing.joinTimeoutS * 1000) ?? 0,
        );
    }
    const windowEnd = lastDeadline + timing.tailMs;
    log(
      `stuck Machines created in ${(Date.now() - t) / 1000} s; the detection window closes in ${Math.round((windowEnd - Date.now()) / 1000)} s`,
    );
    await sleep(Math.max(0, windowEnd - Date.now()));
    detect.to = Date.now();
    const detectionEnd = await edge();
    phase('detectionS', t);

    const result = {
      detection: Object.fromEntries(
        sides.map((s) => [s, detection(s, w.machines.values(), clusters, shape, windowEnd)]),
      ) as RunResult['detection'],
      ...(sides.length === 2 ? { race: race(w.machines.values(), windowEnd) } : {}),
      machines: machineRows(w.machines.values(), clusters, shape),
    };
    for (const s of sides) {
      const d = result.detection[s]!;
      log(
        `${s}: marked ${d.marked}/${d.stuck}, censored ${d.censored}, p50 ${d.p50?.s} s, p99 ${d.p99?.censored ? '> ' : ''}${d.p99?.s} s`,
      );
    }

    // Stop: JoinGuard first (it hands its Lease back), then the control plane (flushes the audit log).
    const apiserverMetrics = parseMetrics((await kube.send('GET', '/metrics', undefined, undefined, 60_000)).body);
    const peakRssKiB = Object.fromEntries(samplers.map((s) => [s.label, Math.max(s.peakRssKiB, s.last?.hwmKiB ?? 0)]));
    let jgSummary: RunResult['joinguard'];
    const shardStops: Omit<ShardRun, 'detection' | 'markedByOtherShard' | 'markedByThisShard' | 'audit'>[] = [];
    for (const [shard, p] of shardProcs) {
      await p.stop();
      const mine = [...checks.firstStatusAt].filter(([n]) => shardOfName(shape, n) === shard).map(([, at]) => at);
      shardStops.push({
        name: shard,
        user: shardUser(shard),
        lease: `joinguard-leader-${shard}`,
        clusters: [...clusters.keys()].filter((c) => shardOfName(shape, c) === shard).length,
        spawnedAt: p.spawnedAt,
        readyAt: p.readyAt!,
        firstReconcileAt: Math.max(...mine),
        checks: mine.length,
        logLines: p.logLines(),
        exit: p.proc.describeExit(),
        peakRssKiB: peakRssKiB[`joinguard-${shard}`]!,
        memoryLimit: p.memoryLimit,
      });
    }
    if (jg) {
      await jg.stop();
      jgSummary = {
        spawnedAt: jg.spawnedAt,
        readyAt: jg.readyAt!,
        firstReconcileAt: Math.max(...checks.firstStatusAt.values()),
        checks: checks.names.size,
        logLines: jg.logLines(),
        exit: jg.proc.describeExit(),
        nodeOptions: o.nodeOptions,
        memoryLimit: jg.memoryLimit,
      };
    }
    for (const x of [...watchers, ...samplers]) x.stop();
    const keptAudit = path.join(os.tmpdir(), `joinguard-bench-audit-${process.pid}-${o.name}.log`);
    await bench.env.stop();
    fs.renameSync(bench.auditLog, keptAudit);
    await bench.stop();
    bench = undefined;
    t = Date.now();
    // One pass over the log for every reader.
    const counter = new AuditCounter([startup, quiet, detect]);
    const latency = sides.includes('joinguard')
      ? new LatencyReader(detect, (user) => user.startsWith('joinguard'))
      : undefined;
    const sharded = shards.length
      ? new ShardAuditor(
          Object.fromEntries(shards.map((s) => [s, shardUser(s)])),
          (n) => shardOfName(shape, n),
          WATCH_FILTER,
        )
      : undefined;
    const lines = await readAudit(keptAudit, [counter, ...(latency ? [latency] : []), ...(sharded ? [sharded] : [])]);
    const audit = { counts: counter.counts, userAgents: counter.userAgents, lines };
    const jgAudit = latency?.result();
    if (process.env.JOINGUARD_BENCH_KEEP === '1') log(`audit log kept: ${keptAudit}`);
    else fs.rmSync(keptAudit, { force: true });
    const integrity = checkAuditComplete(apiserverMetrics, audit.lines);
    phase('auditS', t);
    return {
      name: o.name,
      sides,
      phasesS,
      windows: { startup, quiet, detection: detect },
      edges: { quietStart, quietEnd, detectionStart, detectionEnd },
      peakRssKiB,
      ...(jgSummary ? { joinguard: jgSummary } : {}),
      audit: { counts: audit.counts, userAgents: audit.userAgents, integrity },
      apiserverRequestTotalLabels,
      ...result,
      clusters: Object.fromEntries(clusters),
      ...(jgAudit ? { apiserverLatency: jgAudit.latency, joinguardFirstWrites: jgAudit.firstWrites } : {}),
      ...(jg ? { joinguardSeries: jg.sampler.seriesTable() } : {}),
      ...(sharded ? shardResults(shape, shardStops, sharded, w.machines.values(), clusters, windowEnd) : {}),
    };
  } finally {
    for (const x of [...watchers, ...samplers]) x.stop();
    await jg?.stop().catch(() => undefined);
    for (const p of shardProcs.values()) await p.stop().catch(() => undefined);
    await bench?.stop().catch(() => undefined);
  }
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(500);
  }
}

/** Run `sharded`: per shard, detection over its own stuck Machines, who marked them (the audit log), its requests. */
function shardResults(
  shape: FleetShape,
  stops: Omit<ShardRun, 'detection' | 'markedByOtherShard' | 'markedByThisShard' | 'audit'>[],
  audit: Pick<ShardAuditor, 'shards' | 'machineWriters'>,
  machines: Iterable<MachineRecord>,
  clusters: Map<string, ClusterTimes>,
  windowEnd: number,
): Pick<RunResult, 'shards' | 'shardRows'> {
  const all = [...machines];
  const stuck = all.filter((r) => r.pool.endsWith('-watch'));
  const owner = (r: MachineRecord) => shardOfName(shape, r.name) ?? null;
  const writers = (r: MachineRecord) => audit.machineWriters[r.name] ?? [];
  return {
    shards: stops.map((s) => ({
      ...s,
      detection: detection(
        'joinguard',
        all.filter((r) => owner(r) === s.name),
        clusters,
        shape,
        windowEnd,
      ),
      markedByOtherShard: stuck
        .filter((r) => owner(r) === s.name && writers(r).some((x) => x !== s.name))
        .map((r) => r.name),
      markedByThisShard: stuck.filter((r) => writers(r).includes(s.name)).length,
      audit: audit.shards[s.name]!,
    })),
    shardRows: {
      columns: ['name', 'shard', 'writtenBy'],
      rows: stuck.map((r) => [r.name, owner(r), writers(r).join(',') || null]),
    },
  };
}
