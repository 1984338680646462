// Scenario (c): the join credential "expires" (every Machine whose bootstrap data is made from now on
// fails to join). The first Machine to time out is rebuilt; the second failure in a row (default
// consecutiveJoinFailures: 2) is not rebuilt but stalls the check with BootstrapCredentialSuspect naming
// the evidence; one canary is rebuilt after probeInterval; the credential is "rotated", the canary joins,
// the suspicion clears and the remaining stuck Machines are replaced.
import { expect } from 'chai';
import { conditionOf, hasNode, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';

const JOIN_TIMEOUT_S = 8;
const PROBE_INTERVAL_S = 20;

describe('scenario (c): an expired join credential is caught, probed with one canary, and cleared by a rotation', function () {
  this.timeout(400_000);
  const s = useScenario({
    prefix: 'jg-c',
    cluster: 'cred',
    checkName: 'workers',
    workers: [{ name: 'md', replicas: 2, labels: { pool: 'workers' } }],
    waitJoined: true,
  });
  const seen = s.seen();
  const check = () => s.check();
  const workers = () => s.workers();
  const markedUids = async () =>
    new Set(
      (await workers())
        .filter((m) => conditionOf(m, 'HealthCheckSucceeded')?.status === 'False')
        .map((m) => m.metadata.uid as string),
    );

  it('rebuilds the first failure, stalls on the second with the evidence, sends one canary, clears on rotation', async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      suspicion: { probeInterval: `${PROBE_INTERVAL_S}s`, maxProbeInterval: `${PROBE_INTERVAL_S * 4}s` },
    });
    await s.startJoinGuard();
    const healthy = new Set((await workers()).map((m) => m.metadata.uid as string));
    sim.policy.expireCredential({ namespace });
    // Two new workers get bootstrap data with the expired credential.
    await kube.mergePatch(capi.path('MachineDeployment', namespace, `${cluster}-md`), { spec: { replicas: 4 } });

    const stalled = await waitFor(
      'Progressing=False/BootstrapCredentialSuspect',
      async () => {
        const c = await check();
        return checkCondition(c, 'Progressing')?.reason === 'BootstrapCredentialSuspect' && c;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    const stalledAt = Date.now();
    const progressing = checkCondition(stalled, 'Progressing')!;
    expect(progressing.status).to.equal('False');
    // Ready summarises (CAPI v1beta2, issue 19 item 8): not ready while the check stalls, the stall in its message.
    expect(checkCondition(stalled, 'Ready')).to.include({
      status: 'False',
      reason: 'NotReady',
      message: `* Progressing: ${progressing.message}`,
    });
    expect(stalled.status?.consecutiveJoinFailures).to.equal(2);
    expect(stalled.status?.suspicion?.canariesSpent).to.equal(0);
    // Exactly one rebuild before the stall: the first failure.
    const rebuildsBeforeStall = (stalled.status?.remediations ?? []).filter((r) => r.path === 'OwnerRemediated');
    expect(rebuildsBeforeStall, describeCheck(stalled)).to.have.length(1);
    // The message names the failing Machines, their bootstrap config and data secret, and the endpoint.
    const failures = (stalled.status?.recentFailures ?? []).slice(-2);
    expect(failures).to.have.length(2);
    for (const f of failures) {
      expect(progressing.message).to.contain(f.machine);
      expect(f.bootstrapConfig, JSON.stringify(f)).to.be.a('string');
      expect(progressing.message).to.contain(f.bootstrapConfig!).and.contain(f.dataSecretName!);
      expect(healthy.has(f.uid)).to.equal(false);
    }
    const cl = await kube.get(capi.path('Cluster', namespace, cluster));
    expect(progressing.message).to.contain(
      `${cl!.spec.controlPlaneEndpoint.host}:${cl!.spec.controlPlaneEndpoint.port}`,
    );
    expect(progressing.message).to.contain('docs/runbook.md#bootstrapcredentialsuspect');
    const nextCanary = Date.parse(stalled.status!.suspicion!.nextCanaryTime!);
    expect(nextCanary - Date.parse(stalled.status!.suspicion!.since)).to.be.closeTo(PROBE_INTERVAL_S * 1000, 1500);

    // While suspected nothing more is rebuilt until the canary is due.
    const marksAtStall = await markedUids();
    await new Promise((r) => setTimeout(r, Math.max(0, nextCanary - Date.now() - 4000)));
    const quiet = await check();
    expect(
      (quiet.status?.remediations ?? []).filter((r) => r.path === 'OwnerRemediated'),
      describeCheck(quiet),
    ).to.have.length(1);
    for (const uid of await markedUids())
      expect(marksAtStall.has(uid) || !(await workers()).some((m) => m.metadata.uid === uid)).to.equal(true);

    // The credential is rotated before the canary's replacement gets its bootstrap data.
    sim.policy.rotateCredential({ namespace });
    const canary = await waitFor(
      'one canary rebuilt',
      async () => {
        const c = await check();
        return c.status?.remediations?.find((r) => r.canary === true);
      },
      { timeoutMs: 60_000, describe: seen },
    );
    const canaryDelayS = (Date.parse(canary.time) - Date.parse(stalled.status!.suspicion!.since)) / 1000;
    expect(canaryDelayS).to.be.at.least(PROBE_INTERVAL_S - 1);

    const cleared = await waitFor(
      'the suspicion cleared by the canary replacement joining',
      async () => {
        const c = await check();
        return (
          c.status?.suspicion === undefined &&
          checkCondition(c, 'Progressing')?.reason !== 'BootstrapCredentialSuspect' &&
          c
        );
      },
      { timeoutMs: 90_000, describe: seen },
    );
    expect(cleared.status?.consecutiveJoinFailures).to.equal(0);

    const final = await waitFor(
      'all 4 workers joined, every stuck Machine replaced',
      async () => {
        const w = await workers();
        return w.length === 4 && w.every(hasNode) && w;
      },
      { timeoutMs: 150_000, describe: seen },
    );
    const done = await waitFor(
      'the check at AsExpected',
      async () => {
        const c = await check();
        return checkCondition(c, 'Progressing')?.reason === 'AsExpected' && c;
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect(checkCondition(done, 'Ready')).to.include({ status: 'True', reason: 'Ready' });
    // Every Machine that failed was replaced exactly once; none twice.
    const uids = (done.status?.remediations ?? []).map((r) => r.uid);
    expect(new Set(uids).size).to.equal(uids.length);
    const failedUids = new Set((done.status?.recentFailures ?? []).map((f) => f.uid));
    for (const m of final) expect(failedUids.has(m.metadata.uid)).to.equal(false);
    process.stderr.write(
      `[scenario c] rebuilds before the stall: ${rebuildsBeforeStall.length}; canary after ${canaryDelayS.toFixed(1)}s; ` +
        `stall -> all joined in ${((Date.now() - stalledAt) / 1000).toFixed(1)}s; remediations ${uids.length}\n`,
    );
  });
});
