// npm run test:mutants — proof that the proof can fail. Each deliberate defect of mutants.ts is applied in turn to a
// throwaway copy of the working tree (tracked and untracked files, node_modules linked), and every named test that
// must catch it runs there: a unit spec (or the tests of it whose title matches), and the property test with the
// mutant's own fixed seed, stopping at its first failing history (PROPERTY_NO_SHRINK=1) and naming the oracle
// invariant that caught it and after how many histories. A mutant is killed when every named test fails; the same
// tree gives the same verdicts on every run (no timings in them). Ends with `N mutants, N killed, N survived`; exits
// non-zero if any survives or any anchor is missing. Not part of npm test.
//
//   npm run test:mutants                      every mutant
//   npm run test:mutants -- no-write-gate     only the named mutants
//   MUTANT_SEED=42 npm run test:mutants       the property test with this seed instead of each mutant's own
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { editsByFile, MUTANTS, mutate, PROPERTY, type Mutant } from './mutants.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const RUNS = process.env['MUTANT_RUNS'] ?? '2000';

interface Outcome {
  test: string;
  failed: boolean;
  /** What failed, as the test said it (deterministic: no timings). */
  by: string;
  histories?: number;
}

function copyTree(): string {
  const dir = mkdtempSync(join(tmpdir(), 'joinguard-mutant-'));
  const files = spawnSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .stdout.split('\0')
    .filter((f) => f !== '');
  for (const f of files) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    try {
      cpSync(join(ROOT, f), join(dir, f));
    } catch {
      // a file deleted in the working tree but still in the index
    }
  }
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

function runOne(m: Mutant): Outcome[] {
  const dir = copyTree();
  try {
    for (const file of editsByFile(m).keys()) {
      const path = join(dir, file);
      writeFileSync(path, mutate(readFileSync(path, 'utf8'), m, file));
    }
    return m.tests.map((t) => runTest(t, m, dir));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Runs one named test in the mutated copy: it kills the mutant when it fails. */
function runTest(test: string, m: Mutant, dir: string): Outcome {
  const [spec, title] = test.split('#') as [string, string | undefined];
  // The random histories at the mutant's seed; a title (the kept histories' replay) runs as any named test.
  const property = spec === PROPERTY && title === undefined;
  const seed = process.env['MUTANT_SEED'] ?? String(m.seed ?? 1);
  const env = {
    ...process.env,
    ...(property
      ? { PROPERTY_NO_SHRINK: '1', PROPERTY_SEED: seed, PROPERTY_RUNS: RUNS, PROPERTY_REGRESSIONS: '0' }
      : {}),
  };
  const args = ['mocha', '--config', '.mocharc.unit.json', '--reporter', 'spec', spec];
  if (title !== undefined) args.push('--grep', escape(title));
  const r = spawnSync('npx', args, {
    cwd: dir,
    env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: 30 * 60 * 1000,
  });
  const out = `${r.stdout}\n${r.stderr}`;
  const name = property ? `${PROPERTY} (seed ${seed})` : test;
  if (r.status === 0) {
    const passing = /(\d+) passing/.exec(out)?.[1] ?? '?';
    return { test: name, failed: false, by: `${passing} passing` };
  }
  if (property) {
    const tag =
      /AssertionError: (\[[A-Za-z-]+\])/.exec(out)?.[1] ??
      /AssertionError: ([^\n]{0,80})/.exec(out)?.[1] ??
      'an error (see the log)';
    const n = /Property failed after (\d+) tests/.exec(out)?.[1];
    return { test: name, failed: true, by: tag, ...(n ? { histories: Number(n) } : {}) };
  }
  const failing = [...out.matchAll(/^\s+\d+\) (.+)$/gm)]
    .map((x) => x[1]!.trim())
    .filter((t, i, all) => all.indexOf(t) === i);
  return { test: name, failed: true, by: failing.slice(0, 3).join(' | ') || 'the spec failed' };
}

const only = process.argv.slice(2);
const chosen = only.length > 0 ? MUTANTS.filter((m) => only.includes(m.name)) : MUTANTS;
if (chosen.length === 0)
  throw new Error(`no mutant named ${only.join(', ')}; known: ${MUTANTS.map((m) => m.name).join(', ')}`);
// Every anchor first: a missing one fails before anything runs.
for (const m of chosen)
  for (const file of editsByFile(m).keys()) mutate(readFileSync(join(ROOT, file), 'utf8'), m, file);

let killed = 0;
const started = performance.now();
for (const m of chosen) {
  const outcomes = runOne(m);
  const dead = outcomes.every((o) => o.failed);
  if (dead) killed++;
  console.log(`${dead ? 'KILLED  ' : 'SURVIVED'} ${m.name}: ${m.what}`);
  for (const o of outcomes) {
    const after = o.histories !== undefined ? ` after ${o.histories} histories` : '';
    const expected =
      o.test.startsWith(PROPERTY) && m.expect !== undefined && o.by !== m.expect ? ` (expected ${m.expect})` : '';
    console.log(`         ${o.failed ? 'failed' : 'PASSED'}: ${o.test}: ${o.by}${after}${expected}`);
  }
}
console.log(`${chosen.length} mutants, ${killed} killed, ${chosen.length - killed} survived`);
console.error(`(${((performance.now() - started) / 1000).toFixed(0)} s)`);
process.exitCode = killed === chosen.length ? 0 : 1;
