// The README's first command in CI: `npm run demo` (demo.ts) as a newcomer runs it, on the local control plane of
// the job's CAPI release, in a process of its own. Each act passes only when the demo printed its closing line, which
// it prints only after checking the cluster and the check's status (acts.ts); a demo that exits non-zero or never
// finishes fails, with its own last lines.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ACT_ENDS } from './acts.js';

const ROOT = resolve(fileURLToPath(import.meta.url), '..', '..', '..');
/** The demo takes about 3 minutes on a warm cache; four jobs beside it on 2 cores stretch that. */
const DEMO_TIMEOUT_MS = 15 * 60_000;

describe('demo: `npm run demo` ends each act as it says', function () {
  this.timeout(DEMO_TIMEOUT_MS + 60_000);
  let child: ChildProcess | undefined;
  let out = '';
  let code: number | null = null;
  const tail = () => out.split('\n').slice(-60).join('\n');

  before(async () => {
    // What `npm run demo` runs (tsx e2e/demo/demo.ts), without npm's banner; the job's environment (the release's
    // build, the CI run's mark) passes through.
    child = spawn(process.execPath, ['--import', 'tsx', 'e2e/demo/demo.ts'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child?.kill('SIGINT'), DEMO_TIMEOUT_MS);
    code = await new Promise<number | null>((ok) => child!.on('close', (c) => ok(c)));
    clearTimeout(timer);
    child = undefined;
  });
  after(() => child?.kill('SIGKILL'));

  for (const [i, line] of ACT_ENDS.entries()) {
    it(`act ${i + 1}: "${line}"`, () => {
      expect(out.includes(`>>> ${line}`), `not printed; the demo's last lines:\n${tail()}`).to.equal(true);
    });
  }

  it('exits 0, having stopped what it started', () => {
    expect(code, tail()).to.equal(0);
    expect(out).to.match(/Demo finished in \d+s\. .* Everything it started has stopped\./);
  });
});
