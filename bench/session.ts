// One invocation of `npm run bench`: one control plane (audit log, leader election on, bench/env.ts) on a fleet
// (bench/fleet.ts) made once through CAPI, saved and restored (bench/fleet-cache.ts: a fleet costs ~0.33 s per
// Machine to build, its restore a copy and a start), then its phases one after another on that same fleet and
// commit (bench/phase.ts), each measured in windows of its own; at the end everything is stopped and the audit log
// is read once, every phase's windows counted in that one pass. CAPI's managers' logs are kept in logsDir.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  AuditCounter,
  checkAuditComplete,
  readAudit,
  ShardAuditor,
  type AuditConsumer,
  type AuditEvent,
  type AuditIntegrity,
  type AuditWindow,
} from './audit.js';
import { LatencyReader } from './audit-latency.js';
import { JOINGUARD_LEASE_NAMESPACE } from './controller-process.js';
import { installBenchCrds } from './crds.js';
import { startBenchEnv, type BenchEnv } from './env.js';
import {
  fleetCache,
  fleetKey,
  FLEET_SOURCES,
  readMeta,
  restoreCopy,
  save,
  sourcesHash,
  stagingDir,
  usable,
  type FleetCache,
  type FleetMeta,
} from './fleet-cache.js';
import { capiLeasesHeld, readOwners, repointRestored, storageReady } from './fleet-once.js';
import { ManagerLogs } from './manager-logs.js';
import { readBuiltRelease } from '../hack/testenv/capi-releases.js';
import {
  burstFleet,
  clusterName,
  clusterTimes,
  createCluster,
  createClusters,
  createMachine,
  createNamespace,
  NAMESPACE,
  parkedMachines,
  parkedPools,
  parkedTags,
  pool,
  restingMachines,
  shardOfName,
  startLiveOwners,
  WATCH_FILTER,
  type FleetShape,
} from './fleet.js';
import { runBurst } from './burst.js';
import { emptyResult, runStandard, type EventFigures, type PhasePlan, type PhaseResult } from './phase.js';
import { fmt, restoreBudgetS } from './plan.js';
import { MAX_PENDING, sleep, waitFor, type Context, type Timing } from './phase-kit.js';
import { ProcSampler } from './proc.js';
import { parseMetrics } from './prom.js';
import { REPLICA_USERS, runReplicas } from './replicas.js';
import { SHARD_USERS, shardAudit } from './sharded.js';
import { CheckWatcher, MachineWatcher } from './watch.js';

const STALL_MS = 300_000;

export interface SessionOptions {
  shape: FleetShape;
  timing: Timing;
  plan: PhasePlan[];
  nodeOptions: string;
  cpuLimit: string;
  burst: number;
  commit: string;
  binDir: string;
  log: (line: string) => void;
  /** After each phase: the results so far (written, so a run cut short keeps what it measured). */
  onPhase?: (done: PhaseResult[], fleetS: number) => void;
  /** Where CAPI's managers' logs are kept (one folder per control plane: build/, run/). */
  logsDir: string;
  /** Build and save the fleet even if a usable one is saved. */
  rebuildFleet?: boolean;
  /** The fleet of the plan (its stuck Machines parked) built or restored, and no phase run. */
  fleetOnly?: boolean;
  /** When the invocation started, and its estimate in seconds (bench/plan.ts): progress lines say both. */
  startedAt: number;
  estimateS?: number;
  /** Phases' Machines moved out of their pools when they end, not deleted (the headline plan). */
  retire?: boolean;
}

/** How this invocation got its fleet: built (and saved) or only restored. */
export interface FleetFigures {
  key: string;
  builtNow: boolean;
  buildS: number;
  /** The saved data folder copied for this run. */
  copyS: number;
  /** From the copy to CAPI's managers leading and the fleet's Machines settled. */
  restoreS: number;
  /** The saved fleet's age when restored. */
  ageS: number;
  bytes: number;
}

