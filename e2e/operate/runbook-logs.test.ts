// docs/runbook.md's "Reconcile errors" tells an operator how to find the error lines in the leader's log. This runs
// the real `joinguard` command into a real failure — its ClusterRole lacks `update` on machinejoinchecks/status, the
// runbook's first cause (403) — in both log formats, and pipes what it wrote through the very commands the runbook
// shows (the part after `kubectl logs ... |`): each finds the reconcile's error line, which names the check and the
// 403, and nothing else. Real kube-apiserver, real RBAC, the command as the Deployment runs it.
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import type { KubeClient } from '../../hack/testenv/kube-client.js';
import { CONTROLLER_NEEDS } from '../../manifests/rbac-needs.js';
import { serviceAccountKubeConfig } from '../install/install-env.js';
import { createCheck, installJoinGuardCrd } from '../support/joinguard.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';

const root = resolve(import.meta.dirname, '../..');

/** The shell lines of the fenced blocks of a runbook section. */
function runbookCommands(section: string): string[] {
  const text = readFileSync(join(root, 'docs', 'runbook.md'), 'utf8');
  const start = text.indexOf(`\n## ${section}\n`);
  expect(start, `runbook section ${section}`).to.be.greaterThan(-1);
  const body = text.slice(start + 1).split(/\n## /)[0]!;
  return [...body.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n')).filter((l) => l.trim() !== '');
}

/** The runbook's log filter of a format: the pipeline after `kubectl ... logs ... |`, comment dropped. */
function filterFor(format: 'text' | 'json'): string {
  const line = runbookCommands('Reconcile errors').find(
    (l) => /kubectl .*logs /.test(l) && (format === 'json' ? /JSON format/ : /text format/).test(l),
  );
  expect(line, `the runbook's command for the ${format} format`).to.be.a('string');
  return line!.replace(/\s+#.*$/, '').replace(/^.*?logs [^|]*\|\s*/, '');
}

async function runUntilError(kubeconfig: string, namespace: string, format: 'text' | 'json'): Promise<string> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      resolve(root, 'cmd/joinguard.ts'),
      `--kubeconfig=${kubeconfig}`,
      `--namespace=${namespace}`,
      '--webhook-port=0',
      '--diagnostics-address=0',
      '--health-addr=0',
      `--logging-format=${format}`,
    ],
    { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const deadline = Date.now() + 90_000;
  while (!/Reconciler error/.test(out) && Date.now() < deadline && child.exitCode === null)
    await new Promise((r) => setTimeout(r, 200));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
  if (child.exitCode === null) child.kill('SIGKILL');
  expect(out, 'the command to hit the failure').to.match(/Reconciler error/);
  return out;
}

const grep = (filter: string, file: string) =>
  new Promise<string>((ok, fail) =>
    execFile('bash', ['-c', `cat "$1" | ${filter}`, 'runbook', file], (err, stdout) =>
      err && (err as { code?: number }).code !== 1 ? fail(err) : ok(stdout),
    ),
  );

describe("operate: the runbook's log commands find the error line of a real failure", function () {
  this.timeout(300_000);
  const ns = `jg-rblogs-${process.pid}`;
  const role = `jg-runbook-logs-${process.pid}`;
  let env: TestEnv;
  let kube: KubeClient;
  let dir: string;
  let kubeconfig: string;

  before(async () => {
    env = await getTestEnv();
    kube = env.kube();
    dir = mkdtempSync(join(tmpdir(), 'jg-rblogs-'));
    await installJoinGuardCrd(kube);
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    await kube.create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'joinguard' },
    });
    // The release's ClusterRole, less `update` on the checks' status: "the ClusterRole differs from the release's".
    const rules = CONTROLLER_NEEDS.filter(
      (g) => !g.namespaced && !g.workloadNodeCheck && !g.machineDelete && g.resource !== 'machinejoinchecks/status',
    ).map((g) => ({ apiGroups: [g.group], resources: [g.resource], verbs: g.verbs }));
    await kube.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: role },
      rules,
    });
    await kube.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: role },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', name: 'joinguard', namespace: ns }],
    });
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, (await serviceAccountKubeConfig(env.kubeConfig(), ns, 'joinguard')).exportConfig());
    await createCheck(kube, ns, 'workers', { clusterName: 'prod-a', selector: { matchLabels: { pool: 'workers' } } });
  });

  after(async () => {
    if (kube) {
      await kube.delete(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${role}`).catch(() => undefined);
      await kube.delete(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`).catch(() => undefined);
      kube.close();
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const format of ['json', 'text'] as const) {
    it(`${format} format: the runbook's filter keeps the reconcile error (the check, the 403) and only error lines`, async () => {
      const out = await runUntilError(kubeconfig, ns, format);
      const file = join(dir, `joinguard-${format}.log`);
      writeFileSync(file, out);
      const found = (await grep(filterFor(format), file)).trim().split('\n').filter(Boolean);
      const reconcile = found.filter((l) => l.includes('Reconciler error'));
      expect(reconcile.length, `${filterFor(format)} on:\n${out}`).to.be.greaterThan(0);
      if (format === 'json') {
        const line = JSON.parse(reconcile[0]!) as Record<string, unknown>;
        expect(line).to.deep.include({ MachineJoinCheck: { name: 'workers', namespace: ns } });
        expect(String(line['err'])).to.match(/403|forbidden/i);
        // Every line it keeps is an error line, and every error line is kept.
        const lines = out
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        expect(found.map((l) => (JSON.parse(l) as Record<string, unknown>)['msg'])).to.deep.equal(
          lines.filter((l) => 'err' in l).map((l) => l['msg']),
        );
        expect(lines.filter((l) => 'err' in l).every((l) => !('v' in l))).to.equal(true);
      } else {
        expect(reconcile[0])
          .to.match(/^E\d{4} .*"Reconciler error, retrying" err=".*(403|forbidden)/i)
          .and.include(`MachineJoinCheck="${ns}/workers"`);
        expect(found.every((l) => /^E\d{4} /.test(l))).to.equal(true);
      }
      // The runbook's old filter found nothing: there is no level key.
      expect(await grep(`grep '"level":"error"'`, file)).to.equal('');
    });
  }
});
