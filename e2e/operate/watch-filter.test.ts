// Issue 12, "Must show": the real `joinguard` command started with --watch-filter=x acts on a Cluster labelled
// cluster.x-k8s.io/watch-filter=x and ignores one without the label, as CAPI's managers do — two simulated
// clusters, each with a worker that never joins, each with a check; only the labelled one is touched. The filter
// selects Clusters, Machines and checks server-side (issue 18), so the labelled Cluster's check and its Machines
// carry the label too: the workers through the MachineDeployment's template, the control plane through the
// KubeadmControlPlane's machineTemplate (docs/decisions/sharding-with-watch-filter.md).
// Until the controller supports the filter, the command refuses to start with it (never ignoring it
// silently) and this spec is pending.
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'chai';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { capiApi } from '../sim/capi-api.js';
import type { PolicyRule } from '../sim/policy.js';
import { controlPlaneName, createCluster } from '../sim/topology.js';
import {
  conditionOf,
  deleteClusters,
  describeMachines,
  isControlPlane,
  listMachines,
  waitFor,
} from '../support/cluster-view.js';
import { checksPath, createCheck, describeCheck, getCheck, installJoinGuardCrd } from '../support/joinguard.js';
import { getSim } from '../support/shared-sim.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';

const WATCH_LABEL = 'cluster.x-k8s.io/watch-filter';
const root = resolve(import.meta.dirname, '../..');

describe('operate: --watch-filter (the real command)', function () {
  this.timeout(300_000);
  const ns = `jg-wf-${process.pid}`;
  let env: TestEnv;
  let kube: KubeClient;
  const capi = capiApi('v1beta2');
  let child: ChildProcess | undefined;
  let exited: Promise<number | null>;
  const output: string[] = [];
  const rules: PolicyRule[] = [];
  const stuckWorker = async (cluster: string) =>
    (await listMachines(kube, capi, ns, cluster)).filter((m) => !isControlPlane(m))[0];
  const seen = async () =>
    `${describeMachines([...(await listMachines(kube, capi, ns, 'wf-in')), ...(await listMachines(kube, capi, ns, 'wf-out'))])}\n` +
    `${describeCheck(await getCheck(kube, ns, 'in'))}\n${describeCheck(await getCheck(kube, ns, 'out'))}\njoinguard output:\n${output.slice(-20).join('\n')}`;

  before(async function () {
    env = await getTestEnv();
    kube = env.kube();
    const sim = await getSim();
    await installJoinGuardCrd(kube);
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });

    child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        resolve(root, 'cmd/joinguard.ts'),
        `--kubeconfig=${env.kubeconfigPath}`,
        `--namespace=${ns}`,
        '--watch-filter=x',
        '--webhook-port=0',
        '--diagnostics-address=0',
        '--health-addr=0',
        '--logging-format=json',
        '-v=4',
        '--connection-grace=2s',
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    for (const s of [child.stdout!, child.stderr!])
      s.on('data', (c: Buffer) => output.push(...c.toString().trimEnd().split('\n')));
    exited = new Promise((r) => child!.once('exit', (code) => r(code)));
    const started = await Promise.race([
      exited.then(() => 'exited' as const),
      waitFor('joinguard reconciling', async () => output.some((l) => l.includes('"Starting workers"')), {
        timeoutMs: 60_000,
        describe: async () => output.join('\n'),
      }).then(() => 'running' as const),
    ]);
    if (started === 'exited') {
      if (output.some((l) => l.includes('--watch-filter is not supported'))) {
        process.stderr.write(
          '[watch-filter] pending: the controller does not support --watch-filter yet (the command refuses it)\n',
        );
        this.skip();
      }
      throw new Error(`joinguard exited:\n${output.join('\n')}`);
    }

    rules.push(sim.policy.neverJoin({ namespace: ns, cluster: 'wf-in', role: 'worker' }, { limit: 1 }));
    rules.push(sim.policy.neverJoin({ namespace: ns, cluster: 'wf-out', role: 'worker' }, { limit: 1 }));
    for (const name of ['wf-in', 'wf-out']) {
      const shard: Record<string, string> = name === 'wf-in' ? { [WATCH_LABEL]: 'x' } : {};
      await createCluster(kube, {
        namespace: ns,
        name,
        workers: [{ name: `${name}-md`, replicas: 1, labels: { pool: 'workers', ...shard } }],
        ca: { certPem: env.caCertPem, keyPem: env.caKeyPem },
      });
    }
    await kube.mergePatch(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/clusters/wf-in`, {
      metadata: { labels: { [WATCH_LABEL]: 'x' } },
    });
    await kube.mergePatch(
      `/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/${ns}/kubeadmcontrolplanes/${controlPlaneName('wf-in')}`,
      { spec: { machineTemplate: { metadata: { labels: { [WATCH_LABEL]: 'x' } } } } },
    );
    for (const [check, cluster] of [
      ['in', 'wf-in'],
      ['out', 'wf-out'],
    ] as const) {
      await createCheck(kube, ns, check, {
        clusterName: cluster,
        selector: { matchLabels: { pool: 'workers' } },
        joinTimeout: '10s',
      });
    }
    await kube.mergePatch(`${checksPath(ns)}/in`, { metadata: { labels: { [WATCH_LABEL]: 'x' } } });
  });

  after(async function () {
    this.timeout(60_000);
    for (const r of rules) r.lift();
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    if (kube) await deleteClusters(kube, capi, ns);
    kube?.close();
  });

  it('marks the stuck worker of the labelled Cluster and leaves the unlabelled Cluster and its check untouched', async () => {
    const marked = await waitFor(
      'the stuck worker of wf-in marked HealthCheckSucceeded=False',
      async () => {
        const m = await stuckWorker('wf-in');
        return conditionOf(m, 'HealthCheckSucceeded')?.status === 'False' && m;
      },
      { timeoutMs: 180_000, describe: seen },
    );
    expect(conditionOf(marked, 'HealthCheckSucceeded')!.reason).to.equal('JoinTimeout');
    // CAPI carried the label from the templates to every Machine of the labelled Cluster.
    const inMachines = await listMachines(kube, capi, ns, 'wf-in');
    expect(
      inMachines.filter((m) => m.metadata.labels?.[WATCH_LABEL] !== 'x').map((m) => m.metadata.name),
      await seen(),
    ).to.deep.equal([]);
    expect((await getCheck(kube, ns, 'in')).status?.conditions?.length ?? 0).to.be.greaterThan(0);

    // The unlabelled Cluster's worker is as far past the same joinTimeout; give JoinGuard 10 s more.
    await new Promise((r) => setTimeout(r, 10_000));
    const out: Json | undefined = await stuckWorker('wf-out');
    expect(out, await seen()).to.not.equal(undefined);
    expect(conditionOf(out, 'HealthCheckSucceeded'), await seen()).to.equal(undefined);
    const outCheck = await kube.get(`${checksPath(ns)}/out`);
    expect(outCheck?.status ?? {}, await seen()).to.deep.equal({});
    // Not even reconciled: its events are dropped before the queue, as CAPI's filter predicate does.
    expect(output.filter((l) => /"MachineJoinCheck":\{"name":"out"/.test(l)).slice(0, 3)).to.deep.equal([]);
  });
});
