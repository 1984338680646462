// Fault injection (issue 10, finding 2 and deliverable 1): a withdrawal whose first write fails must be
// made again. The MachineDeployment's `remediation.maxInFlight: 1` defers the second mark while the first
// marked Machine is being deleted (a test finalizer keeps it deleting); the deferred Machine then joins;
// JoinGuard's first withdrawal write on it is answered 500 by the fault proxy; then the deferral lifts.
// The joined Machine must never be deleted and must end HealthCheckSucceeded=True.
import { expect } from 'chai';
import { retryOnConflict, type Json, type KubeClient as Kube } from '../../hack/testenv/kube-client.js';
import { waitFor } from '../support/cluster-view.js';
import { capiApi } from '../sim/capi-api.js';
import { createCheck } from '../support/joinguard.js';
import { carriesJoinGuardMark } from './machine-history.js';
import { figure, machineWrites, scaleDeployment, secs, sleep, useFaultScenario } from './harness.js';

const JOIN_TIMEOUT_S = 15;
const HOLD_FINALIZER = 'faults.joinguard.io/hold';

/** A guarded write: a 409 (CAPI or JoinGuard wrote the Machine meanwhile) reads it again. */
async function setHoldFinalizer(kube: Kube, namespace: string, name: string, on: boolean): Promise<void> {
  return retryOnConflict(() => setHoldFinalizerOnce(kube, namespace, name, on));
}

async function setHoldFinalizerOnce(kube: Kube, namespace: string, name: string, on: boolean): Promise<void> {
  const path = capiApi('v1beta2').path('Machine', namespace, name); // the fault specs run on v1.14 only
  const m = await kube.get(path);
  if (!m) return;
  const finalizers = (m.metadata.finalizers ?? []) as string[];
  const next = on ? [...new Set([...finalizers, HOLD_FINALIZER])] : finalizers.filter((f) => f !== HOLD_FINALIZER);
  if (next.length === finalizers.length && on === finalizers.includes(HOLD_FINALIZER)) return;
  await kube.mergePatch(path, { metadata: { resourceVersion: m.metadata.resourceVersion, finalizers: next } });
}