export interface SessionResult {
  fleetS: number;
  phases: PhaseResult[];
  audit: { integrity?: AuditIntegrity; userAgents: Record<string, string>; lines: number };
  apiserverRequestTotalLabels: string[];
  /** Why the phases after the last one were not run (a CAPI manager exited). */
  aborted?: string;
  fleet?: FleetFigures;
}

/** Hands a consumer only the events received within a window. */
function within(w: AuditWindow, c: AuditConsumer): AuditConsumer {
  return {
    take(e: AuditEvent) {
      const at = Date.parse(e.requestReceivedTimestamp ?? '');
      if (at >= w.from && at < w.to) c.take(e);
    },
  };
}

async function buildFleet(ctx: Context, bench: BenchEnv): Promise<void> {
  const kube = bench.driver;
  const { shape, log } = ctx;
  const w = ctx.machines;
  const owners = await createClusters(kube, shape, {
    server: new URL(bench.env.server),
    kubeconfigYaml: bench.workloadKubeconfigYaml,
  });
  for (const [k, v] of owners) ctx.owners.set(k, v);
  await waitFor('every Cluster initialized and connected', 300_000, async () =>
    [...(await clusterTimes(kube)).values()].every((c) => c.ready),
  );
  const resting = restingMachines(shape);
  let created = 0;
  const progress = setInterval(
    () => log(`created ${created}/${resting.length} resting Machines; Provisioned ${w.provisionedCount}`),
    30_000,
  );
  // Back-pressure: no more than MAX_PENDING Machines ahead of CAPI. Flooding CAPI's Machine controller on 2 cores
  // lags its cache, and its status patches then conflict (409) in a storm that feeds itself. A stall fails the run:
  // under overload CAPI's core manager can miss its Lease renewal and exit, as a pod would before its restart.
  let last = { at: Date.now(), provisioned: 0 };
  await pool(resting, 16, async (m) => {
    while (created - w.provisionedCount >= MAX_PENDING) {
      if (w.provisionedCount !== last.provisioned) last = { at: Date.now(), provisioned: w.provisionedCount };
      else if (Date.now() - last.at > STALL_MS)
        throw new Error(`no Machine became Provisioned for ${STALL_MS / 1000} s (${w.provisionedCount} of ${created})`);
      await sleep(100);
    }
    created++;
    await createMachine(kube, m, ctx.owners);
  })
    .catch((e: Error) => {
      // Under overload a CAPI manager misses its Lease renewal and exits, as a pod would before its restart (its
      // webhooks go with it); the bench does not restart it: say which.
      throw new Error(`${e.message}; CAPI's managers: ${managersState(bench)}`);
    })
    .finally(() => clearInterval(progress));
  await w.until(`${resting.length} Machines Provisioned`, () => w.provisionedCount >= resting.length, 900_000);
}

/**
 * The saved fleet of this shape, CAPI release and fleet sources, or, if none is usable, a fleet built through
 * CAPI on a control plane of its own (etcd's data in the cache's staging folder), stopped cleanly and saved.
 */
