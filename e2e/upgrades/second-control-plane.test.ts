// Three control-plane Machines (a): the second control-plane Machine of a new Cluster never joins, and neither does
// its first replacement. CAPI's real KubeadmControlPlane (3 replicas, remediation.maxRetry 1,
// retryPeriodSeconds 40) reads the etcd member list through the workload cluster (sim-kubelet) and remediates
// after initialization. JoinGuard asks once per Machine, waits out KCP's retry period for the replacement instead
// of asking what KCP would defer, never re-asserts a mark KCP answered, and does not ask for the third Machine,
// which KCP would refuse (maxRetry reached): Progressing=False/RemediationRefusedByOwner. Judged from every
// change of every Machine.
import { expect } from 'chai';
import { hasNode, isControlPlane, joinClockStart, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { MachineRecord } from '../support/machine-record.js';
import { useScenario } from '../support/scenario.js';

const JOIN_TIMEOUT_S = 10;
const RETRY_PERIOD_S = 40;
const REMEDIATION_FOR = 'controlplane.cluster.x-k8s.io/remediation-for';

describe('three control planes (a): the second control-plane Machine of a new Cluster never joins', function () {
  this.timeout(480_000);
  const s = useScenario({
    prefix: 'jg-cp2',
    cluster: 'cp2',
    checkName: 'control-plane',
    workers: [],
    createClusterFirst: false,
    shape: { controlPlaneReplicas: 3, kcpRemediation: { maxRetry: 1, retryPeriodSeconds: RETRY_PERIOD_S } },
  });
  const seen = s.seen();
  let record: MachineRecord | undefined;
  after(() => record?.stop());

  it('KCP remediates it and one retry; JoinGuard waits out retryPeriodSeconds, asks once each, leaves the one KCP would refuse', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    // kubeadm join fails on the second control-plane Machine, its replacement and the replacement's replacement.
    const failing = sim.policy.neverJoin((m) => m.namespace === namespace && m.role === 'join-control-plane', {
      limit: 3,
    });
    record = await MachineRecord.start(kube, capi, namespace);
    await s.startJoinGuard();
    await s.createCluster();
    const byName = async (name: string) => (await s.machines()).find((m) => m.metadata.name === name);
    const cp = async () => (await s.machines()).filter(isControlPlane);
    // The check comes once the first Machine has its nodeRef: in the simulation CAPI sets it some 20 s after the
    // init Node registers (the workload connection waits for KCP to see kubeadm-config), longer than this
    // spec's 10 s joinTimeout and its one extension; the second Machine is created only after that.
    await waitFor(
      'the first control-plane Machine initialized the cluster',
      async () => {
        const ms = await cp();
        return ms.length === 1 && hasNode(ms[0]!);
      },
      { timeoutMs: 150_000, describe: seen },
    );
    await createCheck(kube, namespace, 'control-plane', {
      clusterName: cluster,
      selector: { matchLabels: { 'cluster.x-k8s.io/control-plane': '' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      // Every failure is rebuilt as far as KCP allows: the suspicion (which would stall at the second) is off here.
      suspicion: { consecutiveJoinFailures: 0 },
    });

    const failed = async (n: number) =>
      waitFor(
        `failed control-plane join #${n}`,
        async () => {
          const name = failing.applied[n - 1];
          return (
            name !== undefined && sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === name) && byName(name)
          );
        },
        { timeoutMs: 180_000, describe: seen },
      );

    // 1. The second Machine: asked at its deadline; KCP deletes it (etcd members read, 1 member, none on it).
    const second = await failed(1);
    const deletedBy = (uid: string) =>
      waitFor(
        'KCP deleting it, OwnerRemediated=False/MachineDeleting',
        async () => record!.of(uid).find((c) => c.deleting && c.ownerRemediated === 'False/MachineDeleting'),
        { timeoutMs: 120_000, describe: seen },
      );
    const deleting = await deletedBy(second.metadata.uid);
    expect(deleting.ownerMessage).to.equal('Machine is deleting');
    expect(deleting.marked).to.equal(true);

    // 2. Its replacement carries KCP's remediation-for; when it fails, JoinGuard waits until retryPeriodSeconds passed.
    const retry = await failed(2);
    const rf = JSON.parse(retry.metadata.annotations?.[REMEDIATION_FOR] ?? '{}') as {
      machine?: string;
      timestamp?: string;
      retryCount?: number;
    };
    expect(rf, `${REMEDIATION_FOR} on ${retry.metadata.name}`).to.include({
      machine: second.metadata.name,
      retryCount: 0,
    });
    const retryMarked = await waitFor(
      `${retry.metadata.name} marked`,
      async () => record!.of(retry.metadata.uid).find((c) => c.marked),
      { timeoutMs: 150_000, describe: seen },
    );
    const cl = await kube.get(capi.path('Cluster', namespace, cluster));
    const retryDeadline = joinClockStart(capi, retry, cl) + JOIN_TIMEOUT_S * 1000;
    const retryAllowed = Date.parse(rf.timestamp!) + RETRY_PERIOD_S * 1000;
    expect(retryMarked.at, "not asked before KCP's retry period ended").to.be.at.least(retryAllowed - 1000);
    const waitedS = (retryMarked.at - retryDeadline) / 1000;
    await deletedBy(retry.metadata.uid);

    // 3. The third carries retryCount 1 = maxRetry: KCP would refuse it, so JoinGuard does not ask.
    const third = await failed(3);
    const rf3 = JSON.parse(third.metadata.annotations?.[REMEDIATION_FOR] ?? '{}') as { retryCount?: number };
    expect(rf3.retryCount).to.equal(1);
    const refused = await waitFor(
      'Progressing=False/RemediationRefusedByOwner naming the third Machine',
      async () => {
        const c = await s.check();
        const p = checkCondition(c, 'Progressing');
        return p?.reason === 'RemediationRefusedByOwner' && p.message.includes(third.metadata.name) && c;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    const p = checkCondition(refused, 'Progressing')!;
    expect(p.status).to.equal('False');
    expect(p.message).to.contain('maxRetry 1');
    // Held for a while past its deadline: never marked.
    await new Promise((r) => setTimeout(r, 15_000));
    expect(
      record.of(third.metadata.uid).some((c) => c.marked),
      `${third.metadata.name} marked`,
    ).to.equal(false);

    // Asked once per Machine, never for a joined one, and no mark re-asserted after KCP answered.
    const final = await s.check();
    const uids = (final.status?.remediations ?? []).map((r) => r.uid);
    expect(uids, describeCheck(final)).to.deep.equal([second.metadata.uid, retry.metadata.uid]);
    for (const r of final.status?.remediations ?? [])
      expect(r.owner).to.deep.equal({ kind: 'KubeadmControlPlane', name: `${cluster}-cp` });
    for (const uid of [second.metadata.uid, retry.metadata.uid]) {
      const answers = record.ownerAnswers(uid);
      const firstAnswer = answers.findIndex((a) => !a.startsWith('False/WaitingForRemediation'));
      expect(
        answers.slice(firstAnswer).some((a) => a.startsWith('False/WaitingForRemediation')),
        answers.join('\n'),
      ).to.equal(false);
    }
    for (const [uid] of record.marked()) {
      expect(
        record.of(uid).some((c) => c.marked && c.node !== undefined),
        `a joined Machine ${uid} carried a mark`,
      ).to.equal(false);
    }
    expect(record.restarts).to.deep.equal([]);
    // The cluster keeps its init Machine and the refused one: KCP's preflight checks hold every scale-up while a
    // control-plane Machine has no Node, and KCP leaves the refused Machine to the operator.
    const now = await cp();
    expect(now.map((m) => m.metadata.name).sort()).to.deep.equal(
      [now.find(hasNode)!.metadata.name, third.metadata.name].sort(),
    );
    process.stderr.write(
      `[second-control-plane] retry asked ${waitedS.toFixed(1)}s after its deadline (KCP's retry period ends ${((retryAllowed - retryDeadline) / 1000).toFixed(1)}s after it); ` +
        `KCP answers: ${record.ownerAnswers(second.metadata.uid).join(' | ')} ; then ${p.message.slice(0, 240)}\n`,
    );
  });
});
