// Scenario (a): a worker never joins. JoinGuard marks it through CAPI's remediation contract, CAPI's real
// MachineSet deletes and replaces it, the replacement joins and the cluster completes.
import { expect } from 'chai';
import { conditionOf, hasNode, isDeleting, joinClockStart, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';
import type { Json } from '../../hack/testenv/kube-client.js';

const JOIN_TIMEOUT_S = 10;

describe('scenario (a): a worker that never joins is replaced through its MachineSet', function () {
  this.timeout(240_000);
  const s = useScenario({
    prefix: 'jg-a',
    cluster: 'wa',
    checkName: 'workers',
    workers: [{ name: 'md', replicas: 3, labels: { pool: 'workers' } }],
  });
  const seen = s.seen();

  it('marks the stuck worker after joinTimeout, the real MachineSet replaces it, the replacement joins', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    await s.startJoinGuard();
    const stuckName = await waitFor(
      'the first worker Machine',
      async () => (await s.workers())[0]?.metadata.name as string | undefined,
      { timeoutMs: 60_000, describe: seen },
    );
    sim.policy.neverJoin({ namespace, name: stuckName });
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });

    // The stuck Machine is Provisioned with no Node; its deadline is joinTimeout after its join clock started.
    const marked = await waitFor(
      `${stuckName} marked with HealthCheckSucceeded=False`,
      async () => {
        const m = (await s.workers()).find((x) => x.metadata.name === stuckName);
        return conditionOf(m, 'HealthCheckSucceeded')?.status === 'False' && m;
      },
      { timeoutMs: 150_000, describe: seen },
    );
    const hc = conditionOf(marked, 'HealthCheckSucceeded')!;
    expect(hc.reason).to.equal('JoinTimeout');
    // v1.11+ owners keep OwnerRemediated False (reason MachineDeleting) while they delete; v1.10's MachineSet
    // patches its v1beta1 OwnerRemediated to True (and the v1beta2 one to MachineDeleting) just before it
    // deletes (machineset_controller.go: "we intentionally patch the Machines before we delete them").
    const owner = conditionOf(marked, 'OwnerRemediated');
    const v1beta2Owner = ((marked.status?.v1beta2?.conditions ?? []) as Json[]).find(
      (c) => c.type === 'OwnerRemediated',
    );
    const v110Deleting =
      capi.version === 'v1beta1' &&
      owner?.status === 'True' &&
      (isDeleting(marked) || v1beta2Owner?.reason === 'MachineDeleting');
    expect(owner?.status === 'False' || v110Deleting, JSON.stringify([owner, v1beta2Owner])).to.equal(true);
    const markedAt = Date.now();
    const cl = await kube.get(capi.path('Cluster', namespace, cluster));
    const deadline = joinClockStart(capi, marked, cl) + JOIN_TIMEOUT_S * 1000;
    const markLatencyS = (Date.parse(hc.lastTransitionTime) - deadline) / 1000;
    // Not before the deadline (1 s of slack: condition times are whole seconds), and soon after it.
    expect(markLatencyS).to.be.within(-1, 5);

    const check = await s.check();
    const rec = check.status?.remediations?.find((r) => r.uid === marked.metadata.uid);
    expect(rec, describeCheck(check)).to.include({ machine: stuckName, path: 'OwnerRemediated', kind: 'JoinTimeout' });
    expect(rec!.owner?.kind).to.equal('MachineSet');
    // Recorded before the write (write-ahead), never after it.
    expect(Date.parse(rec!.time)).to.be.at.most(Date.parse(hc.lastTransitionTime) + 1000);
    // The failure is on record (the evidence a later suspicion would name).
    const failure = check.status?.recentFailures?.find((f) => f.uid === marked.metadata.uid);
    expect(failure, describeCheck(check)).to.not.equal(undefined);

    const workers = await waitFor(
      'the marked Machine gone and 3 joined workers',
      async () => {
        const w = await s.workers();
        return !w.some((m) => m.metadata.uid === marked.metadata.uid) && w.length === 3 && w.every(hasNode) && w;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    const replacedAfterS = (Date.now() - markedAt) / 1000;
    process.stderr.write(
      `[scenario a] deadline -> mark ${markLatencyS.toFixed(0)}s (whole-second condition times); mark -> replacement joined in ${replacedAfterS.toFixed(1)}s\n`,
    );
    expect(workers.map((m: Json) => m.metadata.name)).to.not.include(stuckName);

    // Counts are written at most every 30 s (decisions at once): wait for them too.
    const done = await waitFor(
      'the check back to Progressing=True/AsExpected with the remediation Replaced, 3 joined',
      async () => {
        const c = await s.check();
        const p = checkCondition(c, 'Progressing');
        const r = c.status?.remediations?.find((x) => x.uid === marked.metadata.uid);
        return (
          p?.status === 'True' &&
          p.reason === 'AsExpected' &&
          r?.outcome === 'Replaced' &&
          c.status?.joinedMachines === 3 &&
          c
        );
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect(done.status).to.include({ expectedMachines: 3, joinedMachines: 3, stuckMachines: 0, everJoined: true });
    expect(done.status?.consecutiveJoinFailures).to.equal(0); // the replacement's join reset the count
    expect(checkCondition(done, 'Ready')?.status).to.equal('True');
    expect(done.status?.remediations).to.have.length(1);
  });
});
