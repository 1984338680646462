// Scenario (d): dry run. JoinGuard decides everything and says what it would do, and changes no Machine.
import { expect } from 'chai';
import type { MachineJoinCheck } from '../../api/v1alpha1/types.js';
import type { RunningController } from '../../controllers/manager.js';
import { conditionOf, describeMachines, hasNode, isControlPlane, listMachines, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck, getCheck, installJoinGuardCrd, startJoinGuard, type CapturedLog } from '../support/joinguard.js';
import { getSim } from '../support/shared-sim.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { Kube } from '../sim/kube.js';
import type { Sim } from '../sim/sim.js';
import { createCluster } from '../sim/topology.js';

const JOIN_TIMEOUT_S = 6;

describe('scenario (d): dry run changes no Machine and reports what it would do', function () {
  this.timeout(240_000);
  const namespace = `jg-d-${process.pid}`;
  const cluster = 'dry';
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
    sim.policy.neverJoin({ namespace, role: 'worker' }, { limit: 1 });
    await createCluster(kube, { namespace, name: cluster, workers: [{ name: 'md', replicas: 2, labels: { pool: 'workers' } }], ca: { certPem: env.caCertPem, keyPem: env.caKeyPem } });
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster, selector: { matchLabels: { pool: 'workers' } }, joinTimeout: `${JOIN_TIMEOUT_S}s`, dryRun: true,
    });
    jg = await startJoinGuard(env.kubeConfig(), namespace);
  });

  after(async () => {
    await jg?.controller.stop();
    kube?.close();
  });

  const seen = async () => `${describeMachines(await listMachines(kube, namespace, cluster))}\n` +
    `${describeCheck(await getCheck(kube, namespace, 'workers').catch(() => ({ metadata: { name: 'workers' } }) as MachineJoinCheck))}\nJoinGuard log:\n${jg?.log.tail(15)}`;

  it('reports Progressing=False/DryRun naming the Machine it would replace, and leaves it alone', async () => {
    const stuck = await waitFor('one worker failed to join, the other joined', async () => {
      const w = (await listMachines(kube, namespace, cluster)).filter((m) => !isControlPlane(m));
      const failed = sim.eventsOf(namespace, 'JoinFailed').map((e) => e.name);
      return w.length === 2 && w.filter(hasNode).length === 1 && failed.length === 1 && w.find((m) => m.metadata.name === failed[0]);
    }, { timeoutMs: 150_000, describe: seen });

    const c = await waitFor('Progressing=False/DryRun', async () => {
      const x = await getCheck(kube, namespace, 'workers');
      return checkCondition(x, 'Progressing')?.reason === 'DryRun' && x;
    }, { timeoutMs: 60_000, describe: seen });
    expect(checkCondition(c, 'Progressing')!.message).to.contain(stuck.metadata.name).and.contain('changes no Machine');
    const rec = c.status?.remediations?.find((r) => r.uid === stuck.metadata.uid);
    expect(rec, describeCheck(c)).to.include({ outcome: 'DryRun', path: 'OwnerRemediated' });
    expect(c.status?.stuckMachines).to.equal(1);

    // Two more join timeouts later the Machine is still there, unmarked, and nothing else was created.
    await new Promise((r) => setTimeout(r, 2 * JOIN_TIMEOUT_S * 1000));
    const ms = await listMachines(kube, namespace, cluster);
    const still = ms.find((m) => m.metadata.uid === stuck.metadata.uid);
    expect(still, 'the stuck Machine must not be deleted').to.not.equal(undefined);
    expect(conditionOf(still, 'HealthCheckSucceeded')).to.equal(undefined);
    expect(conditionOf(still, 'OwnerRemediated')).to.equal(undefined);
    expect(still!.metadata.annotations?.['cluster.x-k8s.io/remediate-machine']).to.equal(undefined);
    expect(ms.filter((m) => !isControlPlane(m))).to.have.length(2);
    const after = await getCheck(kube, namespace, 'workers');
    expect((after.status?.remediations ?? []).every((r) => r.outcome === 'DryRun')).to.equal(true);
    expect(after.status?.remediations).to.have.length(1);
  });
});
