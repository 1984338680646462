// ClusterClass (a): a Cluster made from a ClusterClass (a KubeadmControlPlane and a MachineDeployment, with the
// MachineHealthChecks the class defines) is upgraded by changing `spec.topology.version`; the first new
// control-plane Machine and the first new worker never join. JoinGuard (`Auto`) sees the class's
// MachineHealthChecks and asks through them (cluster.x-k8s.io/remediate-machine); the MHC marks the Machine, the
// real KCP and MachineSet replace it, and the topology upgrade completes: control plane first, then the workers.
import { expect } from 'chai';
import { hasNode, isControlPlane, isDeleting, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { MachineRecord, REMEDIATE_ANNOTATION } from '../support/machine-record.js';
import { useScenario } from '../support/scenario.js';
import { changeTopology } from '../sim/cluster-class.js';
import { DEFAULT_K8S_VERSION } from '../sim/topology.js';

const JOIN_TIMEOUT_S = 10;
const NEW_VERSION = 'v1.36.4';

describe('ClusterClass (a): a topology upgrade whose new control-plane and worker Machines never join', function () {
  this.timeout(480_000);
  const s = useScenario({
    prefix: 'jg-ccup',
    cluster: 'ccup',
    checkName: 'all',
    workers: [],
    waitJoined: true,
    topology: { controlPlaneReplicas: 1, workers: [{ name: 'md', replicas: 2 }] },
  });
  const seen = s.seen();
  let record: MachineRecord | undefined;
  after(() => record?.stop());

  it("asks through the class's MachineHealthChecks; KCP and the MachineSet replace them; the upgrade completes", async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    const mhcs = (await kube.list(`/apis/cluster.x-k8s.io/${capi.version}/namespaces/${namespace}/machinehealthchecks`))
      .items;
    expect(
      mhcs,
      'the class defines one MachineHealthCheck for the control plane and one for the workers',
    ).to.have.length(2);
    record = await MachineRecord.start(kube, capi, namespace);
    await createCheck(kube, namespace, 'all', {
      clusterName: cluster,
      selector: { matchLabels: { 'cluster.x-k8s.io/cluster-name': cluster } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });
    await s.startJoinGuard();
    const old = await s.machines();
    expect(old.map((m) => m.spec.version)).to.deep.equal([
      DEFAULT_K8S_VERSION,
      DEFAULT_K8S_VERSION,
      DEFAULT_K8S_VERSION,
    ]);
    const oldUids = new Set(old.map((m) => m.metadata.uid as string));

    const cpFails = sim.policy.neverJoin({ namespace, role: 'control-plane', version: NEW_VERSION }, { limit: 1 });
    const workerFails = sim.policy.neverJoin({ namespace, role: 'worker', version: NEW_VERSION }, { limit: 1 });
    const upgradedAt = Date.now();
    await changeTopology(kube, { namespace, name: cluster, apiVersion: capi.version, version: NEW_VERSION });

    const stuck = async (rule: typeof cpFails, what: string) =>
      waitFor(
        `the first new ${what} Machine, its join failed`,
        async () => {
          const name = rule.applied[0];
          return (
            name !== undefined &&
            sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === name) &&
            (await s.machines()).find((m) => m.metadata.name === name)
          );
        },
        { timeoutMs: 240_000, describe: seen },
      );
    const deleted = (uid: string) =>
      waitFor('its owner deleting it', async () => record!.of(uid).find((c) => c.deleting), {
        timeoutMs: 150_000,
        describe: seen,
      });

    const cp = await stuck(cpFails, 'control-plane');
    const cpDeleting = await deleted(cp.metadata.uid);
    const worker = await stuck(workerFails, 'worker');
    const workerDeleting = await deleted(worker.metadata.uid);

    const done = await waitFor(
      `every Machine of ${NEW_VERSION}, joined`,
      async () => {
        const ms = await s.machines();
        return ms.length === 3 && ms.every((m) => m.spec.version === NEW_VERSION && hasNode(m) && !isDeleting(m)) && ms;
      },
      { timeoutMs: 300_000, describe: seen },
    );
    const upgradeS = (Date.now() - upgradedAt) / 1000;
    expect(done.filter(isControlPlane)).to.have.length(1);

    // The class's MachineHealthChecks did the marking, asked by JoinGuard's annotation.
    const check = await waitFor(
      'the check at AsExpected with both remediations Replaced',
      async () => {
        const c = await s.check();
        const rs = c.status?.remediations ?? [];
        return (
          checkCondition(c, 'Progressing')?.reason === 'AsExpected' &&
          rs.length === 2 &&
          rs.every((r) => r.outcome === 'Replaced') &&
          c.status?.joinedMachines === 3 &&
          c
        );
      },
      { timeoutMs: 60_000, describe: seen },
    );
    for (const [m, ownerKind] of [
      [cp, 'KubeadmControlPlane'],
      [worker, 'MachineSet'],
    ] as const) {
      const r = check.status!.remediations!.find((x) => x.uid === m.metadata.uid);
      expect(r, describeCheck(check)).to.include({
        machine: m.metadata.name,
        path: 'RemediateAnnotation',
        kind: 'JoinTimeout',
      });
      expect(r!.owner?.kind).to.equal(ownerKind);
      const marked = record.of(m.metadata.uid).find((c) => c.marked)!;
      expect(marked.annotations[REMEDIATE_ANNOTATION], "JoinGuard's annotation").to.not.equal(undefined);
    }
    for (const d of [cpDeleting, workerDeleting])
      expect(d.healthCheck, 'marked by the MachineHealthCheck').to.match(/^False\//);

    expect(record.restarts).to.deep.equal([]);
    // JoinGuard marked the two stuck Machines and nothing else, no Machine of the old version.
    expect(new Set(record.marked('joinguard').keys())).to.deep.equal(new Set([cp.metadata.uid, worker.metadata.uid]));
    for (const uid of oldUids)
      expect(
        record.of(uid).some((c) => c.joinGuardMark),
        `old Machine ${uid} marked by JoinGuard`,
      ).to.equal(false);
    // Marks the MachineHealthChecks made on their own (their unhealthyNodeConditions), reported, not JoinGuard's.
    const mhcOwn = [...record.marked('any').values()]
      .filter((c) => !record!.marked('joinguard').has(c.uid))
      .map(
        (c) =>
          `${c.name}${oldUids.has(c.uid) ? ' (old)' : ''}: ${c.healthCheck ?? '-'}${c.deleting ? ', deleting' : ''}${c.node ? `, node ${c.node}` : ''}`,
      );
    process.stderr.write(
      `[clusterclass-upgrade] topology.version changed -> every Machine ${NEW_VERSION} and joined ${upgradeS.toFixed(1)}s; ` +
        `control plane: MHC ${cpDeleting.healthCheck}, owner ${record.ownerAnswers(cp.metadata.uid).join(' | ')}; ` +
        `worker: MHC ${workerDeleting.healthCheck}, owner ${record.ownerAnswers(worker.metadata.uid).join(' | ') || '-'}; ` +
        `marks by the MHCs alone: ${mhcOwn.join('; ') || 'none'}\n`,
    );
  });
});
