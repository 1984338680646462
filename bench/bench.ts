// `npm run bench -- [--machines N] [--smoke] [--phases …] [--repeat …] …` (bench/args.ts USAGE): JoinGuard and CAPI's
// MachineHealthCheck on one control plane and one fleet, in phases one after another (bench/session.ts), measured
// from the apiserver's side; then bench/results.json (compact, with the summary of medians), the raw file out of the
// tree, and the tables. `--micro` (bench/micro/micro.ts), `--heap` (bench/micro/heap.ts) and `--shards`
// (bench/micro/shards.ts) run against the in-memory apiserver. See docs/benchmarks.md.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from '../hack/testenv/testenv.js';
import { parseArgs, planOf, timingFor } from './args.js';
import { fmt, planBudget } from './plan.js';
import { compileController, removeCompiledController } from './controller-process.js';
import { fleetShape } from './fleet.js';
import { heapSettings, parseHeapArgs } from './micro/heap.js';
import { micro, parseMicroArgs } from './micro/micro.js';
import { parseShardArgs, shardsInMemory } from './micro/shards.js';
import { wastedRebuilds } from './rebuilds.js';
import { buildResults, rawOf, type BenchInputs, type Results } from './report.js';
import { runSession } from './session.js';
import { printTables, renderTables } from './tables.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

export function gitCommit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: here, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      cwd: here,
      encoding: 'utf8',
    });
    return dirty.trim() ? `${head}-dirty` : head;
  } catch {
    return 'unknown';
  }
}

/** The in-memory sharded run of an existing results file (`--shards` writes it apart), kept as it was. */
function keptSharded(out: string): unknown {
  try {
    return (JSON.parse(fs.readFileSync(out, 'utf8')) as Results).sharded100k ?? undefined;
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  process.on('exit', removeCompiledController);
  const argv = process.argv.slice(2);
  if (argv.includes('--micro')) return micro(parseMicroArgs(argv));
  if (argv.includes('--heap')) return heapSettings(parseHeapArgs(argv));
  if (argv.includes('--shards')) return shardsInMemory(parseShardArgs(argv), gitCommit());
  const args = parseArgs(argv);
  const commit = gitCommit();
  const t0 = Date.now();
  const timing = timingFor(args);
  const shape = fleetShape(args.machines);
  const plan = planOf(args);
  const burst = args.burst ?? (args.smoke ? 10 : 500);
  const budget = planBudget(plan, timing, shape, burst);
  // CAPI's managers' logs, kept small, beside the raw file (out of the tree).
  const logsDir = args.raw.replace(/\.json$/, '.capi');
  log(
    `fleet: ${shape.machines} Machines (${shape.clusters * shape.controlPlanePerCluster} control plane + ${shape.resting} resting + ${shape.stuck} stuck per phase) over ${shape.clusters} Clusters; phases ${plan.map((p) => p.id).join(', ')}`,
  );
  log(
    `plan ${args.plan}: estimate ~${fmt(budget.totalS)} (restore and phases; the fleet's build, if not saved, comes first), per phase:\n  ${budget.lines.join('\n  ')}`,
  );
  const t = Date.now();
  compileController();
  log(`JoinGuard compiled with tsc in ${(Date.now() - t) / 1000} s`);
  const rebuilds = wastedRebuilds();
  log(`wasted rebuilds (planner, simulated 24 h): ${rebuilds.rows.map((r) => `${r.guard}=${r.rebuilds}`).join(', ')}`);
  const sharded100k = keptSharded(args.out);
  const binDir = await ensureBuilt(log);
  const write = (session: BenchInputs['session']) => {
    const inputs: BenchInputs = {
      machines: args.machines,
      smoke: args.smoke,
      shape,
      timing,
      plan: plan.map((p) => p.id),
      nodeOptions: args.nodeOptions,
      cpuLimit: args.cpuLimit,
      wallS: (Date.now() - t0) / 1000,
      session,
      rebuilds,
      commit,
      ...(sharded100k ? { sharded100k } : {}),
    };
    const r = buildResults(inputs);
    for (const [file, data] of [
      [args.out, r],
      [args.raw, rawOf(inputs)],
    ] as const) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, `${JSON.stringify(data, null, file === args.out ? 1 : 0)}\n`);
    }
    return r;
  };
  const session = await runSession({
    shape,
    timing,
    plan,
    nodeOptions: args.nodeOptions,
    cpuLimit: args.cpuLimit,
    burst,
    startedAt: t0,
    retire: args.plan === 'headline',
    estimateS: budget.totalS,
    commit,
    binDir,
    log,
    logsDir,
    rebuildFleet: args.rebuildFleet,
    fleetOnly: args.fleetOnly,
    // Each phase's results are written as it ends: a benchmark cut short keeps the phases it finished.
    onPhase: (phases, fleetS) => {
      if (args.smoke) return;
      try {
        log(`results so far in ${path.relative(process.cwd(), args.out)}:\n${renderTables(write({ fleetS, phases }))}`);
      } catch (e) {
        log(`results so far not written: ${(e as Error).message}`);
      }
    },
  });
  log(`CAPI's managers' logs kept in ${path.relative(process.cwd(), logsDir)}`);
  if (args.fleetOnly) {
    log(`--fleet-only: ${JSON.stringify(session.fleet)}; wall ${(Date.now() - t0) / 1000} s; no results written`);
    return;
  }
  const results = write(session);
  printTables(results);
  log(
    `results in ${path.relative(process.cwd(), args.out)}, raw in ${path.relative(process.cwd(), args.raw)}; wall ${results.run.wallS} s`,
  );
  const failed = session.phases.filter((p) => p.error);
  if (failed.length || session.aborted)
    throw new Error(
      `phases failed: ${failed.map((p) => `${p.id}: ${p.error}`).join('; ')}${session.aborted ? `; the rest not run: ${session.aborted}` : ''}`,
    );
}

main().catch((e: Error) => {
  log(`FAILED: ${e.stack ?? e.message}`);
  process.exitCode = 1;
});
