// Scenario (e): the `joinguard` command is killed (SIGKILL) mid-scenario and started again. Decisions are
// persisted in the check's status before they are acted on, so no Machine is remediated twice and the
// counters, the suspicion and its canary schedule survive.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { conditionOf, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const JOIN_TIMEOUT_S = 8;

/** The real command in its own process, JSON logs kept for failure messages. */
class JoinGuardProcess {
  readonly lines: string[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;

  constructor(kubeconfig: string, namespace: string) {
    this.child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(root, 'cmd/joinguard.ts'),
        `--kubeconfig=${kubeconfig}`,
        `--namespace=${namespace}`,
        '--diagnostics-address=0',
        '--health-addr=0',
        // No admission webhooks here (they need a serving certificate); e2e/install covers them.
        '--webhook-port=0',
        '--connection-grace=2s',
        '--v=4',
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (b: Buffer) => {
      this.lines.push(...b.toString().split('\n').filter(Boolean));
      if (this.lines.length > 3000) this.lines.splice(0, 1000);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.exited = new Promise((resolve) => this.child.on('exit', (code) => resolve(code)));
  }

  kill(): Promise<number | null> {
    this.child.kill('SIGKILL');
    return this.exited;
  }

  async terminate(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }

  tail(n = 15): string {
    return this.lines.slice(-n).join('\n');
  }
}

describe('scenario (e): JoinGuard killed mid-scenario and restarted', function () {
  this.timeout(400_000);
  const s = useScenario({
    prefix: 'jg-e',
    cluster: 'rst',
    checkName: 'workers',
    workers: [{ name: 'md', replicas: 2, labels: { pool: 'workers' } }],
    waitJoined: true,
  });
  let jg: JoinGuardProcess | undefined;
  const check = () => s.check();
  const seen = s.seen(() => `joinguard output:\n${jg?.tail()}\n`);

  after(async () => {
    await jg?.terminate();
  });

  it('remediates no Machine twice and keeps the counters and the suspicion across SIGKILL restarts', async () => {
    const { env, kube, capi, sim, namespace, cluster } = s;
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      suspicion: { probeInterval: '10m' },
    });
    jg = new JoinGuardProcess(env.kubeconfigPath, namespace);
    sim.policy.expireCredential({ namespace });
    await kube.mergePatch(capi.path('MachineDeployment', namespace, `${cluster}-md`), { spec: { replicas: 4 } });

    // Killed the moment the first remediation is recorded: the write may or may not have been made.
    const first = await waitFor(
      'the first remediation recorded',
      async () => (await check()).status?.remediations?.[0],
      { timeoutMs: 120_000, describe: seen, intervalMs: 50 },
    );
    await jg.kill();
    const target = (await s.machines()).find((m) => m.metadata.uid === first.uid);
    const writeMade = target === undefined || conditionOf(target, 'HealthCheckSucceeded')?.status === 'False';
    jg = new JoinGuardProcess(env.kubeconfigPath, namespace);

    const stalled = await waitFor(
      'the suspicion raised (before or after the kill)',
      async () => {
        const c = await check();
        return checkCondition(c, 'Progressing')?.reason === 'BootstrapCredentialSuspect' && c;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    const recs = stalled.status?.remediations ?? [];
    expect(recs, describeCheck(stalled)).to.have.length(1);
    expect(recs[0]!.uid).to.equal(first.uid);
    expect(stalled.status?.consecutiveJoinFailures).to.equal(2);
    // The Machine was marked once and replaced by its MachineSet (the record is not made again).
    // A request recorded but not yet written when the process died is made again once REQUEST_RETRY_MS (60 s)
    // passed without the mark showing: the same mark, never a second remediation.
    const replacedAt = await waitFor(
      'the first failed Machine replaced',
      async () => !(await s.machines()).some((m) => m.metadata.uid === first.uid) && Date.now(),
      { timeoutMs: 150_000, describe: seen },
    );
    process.stderr.write(
      `[scenario e] killed ${writeMade ? 'after' : 'between the status record and'} the Machine write; ` +
        `record -> Machine replaced in ${((replacedAt - Date.parse(first.time)) / 1000).toFixed(0)}s\n`,
    );

    // Killed again while suspected: the new process keeps the suspicion, its canary time and the counters.
    await jg.kill();
    const before = await check();
    jg = new JoinGuardProcess(env.kubeconfigPath, namespace);
    await waitFor(
      'the restarted controller reconciled (a newer status)',
      async () => {
        const c = await check();
        return c.metadata.resourceVersion !== before.metadata.resourceVersion && c;
      },
      { timeoutMs: 30_000, describe: seen },
    ).catch(() => undefined); // an unchanged status is fine too
    await new Promise((r) => setTimeout(r, 3 * JOIN_TIMEOUT_S * 1000)); // long enough for more failures to be judged
    const afterRestart = await check();
    expect(afterRestart.status?.suspicion?.since).to.equal(before.status?.suspicion?.since);
    expect(afterRestart.status?.suspicion?.nextCanaryTime).to.equal(before.status?.suspicion?.nextCanaryTime);
    expect(afterRestart.status?.suspicion?.canariesSpent).to.equal(0);
    expect(afterRestart.status?.consecutiveJoinFailures).to.be.at.least(2);
    expect(afterRestart.status?.remediations, describeCheck(afterRestart)).to.have.length(1);
    expect(checkCondition(afterRestart, 'Progressing')?.reason).to.equal('BootstrapCredentialSuspect');
    // No Machine in the pool carries a second mark.
    const marked = (await s.workers()).filter((m) => conditionOf(m, 'HealthCheckSucceeded')?.status === 'False');
    expect(marked, await seen()).to.have.length(0);
    expect(await jg.terminate()).to.equal(0);
    jg = undefined;
  });
});
