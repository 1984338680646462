// Scenario (e): the `joinguard` command is killed (SIGKILL) mid-scenario and started again. Decisions are
// persisted in the check's status before they are acted on, so no Machine is remediated twice and the
// counters, the suspicion and its canary schedule survive.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { MachineJoinCheck } from '../../api/v1alpha1/types.js';
import { conditionOf, describeMachines, hasNode, isControlPlane, listMachines, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck, getCheck, installJoinGuardCrd } from '../support/joinguard.js';
import { getSim } from '../support/shared-sim.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { Kube } from '../sim/kube.js';
import type { Sim } from '../sim/sim.js';
import { createCluster } from '../sim/topology.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const JOIN_TIMEOUT_S = 8;

/** The real command in its own process, JSON logs kept for failure messages. */
class JoinGuardProcess {
  readonly lines: string[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;

  constructor(kubeconfig: string, namespace: string) {
    this.child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'cmd/joinguard.ts'),
      `--kubeconfig=${kubeconfig}`, `--namespace=${namespace}`, '--metrics-bind-address=0', '--health-probe-bind-address=0',
      '--connection-grace=2s', '--log-level=debug'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
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
  const namespace = `jg-e-${process.pid}`;
  const cluster = 'rst';
  let env: TestEnv;
  let kube: Kube;
  let sim: Sim;
  let jg: JoinGuardProcess | undefined;

  before(async function () {
    this.timeout(300_000);
    env = await getTestEnv();
    kube = await Kube.from(env.kubeConfig());
    sim = await getSim();
    await installJoinGuardCrd(kube);
    await createCluster(kube, { namespace, name: cluster, workers: [{ name: 'md', replicas: 2, labels: { pool: 'workers' } }], ca: { certPem: env.caCertPem, keyPem: env.caKeyPem } });
    await waitFor('the cluster up with 2 joined workers', async () => {
      const ms = await listMachines(kube, namespace, cluster);
      return ms.length === 3 && ms.every(hasNode);
    }, { timeoutMs: 150_000 });
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster, selector: { matchLabels: { pool: 'workers' } }, joinTimeout: `${JOIN_TIMEOUT_S}s`,
      suspicion: { probeInterval: '10m' },
    });
  });

  after(async () => {
    await jg?.terminate();
    kube?.close();
  });

  const check = () => getCheck(kube, namespace, 'workers');
  const seen = async () => `${describeMachines(await listMachines(kube, namespace, cluster))}\n` +
    `${describeCheck(await check().catch(() => ({ metadata: { name: 'workers' } }) as MachineJoinCheck))}\njoinguard output:\n${jg?.tail()}`;

  it('remediates no Machine twice and keeps the counters and the suspicion across SIGKILL restarts', async () => {
    jg = new JoinGuardProcess(env.kubeconfigPath, namespace);
    sim.policy.expireCredential({ namespace });
    await kube.mergePatch(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/machinedeployments/${cluster}-md`, { spec: { replicas: 4 } });

    // Killed the moment the first remediation is recorded: the write may or may not have been made.
    const first = await waitFor('the first remediation recorded', async () => (await check()).status?.remediations?.[0], { timeoutMs: 120_000, describe: seen, intervalMs: 50 });
    await jg.kill();
    jg = new JoinGuardProcess(env.kubeconfigPath, namespace);

    const stalled = await waitFor('the suspicion raised by the restarted controller', async () => {
      const c = await check();
      return checkCondition(c, 'Progressing')?.reason === 'BootstrapCredentialSuspect' && c;
    }, { timeoutMs: 120_000, describe: seen });
    const recs = stalled.status?.remediations ?? [];
    expect(recs, describeCheck(stalled)).to.have.length(1);
    expect(recs[0]!.uid).to.equal(first.uid);
    expect(stalled.status?.consecutiveJoinFailures).to.equal(2);
    // The Machine was marked once and replaced by its MachineSet (the record is not made again).
    await waitFor('the first failed Machine replaced', async () => !(await listMachines(kube, namespace, cluster)).some((m) => m.metadata.uid === first.uid), { timeoutMs: 60_000, describe: seen });

    // Killed again while suspected: the new process keeps the suspicion, its canary time and the counters.
    await jg.kill();
    const before = await check();
    jg = new JoinGuardProcess(env.kubeconfigPath, namespace);
    await waitFor('the restarted controller reconciled (a newer status)', async () => {
      const c = await check();
      return c.metadata.resourceVersion !== before.metadata.resourceVersion && c;
    }, { timeoutMs: 30_000, describe: seen }).catch(() => undefined); // an unchanged status is fine too
    await new Promise((r) => setTimeout(r, 3 * JOIN_TIMEOUT_S * 1000)); // long enough for more failures to be judged
    const afterRestart = await check();
    expect(afterRestart.status?.suspicion?.since).to.equal(before.status?.suspicion?.since);
    expect(afterRestart.status?.suspicion?.nextCanaryTime).to.equal(before.status?.suspicion?.nextCanaryTime);
    expect(afterRestart.status?.suspicion?.canariesSpent).to.equal(0);
    expect(afterRestart.status?.consecutiveJoinFailures).to.be.at.least(2);
    expect(afterRestart.status?.remediations, describeCheck(afterRestart)).to.have.length(1);
    expect(checkCondition(afterRestart, 'Progressing')?.reason).to.equal('BootstrapCredentialSuspect');
    // No Machine in the pool carries a second mark.
    const marked = (await listMachines(kube, namespace, cluster)).filter((m) => !isControlPlane(m) && conditionOf(m, 'HealthCheckSucceeded')?.status === 'False');
    expect(marked, await seen()).to.have.length(0);
    expect(await jg.terminate()).to.equal(0);
    jg = undefined;
  });
});
