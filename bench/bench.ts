// `npm run bench -- [--machines N] [--smoke] [--runs joinguard,mhc,both,sharded] [--quiet-min M | --quiet-min joinguard=M,mhc=M,both=M,sharded=M]
//                   [--parallel] [--node-options "..." (default: the Deployment's allocator env and NODE_OPTIONS)] [--out FILE] [--merge [--merge-commit C]]`
// --merge keeps the runs of the existing results file that are not re-run (same --machines), each with its own
// date and commit, so that re-running some runs loses none of the others (--merge-commit: the commit of a file
// written before results carried one).
// `npm run bench -- --micro ...` (bench/micro/micro.ts) and `npm run bench -- --heap ...` (bench/micro/heap.ts).
// JoinGuard alone, CAPI's MachineHealthCheck alone, and both together, each on a control plane and a fleet
// of its own built afresh (bench/run.ts), measured from the apiserver's side; then the results JSON and the
// tables. See docs/benchmarks.md.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from '../hack/testenv/testenv.js';
import { compileController, deployedRuntime, removeCompiledController } from './controller-process.js';
import { fleetShape } from './fleet.js';
import { heapSettings, parseHeapArgs } from './micro/heap.js';
import { micro, parseMicroArgs } from './micro/micro.js';
import { wastedRebuilds } from './rebuilds.js';
import { buildResults, type Results } from './report.js';
import { RUN_SIDES, runOne, type RunName, type RunResult, type RunTiming } from './run.js';
import { printTables, renderTables } from './tables.js';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface BenchArgs {
  machines: number;
  smoke: boolean;
  runs: RunName[];
  /** Minutes of quiet, for every run or per run (a run not named keeps the default). */
  quietMin?: number | Partial<Record<RunName, number>>;
  parallel: boolean;
  /**
   * Node flags for JoinGuard, after optional `NAME=value` environment words (bench/controller-process.ts
   * runtimeSetting); default: the Deployment's allocator variables and NODE_OPTIONS (as deployed).
   */
  nodeOptions: string;
  out: string;
  /** Keep the runs of `out` that are not re-run. */
  merge: boolean;
  /** --merge of a file written before results carried their commit: the commit its runs were measured on. */
  mergeCommit?: string;
}

const USAGE =
  'usage: npm run bench -- [--machines N] [--smoke] [--runs joinguard,mhc,both,sharded] [--quiet-min M | --quiet-min joinguard=M,mhc=M,both=M,sharded=M] [--parallel] [--node-options "..."] [--out FILE] [--merge [--merge-commit C]]';

function parseQuiet(v: string): BenchArgs['quietMin'] {
  if (!v.includes('=')) return Number(v);
  const out: Partial<Record<RunName, number>> = {};
  for (const part of v.split(',')) {
    const [run, m] = part.split('=') as [RunName, string];
    if (!(run in RUN_SIDES) || !(Number(m) > 0)) throw new Error(`bad --quiet-min ${part}; ${USAGE}`);
    out[run] = Number(m);
  }
  return out;
}

function parseArgs(argv: string[]): BenchArgs {
  const a: BenchArgs = {
    machines: 0,
    smoke: false,
    runs: ['joinguard', 'mhc', 'both'],
    parallel: false,
    nodeOptions: deployedRuntime(),
    out: '',
    merge: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--smoke') a.smoke = true;
    else if (flag === '--parallel') a.parallel = true;
    else if (flag === '--merge') a.merge = true;
    else if (flag === '--merge-commit') a.mergeCommit = value();
    else if (flag === '--machines') a.machines = Number(value());
    else if (flag === '--quiet-min') a.quietMin = parseQuiet(value());
    else if (flag === '--node-options') a.nodeOptions = value();
    else if (flag === '--out') a.out = value();
    else if (flag === '--runs') {
      a.runs = value().split(',') as RunName[];
      for (const r of a.runs) if (!(r in RUN_SIDES)) throw new Error(`unknown run ${r}; ${USAGE}`);
    } else throw new Error(`unknown argument ${argv[i]}; ${USAGE}`);
  }
  // A smoke run is small and runs its three control planes at once: it proves the pipeline, not the numbers.
  a.machines ||= a.smoke ? 200 : 2000;
  a.parallel ||= a.smoke;
  if (!Number.isInteger(a.machines) || a.machines < 20) throw new Error('--machines must be an integer of at least 20');
  // The smoke run must not overwrite the committed results.
  a.out ||= a.smoke ? path.join(here, 'runs', 'results.smoke.json') : path.join(here, 'results.json');
  return a;
}

export function timingFor(a: BenchArgs, run?: RunName): RunTiming {
  // MHC refuses a nodeStartupTimeout under 30 s. The quiet window of a full run outlasts every re-watch
  // cycle (JoinGuard 4–6 min, client-go's reflectors 5–10 min). JoinGuard holds verdicts for a grace
  // (default 2m) after a Cluster's connection came up; the smoke run shortens it, full runs wait it out.
  const t: RunTiming = a.smoke
    ? {
        joinTimeoutS: 30,
        quietMs: 15_000,
        stuckSpreadMs: 10_000,
        tailMs: 20_000,
        connectionGraceMs: 5_000,
        settleMs: 3_000,
      }
    : { joinTimeoutS: 60, quietMs: 10 * 60_000, stuckSpreadMs: 60_000, tailMs: 120_000, settleMs: 10_000 };
  const m = typeof a.quietMin === 'number' ? a.quietMin : run && a.quietMin?.[run];
  if (m !== undefined) t.quietMs = m * 60_000;
  return t;
}