describe('faults (c): a withdrawal whose first write fails is made again', function () {
  this.timeout(360_000);
  const cluster = 'fc';
  const pool = `${cluster}-md`;
  const f = useFaultScenario({
    prefix: 'jg-fc',
    cluster,
    checkName: 'workers',
    waitJoined: true,
    workers: [{ name: 'md', replicas: 0, labels: { role: 'worker' } }],
  });
  const { s, seen } = f;
  afterEach(async function () {
    this.timeout(60_000);
    for (const m of await s.machines())
      await setHoldFinalizer(s.kube, s.namespace, m.metadata.name, false).catch(() => undefined);
  });

  it('never deletes the joined Machine, which ends HealthCheckSucceeded=True', async () => {
    const { kube, sim, namespace } = s;
    await kube.mergePatch(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/machinedeployments/${pool}`, {
      spec: { remediation: { maxInFlight: 1 } },
    });
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { role: 'worker' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      maxInFlight: 2,
      suspicion: { consecutiveJoinFailures: 0 },
      neverJoinedLimit: 0,
    });
    const history = await f.recordMachines();
    const p = await f.startBehindProxy();

    // M1 never joins and is held deleting once its owner acts; M2, created a little later, is held before joining.
    sim.policy.neverJoin({ namespace }, { limit: 1 });
    sim.policy.holdJoin({ namespace }, { limit: 1 });
    await scaleDeployment(kube, namespace, pool, 1);
    const m1 = await waitFor('M1', async () => (await s.workers())[0], { timeoutMs: 60_000, describe: seen });
    await setHoldFinalizer(kube, namespace, m1.metadata.name, true);
    await sleep(6_000);
    await scaleDeployment(kube, namespace, pool, 2);
    const m2: Json = await waitFor(
      'M2',
      async () => (await s.workers()).find((m) => m.metadata.name !== m1.metadata.name),
      { timeoutMs: 60_000, describe: seen },
    );
    const n1 = m1.metadata.name as string;
    const n2 = m2.metadata.name as string;

    await waitFor(
      `${n1} marked and deleting (held by ${HOLD_FINALIZER})`,
      async () => {
        const st = history.last(n1);
        return st?.deleting && history.where((x) => x.name === n1 && carriesJoinGuardMark(x)).length > 0;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    const deferred = await waitFor(
      `${n2} marked and its remediation deferred by maxInFlight`,
      async () => {
        const st = history.last(n2);
        return st && carriesJoinGuardMark(st) && st.ownerRemediated === 'False/RemediationDeferred' && st;
      },
      { timeoutMs: 120_000, describe: seen },
    );
    figure(
      'c',
      `${n1} deleting (held); ${n2} marked, owner says ${deferred.ownerRemediated}: ${deferred.ownerMessage}`,
    );

    // The first withdrawal write on M2 fails; then M2 joins.
    const fail = p.addRule({
      method: /^(PATCH|PUT)$/,
      path: new RegExp(`/machines/${n2}(/status)?$`),
      times: 1,
      fault: { status: 500 },
    });
    const releasedAt = Date.now();
    sim.policy.releaseHold(n2);
    const joined = await waitFor(
      `${n2} joined`,
      async () => history.where((x) => x.name === n2 && x.node !== undefined)[0],
      { timeoutMs: 60_000, describe: seen },
    );
    const problems: string[] = [];
    await waitFor("JoinGuard's first withdrawal write (answered 500)", async () => fail.matched.length > 0, {
      timeoutMs: 60_000,
      describe: seen,
    }).catch(() => problems.push(`JoinGuard never wrote to ${n2} after it joined (no withdrawal attempted)`));
    const failedAt = fail.matched[0]?.at;
    // A withdrawal made again lands within a few seconds; the owner's deferral lifts 20 s after the failure at the latest.
    await waitFor(`${n2} HealthCheckSucceeded=True`, async () => history.last(n2)?.healthCheck?.startsWith('True/'), {
      timeoutMs: 20_000,
    }).catch(() => undefined);
    const retried = machineWrites(p, namespace, n2).find((w) => failedAt !== undefined && w.at > failedAt);
    const liftedAt = Date.now();
    await setHoldFinalizer(kube, namespace, n1, false);
    await waitFor(`${n1} gone`, async () => history.last(n1)?.gone, { timeoutMs: 60_000, describe: seen });
    // The owner has its remediation slot back: give it time to act on whatever M2 still carries.
    await waitFor(`${n2} deleted by its owner`, async () => history.last(n2)?.deleting || history.last(n2)?.gone, {
      timeoutMs: 25_000,
    }).catch(() => undefined);

    const end = history.last(n2)!;
    const deletions = history.where((x) => x.name === n2 && (x.deleting || x.gone));
    figure(
      'c',
      `${n2} joined ${secs(joined.at - releasedAt)} after release; first withdrawal write answered 500 at ` +
        `${failedAt ? `+${secs(failedAt - releasedAt)}` : 'never'}; made again ${retried && failedAt ? `${secs(retried.at - failedAt)} later` : 'never'}; ` +
        `deferral lifted ${failedAt ? `${secs(liftedAt - failedAt)} after the failure` : ''}; ${n2} at the end: ${end.deleting || end.gone ? 'DELETED' : 'kept'}, ` +
        `HealthCheckSucceeded=${end.healthCheck ?? '-'}, OwnerRemediated=${end.ownerRemediated ?? '-'}`,
    );
    if (deletions.length)
      problems.push(
        `${n2} (joined) was deleted by its owner at +${secs(deletions[0]!.at - liftedAt)} after the deferral lifted`,
      );
    if (!end.healthCheck?.startsWith('True/'))
      problems.push(`${n2} ends HealthCheckSucceeded=${end.healthCheck ?? '-'} (want True)`);
    if (history.restarts.length)
      problems.push(
        `the Machine watch started over ${history.restarts.length} times (a change may be missing): ${history.restarts[0]}`,
      );
    expect(problems, await seen()).to.deep.equal([]);
  });
});
