// `npm run bench -- [--machines N] [--smoke] [--out FILE]`: JoinGuard against CAPI's MachineHealthCheck on
// the local test control plane (hack/testenv), measured from the apiserver's side. See docs/benchmarks.md.
// Phases: control plane with audit log → fleet (N Machines, watched by both) → JoinGuard started, first full
// reconcile → a quiet window (requests at rest) → stuck Machines added at a steady pace (detection
// latency) → everything stopped, audit log counted → table on stdout and results JSON.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { countAudit } from './audit.js';
import { compileController, ControllerProcess, removeCompiledController } from './controller-process.js';
import { installBenchCrds } from './crds.js';
import { JOINGUARD_USER_AGENT, scrapeRequestMetricLabels, startBenchEnv, USER_JOINGUARD, type BenchEnv } from './env.js';
import {
  clusterTimes, createChecks, createClusters, createMachine, createNamespace, fleetShape, NAMESPACE, pool,
  restingMachines, SIDES, stuckMachines,
} from './fleet.js';
import { latencies } from './latency.js';
import { ProcSampler } from './proc.js';
import { wastedRebuilds } from './rebuilds.js';
import { buildResults, printTable } from './report.js';
import { MachineWatcher } from './watch.js';
import type { RestClient } from '../controllers/runtime/rest.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const MAX_PENDING = 200;

export interface BenchArgs {
  machines: number;
  smoke: boolean;
  out: string;
}

