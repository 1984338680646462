// Uninstall without leaving a mark behind (docs/install.md): `joinguard.io/withdraw-all` on a check. A
// MachineDeployment allows one remediation at a time; two workers never join; JoinGuard marks both; the real
// MachineSet deletes one (its VM teardown held) and defers the other (OwnerRemediated=False/RemediationDeferred).
// With the annotation, JoinGuard withdraws the deferred Machine's mark though it never joined, says
// MarksWithdrawn, and asks nothing more: once the deferral lifts, the MachineSet leaves that Machine alone —
// as it would with JoinGuard uninstalled.
import { expect } from 'chai';
import { conditionOf, hasNode, waitFor } from '../support/cluster-view.js';
import { deferralScenario, deferRemediation } from '../support/deferral.js';
import { checksPath, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';

describe('uninstall: joinguard.io/withdraw-all withdraws every mark, also from a Machine that never joined', function () {
  this.timeout(400_000);
  const s = useScenario(deferralScenario('jg-wa', 'wa'));

  it('the deferred Machine ends unmarked and is not deleted when the deferral lifts; the check says MarksWithdrawn', async () => {
    const { kube, namespace } = s;
    const seen = s.seen();
    const { taken, deferred, teardown, stillThere } = await deferRemediation(s);
    const uid = deferred.metadata.uid as string;

    const t0 = Date.now();
    await kube.mergePatch(`${checksPath(namespace)}/workers`, {
      metadata: { annotations: { 'joinguard.io/withdraw-all': '' } },
    });
    const clean = await waitFor(
      `${deferred.metadata.name} unmarked (never joined) and the check saying MarksWithdrawn`,
      async () => {
        const m = await stillThere();
        const check = await s.check();
        const paused = check.status?.conditions?.find((c) => c.type === 'Paused');
        return (
          !hasNode(m) &&
          conditionOf(m, 'HealthCheckSucceeded')?.status !== 'False' &&
          conditionOf(m, 'OwnerRemediated') === undefined &&
          paused?.reason === 'MarksWithdrawn' &&
          m
        );
      },
      { timeoutMs: 60_000, describe: seen },
    );
    const tookMs = Date.now() - t0;

    // The deferral lifts: the taken Machine goes; the unmarked one stays, never asked for again.
    teardown.lift();
    await waitFor(
      'the taken Machine gone',
      async () => !(await s.workers()).some((m) => m.metadata.uid === taken.metadata.uid),
      { timeoutMs: 120_000, describe: seen },
    );
    await new Promise((r) => setTimeout(r, 5000));
    const last = await stillThere();
    expect(hasNode(last)).to.equal(false);
    expect(conditionOf(last, 'HealthCheckSucceeded')?.status).to.not.equal('False');
    const check = await s.check();
    const req = check.status?.requests?.find((r) => r.uid === uid);
    expect(req, describeCheck(check)).to.include({ state: 'Withdrawn', withdrawn: 'WithdrawAll' });
    process.stderr.write(
      `[uninstall] ${clean.metadata.name} unmarked ${(tookMs / 1000).toFixed(1)}s after the annotation; kept after the deferral lifted\n`,
    );
  });
});