function gitCommit(): string {
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

/** --merge: the runs of the existing results file that this bench does not re-run, each labelled with when it ran. */
function keptRuns(a: BenchArgs) {
  if (!a.merge || !fs.existsSync(a.out)) return undefined;
  const old = JSON.parse(fs.readFileSync(a.out, 'utf8')) as Results;
  if (old.run.machines !== a.machines)
    throw new Error(`--merge: ${a.out} is of ${old.run.machines} Machines, this bench of ${a.machines}`);
  // Files written before runs carried their own date: the file's date; its commit from git (the commit that wrote it).
  let fileCommit = (old.run as { commit?: string }).commit ?? a.mergeCommit;
  if (!fileCommit) {
    try {
      const c = execFileSync('git', ['log', '-1', '--format=%h', '--', a.out], { cwd: here, encoding: 'utf8' }).trim();
      fileCommit = c ? `unknown (results committed in ${c})` : 'unknown';
    } catch {
      fileCommit = 'unknown';
    }
  }
  const kept: NonNullable<Parameters<typeof buildResults>[0]['kept']> = { runs: {}, perRun: {}, quietMin: {} };
  for (const [name, r] of Object.entries(old.runs) as [RunName, RunResult][]) {
    if (a.runs.includes(name)) continue;
    kept.runs[name] = { ...r, measured: r.measured ?? { date: old.run.date, commit: fileCommit } };
    const p = old.perRun[name];
    if (p) kept.perRun[name] = p;
    const q = (old.setup.quietMinByRun as Record<string, number>)[name];
    if (q !== undefined) kept.quietMin[name] = q;
  }
  return kept;
}

const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

async function main(): Promise<void> {
  process.on('exit', removeCompiledController);
  if (process.argv.includes('--micro')) return micro(parseMicroArgs(process.argv.slice(2)));
  if (process.argv.includes('--heap')) return heapSettings(parseHeapArgs(process.argv.slice(2)));
  const args = parseArgs(process.argv.slice(2));
  const kept = keptRuns(args);
  const commit = gitCommit();
  const t0 = Date.now();
  const timing = timingFor(args);
  const shape = fleetShape(args.machines, timing.joinTimeoutS);
  const quietMin = Object.fromEntries(args.runs.map((r) => [r, timingFor(args, r).quietMs / 60_000]));
  log(
    `fleet per run: ${shape.machines} Machines (${shape.resting} resting + ${shape.stuck} stuck) over ${shape.clusters} Clusters; runs ${args.runs.join(', ')}${args.parallel ? ' at once' : ' one after another'}; quiet ${args.runs.map((r) => `${r} ${quietMin[r]} min`).join(', ')}`,
  );
  let t = Date.now();
  compileController();
  log(`JoinGuard compiled with tsc in ${(Date.now() - t) / 1000} s`);
  const rebuilds = wastedRebuilds();
  log(`wasted rebuilds (planner, simulated 24 h): ${rebuilds.rows.map((r) => `${r.guard}=${r.rebuilds}`).join(', ')}`);

  const binDir = await ensureBuilt(log);
  const runs: Partial<Record<RunName, RunResult>> = {};
  const one = async (name: RunName) => {
    t = Date.now();
    runs[name] = await runOne({
      name,
      shape,
      timing: timingFor(args, name),
      nodeOptions: args.nodeOptions,
      binDir,
      log: (l) => log(`[${name}] ${l}`),
    });
    runs[name].measured = { date: new Date().toISOString(), commit };
    log(`[${name}] done in ${Math.round((Date.now() - t) / 1000)} s`);
  };
  const write = () => {
    const r = buildResults({
      machines: args.machines,
      smoke: args.smoke,
      shape,
      timing,
      quietMin,
      nodeOptions: args.nodeOptions,
      wallS: (Date.now() - t0) / 1000,
      runs,
      rebuilds,
      commit,
      ...(kept ? { kept } : {}),
    });
    fs.mkdirSync(path.dirname(args.out), { recursive: true });
    fs.writeFileSync(args.out, `${JSON.stringify(r, null, 1)}\n`);
    return r;
  };
  if (args.parallel) {
    // Every run ends (and stops what it started) before a failure is reported.
    // Each run's results are written as it ends: a benchmark cut short keeps the runs it finished.
    const failed = (
      await Promise.allSettled(
        args.runs.map((name) =>
          one(name).then(() => {
            if (args.smoke) return;
            try {
              log(`results so far in ${path.relative(process.cwd(), args.out)}:\n${renderTables(write())}`);
            } catch (e) {
              log(`results so far not written: ${(e as Error).message}`);
            }
          }),
        ),
      )
    ).find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  } else {
    // One after another, the results so far are written (and their tables logged) after each run: a long
    // benchmark cut short keeps the runs it finished.
    for (const name of args.runs.slice(0, -1)) {
      await one(name);
      try {
        log(`results so far in ${path.relative(process.cwd(), args.out)}:\n${renderTables(write())}`);
      } catch (e) {
        log(`results so far not written: ${(e as Error).message}`);
      }
    }
    await one(args.runs.at(-1)!);
  }

  const results = write();
  printTables(results);
  log(`results in ${path.relative(process.cwd(), args.out)}; wall time ${results.run.wallS} s`);
}

main().catch((e: Error) => {
  log(`FAILED: ${e.stack ?? e.message}`);
  process.exitCode = 1;
});
