// Scenario (b): the first control-plane Machine never finishes `kubeadm init`. JoinGuard holds back every
// other Machine, probes the endpoint, then asks the real KubeadmControlPlane to remediate it; KCP deletes
// it and creates a new *init* Machine, which initializes the cluster, and then the workers join.
import { expect } from 'chai';
import {
  conditionOf,
  controlPlaneInitialized,
  hasNode,
  isControlPlane,
  isDeleting,
  waitFor,
} from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';

const JOIN_TIMEOUT_S = 8;

describe('scenario (b): the first control-plane Machine never initializes', function () {
  this.timeout(300_000);
  const s = useScenario({
    prefix: 'jg-b',
    cluster: 'fcp',
    checkName: 'all',
    workers: [{ name: 'md', replicas: 2 }],
    createClusterFirst: false,
  });
  const seen = s.seen();

  it('replaces it through KCP as an init Machine; workers wait, then join', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    sim.policy.neverJoinInitControlPlane({ namespace }, { limit: 1 });
    // One check over every Machine of the Cluster, as a user guarding a cluster's bring-up would write.
    await createCheck(kube, namespace, 'all', {
      clusterName: cluster,
      selector: { matchLabels: { 'cluster.x-k8s.io/cluster-name': cluster } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });
    await s.startJoinGuard();
    await s.createCluster();

    const first = await waitFor(
      'the first control-plane Machine, its kubeadm init failed',
      async () => {
        const cp = (await s.machines()).filter(isControlPlane);
        return (
          cp.length === 1 && sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === cp[0]!.metadata.name) && cp[0]
        );
      },
      { timeoutMs: 120_000, describe: seen },
    );

    // Workers exist but cannot join before the control plane: their clocks do not run, nobody marks them.
    const marked = await waitFor(
      'the first control-plane Machine marked for KCP',
      async () => {
        const ms = await s.machines();
        const m = ms.find((x) => x.metadata.uid === first.metadata.uid);
        if (!m) return undefined;
        for (const w of ms.filter((x) => !isControlPlane(x))) {
          expect(
            conditionOf(w, 'HealthCheckSucceeded'),
            `worker ${w.metadata.name} marked while the first CP was stuck`,
          ).to.equal(undefined);
        }
        return conditionOf(m, 'HealthCheckSucceeded')?.status === 'False' && m;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    expect(conditionOf(marked, 'HealthCheckSucceeded')?.reason).to.equal('JoinTimeout');
    const check = await s.check();
    const rec = check.status?.remediations?.find((r) => r.uid === first.metadata.uid);
    expect(rec, describeCheck(check)).to.include({ path: 'OwnerRemediated', firstControlPlane: true });
    expect(rec!.owner?.kind).to.equal('KubeadmControlPlane');
    // The endpoint answered (the test apiserver stands in for it), so the Machine got one more joinTimeout first.
    expect(check.status?.firstControlPlane?.extendedFor).to.equal(first.metadata.uid);
    const markedAt = Date.now();

    const replacement = await waitFor(
      'a new control-plane Machine from KCP',
      async () => {
        const cp = (await s.machines()).filter((m) => isControlPlane(m) && !isDeleting(m));
        return cp.find((m) => m.metadata.uid !== first.metadata.uid);
      },
      { timeoutMs: 90_000, describe: seen },
    );
    const config = await kube.get(capi.path('KubeadmConfig', namespace, replacement.spec.bootstrap.configRef.name));
    expect(config?.spec?.joinConfiguration?.controlPlane, 'replacement must be an init Machine').to.equal(undefined);

    await waitFor(
      'the cluster initialized and all 3 Machines joined',
      async () => {
        const ms = await s.machines();
        return (await controlPlaneInitialized(kube, capi, namespace, cluster)) && ms.length === 3 && ms.every(hasNode);
      },
      { timeoutMs: 120_000, describe: seen },
    );
    process.stderr.write(`[scenario b] mark -> cluster complete in ${((Date.now() - markedAt) / 1000).toFixed(1)}s\n`);
    expect(
      sim
        .eventsOf(namespace, 'NodeJoined')
        .filter((e) => e.message.endsWith('(init)'))
        .map((e) => e.name),
    ).to.deep.equal([replacement.metadata.name]);

    // Counts are written at most every 30 s (decisions at once): wait for them too.
    const done = await waitFor(
      'the check at AsExpected with one remediation, Replaced, 3 joined',
      async () => {
        const c = await s.check();
        const p = checkCondition(c, 'Progressing');
        return (
          p?.reason === 'AsExpected' &&
          c.status?.remediations?.[0]?.outcome === 'Replaced' &&
          c.status?.joinedMachines === 3 &&
          c
        );
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect(done.status?.remediations).to.have.length(1);
    expect(done.status).to.include({ expectedMachines: 3, joinedMachines: 3, everJoined: true });
  });
});
