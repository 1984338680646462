// The command's first and last words, as CAPI's managers say them: the version line first, and a fatal start-up
// error as one log line in the chosen format (exit 1), never a bare message on stderr; a bad flag is refused on
// stderr, as pflag does (exit 2). Unit tests that run the real command (no apiserver needed).
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'chai';
import { BUILD } from '../controllers/version.js';

const root = resolve(import.meta.dirname, '..');

function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', resolve(root, 'cmd/joinguard.ts'), ...args],
      { cwd: root, env: { ...process.env, KUBECONFIG: '' } },
      (err, stdout, stderr) => done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('joinguard command: version line and fatal errors', function () {
  this.timeout(30_000);

  it('logs its version first, and a fatal start-up error as a JSON line with err (exit 1)', async () => {
    const r = await run(
      '--logging-format=json',
      '--kubeconfig=/nonexistent/kubeconfig',
      '--health-addr=0',
      '--diagnostics-address=0',
    );
    expect(r.code, r.stdout + r.stderr).to.equal(1);
    expect(r.stderr).to.equal('');
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).to.deep.include({
      msg: `Version: ${BUILD.version} (git commit: ${BUILD.gitCommit})`,
      version: BUILD.version,
      v: 0,
    });
    expect(BUILD.version).to.match(/^v\d+\.\d+\.\d+/);
    const last = lines.at(-1)!;
    expect(last).to.include({ msg: 'Unable to start manager' });
    expect(String(last['err'])).to.match(/nonexistent/);
    // At the default -v=2 the flags are logged at V(1), as CAPI's main does.
    expect(lines.some((l) => l['msg'] === 'FLAG: --v="2"' && l['v'] === 1)).to.equal(true);
  });

  it('in the default text format the fatal error is a klog E line', async () => {
    const r = await run('--kubeconfig=/nonexistent/kubeconfig', '--health-addr=0', '--diagnostics-address=0');
    expect(r.code).to.equal(1);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).to.match(/^I\d{4} .* joinguard\] "Version: v\d+\.\d+\.\d+ \(git commit: [0-9a-f]*\)"/);
    expect(lines.at(-1)).to.match(/^E\d{4} .* joinguard\] "Unable to start manager" err=".*nonexistent/);
  });

  it('refuses a bad flag on stderr with exit 2, as pflag', async () => {
    const r = await run('--machine-concurrency=10');
    expect(r.code).to.equal(2);
    expect(r.stdout).to.equal('');
    expect(r.stderr).to.match(/^joinguard: unknown flag: --machine-concurrency \(a flag of CAPI's core manager/);
  });
});
