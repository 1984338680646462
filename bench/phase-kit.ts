// What every phase of an invocation (bench/session.ts) shares, and the steps they are made of: the context (one
// control plane, one fleet, the bench's watches and samplers), starting JoinGuard as deployed, waiting for its first
// complete reconcile, sampling a window's edge, adding stuck Machines at a pace, closing a detection window and
// deleting a phase's Machines again.
import os from 'node:os';
import path from 'node:path';
import type { AuditWindow } from './audit.js';
import { JoinGuardProcess } from './controller-process.js';
import type { BenchEnv } from './env.js';
import {
  clusterTimes,
  createMachine,
  deleteMachines,
  pool,
  provisionInfrastructure,
  unpark,
  type ClusterTimes,
  type FleetShape,
  type MachineSpec,
  type Owners,
} from './fleet.js';
import { flipSchedule } from './fleet-cache.js';
import { capiPath } from './fleet-objects.js';
import { isNotFound } from '../hack/testenv/kube-client.js';
import { clusterOfPool, deadline } from './latency.js';
import type { ProcSample, ProcSampler } from './proc.js';
import { scrape, type Sample } from './prom.js';
import type { CheckWatcher, MachineRecord, MachineWatcher, Side } from './watch.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Timing {
  /** JoinGuard's joinTimeout on the watch pools. */
  joinTimeoutS: number;
  /** The MHC's short nodeStartupTimeout on the watch pools (as joinTimeout in full runs; the MHC refuses < 30 s). */
  mhcTimeoutS: number;
  /** The MHC at a realistic nodeStartupTimeout (its default, 10m). */
  mhcLongTimeoutS: number;
  stuckSpreadMs: number;
  /** The detection window closes this long after the last stuck Machine's deadline. */
  tailMs: number;
  /** The same when the MHC is measured (it requeues; at 10,000 its p99 was ~14 s at a 60 s timeout). */
  mhcTailMs: number;
  /** JoinGuard's --connection-grace; undefined = its default (2m). */
  connectionGraceMs?: number;
  /** Before JoinGuard starts: no Machine changed for this long (CAPI's follow-up reconciles are over). */
  settleMs: number;
  /** Failover and re-list: the event comes this long before the first of its Machines' deadlines. */
  eventLeadMs: number;
  /** Failover and re-list: their stuck Machines are created over this long. */
  eventSpreadMs: number;
}

