// `npm run test:property -- --seeds N [--runs K] [--from S] [--jobs J]`: the property test
// (controllers/joincheck/property.test.ts) over N seeds, S, S+1, ..., S+N-1 (S: the commit's seed, the one CI runs,
// by default), K random histories each (1,024), J mocha processes at once (2: one per core here). Each seed stops at
// its first violation (PROPERTY_NO_SHRINK=1: the replay command shrinks it) and skips the kept regressions (every
// unit run replays those). Prints a line per seed as it ends, the failing seeds' replay commands, and last the plain
// line `property sweep: N seeds x K histories, V violations`; exits 1 when any seed failed.
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const SPEC = 'controllers/joincheck/property.test.ts';

export interface SweepArgs {
  seeds: number;
  runs: number;
  from: number | undefined;
  jobs: number;
}

const USAGE = 'usage: npm run test:property -- --seeds N [--runs K] [--from S] [--jobs J]';

export function parseArgs(argv: readonly string[]): SweepArgs {
  const args: SweepArgs = { seeds: 0, runs: 1024, from: undefined, jobs: 2 };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    const n = Number(value);
    if (value === undefined || !Number.isSafeInteger(n) || n < 0) throw new Error(`${flag}: an integer, not ${value}`);
    if (flag === '--seeds') args.seeds = n;
    else if (flag === '--runs') args.runs = n;
    else if (flag === '--from') args.from = n;
    else if (flag === '--jobs') args.jobs = n;
    else throw new Error(`unknown argument ${flag}`);
  }
  if (args.seeds < 1 || args.runs < 1 || args.jobs < 1) throw new Error('--seeds, --runs and --jobs are at least 1');
  return args;
}

/** The commit's seed, as hack/run-tests.sh takes it: HEAD's first 7 hex digits; undefined outside git. */
export function commitSeed(
  head: () => string = () => execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }),
): number | undefined {
  try {
    const h = head().trim();
    return /^[0-9a-f]{7}/.test(h) ? parseInt(h.slice(0, 7), 16) : undefined;
  } catch {
    return undefined;
  }
}

export function seedList(args: SweepArgs, commit: number | undefined): number[] {
  const from = args.from ?? commit ?? 1;
  return Array.from({ length: args.seeds }, (_, i) => from + i);
}

export function replayCommand(seed: number, runs: number): string {
  return `PROPERTY_SEED=${seed} PROPERTY_RUNS=${runs} npx mocha --config .mocharc.unit.json ${SPEC}`;
}

export interface SeedResult {
  seed: number;
  ok: boolean;
  seconds: number;
  /** The first lines of mocha's failure (or why there is no result). */
  why: string;
}

/** A seed's verdict from its mocha output and exit code: passed only with the closing line `N passed, 0 failed`. */
export function verdict(seed: number, seconds: number, code: number | null, output: string): SeedResult {
  const counts = /^(\d+) passed, (\d+) failed/m.exec(output);
  const ok = code === 0 && counts !== null && counts[2] === '0' && Number(counts[1]) > 0;
  let why = '';
  if (!ok) {
    // fast-check's line (how many histories it took) and the oracle's violation (mocha prints it as the cause);
    // the counterexample itself is left to the replay.
    const lines = (output.split(/^\s*\d+ failing\s*$/m)[1] ?? output)
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('at ') && !l.startsWith('Counterexample:'));
    const picked = [
      lines.find((l) => l.startsWith('Error: Property failed')),
      lines.find((l) => l.startsWith('Caused by:')),
    ];
    const named = picked.filter((l) => l !== undefined);
    why = (named.length > 0 ? named : lines.slice(0, 3)).join(' | ').slice(0, 400) || `no result (exit ${code})`;
  }
  return { seed, ok, seconds, why };
}

function runSeed(seed: number, runs: number): Promise<SeedResult> {
  const mocha = createRequire(import.meta.url).resolve('mocha/bin/mocha.js');
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [mocha, '--config', '.mocharc.unit.json', SPEC], {
      cwd: ROOT,
      env: {
        ...process.env,
        PROPERTY_SEED: String(seed),
        PROPERTY_RUNS: String(runs),
        PROPERTY_NO_SHRINK: '1',
        PROPERTY_REGRESSIONS: '0',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child.pid!);
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('close', (code) => {
      running.delete(child.pid!);
      resolve(verdict(seed, Math.round((Date.now() - started) / 1000), code, output));
    });
  });
}

const running = new Set<number>();

async function main(): Promise<number> {
  let args: SweepArgs;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const commit = commitSeed();
  const seeds = seedList(args, commit);
  console.log(
    `property sweep: seeds ${seeds[0]}..${seeds[seeds.length - 1]}${args.from === undefined && commit !== undefined ? " (from the commit's seed)" : ''}, ${args.runs} histories each, ${args.jobs} at a time`,
  );
  const stop = () => {
    for (const pid of running) process.kill(pid);
    process.exit(130);
  };
  process.on('SIGINT', stop).on('SIGTERM', stop);
  const results: SeedResult[] = [];
  const queue = [...seeds];
  await Promise.all(
    Array.from({ length: Math.min(args.jobs, seeds.length) }, async () => {
      for (let seed = queue.shift(); seed !== undefined; seed = queue.shift()) {
        const r = await runSeed(seed, args.runs);
        results.push(r);
        console.log(`  seed ${seed}: ${r.ok ? 'ok' : `VIOLATION: ${r.why}`} (${r.seconds}s)`);
      }
    }),
  );
  const failed = results.filter((r) => !r.ok).sort((a, b) => a.seed - b.seed);
  for (const r of failed) console.log(`  failed seed ${r.seed}; replay: ${replayCommand(r.seed, args.runs)}`);
  console.log(`property sweep: ${seeds.length} seeds x ${args.runs} histories, ${failed.length} violations`);
  return failed.length === 0 ? 0 : 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href)
  main().then(
    (code) => (process.exitCode = code),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 2;
    },
  );
