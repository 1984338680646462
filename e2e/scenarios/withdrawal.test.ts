// Scenario (f): withdrawal while the owner defers. A MachineDeployment allows one remediation at a time
// (`remediation.maxInFlight: 1`). Two workers are slow to join; JoinGuard marks both; the real MachineSet
// deletes one (its VM teardown is held, so the remediation stays in flight) and defers the other
// (OwnerRemediated=False/RemediationDeferred). The deferred Machine then gets its Node: JoinGuard must
// withdraw its mark (HealthCheckSucceeded=True, so that the owner drops OwnerRemediated) before the deferral
// lifts, or the MachineSet deletes a Machine that works (cluster-api #12870). The second case pauses the
// check while the deferral holds: a withdrawal is made even while paused (the lead's decision: the harm it
// prevents does not pause). Code that skipped withdrawals while paused failed that case: the joined Machine kept
// HealthCheckSucceeded=False + OwnerRemediated=False (RemediationDeferred), which its MachineSet acts on as soon as
// the deferral lifts. The setup is e2e/support/deferral.ts.
import { expect } from 'chai';
import { conditionOf, hasNode, waitFor } from '../support/cluster-view.js';
import { deferralScenario, deferRemediation } from '../support/deferral.js';
import { checksPath, describeCheck } from '../support/joinguard.js';
import { useScenario, type Scenario } from '../support/scenario.js';

describe('scenario (f): a Machine that joins while its owner defers its remediation is withdrawn, never deleted', function () {
  this.timeout(400_000);

  for (const pausedWhileDeferred of [false, true]) {
    describe(
      pausedWhileDeferred ? 'with the check paused while the owner defers' : 'with the check running',
      function () {
        const s = useScenario(deferralScenario(pausedWhileDeferred ? 'jg-fp' : 'jg-f', 'wd'));
        it('withdraws the mark of the deferred Machine once it joins; the owner never deletes it', () =>
          run(s, pausedWhileDeferred));
      },
    );
  }
});

async function run(s: Scenario, pausedWhileDeferred: boolean): Promise<void> {
  const { kube, namespace } = s;
  const seen = s.seen();
  const { taken, deferred, slow, teardown, stillThere } = await deferRemediation(s);
  const deferredUid = deferred.metadata.uid as string;

  if (pausedWhileDeferred) await kube.mergePatch(`${checksPath(namespace)}/workers`, { spec: { paused: true } });
  // The deferred Machine boots after all: its Node registers, CAPI sets its nodeRef.
  slow.lift();
  const withdrawn = await waitFor(
    `${deferred.metadata.name} joined, its mark withdrawn and OwnerRemediated dropped`,
    async () => {
      const m = await stillThere();
      return (
        hasNode(m) &&
        conditionOf(m, 'HealthCheckSucceeded')?.status === 'True' &&
        conditionOf(m, 'OwnerRemediated') === undefined &&
        m
      );
    },
    { timeoutMs: 90_000, describe: seen },
  );
  expect(conditionOf(withdrawn, 'HealthCheckSucceeded')?.message).to.contain('withdrew');

  // The deferral lifts: the taken Machine goes, its replacement joins; the withdrawn one stays.
  teardown.lift();
  await waitFor(
    'the taken Machine gone and 3 joined workers',
    async () => {
      await stillThere();
      const w = await s.workers();
      return !w.some((m) => m.metadata.uid === taken.metadata.uid) && w.length === 3 && w.every(hasNode);
    },
    { timeoutMs: 120_000, describe: seen },
  );
  // A few more owner reconciles: still there, still HealthCheckSucceeded=True.
  await new Promise((r) => setTimeout(r, 5000));
  const last = await stillThere();
  expect(conditionOf(last, 'HealthCheckSucceeded')?.status).to.equal('True');
  const check = await s.check();
  const rec = check.status?.remediations?.find((r) => r.uid === deferredUid);
  expect(rec?.outcome, describeCheck(check)).to.equal('Withdrawn');
  process.stderr.write(
    `[scenario f${pausedWhileDeferred ? ' paused' : ''}] ${deferred.metadata.name} deferred, joined, withdrawn, kept; ${taken.metadata.name} replaced\n`,
  );
}
