// CI's smoke size of the benchmark: `bench/bench.ts --smoke --machines 40` end to end in a child process
// (its own control plane with an audit log, both sides, the JoinGuard controller compiled and forked),
// then what must hold at any size. Latency figures are not asserted: CI machines are shared and noisy.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { Results } from './report.js';

const here = path.dirname(fileURLToPath(import.meta.url));

describe('bench (smoke size)', function () {
  this.timeout(180_000);
  let child: ChildProcess | undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-bench-smoke-'));
  const out = path.join(dir, 'results.json');

  after(async () => {
    // On a mocha timeout the bench is still running: SIGINT makes it stop what it started.
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      await new Promise((r) => child!.once('exit', r));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs end to end, marks every stuck Machine on both sides, and JoinGuard makes no request at rest', async () => {
    let stdout = '';
    let stderr = '';
    child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'bench.ts'), '--smoke', '--machines', '40', '--out', out], {
      cwd: path.join(here, '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (d) => (stdout += String(d)));
    child.stderr!.on('data', (d) => (stderr += String(d)));
    const code = await new Promise<number | null>((r) => child!.once('exit', r));
    expect(code, `bench failed:\n${stderr.slice(-4000)}`).to.equal(0);

    expect(stdout).to.contain('| JoinGuard').and.to.contain('| MHC (CAPI core)').and.to.contain('detection p99');
    const res = JSON.parse(fs.readFileSync(out, 'utf8')) as Results;
    for (const side of [res.joinguard, res.mhc]) {
      expect(side.detection.missed, 'stuck Machines never marked').to.deep.equal([]);
      expect(side.detection.falseMarks, 'resting Machines marked').to.deep.equal([]);
      expect(side.detection.early, 'marks before the deadline').to.equal(0);
      expect(side.detection.marked).to.equal(res.setup.shape.stuck);
    }
    expect(res.joinguard.restRequests.requests, JSON.stringify(res.joinguard.restRequests.byVerbResource)).to.equal(0);
    expect(res.joinguard.checksReconciled).to.equal(2 * res.setup.shape.clusters);
    const defaults = res.rebuilds.rows.find((r) => r.guard === 'JoinGuard, defaults')!;
    expect(defaults.rebuilds).to.be.at.most(7);
  });
});
