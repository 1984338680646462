// Rolling upgrade (1): a MachineDeployment rolls out a new template (RollingUpdate, maxSurge 1, maxUnavailable 0)
// and the first Machine of the new revision never joins. JoinGuard asks for it through the MachineSet of the new
// revision, CAPI's real MachineSet replaces it, the replacement joins and the rollout completes; no Machine of the
// old revision carries a mark at any moment (judged from every change of every Machine, not from samples).
import { expect } from 'chai';
import { conditionOf, hasNode, isDeleting, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { MachineRecord } from '../support/machine-record.js';
import { useScenario } from '../support/scenario.js';
import { rollWorkerPool } from '../sim/topology.js';
import type { Json } from '../../hack/testenv/kube-client.js';

const JOIN_TIMEOUT_S = 10;
const ownerOf = (m: Json) =>
  ((m.metadata.ownerReferences ?? []) as Json[]).find((r) => r.controller === true)?.name as string | undefined;

describe('rolling upgrade (1): a MachineDeployment rollout whose first new Machine never joins', function () {
  this.timeout(420_000);
  const s = useScenario({
    prefix: 'jg-mdroll',
    cluster: 'mdroll',
    checkName: 'workers',
    waitJoined: true,
    workers: [
      {
        name: 'md',
        replicas: 3,
        labels: { pool: 'workers' },
        image: 'sim-image-1.0',
        rollout: { maxSurge: 1, maxUnavailable: 0 },
      },
    ],
  });
  const seen = s.seen();
  let record: MachineRecord | undefined;
  after(() => record?.stop());

  it('asks the new MachineSet, the rollout completes once a replacement joins, no old Machine is ever marked', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    record = await MachineRecord.start(kube, capi, namespace);
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });
    await s.startJoinGuard();
    const before = await s.workers();
    const oldMs = new Set(before.map(ownerOf));
    expect(oldMs.size, 'one MachineSet before the rollout').to.equal(1);
    const oldUids = new Set(before.map((m) => m.metadata.uid as string));

    // The new image boots, but the first VM made from it fails its kubeadm join.
    const broken = sim.policy.neverJoin({ namespace, image: 'sim-image-1.1' }, { limit: 1 });
    const rolledAt = Date.now();
    await rollWorkerPool(kube, {
      namespace,
      cluster,
      pool: 'md',
      revision: 'r2',
      image: 'sim-image-1.1',
      apiVersion: capi.version,
    });

    const stuck = await waitFor(
      'the first Machine of the new revision, its join failed',
      async () => {
        const name = broken.applied[0];
        return name !== undefined && (await s.workers()).find((m) => m.metadata.name === name);
      },
      { timeoutMs: 120_000, describe: seen },
    );
    const newMs = ownerOf(stuck)!;
    expect(oldMs.has(newMs), 'the stuck Machine belongs to the new MachineSet').to.equal(false);

    // maxUnavailable 0: while the new Machine is stuck, every old Machine stays.
    const marked = await waitFor(
      `${stuck.metadata.name} marked by JoinGuard`,
      async () => {
        const w = await s.workers();
        const m = w.find((x) => x.metadata.uid === stuck.metadata.uid);
        const old = w.filter((x) => oldUids.has(x.metadata.uid));
        return (
          conditionOf(m, 'HealthCheckSucceeded')?.status === 'False' &&
          old.length === 3 &&
          old.every((x) => !isDeleting(x)) &&
          m
        );
      },
      { timeoutMs: 120_000, describe: seen },
    );
    expect(conditionOf(marked, 'HealthCheckSucceeded')?.reason).to.equal('JoinTimeout');
    const check = await s.check();
    const rec = check.status?.remediations?.find((r) => r.uid === stuck.metadata.uid);
    expect(rec, describeCheck(check)).to.include({
      machine: stuck.metadata.name,
      path: 'OwnerRemediated',
      kind: 'JoinTimeout',
    });
    expect(rec!.owner, 'asked through the MachineSet of the new revision').to.deep.equal({
      kind: 'MachineSet',
      name: newMs,
    });
    const markedAt = Date.now();

    const done = await waitFor(
      'the rollout complete: 3 joined workers of the new MachineSet, the old ones gone',
      async () => {
        const w = await s.workers();
        return w.length === 3 && w.every((m) => hasNode(m) && !isDeleting(m) && ownerOf(m) === newMs) && w;
      },
      { timeoutMs: 240_000, describe: seen },
    );
    const rolloutS = (Date.now() - rolledAt) / 1000;
    expect(done.map((m: Json) => m.metadata.uid)).to.not.include(stuck.metadata.uid);
    const md = await kube.get(capi.path('MachineDeployment', namespace, `${cluster}-md`));
    const upToDate = capi.version === 'v1beta2' ? md?.status?.upToDateReplicas : md?.status?.v1beta2?.upToDateReplicas;
    expect(upToDate, JSON.stringify(md?.status)).to.equal(3);

    // From every change of every Machine: only the stuck one ever carried a mark; no old Machine did.
    expect(record.restarts, 'the Machine watch never had to list again').to.deep.equal([]);
    const everMarked = record.marked();
    expect([...everMarked.keys()]).to.deep.equal([stuck.metadata.uid]);
    for (const uid of oldUids)
      expect(
        record.of(uid).some((c) => c.marked),
        `old Machine ${uid} marked`,
      ).to.equal(false);
    expect(record.of(stuck.metadata.uid).find((c) => c.marked)?.owner).to.equal(`MachineSet/${newMs}`);

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
    expect(final.status?.consecutiveJoinFailures).to.equal(0);
    process.stderr.write(
      `[md-rollout] template changed -> rollout complete ${rolloutS.toFixed(1)}s; mark -> complete ${((Date.now() - markedAt) / 1000).toFixed(1)}s; ` +
        `Machines seen ${new Set(record.changes.map((c) => c.uid)).size}, changes ${record.changes.length}\n`,
    );
  });
});