export async function ensureFleet(o: SessionOptions): Promise<{ cache: FleetCache; meta: FleetMeta; built: boolean }> {
  const capi = readBuiltRelease(o.binDir).version;
  const parked = parkedMachines(o.shape, parkedTags(o.plan), parkedPools(o.plan));
  const burst = burstFleet(o.shape, o.plan, o.burst);
  // The parked Machines' names (the plan's phases) and the burst's are part of what is saved.
  const texts = [
    ...FLEET_SOURCES.map((f) => fs.readFileSync(f, 'utf8')),
    parked.map((m) => m.name).join(','),
    ...(burst.machines.length ? [`burst:${burst.machines.map((m) => m.name).join(',')}`] : []),
  ];
  const key = fleetKey(o.shape, capi, sourcesHash(texts));
  const cache = fleetCache(key);
  const saved = readMeta(cache);
  if (!o.rebuildFleet && saved && usable(saved, key, Date.now())) return { cache, meta: saved, built: false };
  if (saved) o.log(`saved fleet ${key} not used (${o.rebuildFleet ? '--rebuild-fleet' : 'too old'}): building`);
  else o.log(`no saved fleet ${key}: building it through CAPI`);
  const staging = stagingDir(cache);
  const t0 = Date.now();
  try {
    const bench = await startBenchEnv((l) => o.log(`testenv (build): ${l}`), o.binDir, [], {
      etcdDataDir: path.join(staging, 'etcd-data'),
    });
    const logs = new ManagerLogs(bench.env.runDir, bench.env.pids);
    const machines = new MachineWatcher(bench.driver, NAMESPACE);
    try {
      await installBenchCrds(bench.driver);
      await createNamespace(bench.driver);
      await createNamespace(bench.driver, JOINGUARD_LEASE_NAMESPACE);
      await machines.start();
      const ctx = { shape: o.shape, log: o.log, machines, owners: new Map<string, string>() };
      await buildFleet(ctx as unknown as Context, bench);
      o.log(
        `the fleet's ${o.shape.machines - o.shape.stuck} Machines at rest built in ${Math.round((Date.now() - t0) / 1000)} s`,
      );
      const tParked = Date.now();
      // Not Provisioned (their infrastructure not ready): no back-pressure to wait on.
      await pool(parked, 16, (m) => createMachine(bench.driver, m, ctx.owners));
      await startLiveOwners(bench.driver, parked);
      o.log(
        `${parked.length} stuck Machines parked for ${parkedTags(o.plan).length} phases in ${Math.round((Date.now() - tParked) / 1000)} s`,
      );
      const tBurst = Date.now();
      // The burst's Clusters (not initialized) and Machines (Provisioned: their clock waits for the control plane).
      const server = new URL(bench.env.server);
      for (const c of burst.clusters)
        await createCluster(
          bench.driver,
          o.shape,
          c,
          { server, kubeconfigYaml: bench.workloadKubeconfigYaml, initialized: false, healthChecks: true },
          ctx.owners,
        );
      const made: string[] = [];
      await pool(burst.machines, 16, async (m) => {
        while (made.length - machines.named(made).filter((r) => r.provisioned).length >= MAX_PENDING) await sleep(100);
        made.push(m.name);
        await createMachine(bench.driver, m, ctx.owners);
      });
      await machines.until(
        `${made.length} burst Machines Provisioned`,
        () => machines.named(made).filter((r) => r.provisioned).length >= made.length,
        900_000,
      );
      if (burst.machines.length)
        o.log(
          `${burst.machines.length} burst Machines saved Provisioned in ${burst.clusters.length} Clusters in ${Math.round((Date.now() - tBurst) / 1000)} s`,
        );
    } finally {
      machines.stop();
      logs.keep(path.join(o.logsDir, 'build'));
      // A clean stop: etcd closes its store, so the folder is a consistent copy.
      await bench.stop();
    }
    const buildS = Math.round((Date.now() - t0) / 100) / 10;
    const meta = save(cache, staging, { key, builtAt: t0, buildS });
    o.log(`fleet built in ${buildS} s and saved (${(meta.bytes / 2 ** 20).toFixed(1)} MiB): ${cache.dir}`);
    return { cache, meta, built: true };
  } catch (e) {
    fs.rmSync(staging, { recursive: true, force: true });
    throw e;
  }
}

function managersState(bench: BenchEnv): string {
  return ['capi-core', 'capi-kubeadm-bootstrap', 'capi-kubeadm-control-plane']
    .map(
      (m) =>
        `${m} ${alive(bench.env.pids[m] ?? -1) ? 'runs' : 'has exited (see its log; JOINGUARD_BENCH_KEEP=1 keeps it)'}`,
    )
    .join(', ');
}

const alive = (pid: number) => {
  try {
    return process.kill(pid, 0);
  } catch {
    return false;
  }
};