function parseArgs(argv: string[]): BenchArgs {
  const args: BenchArgs = { machines: 0, smoke: false, out: '' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--smoke') args.smoke = true;
    else if (a === '--machines') args.machines = Number(argv[++i]);
    else if (a.startsWith('--machines=')) args.machines = Number(a.slice(10));
    else if (a === '--out') args.out = argv[++i] ?? '';
    else throw new Error(`unknown argument ${a}; usage: npm run bench -- [--machines N] [--smoke] [--out FILE]`);
  }
  // A smoke run is small unless told otherwise: it proves the pipeline, not the numbers.
  args.machines ||= args.smoke ? 200 : 2000;
  if (!Number.isInteger(args.machines) || args.machines < 20) throw new Error('--machines must be an integer of at least 20');
  // The smoke run must not overwrite the committed results.
  args.out ||= args.smoke ? path.join(here, 'runs', 'results.smoke.json') : path.join(here, 'results.json');
  return args;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const t0 = Date.now();
  // Durations: the watch pools' timeout, the quiet window, the pace at which stuck Machines arrive.
  // connectionGraceMs: JoinGuard holds verdicts for a grace period (default 2m) after a Cluster's
  // RemoteConnectionProbe turned True; full runs keep the default and wait it out, the smoke run shortens it.
  const timing = args.smoke
    ? { joinTimeoutS: 30, restMs: 15_000, stuckSpreadMs: 10_000, connectionGraceMs: 5_000 } // MHC refuses a nodeStartupTimeout under 30 s
    : { joinTimeoutS: 60, restMs: 60_000, stuckSpreadMs: 60_000, connectionGraceMs: 120_000 };
  const shape = fleetShape(args.machines, timing.joinTimeoutS);
  log(`fleet: ${shape.machines} Machines (${shape.resting} resting + ${shape.stuck} stuck) over ${shape.clusters} Clusters, ${2 * shape.clusters} MachineJoinChecks and as many MachineHealthChecks`);

  let t = Date.now();
  const controllerEntry = compileController();
  log(`controller compiled with tsc in ${(Date.now() - t) / 1000} s`);

  const rebuilds = wastedRebuilds();
  log(`wasted rebuilds (planner, simulated 24 h): ${rebuilds.rows.map((r) => `${r.guard}=${r.rebuilds}`).join(', ')}`);

  let bench: BenchEnv | undefined;
  let jg: ControllerProcess | undefined;
  let watcher: MachineWatcher | undefined;
  const cleanup = async () => {
    watcher?.stop();
    await jg?.stop().catch(() => undefined);
    await bench?.stop().catch(() => undefined);
    removeCompiledController();
  };
  const onSignal = (sig: NodeJS.Signals) => {
    log(`${sig}: stopping`);
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const phase: Record<string, number> = {};
    const mark = (name: string, since: number) => (phase[name] = Math.round((Date.now() - since) / 100) / 10);

    t = Date.now();
    bench = await startBenchEnv((l) => log(`testenv: ${l}`));
    const rest = bench.driver;
    const metricLabels = await scrapeRequestMetricLabels(bench.env);
    log(`apiserver_request_total labels: ${metricLabels.join(', ')}`);
    await installBenchCrds(rest);
    await createNamespace(rest);
    mark('controlPlaneS', t);

    t = Date.now();
    const w = (watcher = new MachineWatcher(rest, NAMESPACE));
    await w.start();
    const msUids = await createClusters(rest, shape, new URL(bench.env.server), bench.workloadKubeconfigYaml);
    await createChecks(rest, shape);
    await waitFor('every Cluster initialized and connected', 120_000, async () => {
      for (const c of (await clusterTimes(rest)).values()) if (!c.ready) return false;
      return true;
    });
    const resting = restingMachines(shape);
    let created = 0;
    const provisioned = () => w.provisionedCount;
    const progress = setInterval(() => log(`  created ${created}/${resting.length} resting Machines; Provisioned ${provisioned()}`), 10_000);
    // Back-pressure: no more than MAX_PENDING Machines ahead of CAPI. Flooding CAPI's Machine controller on
    // 2 cores lags its cache, and its status patches then conflict (409) in a storm that feeds itself.
    await pool(resting, 16, async (m) => {
      while (created - provisioned() >= MAX_PENDING) await sleep(100);
      created++;
      await createMachine(rest, m, msUids);
    });
    clearInterval(progress);
    await w.until(`${shape.resting} Machines Provisioned`, () => w.provisionedCount >= shape.resting, 600_000);
    mark('fleetS', t);
    log(`fleet ready in ${phase.fleetS} s`);
    const core = new ProcSampler(bench.env.pids['capi-core']!, 1000);
    await sleep(args.smoke ? 2000 : 10_000); // let CAPI's managers finish their follow-up reconciles

    jg = new ControllerProcess(controllerEntry, bench.kubeconfigs[USER_JOINGUARD], NAMESPACE, JOINGUARD_USER_AGENT, {
      JOINGUARD_BENCH_CONNECTION_GRACE_MS: String(timing.connectionGraceMs),
    });
    await jg.fullReconcile(120_000);
    const m = jg.milestones;
    log(`JoinGuard: ready ${(m.readyAt! - m.spawnedAt) / 1000} s, every check reconciled ${(m.fullReconcileAt! - m.spawnedAt) / 1000} s after spawn`);
    await sleep(3000);

    // Quiet window: nothing changes; every request a controller makes now is a request at rest.
    const coreAtRestStart = core.take()!;
    const jgAtRestStart = jg.sampler.take()!;
    const restWindow = { name: 'rest', from: Date.now(), to: 0 };
    log(`at rest for ${timing.restMs / 1000} s`);
    await sleep(timing.restMs);
    restWindow.to = Date.now();
    const coreAtRestEnd = core.take()!;
    const jgAtRestEnd = jg.sampler.take()!;

    // The first stuck deadline must fall after every Cluster's connection grace, or the latency measured
    // would be the grace (MHC has none).
    let graceEnd = 0;
    for (const c of (await clusterTimes(rest)).values()) graceEnd = Math.max(graceEnd, (c.remoteConnectionAt ?? 0) + timing.connectionGraceMs + 1000);
    const graceWait = graceEnd - timing.joinTimeoutS * 1000 - Date.now();
    if (graceWait > 0) {
      log(`waiting ${Math.ceil(graceWait / 1000)} s so that no deadline falls within JoinGuard's connection grace`);
      await sleep(graceWait);
    }

    // Stuck Machines arrive at a steady pace; their deadlines follow.
    t = Date.now();
    const stuck = stuckMachines(shape);
    const gap = timing.stuckSpreadMs / stuck.length;
    const detectWindow = { name: 'detection', from: Date.now(), to: 0 };
    let next = 0;
    await pool(stuck, 16, async (s) => {
      const due = t + gap * next++;
      if (due > Date.now()) await sleep(due - Date.now());
      await createMachine(rest, s, msUids);
    });
    log(`stuck Machines created in ${(Date.now() - t) / 1000} s; waiting for the marks`);
    const markTimeout = timing.joinTimeoutS * 1000 + 120_000;
    const waits = await Promise.allSettled(SIDES.map((side) => w.until(`every stuck Machine marked by ${side}`, () => w.markedCount[side] >= shape.stuck, markTimeout)));
    for (const w of waits) if (w.status === 'rejected') log(`WARNING: ${(w.reason as Error).message}`);
    await explainUnmarked(rest, w);
    await sleep(2000); // late marks of resting Machines (there must be none) would show here
    detectWindow.to = Date.now();
    mark('detectionS', t);

    const coreEnd = core.take()!;
    core.stop();
    const memory = bench.env.memory();
    const clusters = await clusterTimes(rest);
    await jg.stop();
    w.stop();
    const auditLog = bench.auditLog;
    const keptAudit = path.join(os.tmpdir(), `joinguard-bench-audit-${process.pid}.log`);
    await bench.env.stop(); // flushes the audit log
    fs.renameSync(auditLog, keptAudit);
    await bench.stop();
    bench = undefined;

    t = Date.now();
    const audit = await countAudit(keptAudit, [restWindow, detectWindow]);
    fs.rmSync(keptAudit, { force: true });
    mark('auditS', t);

    const results = buildResults({
      args, shape, timing, phase, wallS: (Date.now() - t0) / 1000, metricLabels,
      latency: { joinguard: latencies('joinguard', w, clusters, shape), mhc: latencies('mhc', w, clusters, shape) },
      audit, restWindow, detectWindow,
      joinguard: { milestones: jg.milestones, atRestStart: jgAtRestStart, atRestEnd: jgAtRestEnd, last: jg.sampler.last!, peakRssKiB: jg.sampler.peakRssKiB },
      core: { atRestStart: coreAtRestStart, atRestEnd: coreAtRestEnd, last: coreEnd, memory: memory.byComponent['capi-core'] },
      rebuilds,
    });
    fs.mkdirSync(path.dirname(args.out), { recursive: true });
    fs.writeFileSync(args.out, `${JSON.stringify(results, null, 2)}\n`);
    printTable(results);
    log(`results in ${path.relative(process.cwd(), args.out)}; wall time ${results.run.wallS} s`);
  } finally {
    await cleanup();
  }
}

