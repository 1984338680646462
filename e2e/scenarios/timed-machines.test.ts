// What an operator reads from kubectl alone (DESIGN, "What users see"), on the real stack: a worker that never joins
// is listed in status.timedMachines with its clock's start and its deadline, and `kubectl get mjc` (the apiserver's
// Table, which kubectl only lays out) shows that deadline — both read BEFORE the deadline; after it the Machine leaves
// the list for `remediations` (its mark, the owner's answer), and once CAPI's real MachineSet replaced it and the
// replacement joined, the list is empty. `kubectl describe` (its generic rendering of the status) tells it in that
// order, and the served schema (what `kubectl explain` reads) describes every field of the list.
import { expect } from 'chai';
import type { TimedMachine } from '../../api/v1alpha1/types.js';
import { hasNode, joinClockStart, waitFor } from '../support/cluster-view.js';
import { checksPath, createCheck, describeCheck } from '../support/joinguard.js';
import { describeFields, getTable, printTable, type Table } from '../support/kubectl-view.js';
import { useScenario } from '../support/scenario.js';
import type { Json } from '../../hack/testenv/kube-client.js';

// Long enough that the list (a display-only change, written within 30 s of the check's previous write) is read well
// before the deadline, even on a loaded machine.
const JOIN_TIMEOUT_S = 75;

describe('kubectl get/describe mjc: the Machines being timed, each with its deadline', function () {
  this.timeout(420_000);
  const s = useScenario({
    prefix: 'jg-t',
    cluster: 'wt',
    checkName: 'workers',
    workers: [{ name: 'md', replicas: 3, labels: { pool: 'workers' } }],
  });
  const seen = s.seen();
  const row = async (): Promise<Table['rows'][number]> => {
    const t = await getTable(s.env.kubeconfigPath, `${checksPath(s.namespace)}/workers`);
    process.stderr.write(`[timed] $ kubectl get mjc -n ${s.namespace} workers\n${printTable(t)}\n`);
    return t.rows[0]!;
  };

  it('lists a stuck worker with its due time before its deadline, and is empty once it is replaced', async () => {
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

    // Before the deadline: the other workers joined, the stuck one is the list, with its clock.
    const listed = await waitFor(
      `${stuckName} alone in status.timedMachines`,
      async () => {
        const c = await s.check();
        const l = c.status?.timedMachines ?? [];
        return l.length === 1 && l[0]!.machine === stuckName && c.status?.joinedMachines === 2 && c;
      },
      { timeoutMs: 150_000, describe: seen },
    );
    const entry: TimedMachine = listed.status!.timedMachines![0]!;
    const due = Date.parse(entry.until!);
    const r = await row();
    const readAt = Date.now();
    process.stderr.write(`[timed] listed and read ${((due - readAt) / 1000).toFixed(1)} s before its deadline\n`);
    expect(readAt, `read at ${new Date(readAt).toISOString()}, due ${entry.until}`).to.be.below(due);
    const m = (await s.workers()).find((x) => x.metadata.name === stuckName)!;
    const clockStart = joinClockStart(capi, m, await kube.get(capi.path('Cluster', namespace, cluster)));
    expect(entry).to.deep.equal({
      machine: stuckName,
      phase: 'Joining',
      since: new Date(clockStart).toISOString().replace('.000Z', 'Z'),
      until: new Date(clockStart + JOIN_TIMEOUT_S * 1000).toISOString().replace('.000Z', 'Z'),
    });
    expect(r.cells).to.include({
      'Next Deadline': entry.until,
      Ready: 'True',
      Paused: 'False',
      Expected: 3,
      Joined: 2,
      Stuck: 0,
      Held: 0,
      Progressing: 'AsExpected',
    });
    const story = describeFields({ status: listed.status }).join('\n');
    process.stderr.write(`[timed] kubectl describe mjc (status), before the deadline:\n${story}\n`);
    expect(story).to.match(
      new RegExp(
        `  Timed Machines:\n    Machine: +${stuckName}\n    Phase: +Joining\n    Since: +${entry.since}\n    Until: +${entry.until}(\n|$)`,
      ),
    );

    // Past the deadline JoinGuard asks: the Machine leaves the list for remediations (its mark, the owner's answer).
    const marked = await waitFor(
      `${stuckName} marked and out of the list, in remediations`,
      async () => {
        const c = await s.check();
        const rec = c.status?.remediations?.find((x) => x.machine === stuckName);
        const inList = (c.status?.timedMachines ?? []).some((x) => x.machine === stuckName);
        return rec !== undefined && !inList && c;
      },
      { timeoutMs: 150_000, describe: seen },
    );
    const rec = marked.status!.remediations!.find((x) => x.machine === stuckName)!;
    expect(Date.parse(rec.time)).to.be.at.least(due - 1000);
    expect(rec).to.include({ path: 'OwnerRemediated', kind: 'JoinTimeout' });
    process.stderr.write(
      `[timed] kubectl describe mjc (status.remediations), the mark:\n` +
        `${describeFields({ remediations: marked.status!.remediations }).join('\n')}\n`,
    );

    // Replaced by CAPI's real MachineSet, the replacement joined: nothing is timed any more.
    await waitFor(
      'the marked Machine gone and 3 joined workers',
      async () => {
        const w = await s.workers();
        return !w.some((x: Json) => x.metadata.name === stuckName) && w.length === 3 && w.every(hasNode);
      },
      { timeoutMs: 150_000, describe: seen },
    );
    const done = await waitFor(
      'the list emptied, the remediation Replaced, 3 joined',
      async () => {
        const c = await s.check();
        const rr = c.status?.remediations?.find((x) => x.machine === stuckName);
        return (
          c.status?.timedMachines === undefined && rr?.outcome === 'Replaced' && c.status?.joinedMachines === 3 && c
        );
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect(done.status).to.include({ expectedMachines: 3, joinedMachines: 3, stuckMachines: 0, heldMachines: 0 });
    const after = await row();
    expect(after.cells['Next Deadline'] ?? null, describeCheck(done)).to.equal(null);
    expect(after.cells).to.include({ Ready: 'True', Paused: 'False', Stuck: 0, Progressing: 'AsExpected' });
  });

  it('kubectl explain: the served schema describes timedMachines and every field of its entries', async () => {
    const index = (await s.kube.get('/openapi/v3')) as { paths: Record<string, { serverRelativeURL: string }> };
    const doc = (await s.kube.get(index.paths['apis/joinguard.io/v1alpha1']!.serverRelativeURL)) as {
      components: { schemas: Record<string, Json> };
    };
    const [, schema] = Object.entries(doc.components.schemas).find(([k]) => k.endsWith('.MachineJoinCheck'))!;
    const list = schema.properties.status.properties.timedMachines as Json;
    expect(list.description).to.match(/nearest deadline first/);
    for (const f of ['machine', 'phase', 'since', 'until', 'onHold'])
      expect(list.items.properties[f]?.description, f).to.be.a('string').and.not.equal('');
    expect(list.items.properties.onHold.enum).to.include('RemediationBudgetExhausted');
  });
});
