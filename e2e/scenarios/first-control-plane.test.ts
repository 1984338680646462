// Scenario (b): the first control-plane Machine never finishes `kubeadm init`. JoinGuard holds back every
// other Machine, probes the endpoint, then asks the real KubeadmControlPlane to remediate it; KCP deletes
// it and creates a new *init* Machine, which initializes the cluster, and then the workers join.
import { expect } from 'chai';
import type { MachineJoinCheck } from '../../api/v1alpha1/types.js';
import type { RunningController } from '../../controllers/manager.js';
import {
  conditionOf, controlPlaneInitialized, describeMachines, hasNode, isControlPlane, isDeleting, listMachines, waitFor,
} from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck, getCheck, installJoinGuardCrd, startJoinGuard, type CapturedLog } from '../support/joinguard.js';
import { getSim } from '../support/shared-sim.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { Kube } from '../sim/kube.js';
import type { Sim } from '../sim/sim.js';
import { createCluster } from '../sim/topology.js';

const JOIN_TIMEOUT_S = 8;

describe('scenario (b): the first control-plane Machine never initializes', function () {
  this.timeout(300_000);
  const namespace = `jg-b-${process.pid}`;
  const cluster = 'fcp';
  let env: TestEnv;
  let kube: Kube;
  let sim: Sim;
  let jg: { controller: RunningController; log: CapturedLog } | undefined;

  before(async function () {
    this.timeout(300_000);
    env = await getTestEnv();
    kube = await Kube.from(env.kubeConfig());
    sim = await getSim();
    await installJoinGuardCrd(kube);
    sim.policy.neverJoinInitControlPlane({ namespace }, { limit: 1 });
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    // One check over every Machine of the Cluster, as a user guarding a cluster's bring-up would write.
    await createCheck(kube, namespace, 'all', {
      clusterName: cluster, selector: { matchLabels: { 'cluster.x-k8s.io/cluster-name': cluster } }, joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });
    jg = await startJoinGuard(env.kubeConfig(), namespace);
    await createCluster(kube, { namespace, name: cluster, workers: [{ name: 'md', replicas: 2 }], ca: { certPem: env.caCertPem, keyPem: env.caKeyPem } });
  });

  after(async () => {
    await jg?.controller.stop();
    kube?.close();
  });

  const seen = async () => `${describeMachines(await listMachines(kube, namespace, cluster))}\n` +
    `${describeCheck(await getCheck(kube, namespace, 'all').catch(() => ({ metadata: { name: 'all' } }) as MachineJoinCheck))}\nJoinGuard log:\n${jg?.log.tail(15)}`;

  it('replaces it through KCP as an init Machine; workers wait, then join', async () => {
    const first = await waitFor('the first control-plane Machine, its kubeadm init failed', async () => {
      const cp = (await listMachines(kube, namespace, cluster)).filter(isControlPlane);
      return cp.length === 1 && sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === cp[0]!.metadata.name) && cp[0];
    }, { timeoutMs: 120_000, describe: seen });

    // Workers exist but cannot join before the control plane: their clocks do not run, nobody marks them.
    const marked = await waitFor('the first control-plane Machine marked for KCP', async () => {
      const ms = await listMachines(kube, namespace, cluster);
      const m = ms.find((x) => x.metadata.uid === first.metadata.uid);
      if (!m) return undefined;
      for (const w of ms.filter((x) => !isControlPlane(x))) {
        expect(conditionOf(w, 'HealthCheckSucceeded'), `worker ${w.metadata.name} marked while the first CP was stuck`).to.equal(undefined);
      }
      return conditionOf(m, 'HealthCheckSucceeded')?.status === 'False' && m;
    }, { timeoutMs: 120_000, describe: seen });
    expect(conditionOf(marked, 'HealthCheckSucceeded')?.reason).to.equal('JoinTimeout');
    const check = await getCheck(kube, namespace, 'all');
    const rec = check.status?.remediations?.find((r) => r.uid === first.metadata.uid);
    expect(rec, describeCheck(check)).to.include({ path: 'OwnerRemediated', firstControlPlane: true });
    expect(rec!.owner?.kind).to.equal('KubeadmControlPlane');
    // The endpoint answered (the test apiserver stands in for it), so the Machine got one more joinTimeout first.
    expect(check.status?.firstControlPlaneExtendedFor).to.equal(first.metadata.uid);
    const markedAt = Date.now();

    const replacement = await waitFor('a new control-plane Machine from KCP', async () => {
      const cp = (await listMachines(kube, namespace, cluster)).filter((m) => isControlPlane(m) && !isDeleting(m));
      return cp.find((m) => m.metadata.uid !== first.metadata.uid);
    }, { timeoutMs: 90_000, describe: seen });
    const config = await kube.get(`/apis/bootstrap.cluster.x-k8s.io/v1beta2/namespaces/${namespace}/kubeadmconfigs/${replacement.spec.bootstrap.configRef.name}`);
    expect(config?.spec?.joinConfiguration?.controlPlane, 'replacement must be an init Machine').to.equal(undefined);

    await waitFor('the cluster initialized and all 3 Machines joined', async () => {
      const ms = await listMachines(kube, namespace, cluster);
      return (await controlPlaneInitialized(kube, namespace, cluster)) && ms.length === 3 && ms.every(hasNode);
    }, { timeoutMs: 120_000, describe: seen });
    process.stderr.write(`[scenario b] mark -> cluster complete in ${((Date.now() - markedAt) / 1000).toFixed(1)}s\n`);
    expect(sim.eventsOf(namespace, 'NodeJoined').filter((e) => e.message.endsWith('(init)')).map((e) => e.name)).to.deep.equal([replacement.metadata.name]);

    const done = await waitFor('the check at AsExpected with one remediation, Replaced', async () => {
      const c = await getCheck(kube, namespace, 'all');
      const p = checkCondition(c, 'Progressing');
      return p?.reason === 'AsExpected' && c.status?.remediations?.[0]?.outcome === 'Replaced' && c;
    }, { timeoutMs: 60_000, describe: seen });
    expect(done.status?.remediations).to.have.length(1);
    expect(done.status).to.include({ expectedMachines: 3, joinedMachines: 3, everJoined: true });
  });
});