async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(500);
  }
}

main().catch((e: Error) => {
  log(`FAILED: ${e.stack ?? e.message}`);
  process.exitCode = 1;
});

/** Why JoinGuard left a stuck Machine unmarked, as its check and the Cluster say (printed, for the docs). */
async function explainUnmarked(rest: RestClient, w: MachineWatcher): Promise<void> {
  const pools = new Set([...w.machines.values()].filter((r) => r.pool.endsWith('-watch') && !r.marks.joinguard).map((r) => r.pool));
  for (const pool of [...pools].slice(0, 10)) {
    const check = await rest.get(`/apis/joinguard.io/v1alpha1/namespaces/${NAMESPACE}/machinejoinchecks/${pool}`).catch(() => undefined);
    const cluster = await rest.get(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${NAMESPACE}/clusters/${check?.spec?.clusterName}`).catch(() => undefined);
    const conds = ((check?.status?.conditions ?? []) as { type: string; status: string; reason: string; message: string }[])
      .map((c) => `${c.type}=${c.status}/${c.reason}: ${c.message.slice(0, 240)}`).join(' | ');
    const probe = ((cluster?.status?.conditions ?? []) as { type: string; status: string; lastTransitionTime: string }[]).find((c) => c.type === 'RemoteConnectionProbe');
    log(`unmarked by JoinGuard in ${pool}: ${conds}; RemoteConnectionProbe ${probe?.status} since ${probe?.lastTransitionTime}; remediations ${JSON.stringify(check?.status?.remediations?.map((r: { machine: string; outcome: string }) => `${r.machine}:${r.outcome}`))}`);
  }
}

