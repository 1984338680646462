// Three control planes (b): a KubeadmControlPlane rollout (a version bump, 3 replicas, RollingUpdate maxSurge 1)
// whose first new Machine never joins. JoinGuard asks KCP for it; the real KCP, reading the etcd members through
// the workload cluster (sim-kubelet), deletes it, creates a replacement of the new version, and the rollout
// completes (KCP moves the etcd leader and removes each old member). No Machine of the old version carries a
// mark at any moment (judged from every change of every Machine).
import { expect } from 'chai';
import { hasNode, isControlPlane, isDeleting, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { MachineRecord } from '../support/machine-record.js';
import { useScenario } from '../support/scenario.js';
import { DEFAULT_K8S_VERSION } from '../sim/topology.js';

const JOIN_TIMEOUT_S = 10;
const NEW_VERSION = 'v1.36.4';
const REMEDIATION_FOR = 'controlplane.cluster.x-k8s.io/remediation-for';

describe('three control planes (b): a KubeadmControlPlane rollout whose new Machine never joins', function () {
  this.timeout(480_000);
  const s = useScenario({
    prefix: 'jg-kcproll',
    cluster: 'kcproll',
    checkName: 'control-plane',
    workers: [],
    waitJoined: true,
    shape: { controlPlaneReplicas: 3 },
  });
  const seen = s.seen();
  let record: MachineRecord | undefined;
  after(() => record?.stop());

  it('KCP replaces it with a Machine of the new version and completes the rollout; no old Machine is marked', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    record = await MachineRecord.start(kube, capi, namespace);
    await createCheck(kube, namespace, 'control-plane', {
      clusterName: cluster,
      selector: { matchLabels: { 'cluster.x-k8s.io/control-plane': '' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });
    await s.startJoinGuard();
    const old = (await s.machines()).filter(isControlPlane);
    expect(old.map((m) => m.spec.version)).to.deep.equal([
      DEFAULT_K8S_VERSION,
      DEFAULT_K8S_VERSION,
      DEFAULT_K8S_VERSION,
    ]);
    const oldUids = new Set(old.map((m) => m.metadata.uid as string));

    const broken = sim.policy.neverJoin({ namespace, role: 'control-plane', version: NEW_VERSION }, { limit: 1 });
    const bumpedAt = Date.now();
    await kube.mergePatch(capi.path('KubeadmControlPlane', namespace, `${cluster}-cp`), {
      spec: { version: NEW_VERSION },
    });

    const stuck = await waitFor(
      'the first control-plane Machine of the new version, its join failed',
      async () => {
        const name = broken.applied[0];
        return (
          name !== undefined &&
          sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === name) &&
          (await s.machines()).find((m) => m.metadata.name === name)
        );
      },
      { timeoutMs: 150_000, describe: seen },
    );
    const deleting = await waitFor(
      `${stuck.metadata.name} deleted by KCP (OwnerRemediated=False/MachineDeleting)`,
      async () =>
        record!.of(stuck.metadata.uid).find((c) => c.deleting && c.ownerRemediated === 'False/MachineDeleting'),
      { timeoutMs: 150_000, describe: seen },
    );
    expect(deleting.ownerMessage).to.equal('Machine is deleting');
    const check = await s.check();
    const rec = check.status?.remediations?.find((r) => r.uid === stuck.metadata.uid);
    expect(rec, describeCheck(check)).to.include({
      machine: stuck.metadata.name,
      path: 'OwnerRemediated',
      kind: 'JoinTimeout',
    });
    expect(rec!.owner).to.deep.equal({ kind: 'KubeadmControlPlane', name: `${cluster}-cp` });

    const done = await waitFor(
      `the rollout complete: 3 joined control-plane Machines of ${NEW_VERSION}`,
      async () => {
        const cp = (await s.machines()).filter(isControlPlane);
        return cp.length === 3 && cp.every((m) => m.spec.version === NEW_VERSION && hasNode(m) && !isDeleting(m)) && cp;
      },
      { timeoutMs: 300_000, describe: seen },
    );
    const rolloutS = (Date.now() - bumpedAt) / 1000;
    // KCP counted its remediation: the replacement of the stuck Machine carries remediation-for.
    const replacement = done.find((m) =>
      String(m.metadata.annotations?.[REMEDIATION_FOR] ?? '').includes(stuck.metadata.name),
    );
    expect(replacement, `a Machine with ${REMEDIATION_FOR} naming ${stuck.metadata.name}`).to.not.equal(undefined);
    // KCP removed the old etcd members as it deleted the old Machines (sim-kubelet's log says so).
    const removed = s.env
      .logTail('sim-kubelet', 400)
      .split('\n')
      .filter((l) => l.includes(`etcd ${namespace}/${cluster}: member`) && l.includes('removed'));
    expect(removed.length, removed.join('\n')).to.be.at.least(3);

    expect(record.restarts).to.deep.equal([]);
    expect([...record.marked().keys()], 'only the stuck Machine ever carried a mark').to.deep.equal([
      stuck.metadata.uid,
    ]);
    for (const uid of oldUids)
      expect(
        record.of(uid).some((c) => c.marked),
        `old Machine ${uid} marked`,
      ).to.equal(false);

    const final = await waitFor(
      'the check at AsExpected with the remediation Replaced',
      async () => {
        const c = await s.check();
        const r = c.status?.remediations?.find((x) => x.uid === stuck.metadata.uid);
        return (
          checkCondition(c, 'Progressing')?.reason === 'AsExpected' &&
          r?.outcome === 'Replaced' &&
          c.status?.joinedMachines === 3 &&
          c
        );
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect(final.status?.remediations, describeCheck(final)).to.have.length(1);
    process.stderr.write(
      `[kcp-rollout] version bump -> rollout complete ${rolloutS.toFixed(1)}s; KCP answers for ${stuck.metadata.name}: ` +
        `${record.ownerAnswers(stuck.metadata.uid).join(' | ')}; etcd members removed: ${removed.length}\n`,
    );
  });
});
