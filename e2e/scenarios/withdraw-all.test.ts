// Uninstall without leaving a mark behind (docs/install.md): `joinguard.io/withdraw-all` on a check. A
// MachineDeployment allows one remediation at a time; two workers never join; JoinGuard marks both; the real
// MachineSet deletes one (its VM teardown held) and defers the other (OwnerRemediated=False/RemediationDeferred).
// With the annotation, JoinGuard withdraws the deferred Machine's mark though it never joined, says
// MarksWithdrawn, and asks nothing more: once the deferral lifts, the MachineSet leaves that Machine alone —
// as it would with JoinGuard uninstalled.
import { expect } from 'chai';
import type { Json } from '../../hack/testenv/kube-client.js';
import { conditionOf, hasNode, isDeleting, waitFor } from '../support/cluster-view.js';
import { checksPath, createCheck, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';

const JOIN_TIMEOUT_S = 8;

describe('uninstall: joinguard.io/withdraw-all withdraws every mark, also from a Machine that never joined', function () {
  this.timeout(400_000);
  const s = useScenario({
    prefix: 'jg-wa', cluster: 'wa', checkName: 'workers', createClusterFirst: false,
    workers: [{ name: 'md', replicas: 3, labels: { pool: 'workers' }, remediationMaxInFlight: 1 }],
  });

  it('the deferred Machine ends unmarked and is not deleted when the deferral lifts; the check says MarksWithdrawn', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    const seen = s.seen();
    const stuck = sim.policy.holdJoin({ namespace, role: 'worker' }, { limit: 2 });
    const teardown = sim.policy.holdDeletion({ namespace });
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster, selector: { matchLabels: { pool: 'workers' } }, joinTimeout: `${JOIN_TIMEOUT_S}s`,
      maxInFlight: 3, remediation: { maxPerOwner: 5 }, suspicion: { consecutiveJoinFailures: 5 },
    });
    await s.startJoinGuard();
    await s.createCluster();

    const deferredReason = (m: Json) => capi.v1beta2Conditions(m).find((c) => c.type === 'OwnerRemediated')?.reason;
    const { taken, deferred } = await waitFor('one marked worker deleting, the other deferred by its MachineSet', async () => {
      const w = await s.workers();
      const t = w.find((m) => isDeleting(m) && stuck.applied.includes(m.metadata.name));
      const d = w.find((m) => !isDeleting(m) && conditionOf(m, 'HealthCheckSucceeded')?.status === 'False' && deferredReason(m) === 'RemediationDeferred');
      return t && d && { taken: t, deferred: d };
    }, { timeoutMs: 150_000, describe: seen });
    const uid = deferred.metadata.uid as string;
    const stillThere = async () => {
      const m = (await s.workers()).find((x) => x.metadata.uid === uid);
      expect(m, `${deferred.metadata.name} was deleted\n${await seen()}`).to.not.equal(undefined);
      expect(isDeleting(m!), `${deferred.metadata.name} is being deleted\n${await seen()}`).to.equal(false);
      return m!;
    };

    const t0 = Date.now();
    await kube.mergePatch(`${checksPath(namespace)}/workers`, { metadata: { annotations: { 'joinguard.io/withdraw-all': '' } } });
    const clean = await waitFor(`${deferred.metadata.name} unmarked (never joined) and the check saying MarksWithdrawn`, async () => {
      const m = await stillThere();
      const check = await s.check();
      const paused = check.status?.conditions?.find((c) => c.type === 'Paused');
      return !hasNode(m) && conditionOf(m, 'HealthCheckSucceeded')?.status !== 'False' && conditionOf(m, 'OwnerRemediated') === undefined && paused?.reason === 'MarksWithdrawn' && m;
    }, { timeoutMs: 60_000, describe: seen });
    const tookMs = Date.now() - t0;

    // The deferral lifts: the taken Machine goes; the unmarked one stays, never asked for again.
    teardown.lift();
    await waitFor('the taken Machine gone', async () => !(await s.workers()).some((m) => m.metadata.uid === taken.metadata.uid), { timeoutMs: 120_000, describe: seen });
    await new Promise((r) => setTimeout(r, 5000));
    const last = await stillThere();
    expect(hasNode(last)).to.equal(false);
    expect(conditionOf(last, 'HealthCheckSucceeded')?.status).to.not.equal('False');
    const check = await s.check();
    const req = check.status?.requests?.find((r) => r.uid === uid);
    expect(req, describeCheck(check)).to.include({ state: 'Withdrawn', withdrawn: 'WithdrawAll' });
    process.stderr.write(`[uninstall] ${clean.metadata.name} unmarked ${(tookMs / 1000).toFixed(1)}s after the annotation; kept after the deferral lifted\n`);
  });
});
