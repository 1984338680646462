// The stack is real: CAPI's own controllers (MachineDeployment/MachineSet, Machine, KubeadmControlPlane,
// kubeadm bootstrap) drive simulated VMs (e2e/sim) through their whole life on the test control plane.
// No JoinGuard here: remediation marks are written by hand, as an MHC would.
import { expect } from 'chai';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import {
  controlPlaneInitialized,
  deleteClusters,
  describeMachines,
  hasNode,
  isControlPlane,
  isDeleting,
  listMachines,
  markForRemediation,
  waitFor,
} from '../support/cluster-view.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { capiApi, type CapiApi } from '../sim/capi-api.js';
import type { Sim } from '../sim/sim.js';
import { getSim } from '../support/shared-sim.js';
import { createCluster } from '../sim/topology.js';

describe('CAPI stack with the infrastructure simulation', function () {
  this.timeout(240_000);
  let env: TestEnv;
  let kube: KubeClient;
  let capi: CapiApi;
  let sim: Sim;
  const namespaces: string[] = [];
  const ns = (suffix: string) => {
    const n = `stack-${suffix}-${process.pid}`;
    namespaces.push(n);
    return n;
  };

  before(async function () {
    this.timeout(300_000);
    env = await getTestEnv();
    kube = env.kube();
    capi = capiApi(env.capiApiVersion);
    sim = await getSim();
  });

  after(async function () {
    this.timeout(60_000);
    for (const n of namespaces) await deleteClusters(kube, capi, n).catch(() => undefined);
    kube?.close();
  });

  const seen = (namespace: string, cluster: string) => async () =>
    `Machines:\n${describeMachines(await listMachines(kube, capi, namespace, cluster))}\nsim errors: ${sim.errors.slice(-5).join(' | ') || 'none'}`;

  async function joinedCluster(namespace: string, cluster: string, workers: number): Promise<Json[]> {
    await createCluster(kube, {
      namespace,
      name: cluster,
      controlPlaneReplicas: 1,
      workers: [{ name: 'md', replicas: workers }],
      ca: { certPem: env.caCertPem, keyPem: env.caKeyPem },
      apiVersion: capi.version,
    });
    return waitFor(
      `${1 + workers} joined Machines in ${namespace}/${cluster}`,
      async () => {
        const ms = await listMachines(kube, capi, namespace, cluster);
        return ms.length === 1 + workers && ms.every(hasNode) && ms;
      },
      { timeoutMs: 150_000, describe: seen(namespace, cluster) },
    );
  }

  it('a MachineDeployment of 3 becomes 3 joined Machines (after a KCP of 1 initializes the cluster)', async () => {
    const namespace = ns('md3');
    const machines = await joinedCluster(namespace, 'c1', 3);
    expect(machines.filter(isControlPlane)).to.have.length(1);
    expect(machines.filter((m) => !isControlPlane(m))).to.have.length(3);
    for (const m of machines) expect(m.status.phase, m.metadata.name).to.equal('Running');
    expect(await controlPlaneInitialized(kube, capi, namespace, 'c1')).to.equal(true);
    // The init Machine ran `kubeadm init` in the sim; the workers joined.
    expect(
      sim
        .eventsOf(namespace, 'NodeJoined')
        .map((e) => e.message.match(/\((\w[\w-]*)\)$/)?.[1])
        .sort(),
    ).to.deep.equal(['init', 'join', 'join', 'join']);
  });

  it('deleting a worker Machine makes the real MachineSet create a replacement that joins', async () => {
    const namespace = namespaces[0]!;
    const before = await listMachines(kube, capi, namespace, 'c1');
    const victim = before.find((m) => !isControlPlane(m))!;
    await kube.delete(capi.path('Machine', namespace, victim.metadata.name));
    const after = await waitFor(
      'a replacement worker with a Node',
      async () => {
        const ms = await listMachines(kube, capi, namespace, 'c1');
        const workers = ms.filter((m) => !isControlPlane(m));
        return (
          !ms.some((m) => m.metadata.uid === victim.metadata.uid) &&
          workers.length === 3 &&
          workers.every(hasNode) &&
          ms
        );
      },
      { timeoutMs: 90_000, describe: seen(namespace, 'c1') },
    );
    const fresh = after.filter((m) => !before.some((b) => b.metadata.uid === m.metadata.uid));
    expect(fresh).to.have.length(1);
    expect(fresh[0]!.metadata.ownerReferences[0].kind).to.equal('MachineSet');
  });

  it("a worker marked with the remediation contract (the conditions its release's owners read) is deleted and replaced by the real MachineSet", async () => {
    const namespace = ns('mark');
    await createCluster(kube, {
      namespace,
      name: 'c2',
      controlPlaneReplicas: 1,
      workers: [{ name: 'md', replicas: 2 }],
      ca: { certPem: env.caCertPem, keyPem: env.caKeyPem },
      apiVersion: capi.version,
    });
    // One worker never joins: the mark is what a remediation controller would write about it.
    const stuckName = await waitFor(
      'a worker Machine',
      async () => {
        const w = (await listMachines(kube, capi, namespace, 'c2')).filter((m) => !isControlPlane(m));
        return w[0]?.metadata.name as string | undefined;
      },
      { timeoutMs: 120_000, describe: seen(namespace, 'c2') },
    );
    sim.policy.neverJoin({ namespace, name: stuckName });
    const stuck = await waitFor(
      `${stuckName} provisioned without a Node, the other worker joined`,
      async () => {
        const ms = await listMachines(kube, capi, namespace, 'c2');
        const m = ms.find((x) => x.metadata.name === stuckName);
        const failed = sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === stuckName);
        return failed && ms.filter(hasNode).length === 2 && m?.status?.phase === 'Provisioned' && !hasNode(m) && m;
      },
      { timeoutMs: 120_000, describe: seen(namespace, 'c2') },
    );

    await markForRemediation(kube, capi, namespace, stuckName);
    const after = await waitFor(
      'the marked Machine replaced by a joined one',
      async () => {
        const ms = await listMachines(kube, capi, namespace, 'c2');
        const workers = ms.filter((m) => !isControlPlane(m));
        return (
          !ms.some((m) => m.metadata.uid === stuck.metadata.uid) &&
          workers.length === 2 &&
          workers.every(hasNode) &&
          workers
        );
      },
      { timeoutMs: 90_000, describe: seen(namespace, 'c2') },
    );
    expect(after.map((m) => m.metadata.name)).to.not.include(stuckName);
  });

  it('a KCP of 1 whose only Machine is stuck before initialization, once marked, is replaced by the real KCP with an init Machine', async () => {
    const namespace = ns('kcp');
    sim.policy.neverJoinInitControlPlane({ namespace }, { limit: 1 });
    await createCluster(kube, {
      namespace,
      name: 'c3',
      controlPlaneReplicas: 1,
      workers: [{ name: 'md', replicas: 1 }],
      ca: { certPem: env.caCertPem, keyPem: env.caKeyPem },
      apiVersion: capi.version,
    });
    const first = await waitFor(
      'the first control-plane Machine provisioned, its kubeadm init failed',
      async () => {
        const cp = (await listMachines(kube, capi, namespace, 'c3')).filter(isControlPlane);
        const failed = sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === cp[0]?.metadata.name);
        return cp.length === 1 && cp[0]!.status?.phase === 'Provisioned' && failed && cp[0];
      },
      { timeoutMs: 120_000, describe: seen(namespace, 'c3') },
    );
    expect(await controlPlaneInitialized(kube, capi, namespace, 'c3')).to.equal(false);

    await markForRemediation(kube, capi, namespace, first.metadata.name);
    const replacement = await waitFor(
      'a new control-plane Machine',
      async () => {
        const cp = (await listMachines(kube, capi, namespace, 'c3')).filter((m) => isControlPlane(m) && !isDeleting(m));
        return cp.find((m) => m.metadata.uid !== first.metadata.uid);
      },
      { timeoutMs: 90_000, describe: seen(namespace, 'c3') },
    );
    // KCP made it an init Machine: its KubeadmConfig has no joinConfiguration.controlPlane.
    const config = await kube.get(capi.path('KubeadmConfig', namespace, replacement.spec.bootstrap.configRef.name));
    expect(config?.spec?.joinConfiguration?.controlPlane).to.equal(undefined);
    // The old one was gone before the new one was made (KCP counts deleting Machines).
    expect(await kube.get(capi.path('Machine', namespace, first.metadata.name))).to.equal(undefined);

    await waitFor(
      'the cluster initialized and every Machine joined',
      async () => {
        const ms = await listMachines(kube, capi, namespace, 'c3');
        return (await controlPlaneInitialized(kube, capi, namespace, 'c3')) && ms.length === 2 && ms.every(hasNode);
      },
      { timeoutMs: 120_000, describe: seen(namespace, 'c3') },
    );
    const inits = sim.eventsOf(namespace, 'NodeJoined').filter((e) => e.message.endsWith('(init)'));
    expect(inits.map((e) => e.name)).to.deep.equal([replacement.metadata.name]);
  });
});
