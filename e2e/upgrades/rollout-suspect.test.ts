// Rolling upgrade (4): a MachineDeployment rolls out a template whose Machines all fail to join (a broken image).
// JoinGuard rebuilds the first failure through the new MachineSet, and the second failure in a row — of the same
// revision, of which no Machine joined, while the previous revision's did — stalls the check with
// Progressing=False/RolloutSuspect naming the revision, the Machines and the template references. No more Machine of
// the new revision is asked for, no old Machine is ever marked (every change of every Machine recorded); then the
// MachineDeployment is rolled back to its old template and the stall clears by itself. On CAPI's real managers.
import { expect } from 'chai';
import { conditionOf, hasNode, isDeleting, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { MachineRecord } from '../support/machine-record.js';
import { useScenario } from '../support/scenario.js';
import { pointWorkerPool, rollWorkerPool } from '../sim/topology.js';
import type { Json } from '../../hack/testenv/kube-client.js';

const JOIN_TIMEOUT_S = 10;
// No canary within the test: what is asked after the stall must be nothing.
const PROBE_INTERVAL_S = 900;
const REVISION = 'machinedeployment.clusters.x-k8s.io/revision';
const ownerOf = (m: Json) =>
  ((m.metadata.ownerReferences ?? []) as Json[]).find((r) => r.controller === true)?.name as string | undefined;

describe('rolling upgrade (4): a rollout that cannot join stalls with RolloutSuspect, a rollback clears it', function () {
  this.timeout(480_000);
  const s = useScenario({
    prefix: 'jg-rollsus',
    cluster: 'rollsus',
    checkName: 'workers',
    waitJoined: true,
    workers: [
      {
        name: 'md',
        replicas: 2,
        labels: { pool: 'workers' },
        image: 'sim-image-1.0',
        rollout: { maxSurge: 1, maxUnavailable: 0 },
      },
    ],
  });
  const seen = s.seen();
  let record: MachineRecord | undefined;
  after(() => record?.stop());

  it('rebuilds the first failure, stalls on the second naming the revision, asks nothing more, clears on rollback', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    const md = `${cluster}-md`;
    record = await MachineRecord.start(kube, capi, namespace);
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      suspicion: { probeInterval: `${PROBE_INTERVAL_S}s`, maxProbeInterval: `${PROBE_INTERVAL_S}s` },
    });
    await s.startJoinGuard();
    const before = await s.workers();
    const oldMs = ownerOf(before[0]!)!;
    const oldUids = new Set(before.map((m) => m.metadata.uid as string));

    // Every VM made from the new image fails its kubeadm join.
    const broken = sim.policy.neverJoin({ namespace, image: 'sim-image-1.1' });
    const rolledAt = Date.now();
    await rollWorkerPool(kube, {
      namespace,
      cluster,
      pool: 'md',
      revision: 'r2',
      image: 'sim-image-1.1',
      apiVersion: capi.version,
    });

    const stalled = await waitFor(
      'Progressing=False/RolloutSuspect',
      async () => {
        const c = await s.check();
        return checkCondition(c, 'Progressing')?.reason === 'RolloutSuspect' && c;
      },
      { timeoutMs: 180_000, describe: seen },
    );
    const stalledAt = Date.now();
    const progressing = checkCondition(stalled, 'Progressing')!;
    const suspicion = stalled.status!.suspicion!;
    expect(suspicion.reason).to.equal('RolloutSuspect');
    expect(stalled.status?.consecutiveJoinFailures).to.equal(2);
    const newMs = suspicion.rollout!.machineSet!;
    expect(newMs).to.not.equal(oldMs);
    const msObj = await kube.get(capi.path('MachineSet', namespace, newMs));
    const oldMsObj = await kube.get(capi.path('MachineSet', namespace, oldMs));
    expect(suspicion.rollout, describeCheck(stalled)).to.deep.include({
      owner: { kind: 'MachineDeployment', name: md },
      revision: msObj!.metadata.annotations[REVISION],
      previousRevision: oldMsObj!.metadata.annotations[REVISION],
      previousMachineSet: oldMs,
    });
    expect(suspicion.rollout!.changes).to.deep.equal([
      `spec.template.spec.infrastructureRef: SimMachineTemplate/${md} -> SimMachineTemplate/${md}-r2`,
    ]);
    // The message: the revision, the failing Machines (both of the new MachineSet), the templates, what to do.
    const failures = (stalled.status?.recentFailures ?? []).slice(-2);
    expect(failures.map((f) => f.owner?.name)).to.deep.equal([newMs, newMs]);
    expect(broken.applied.slice(0, 2)).to.deep.equal(failures.map((f) => f.machine));
    for (const piece of [
      `revision ${suspicion.rollout!.revision} of MachineDeployment ${md} (MachineSet ${newMs})`,
      ...failures.map((f) => f.machine),
      `SimMachineTemplate/${md} -> SimMachineTemplate/${md}-r2`,
      'roll back',
      'docs/runbook.md#rolloutsuspect',
    ]) {
      expect(progressing.message).to.contain(piece);
    }
    // Events go out after the status write, off the worker: wait for them rather than read once.
    const checkEvents = (reason: string) =>
      waitFor(
        `an Event ${reason} on the check`,
        async () => {
          const es = (await kube.list(`/api/v1/namespaces/${namespace}/events`)).items.filter(
            (e: Json) => e.reason === reason && e.involvedObject?.name === 'workers',
          );
          return es.length > 0 && es;
        },
        { timeoutMs: 30_000 },
      );
    const events = await checkEvents('RolloutSuspect');
    expect(events, 'an Event RolloutSuspect on the check').to.have.length(1);
    expect(events[0]?.type).to.equal('Warning');
    // How long after the second failure's deadline (its Machine's creation + joinTimeout, an upper bound) the stall came.
    const second = (await s.workers()).find((m) => m.metadata.uid === failures[1]!.uid);
    const secondDeadline = second ? Date.parse(second.metadata.creationTimestamp) + JOIN_TIMEOUT_S * 1000 : undefined;
    const rebuilt = (stalled.status?.remediations ?? []).filter((r) => r.path === 'OwnerRemediated');
    expect(
      rebuilt.map((r) => r.machine),
      'one rebuild, the first failure',
    ).to.deep.equal([failures[0]!.machine]);

    // Stalled: for three joinTimeouts nothing more is asked, the stuck Machine of the new revision carries no mark,
    // no old Machine is touched.
    await new Promise((r) => setTimeout(r, 3 * JOIN_TIMEOUT_S * 1000));
    const quiet = await s.check();
    expect(checkCondition(quiet, 'Progressing')?.reason).to.equal('RolloutSuspect');
    expect(
      (quiet.status?.remediations ?? []).filter((r) => r.path === 'OwnerRemediated'),
      describeCheck(quiet),
    ).to.have.length(1);
    const w = await s.workers();
    const stuck = w.find((m) => m.metadata.uid === failures[1]!.uid);
    expect(stuck, 'the second failure is not rebuilt').to.exist;
    expect(conditionOf(stuck, 'HealthCheckSucceeded')?.status).to.not.equal('False');
    expect(w.filter((m) => oldUids.has(m.metadata.uid) && !isDeleting(m))).to.have.length(2);

    // The rollback: the MachineDeployment points at its old template again; the old MachineSet becomes the newest revision.
    const rollbackAt = Date.now();
    await pointWorkerPool(kube, { namespace, cluster, pool: 'md', template: md, apiVersion: capi.version });
    const cleared = await waitFor(
      'the RolloutSuspect cleared by the rollback',
      async () => {
        const c = await s.check();
        return c.status?.suspicion === undefined && checkCondition(c, 'Progressing')?.reason !== 'RolloutSuspect' && c;
      },
      { timeoutMs: 90_000, describe: seen },
    );
    const clearedS = (Date.now() - rollbackAt) / 1000;
    expect(cleared.status?.consecutiveJoinFailures).to.equal(0);
    const clearedEvents = await checkEvents('SuspicionCleared');
    expect(clearedEvents.map((e: Json) => e.message).join('\n')).to.contain(
      `MachineDeployment ${md} now rolls out revision`,
    );
    const back = await waitFor(
      'back on the old MachineSet: 2 joined workers, the broken Machine gone',
      async () => {
        const ws = await s.workers();
        return ws.length === 2 && ws.every((m) => hasNode(m) && !isDeleting(m) && ownerOf(m) === oldMs) && ws;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    expect(back.map((m: Json) => m.metadata.uid).sort()).to.deep.equal([...oldUids].sort());
    const done = await waitFor(
      'the check at AsExpected',
      async () => {
        const c = await s.check();
        return checkCondition(c, 'Progressing')?.reason === 'AsExpected' && c.status?.joinedMachines === 2 && c;
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect((done.status?.remediations ?? []).map((r) => r.machine)).to.deep.equal([failures[0]!.machine]);

    // From every change of every Machine: only the first failure ever carried a mark; no old Machine did.
    expect(record.restarts, 'the Machine watch never had to list again').to.deep.equal([]);
    expect([...record.marked().keys()]).to.deep.equal([failures[0]!.uid]);
    for (const uid of oldUids)
      expect(
        record.of(uid).some((c) => c.marked),
        `old Machine ${uid} marked`,
      ).to.equal(false);
    process.stderr.write(
      `[rollout-suspect] template changed -> RolloutSuspect ${((stalledAt - rolledAt) / 1000).toFixed(1)}s; ` +
        `second failure's creation+joinTimeout -> stall ${secondDeadline !== undefined ? ((stalledAt - secondDeadline) / 1000).toFixed(1) : 'n/a'}s; ` +
        `rollback -> cleared ${clearedS.toFixed(1)}s; Machines seen ${new Set(record.changes.map((c) => c.uid)).size}\n`,
    );
  });
});