export async function runSession(o: SessionOptions): Promise<SessionResult> {
  const { log } = o;
  let bench: BenchEnv | undefined;
  const phases: PhaseResult[] = [];
  let aborted: string | undefined;
  const stops: { stop(): void }[] = [];
  let managerLogs: ManagerLogs | undefined;
  const runData = path.join(os.tmpdir(), `joinguard-bench-etcd-${process.pid}`);
  try {
    const fleet = await ensureFleet(o);
    const t0 = Date.now();
    restoreCopy(fleet.cache, runData);
    const copyS = Math.round((Date.now() - t0) / 100) / 10;
    bench = await startBenchEnv((l) => log(`testenv: ${l}`), o.binDir, [...REPLICA_USERS, ...SHARD_USERS], {
      etcdDataDir: runData,
      restored: true,
      beforeCapi: (driver, yaml, server) =>
        repointRestored(driver, o.shape, yaml, new URL(server), burstFleet(o.shape, o.plan, o.burst).clusters),
    });
    managerLogs = new ManagerLogs(bench.env.runDir, bench.env.pids);
    const kube = bench.driver;
    await storageReady(kube);
    const labelsLine =
      (await kube.send('GET', '/metrics')).body.split('\n').find((l) => l.startsWith('apiserver_request_total{')) ?? '';
    const apiserverRequestTotalLabels = [...labelsLine.matchAll(/(\w+)="/g)].map((m) => m[1]!);
    const machines = new MachineWatcher(kube, NAMESPACE);
    const checks = new CheckWatcher(kube, NAMESPACE);
    stops.push(machines, checks);
    await machines.start();
    await checks.start();
    const ctx = {
      bench,
      shape: o.shape,
      timing: o.timing,
      owners: await readOwners(kube),
      machines,
      checks,
      samplers: [] as ProcSampler[],
      nodeOptions: o.nodeOptions,
      log,
      clusters: Array.from({ length: o.shape.clusters }, (_, i) => clusterName(i)),
      commit: o.commit,
      cpuLimit: o.cpuLimit,
      burst: o.burst,
      burstsSoFar: 0,
      ...(o.retire ? { retire: true } : {}),
      // Saved in the fleet, not made mid-run: the parked Machines and the first burst's.
      parked: new Set(
        [
          ...parkedMachines(o.shape, parkedTags(o.plan), parkedPools(o.plan)),
          ...burstFleet(o.shape, o.plan, o.burst).machines,
        ].map((m) => m.name),
      ),
    };
    // The restored fleet is ready when CAPI's new managers lead and their first pass over it has settled.
    const step = (what: string) => log(`restore: ${what} at ${Math.round((Date.now() - t0) / 100) / 10} s`);
    step('control plane up, lists answer');
    await waitFor("CAPI's managers hold their Leases", 120_000, () => capiLeasesHeld(kube));
    step("CAPI's managers lead");
    const resting = restingMachines(o.shape).length;
    await machines.until(`${resting} Machines Provisioned`, () => machines.provisionedCount >= resting, 300_000);
    step(`${resting} Machines Provisioned`);
    await machines.settle(o.timing.settleMs, 300_000);
    const fleetS = Math.round((Date.now() - t0) / 100) / 10;
    const figures: FleetFigures = {
      key: fleet.meta.key,
      builtNow: fleet.built,
      buildS: fleet.meta.buildS,
      copyS,
      restoreS: fleetS,
      ageS: Math.round((t0 - fleet.meta.builtAt) / 1000),
      bytes: fleet.meta.bytes,
    };
    log(
      `fleet restored in ${fleetS} s (copy ${copyS} s, ${(fleet.meta.bytes / 2 ** 20).toFixed(1)} MiB; saved ${figures.ageS} s ago, built in ${fleet.meta.buildS} s${fleet.built ? ' by this invocation' : ''})`,
    );
    for (const name of ['capi-core', 'kube-apiserver', 'etcd'])
      ctx.samplers.push(new ProcSampler(bench.env.pids[name]!, 1000, name));
    stops.push({ stop: () => ctx.samplers.forEach((s) => s.stop()) });

    log(`fleet restored in ${fmt(fleetS)} (budget ~${fmt(restoreBudgetS(o.shape))})`);
    // Long work shows progress: each running phase (a host and the one it hosts) against its budget, every minute.
    const running: { id: string; at: number; budgetS?: number }[] = [];
    const ticker = setInterval(
      () =>
        running.length &&
        log(
          `progress: ${running.map((x) => `${x.id} ${fmt((Date.now() - x.at) / 1000)} of ~${fmt(x.budgetS)}`).join('; ')}; invocation ${fmt((Date.now() - o.startedAt) / 1000)}${o.estimateS ? ` of ~${fmt(o.estimateS)}` : ''}`,
        ),
      o.timing.settleMs < 5000 ? 20_000 : 60_000,
    );
    stops.push({ stop: () => clearInterval(ticker) });
    const byId = new Map(o.plan.map((p) => [p.id, p]));
    const done = new Set<string>();
    const runOne = async (p: PhasePlan): Promise<void> => {
      log(`phase ${p.id} (${p.tag})${p.budgetS ? `, budget ~${fmt(p.budgetS)}` : ''}`);
      const at = Date.now();
      running.push({ id: p.id, at, ...(p.budgetS ? { budgetS: p.budgetS } : {}) });
      done.add(p.id);
      // A host runs the phases it hosts while it waits for its deadlines, each only if its budget ends in time.
      const idle = p.hosts
        ? async (until: number) => {
            for (const id of p.hosts!) {
              const h = byId.get(id)!;
              const fits = Date.now() + (h.budgetS ?? 0) * 1000 <= until;
              if (!fits || aborted) {
                log(
                  `${id} ${aborted ? 'not run' : `does not fit in ${p.id}'s wait (${fmt((until - Date.now()) / 1000)} left): runs after it`}`,
                );
                done.delete(id);
                continue;
              }
              await runOne(h);
            }
          }
        : undefined;
      let r: PhaseResult;
      try {
        if (p.kind === 'burst') r = await runBurst(ctx, p).finally(() => ctx.burstsSoFar++);
        else if (p.kind === 'replicas') r = await runReplicas(ctx, p);
        else r = await runStandard(ctx, p, idle);
      } catch (e) {
        log(`phase ${p.id} FAILED: ${(e as Error).stack ?? String(e)}`);
        r = { ...emptyResult(ctx, p, at), error: (e as Error).message.slice(0, 2000) };
        const state = managersState(bench!);
        // The phases done are still counted (below); those left cannot run.
        if (state.includes('exited'))
          aborted = `during phase ${p.id} a CAPI manager exited, and its webhooks with it: ${state}`;
      } finally {
        running.splice(
          running.findIndex((x) => x.id === p.id),
          1,
        );
      }
      if (p.budgetS) r.budgetS = p.budgetS;
      phases.push(r);
      log(
        `phase ${p.id} done in ${fmt((Date.now() - at) / 1000)}${p.budgetS ? ` (budget ~${fmt(p.budgetS)})` : ''}; invocation ${fmt((Date.now() - o.startedAt) / 1000)}${o.estimateS ? ` of ~${fmt(o.estimateS)}` : ''}`,
      );
      o.onPhase?.(phases, fleetS);
    };
    for (const p of o.fleetOnly ? [] : o.plan) {
      if (done.has(p.id)) continue;
      await runOne(p);
      if (aborted) break;
    }

    // Stop: the control plane last (flushes the audit log), then one pass over it.
    const apiserverMetrics = parseMetrics((await kube.send('GET', '/metrics', undefined, undefined, 60_000)).body);
    for (const x of stops) x.stop();
    const keptAudit = path.join(os.tmpdir(), `joinguard-bench-audit-${process.pid}.log`);
    managerLogs.keep(path.join(o.logsDir, 'run'));
    managerLogs = undefined;
    await bench.env.stop();
    fs.renameSync(bench.auditLog, keptAudit);
    await bench.stop();
    bench = undefined;
    const audit = await countAudit(keptAudit, phases, o.shape);
    if (process.env.JOINGUARD_BENCH_KEEP === '1') log(`audit log kept: ${keptAudit}`);
    else fs.rmSync(keptAudit, { force: true });
    const integrity = checkAuditComplete(apiserverMetrics, audit.lines);
    return {
      fleetS,
      phases,
      audit: { ...audit, integrity },
      apiserverRequestTotalLabels,
      ...(aborted ? { aborted } : {}),
      fleet: figures,
    };
  } finally {
    for (const x of stops) x.stop();
    try {
      managerLogs?.keep(path.join(o.logsDir, 'run'));
    } catch (e) {
      log(`CAPI's managers' logs not kept: ${(e as Error).message}`);
    }
    await bench?.stop().catch(() => undefined);
    fs.rmSync(runData, { recursive: true, force: true });
  }
}

/** One pass over the audit log: every phase's windows counted, its JoinGuard's writes, its shards' requests. */
async function countAudit(file: string, phases: PhaseResult[], shape: FleetShape) {
  const windows = phases.flatMap((p) => Object.values(p.windows).filter((w) => w.to > 0));
  const counter = new AuditCounter(windows);
  const consumers: AuditConsumer[] = [counter];
  const latency = new Map<PhaseResult, LatencyReader>();
  const shards = new Map<PhaseResult, ShardAuditor>();
  const events = new Map<EventFigures, { reader: LatencyReader; prefix: string }>();
  for (const p of phases) {
    for (const k of ['failover', 'relist'] as const) {
      const w = p.windows[k];
      const ev = p[k];
      if (!w || !ev) continue;
      const reader = new LatencyReader(w, (user) => user.startsWith('joinguard'));
      events.set(ev, { reader, prefix: `-watch-${p.tag}${k[0]}-` });
      consumers.push(reader);
    }
    const w = p.windows.detection;
    if (w && p.sides.includes('joinguard')) {
      const l = new LatencyReader(w, (user) => user.startsWith('joinguard'));
      latency.set(p, l);
      consumers.push(l);
    }
    if (p.shards && w) {
      const users = Object.fromEntries(p.shards.map((s) => [s.name, s.user]));
      const a = new ShardAuditor(users, (n) => shardOfName(shape, n), WATCH_FILTER);
      shards.set(p, a);
      const from = p.windows.startup?.from ?? w.from;
      consumers.push(within({ name: p.id, from, to: w.to }, a));
    }
  }
  const lines = await readAudit(file, consumers);
  for (const [ev, { reader, prefix }] of events) {
    const firsts = reader
      .result()
      .firstWrites.rows.filter(([name]) => name.includes(prefix))
      .map(([, meta, status]) => Math.min(meta ?? Infinity, status ?? Infinity))
      .filter((x) => Number.isFinite(x) && x >= ev.at);
    if (firsts.length) {
      ev.firstWriteAfterS = Math.round(Math.min(...firsts) - ev.at) / 1000;
      if (firsts.length >= ev.detection.stuck) ev.lastWriteAfterS = Math.round(Math.max(...firsts) - ev.at) / 1000;
    }
  }
  for (const p of phases) {
    p.audit = {
      windows: Object.fromEntries(Object.values(p.windows).map((w) => [w.name, counter.counts[w.name] ?? {}])),
    };
    const l = latency.get(p)?.result();
    if (l) {
      p.apiserverLatency = l.latency;
      p.joinguardFirstWrites = l.firstWrites;
    }
    const a = shards.get(p);
    if (a && p.shards) {
      const stuck = (p.machineRows?.rows ?? []).map((row) => String(row[0]));
      shardAudit(p.shards, stuck, a, (n) => shardOfName(shape, n));
      p.audit.shards = a.shards;
    }
  }
  return { userAgents: counter.userAgents, lines };
}
