// Scenario (d): dry run. JoinGuard decides everything and says what it would do, and changes no Machine.
import { expect } from 'chai';
import { conditionOf, hasNode, isControlPlane, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';

const JOIN_TIMEOUT_S = 6;

describe('scenario (d): dry run changes no Machine and reports what it would do', function () {
  this.timeout(240_000);
  const s = useScenario({
    prefix: 'jg-d',
    cluster: 'dry',
    checkName: 'workers',
    workers: [{ name: 'md', replicas: 2, labels: { pool: 'workers' } }],
    createClusterFirst: false,
  });
  const seen = s.seen();

  it('reports Progressing=False/DryRun naming the Machine it would replace, and leaves it alone', async () => {
    const { kube, sim, namespace, cluster } = s;
    sim.policy.neverJoin({ namespace, role: 'worker' }, { limit: 1 });
    await s.createCluster();
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      dryRun: true,
    });
    await s.startJoinGuard();
    const stuck = await waitFor(
      'one worker failed to join, the other joined',
      async () => {
        const w = await s.workers();
        const failed = sim.eventsOf(namespace, 'JoinFailed').map((e) => e.name);
        return (
          w.length === 2 &&
          w.filter(hasNode).length === 1 &&
          failed.length === 1 &&
          w.find((m) => m.metadata.name === failed[0])
        );
      },
      { timeoutMs: 150_000, describe: seen },
    );

    // A dry-run check says DryRun from the start; it names the Machine once it would ask for its replacement.
    const c = await waitFor(
      'Progressing=False/DryRun naming the stuck Machine',
      async () => {
        const x = await s.check();
        const p = checkCondition(x, 'Progressing');
        return p?.reason === 'DryRun' && p.message.includes(stuck.metadata.name) && x;
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect(checkCondition(c, 'Progressing')!.message).to.contain(stuck.metadata.name).and.contain('changes no Machine');
    const rec = c.status?.remediations?.find((r) => r.uid === stuck.metadata.uid);
    expect(rec, describeCheck(c)).to.include({ outcome: 'DryRun', path: 'OwnerRemediated' });
    expect(c.status?.stuckMachines).to.equal(1);

    // Two more join timeouts later the Machine is still there, unmarked, and nothing else was created.
    await new Promise((r) => setTimeout(r, 2 * JOIN_TIMEOUT_S * 1000));
    const ms = await s.machines();
    const still = ms.find((m) => m.metadata.uid === stuck.metadata.uid);
    expect(still, 'the stuck Machine must not be deleted').to.not.equal(undefined);
    expect(conditionOf(still, 'HealthCheckSucceeded')).to.equal(undefined);
    expect(conditionOf(still, 'OwnerRemediated')).to.equal(undefined);
    expect(still!.metadata.annotations?.['cluster.x-k8s.io/remediate-machine']).to.equal(undefined);
    expect(ms.filter((m) => !isControlPlane(m))).to.have.length(2);
    const after = await s.check();
    expect((after.status?.remediations ?? []).every((r) => r.outcome === 'DryRun')).to.equal(true);
    expect(after.status?.remediations).to.have.length(1);
  });
});