export interface Context {
  bench: BenchEnv;
  shape: FleetShape;
  timing: Timing;
  owners: Owners;
  machines: MachineWatcher;
  checks: CheckWatcher;
  /** The control plane's processes (capi-core, kube-apiserver, etcd), sampled for the whole invocation. */
  samplers: ProcSampler[];
  nodeOptions: string;
  log: (line: string) => void;
  /** The fleet's Clusters (burst Clusters come on top). */
  clusters: string[];
  /** Stuck Machines saved parked in the fleet (bench/fleet-cache.ts): flipped by their phase, not created. */
  parked?: Set<string>;
  /** A phase's Machines moved to `<cluster>-done` when it ends instead of deleted (removeMachines). */
  retire?: boolean;
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

// Only the families the report reads are kept (a full scrape of the core manager is thousands of lines).
const KEEP =
  /^(controller_runtime_reconcile_(total|time_seconds_sum)|process_cpu_seconds_total|process_resident_memory_bytes|nodejs_heap_size_(used|total)_bytes|nodejs_external_memory_bytes|nodejs_gc_duration_seconds_(sum|count)|go_memstats_heap_inuse_bytes)$/;
const keep = (s: Sample[] | undefined) => s?.filter((x) => KEEP.test(x.name));

export async function edge(ctx: Context, jgs: JoinGuardProcess[] = []): Promise<Edge> {
  const samplers = [...ctx.samplers, ...jgs.map((j) => j.sampler)];
  const jg = jgs[0];
  return {
    at: Date.now(),
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
    proc: Object.fromEntries(samplers.map((s) => [s.label, s.take()])),
    core: keep(await scrape(ctx.bench.coreMetricsUrl)),
    ...(jg ? { joinguard: keep(await jg.metrics()) } : {}),
  };
}

export function window(name: string): AuditWindow {
  return { name, from: Date.now(), to: 0 };
}

export interface StartOptions {
  /** Client identity (a user of bench/env.ts) and /proc label. */
  user: string;
  label: string;
  phaseId: string;
  extraFlags?: string[];
  cpuLimit?: string;
  /** A kubeconfig file other than the user's own (a replica behind a fault proxy). */
  kubeconfig?: string;
}

/** JoinGuard as the Deployment runs it (bench/controller-process.ts), under the Deployment's memory limit. */
export function startJoinGuard(ctx: Context, o: StartOptions): Promise<JoinGuardProcess> {
  const grace = ctx.timing.connectionGraceMs;
  return JoinGuardProcess.start({
    kubeconfig: o.kubeconfig ?? ctx.bench.kubeconfigs[o.user]!,
    webhookCertDir: path.join(ctx.bench.env.runDir, 'pki', 'webhook'),
    logFile: path.join(ctx.bench.dir, `${o.label}-${o.phaseId.replace(/[^\w-]/g, '_')}.log`),
    nodeOptions: ctx.nodeOptions,
    extraFlags: [...(grace !== undefined ? [`--connection-grace=${grace / 1000}s`] : []), ...(o.extraFlags ?? [])],
    pgidFile: path.join(ctx.bench.env.runDir, 'pgids'),
    label: o.label,
    ...(o.cpuLimit ? { cpuLimit: o.cpuLimit } : {}),
  });
}

/** One JoinGuard process of a phase: when it started, was ready and had reconciled its checks; how it ended. */
export interface ProcessFigures {
  label: string;
  spawnedAt: number;
  readyAt?: number;
  firstReconcileAt?: number;
  checks: number;
  logLines: number;
  exit: string;
  memoryLimit: string;
  cpuLimit: string;
  /** VmHWM of the process (its whole life: this phase) and the most its memory cgroup was charged. */
  hwmKiB: number;
  memoryPeakMiB?: number;
  throttling?: JoinGuardProcess['throttling'];
}

/** Waits until every check (by uid) has a status: the first complete reconcile; returns when the last one came. */
export async function firstReconcile(ctx: Context, uids: string[], procs: JoinGuardProcess[], timeoutMs = 600_000) {
  await waitFor('the first status on every check', timeoutMs, async () => {
    for (const p of procs) if (!p.proc.running) throw new Error(`${p.sampler.label} ${p.proc.describeExit()}`);
    return ctx.checks.allReconciled(uids);
  });
  return Math.max(...(ctx.checks.firstStatusAt(uids) as number[]));
}

export async function stopFigures(
  p: JoinGuardProcess,
  checks: number,
  firstReconcileAt?: number,
): Promise<ProcessFigures> {
  const hwmKiB = Math.max(p.sampler.peakRssKiB, p.sampler.last?.hwmKiB ?? 0);
  await p.stop();
  return {
    label: p.sampler.label,
    spawnedAt: p.spawnedAt,
    ...(p.readyAt !== undefined ? { readyAt: p.readyAt } : {}),
    ...(firstReconcileAt !== undefined ? { firstReconcileAt } : {}),
    checks,
    logLines: p.logLines(),
    exit: p.proc.describeExit(),
    memoryLimit: p.memoryLimit,
    cpuLimit: p.cpuLimit,
    hwmKiB,
    ...(p.memoryPeakMiB !== undefined ? { memoryPeakMiB: p.memoryPeakMiB } : {}),
    ...(p.throttling ? { throttling: p.throttling } : {}),
  };
}

export async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean> | boolean) {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

/** Waits until no deadline of Machines created from now on can fall within JoinGuard's connection grace. */
export async function afterGrace(ctx: Context, timeoutS: number): Promise<void> {
  const grace = ctx.timing.connectionGraceMs ?? 120_000;
  let end = 0;
  for (const c of (await clusterTimes(ctx.bench.driver)).values())
    end = Math.max(end, (c.remoteConnectionAt ?? 0) + grace + 1000);
  const wait = end - timeoutS * 1000 - Date.now();
  if (wait > 0) {
    ctx.log(`waiting ${Math.ceil(wait / 1000)} s so that no deadline falls within JoinGuard's connection grace`);
    await sleep(wait);
  }
}

/** No more Machines than this ahead of CAPI (not yet Provisioned), as the fleet is built (bench/session.ts). */
export const MAX_PENDING = 200;

/**
 * Creates Machines evenly over spreadMs (0: as fast as CAPI takes them). Never more than MAX_PENDING ahead of
 * Provisioned: 500 at once made CAPI's core manager miss its Lease renewal and exit (its client's rate limiter holds
 * the renewal behind its own work; 1,000 Machines, 2026-12-06 04:42).
 */
export async function createPaced(ctx: Context, specs: MachineSpec[], spreadMs: number): Promise<void> {
  const t = Date.now();
  const gap = specs.length ? spreadMs / specs.length : 0;
  const made: string[] = [];
  let next = 0;
  await pool(specs, 16, async (s) => {
    const due = t + gap * next++;
    if (due > Date.now()) await sleep(due - Date.now());
    while (made.length - ctx.machines.named(made).filter((r) => r.provisioned).length >= MAX_PENDING) await sleep(100);
    made.push(s.name);
    await createMachine(ctx.bench.driver, s, ctx.owners);
  });
}

/**
 * A saved fleet's parked stuck Machines flipped on a schedule over spreadMs (flipSchedule): each BenchMachine
 * written provisioned (JoinGuard's and the MHC's clocks both start where CAPI then shows the Machine
 * InfrastructureReady), and the Machine moved into its watch pool. No Machine is created mid-run.
 * - An MHC watches the pool (`mhcWatches`): moved only once CAPI shows it InfrastructureReady, as CAPI's MHC times a
 *   Machine whose infrastructure is not ready from its creation (v1.14.2 machinehealthcheck_targets.go nodeChecks),
 *   which in a saved fleet is long past.
 * - JoinGuard alone: moved first, then flipped. Its check has no provisionTimeout, so a Machine not yet provisioned is
 *   not timed, and the Machine is in the check's view before its clock starts. Moved after the flip instead, at 10,000
 *   the move landed 27 s (median) after the clock started and up to 54 s — past the 30 s deadline — so the mark's
 *   latency measured the bench's move, not JoinGuard (docs/decisions/bench-flip-order.md).
 */
export async function flipPaced(
  ctx: Context,
  specs: MachineSpec[],
  spreadMs: number,
  o: { mhcWatches: boolean },
): Promise<void> {
  const at = flipSchedule(specs.length, Date.now(), spreadMs);
  const due = new Map(specs.map((s, i) => [s.name, at[i]!]));
  const kube = ctx.bench.driver;
  const untilDue = async (s: MachineSpec) => {
    const wait = due.get(s.name)! - Date.now();
    if (wait > 0) await sleep(wait);
  };
  if (!o.mhcWatches) {
    // One task per Machine: nothing waits on CAPI here, so the schedule holds (the client queues past its sockets).
    await Promise.all(
      specs.map(async (s) => {
        await untilDue(s);
        await unpark(kube, s);
        await provisionInfrastructure(kube, s.name);
      }),
    );
    return;
  }
  await pool(specs, 32, async (s) => {
    await untilDue(s);
    await provisionInfrastructure(kube, s.name);
    await waitFor(`${s.name} InfrastructureReady`, 120_000, () => !!ctx.machines.named([s.name])[0]?.infraReadyAt);
    await unpark(kube, s);
  });
}

/** Waits until the named Machines are Provisioned (as the bench's watch sees them). */
export function provisioned(ctx: Context, names: string[], timeoutMs: number): Promise<void> {
  return waitFor(
    `${names.length} Machines Provisioned`,
    timeoutMs,
    () => ctx.machines.named(names).every((r) => r.provisioned) && ctx.machines.named(names).length === names.length,
  );
}

/** The latest deadline of the records for the sides, each by its own clock rule and timeout. */
export function lastDeadline(
  records: MachineRecord[],
  clusters: Map<string, ClusterTimes>,
  timeoutS: Partial<Record<Side, number>>,
): number {
  let last = 0;
  for (const r of records)
    for (const [side, t] of Object.entries(timeoutS) as [Side, number][])
      last = Math.max(last, deadline(side, r, clusters.get(clusterOfPool(r.pool)), t * 1000) ?? 0);
  return last;
}

/**
 * Takes a phase's Machines out of the fleet's pools and waits until the fleet has settled again: deleted (CAPI
 * deletes each one's BenchMachine and KubeadmConfig), or with `retire` (the headline plan, bench/plan.ts) moved into
 * `<cluster>-done`, which no check or MHC selects: one label patch each instead of CAPI's deletion of three objects,
 * and the fleet keeps its size from phase to phase (parked Machines are in it from the start).
 */
export async function removeMachines(ctx: Context, names: string[]): Promise<void> {
  if (names.length === 0) return;
  if (ctx.retire) {
    await pool(names, 16, async (n) => {
      const c = /^c\d{4}/.exec(n)![0];
      await ctx.bench.driver
        .mergePatch(capiPath('machines', n), { metadata: { labels: { pool: `${c}-done` } } })
        .catch((e: unknown) => {
          if (!isNotFound(e)) throw e;
        });
    });
    await waitFor(`${names.length} Machines moved out of their pool`, 600_000, () =>
      names.every((n) => !ctx.machines.present.has(n) || ctx.machines.named([n])[0]?.pool.endsWith('-done')),
    );
  } else {
    await deleteMachines(ctx.bench.driver, names);
    await waitFor(`${names.length} Machines deleted`, 600_000, () => names.every((n) => !ctx.machines.present.has(n)));
  }
  await ctx.machines.settle(ctx.timing.settleMs, 300_000);
}
