// Issue 16 §1.3 on the real CAPI managers (CI runs it on both releases; v1.10 is the one it is about): a
// deferral that lasts past the unanswered bound. CAPI v1.9/v1.10's MachineSet writes RemediationDeferred only into
// `status.v1beta2.conditions` (v1.10.10 machineset_controller.go patchMachineConditions); JoinGuard read v1beta1's
// OwnerRemediated only, saw its own WaitingForRemediation, took the request for unanswered, withdrew it and asked
// the owner nothing more — the deferred Machine was never rebuilt. Here the request must stay open, the owner's
// answer recorded, and the Machine replaced by its MachineSet once the deferral lifts.
//
// The bound is 15 minutes in the product. JoinGuard runs here with `unansweredAfterMs` 20 s (a controller option
// the e2e sets, as it sets joinTimeout in seconds and the connection grace to 2 s; no command flag): the deferral
// is held 40 s after the mark became visible, twice the bound.
import { expect } from 'chai';
import { conditionOf, hasNode, isDeleting, waitFor } from '../support/cluster-view.js';
import { deferralScenario, deferRemediation } from '../support/deferral.js';
import { describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';

const UNANSWERED_MS = 20_000;
const HOLD_MS = 2 * UNANSWERED_MS;

describe('scenario: a deferral past the unanswered bound is an answer, on the release under test', function () {
  this.timeout(400_000);
  const s = useScenario(deferralScenario('jg-db', 'db'));

  it("records the owner's RemediationDeferred, keeps the request open past the bound, and the owner replaces the Machine once it can", async () => {
    const { capi } = s;
    const seen = s.seen();
    const { taken, deferred, teardown, stillThere } = await deferRemediation(s, { unansweredAfterMs: UNANSWERED_MS });
    const name = deferred.metadata.name as string;
    const uid = deferred.metadata.uid as string;
    const answer = capi.v1beta2Conditions(deferred).find((c) => c.type === 'OwnerRemediated');
    const v1beta1Answer = capi.version === 'v1beta1' ? conditionOf(deferred, 'OwnerRemediated') : undefined;
    const request = async () => (await s.check()).status?.requests?.find((r) => r.uid === uid);
    const markedTime = await waitFor(`the request for ${name} seen marked`, async () => (await request())?.markedTime, {
      timeoutMs: 30_000,
      describe: seen,
    });
    const markedAt = Date.parse(markedTime);

    // Hold the deferral twice the bound past the mark: the request stays open, the mark stays on.
    const states = new Set<string>();
    while (Date.now() < markedAt + HOLD_MS) {
      const r = await request();
      states.add(`${r?.state}${r?.withdrawn ? `/${r.withdrawn}` : ''}`);
      const m = await stillThere();
      expect(
        r?.state,
        `the deferred request left Open at +${((Date.now() - markedAt) / 1000).toFixed(1)} s\n${await seen()}`,
      ).to.equal('Open');
      expect(conditionOf(m, 'HealthCheckSucceeded')?.status, `${name}'s mark withdrawn\n${await seen()}`).to.equal(
        'False',
      );
      await new Promise((res) => setTimeout(res, 1000));
    }
    const check = await s.check();
    const record = check.status?.remediations?.find((r) => r.uid === uid);
    expect(record, describeCheck(check)).to.deep.include({ outcome: 'Deferred', ownerReason: 'RemediationDeferred' });
    expect((await request())?.answered).to.equal(true);

    // The deferral lifts: the taken Machine goes, and the owner acts on the request JoinGuard kept open.
    const liftedAt = Date.now();
    teardown.lift();
    const replaced = await waitFor(
      `${name} remediated by its MachineSet`,
      async () => {
        const m = (await s.workers()).find((x) => x.metadata.uid === uid);
        return (m === undefined || isDeleting(m)) && Date.now();
      },
      { timeoutMs: 120_000, describe: seen },
    );
    await waitFor(
      '3 joined workers, neither old Machine left',
      async () => {
        const w = await s.workers();
        return (
          w.length === 3 &&
          w.every(hasNode) &&
          !w.some((m) => m.metadata.uid === uid || m.metadata.uid === taken.metadata.uid)
        );
      },
      { timeoutMs: 150_000, describe: seen },
    );
    const end = (await s.check()).status?.remediations?.find((r) => r.uid === uid);
    expect(end?.outcome, describeCheck(await s.check())).to.equal('Replaced');
    process.stderr.write(
      `[scenario deferral past the bound, CAPI ${s.env.capiRelease}] ${name}: owner answer OwnerRemediated=${answer?.status}/${answer?.reason} "${answer?.message}"` +
        `${v1beta1Answer ? ` (v1beta1 OwnerRemediated=${v1beta1Answer.status}/${v1beta1Answer.reason})` : ''}; request states seen over ${(HOLD_MS / 1000).toFixed(0)} s past the mark ` +
        `(bound ${(UNANSWERED_MS / 1000).toFixed(0)} s): ${[...states].join(', ')}; recorded ${record?.outcome}/${record?.ownerReason}; deleted by its owner ` +
        `${((replaced - liftedAt) / 1000).toFixed(1)} s after the deferral lifted; outcome ${end?.outcome}\n`,
    );
  });
});
