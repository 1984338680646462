// npm run test:mutants — proof that the proof can fail. Each deliberate defect of mutants.ts is applied in turn to a
// throwaway copy of the working tree (tracked and untracked files, node_modules linked), and the spec that must catch
// it runs there: the property test stops at its first failing history (PROPERTY_NO_SHRINK=1) and reports which
// oracle invariant caught the defect and after how many histories; a unit spec reports its failing tests. Ends with
// `N mutants, N killed, N survived`; exits non-zero if any survives or any anchor is missing. Not part of npm test.
//
//   npm run test:mutants                      every mutant, a random seed each (printed)
//   npm run test:mutants -- no-write-gate     only the named mutants
//   MUTANT_SEED=42 npm run test:mutants       the property test with this seed
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MUTANTS, mutate, type Mutant } from './mutants.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const RUNS = process.env['MUTANT_RUNS'] ?? '2000';

interface Outcome {
  killed: boolean;
  by: string;
  histories?: number;
  seed?: string;
  /** The failure, as the test said it. */
  detail?: string;
  seconds: number;
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

function runOne(m: Mutant): Outcome {
  const dir = copyTree();
  const started = performance.now();
  try {
    const file = join(dir, m.file);
    writeFileSync(file, mutate(readFileSync(file, 'utf8'), m));
    const first = runSpec(m.spec, dir, started);
    if (first.killed || m.also === undefined) return first;
    const second = runSpec(m.also, dir, started);
    return {
      ...second,
      by: `${m.also} (the histories missed it: ${first.by}${first.seed !== undefined ? `, seed ${first.seed}` : ''}): ${second.by}`,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs one spec in the mutated copy: killed when it fails. */
function runSpec(spec: string, dir: string, started: number): Outcome {
  const property = spec.endsWith('property.test.ts');
  const seed = process.env['MUTANT_SEED'] ?? String(Math.floor(Math.random() * 2 ** 31));
  const env = {
    ...process.env,
    ...(property
      ? { PROPERTY_NO_SHRINK: '1', PROPERTY_SEED: seed, PROPERTY_RUNS: RUNS, PROPERTY_REGRESSIONS: '0' }
      : {}),
  };
  const r = spawnSync('npx', ['mocha', '--config', '.mocharc.unit.json', '--reporter', 'spec', spec], {
    cwd: dir,
    env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: 20 * 60 * 1000,
  });
  const out = `${r.stdout}\n${r.stderr}`;
  const seconds = (performance.now() - started) / 1000;
  if (r.status === 0) return { killed: false, by: 'nothing failed', seconds, ...(property ? { seed } : {}) };
  if (property) {
    const tag =
      /AssertionError: (\[[A-Za-z-]+\])/.exec(out)?.[1] ??
      /AssertionError: ([^\n]{0,80})/.exec(out)?.[1] ??
      'an error (see the log)';
    const n = /Property failed after (\d+) tests/.exec(out)?.[1];
    const detail = /AssertionError: ([^\n]*)/.exec(out)?.[1]?.slice(0, 300);
    return {
      killed: true,
      by: tag,
      ...(n ? { histories: Number(n) } : {}),
      seed,
      seconds,
      ...(detail ? { detail } : {}),
    };
  }
  const failing = [...out.matchAll(/^\s+\d+\) (.+)$/gm)]
    .map((x) => x[1]!.trim())
    .filter((t, i, all) => all.indexOf(t) === i);
  return { killed: true, by: failing.slice(0, 3).join(' | ') || 'the spec failed', seconds };
}

const only = process.argv.slice(2);
const chosen = only.length > 0 ? MUTANTS.filter((m) => only.includes(m.name)) : MUTANTS;
if (chosen.length === 0)
  throw new Error(`no mutant named ${only.join(', ')}; known: ${MUTANTS.map((m) => m.name).join(', ')}`);
// Every anchor first: a missing one fails before anything runs.
for (const m of chosen) mutate(readFileSync(join(ROOT, m.file), 'utf8'), m);

let killed = 0;
for (const m of chosen) {
  const o = runOne(m);
  if (o.killed) killed++;
  const where =
    o.histories !== undefined
      ? ` after ${o.histories} histories (seed ${o.seed})`
      : o.seed !== undefined
        ? ` (seed ${o.seed})`
        : '';
  const expected = o.by.includes(m.expect) ? '' : ` — expected ${m.expect}`;
  const by = o.by.startsWith(m.also ?? '\0') ? o.by : `${m.spec}: ${o.by}`;
  console.log(
    `${o.killed ? 'KILLED  ' : 'SURVIVED'} ${m.name}: ${m.what}\n         caught by ${by}${where}${expected}; ${o.seconds.toFixed(0)} s`,
  );
  if (o.detail !== undefined) console.log(`         ${o.detail}`);
}
console.log(`${chosen.length} mutants, ${killed} killed, ${chosen.length - killed} survived`);
process.exitCode = killed === chosen.length ? 0 : 1;
