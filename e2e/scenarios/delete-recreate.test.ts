// Issue 16 §1.4 on the real CAPI managers: a GitOps delete-and-recreate of a MachineJoinCheck while a Machine
// waits under its owner's deferral. The MachineDeployment allows one remediation at a time; JoinGuard marked two
// slow workers; the MachineSet deletes one (its VM teardown held) and defers the other. The check is deleted:
// its finalizer withdraws the deferred Machine's mark (the one being deleted cannot be unasked) before the check
// goes; the same check is created again (a new uid). The deferred Machine then joins, and the deferral lifts: it
// is never deleted and no mark of JoinGuard's is left on any Machine. Before the finalizer, the deleted check's
// mark stayed on the deferred Machine — HealthCheckSucceeded=False + OwnerRemediated=False — and its MachineSet
// deleted it, joined, as soon as the deferral lifted. The setup is e2e/support/deferral.ts.
import { expect } from 'chai';
import type { MachineJoinCheck } from '../../api/v1alpha1/types.js';
import { conditionOf, hasNode, isDeleting, waitFor } from '../support/cluster-view.js';
import { deferralScenario, deferRemediation } from '../support/deferral.js';
import { checksPath, createCheck, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';
import type { Json } from '../../hack/testenv/kube-client.js';
import { markerIn } from '../../api/capi/remediation-writes.js';

const REQUESTED_BY = 'joinguard.io/requested-by';
const OWN_REASONS = ['JoinTimeout', 'ProvisionTimeout'];

/** A mark of JoinGuard's on the Machine: its HealthCheckSucceeded reasons, or its marker. */
function joinGuardMark(m: Json): string | undefined {
  const hc = conditionOf(m, 'HealthCheckSucceeded');
  if (hc?.status === 'False' && OWN_REASONS.includes(hc.reason)) return `HealthCheckSucceeded=False/${hc.reason}`;
  const by = m.metadata?.annotations?.[REQUESTED_BY];
  return by !== undefined ? `${REQUESTED_BY}=${by}` : undefined;
}

/** The check a mark names: inside its HealthCheckSucceeded message (the marker rides in the mark's write). */
function markerOf(m: Json): string | undefined {
  return markerIn(conditionOf(m, 'HealthCheckSucceeded')?.message) ?? m.metadata?.annotations?.[REQUESTED_BY];
}

describe('scenario: a check deleted and re-created while its owner defers a Machine leaves no mark behind', function () {
  this.timeout(400_000);
  const s = useScenario(deferralScenario('jg-dr', 'dr'));

  it('the deleted check withdraws its mark before it goes; the Machine joins and is never deleted when the deferral lifts', async () => {
    const { kube, namespace } = s;
    const seen = s.seen();
    const { taken, deferred, slow, teardown, stillThere } = await deferRemediation(s);
    const name = deferred.metadata.name as string;
    const old = await s.check();
    expect(old.metadata.finalizers, 'every check carries the finalizer').to.include('joinguard.io/withdraw-marks');
    expect(markerOf(deferred), 'the mark carries its check').to.equal(old.metadata.uid);

    // GitOps deletes the check: it goes only once its marks are withdrawn.
    const deletedAt = Date.now();
    const paused: string[] = [];
    await kube.delete(`${checksPath(namespace)}/workers`);
    await waitFor(
      'the deleted check gone',
      async () => {
        const c = (await kube.get(`${checksPath(namespace)}/workers`)) as MachineJoinCheck | undefined;
        const p = c?.status?.conditions?.find((x) => x.type === 'Paused');
        if (p && !paused.includes(`${p.reason}: ${p.message}`)) paused.push(`${p.reason}: ${p.message}`);
        return c === undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100, describe: seen },
    );
    const goneAfter = Date.now() - deletedAt;
    const unmarked = await stillThere();
    expect(joinGuardMark(unmarked), `${name} still carries a mark of the deleted check\n${await seen()}`).to.equal(
      undefined,
    );

    // The same check, created again: a new uid.
    await createCheck(kube, namespace, 'workers', old.spec);
    const fresh = await waitFor(
      'the re-created check reconciled',
      async () => {
        const c = await s.check().catch(() => undefined);
        return c?.status?.conditions?.some((x) => x.type === 'Ready') && c;
      },
      { timeoutMs: 30_000, describe: seen },
    );
    expect(fresh.metadata.uid).to.not.equal(old.metadata.uid);

    // The deferred Machine joins after all: whatever the new check asked meanwhile, no mark is left on it.
    slow.lift();
    await waitFor(
      `${name} joined and carrying no mark of JoinGuard's`,
      async () => {
        const m = await stillThere();
        return hasNode(m) && joinGuardMark(m) === undefined && conditionOf(m, 'OwnerRemediated') === undefined;
      },
      { timeoutMs: 90_000, describe: seen },
    );

    // The deferral lifts: the taken Machine goes and is replaced; the joined one stays.
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
    await new Promise((r) => setTimeout(r, 5000)); // a few more owner reconciles
    await stillThere();
    const marked = (await s.workers()).flatMap((m) =>
      joinGuardMark(m) ? [`${m.metadata.name}: ${joinGuardMark(m)}`] : [],
    );
    expect(marked, `marks left\n${await seen()}`).to.deep.equal([]);
    expect((await s.workers()).filter(isDeleting)).to.deep.equal([]);
    const again = (await s.check()).status?.remediations?.find((r) => r.uid === deferred.metadata.uid);
    process.stderr.write(
      `[scenario delete-recreate] deleted check gone ${(goneAfter / 1000).toFixed(1)} s after the delete; Paused seen: ${paused.join(' | ') || '(none)'}; ` +
        `${name} unmarked before the check went, joined, kept; the re-created check's record of it: ${again ? `${again.path} ${again.outcome}${again.ownerReason ? ` (owner: ${again.ownerReason})` : ''}` : 'none'}\n${describeCheck(await s.check())}\n`,
    );
  });
});
