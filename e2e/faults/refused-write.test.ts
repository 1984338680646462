// Issue 16 §1.1 on the real stack: a real validating admission webhook (a policy: "frozen" Machines may be changed
// by CAPI only) refuses JoinGuard's writes to one Machine of a check, and must not hold back another. The setup is
// scenario (f)'s (e2e/support/deferral.ts): a MachineDeployment allowing one remediation at a time, two slow workers
// marked by JoinGuard, the MachineSet deleting one (its teardown held) and deferring the other. Then a frozen
// Machine of the same check never joins; JoinGuard's mark on it is refused by the webhook, again and again. The
// deferred Machine joins meanwhile: its mark must be withdrawn, and it must never be deleted when the deferral lifts.
// The frozen pool's Machines sort before the others (rw-frozen-… < rw-md-…): before the fix, intents ran in name
// order and the first refusal ended the pass, so the joined Machine kept its mark and its MachineSet deleted it.
// JoinGuard runs as user joinguard-e2e (a client certificate of its own), the identity the policy refuses.
import { expect } from 'chai';
import { clusterAccessFromKubeconfig } from '../../runtime/client/kubeconfig.js';
import type { Json } from '../../hack/testenv/kube-client.js';
import { AdmissionPolicy, kubeconfigAs } from '../support/admission-policy.js';
import { conditionOf, hasNode, isDeleting, waitFor } from '../support/cluster-view.js';
import { deferRemediation } from '../support/deferral.js';
import { describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';
import { figure, secs, sleep } from './harness.js';

const USER = 'joinguard-e2e';
const FROZEN = 'policy.example.com/frozen';

describe('faults (refused write): a webhook refusing JoinGuard on one Machine holds back no other Machine', function () {
  this.timeout(420_000);
  const cluster = 'rw';
  const s = useScenario({
    prefix: 'jg-rw',
    cluster,
    checkName: 'workers',
    createClusterFirst: false,
    workers: [
      { name: 'md', replicas: 3, labels: { pool: 'workers' }, remediationMaxInFlight: 1 },
      { name: 'frozen', replicas: 0, labels: { pool: 'workers', [FROZEN]: 'true' } },
    ],
  });
  let policy: AdmissionPolicy | undefined;
  after(async () => {
    await policy?.stop();
  });

  it('the joined Machine is withdrawn and never deleted; the refused one is reported (condition, event, metric) and retried with back-off', async () => {
    const { env, kube, capi, sim, namespace } = s;
    const seen = s.seen(() =>
      policy
        ? `webhook calls by ${USER}: ${policy.calls
            .filter((c) => c.user === USER)
            .map((c) => `${c.name} ${c.resource} ${c.allowed ? 'allowed' : 'refused'}`)
            .slice(-6)
            .join('; ')}\n`
        : '',
    );
    const access = clusterAccessFromKubeconfig(await kubeconfigAs(env, USER));
    const { taken, deferred, slow, teardown, stillThere } = await deferRemediation(s, { access });
    const name = deferred.metadata.name as string;

    // The policy, then a frozen Machine that never joins: JoinGuard's mark on it is refused.
    policy = await AdmissionPolicy.start(env, kube, {
      name: `jg-frozen-${process.pid}`,
      rules: [
        {
          apiGroups: ['cluster.x-k8s.io'],
          apiVersions: ['*'],
          operations: ['UPDATE'],
          resources: ['machines', 'machines/status'],
        },
      ],
      objectSelector: { matchLabels: { [FROZEN]: 'true' } },
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
      decide: (r) =>
        r.userInfo?.username === USER ? `Machine ${r.name} is frozen by policy: only CAPI may change it` : undefined,
    });
    sim.policy.neverJoin((m) => m.namespace === namespace && m.machineName.startsWith(`${cluster}-frozen-`));
    await kube.mergePatch(capi.path('MachineDeployment', namespace, `${cluster}-frozen`), { spec: { replicas: 1 } });
    const frozen: Json = await waitFor(
      'the frozen Machine',
      async () => (await s.workers()).find((m) => m.metadata.labels?.[FROZEN] === 'true'),
      { timeoutMs: 60_000, describe: seen },
    );
    const frozenName = frozen.metadata.name as string;
    expect(frozenName < name, 'the frozen Machine sorts first').to.equal(true);
    const refusedAt = await waitFor(
      `JoinGuard's writes to ${frozenName} refused three times`,
      async () => policy!.refusals(USER).length >= 3 && Date.now(),
      { timeoutMs: 90_000, describe: seen },
    );

    // The deferred Machine joins while JoinGuard's writes to the frozen one are still refused.
    const releasedAt = Date.now();
    slow.lift();
    const joinedAt = await waitFor(`${name} joined`, async () => hasNode(await stillThere()) && Date.now(), {
      timeoutMs: 90_000,
      describe: seen,
    });
    const withdrawnAt = await waitFor(
      `${name}'s mark withdrawn and OwnerRemediated dropped`,
      async () => {
        const m = await stillThere();
        return (
          conditionOf(m, 'HealthCheckSucceeded')?.status === 'True' &&
          conditionOf(m, 'OwnerRemediated') === undefined &&
          Date.now()
        );
      },
      { timeoutMs: 60_000, describe: seen },
    );
    const refusedMeanwhile = policy.refusals(USER).filter((c) => c.at >= releasedAt && c.at <= withdrawnAt).length;
    const progressing = await waitFor(
      'Progressing reports the refusal',
      async () => {
        const c = (await s.check()).status?.conditions?.find((x) => x.type === 'Progressing');
        return c?.message.includes(frozenName) && c.message.includes('refused') && c;
      },
      { timeoutMs: 30_000, describe: seen },
    );

    // The deferral lifts: the taken Machine goes and is replaced; the withdrawn one stays.
    teardown.lift();
    await waitFor(
      'the taken Machine gone and 3 joined md workers',
      async () => {
        await stillThere();
        const md = (await s.workers()).filter((m) => m.metadata.labels?.[FROZEN] !== 'true');
        return !md.some((m) => m.metadata.uid === taken.metadata.uid) && md.length === 3 && md.every(hasNode);
      },
      { timeoutMs: 120_000, describe: seen },
    );
    await sleep(5_000);
    const kept = await stillThere();
    expect(conditionOf(kept, 'HealthCheckSucceeded')?.status).to.equal('True');

    // The refused Machine: never marked, reported three ways, retried with back-off.
    const f = (await s.workers()).find((m) => m.metadata.uid === frozen.metadata.uid)!;
    expect(conditionOf(f, 'HealthCheckSucceeded'), 'the refused mark is not on the frozen Machine').to.equal(undefined);
    expect(isDeleting(f)).to.equal(false);
    const events = (await kube.list(`/api/v1/namespaces/${namespace}/events`)).items.filter(
      (e) => e.reason === 'WriteRefused' && e.involvedObject?.name === frozenName,
    );
    expect(events.length, 'a WriteRefused event on the frozen Machine').to.be.greaterThan(0);
    const metrics = await s.jg!.controller.metrics.registry.metrics();
    const gauge = metrics
      .split('\n')
      .find(
        (l) =>
          l.startsWith('joinguard_write_refused_machines{') &&
          l.includes(`cluster_namespace="${namespace}"`) &&
          l.includes(`write="mark"`),
      );
    expect(
      gauge,
      metrics
        .split('\n')
        .filter((l) => l.startsWith('joinguard_write'))
        .join('\n'),
    ).to.match(/ 1$/);
    const mine = policy.refusals(USER);
    const gaps = mine.slice(1).map((c, i) => c.at - mine[i]!.at);
    const rec = (await s.check()).status?.remediations?.find((r) => r.uid === deferred.metadata.uid);
    expect(rec?.outcome, describeCheck(await s.check())).to.equal('Withdrawn');
    figure(
      'refused write',
      `${mine.length} of JoinGuard's writes to ${frozenName} refused by the webhook (first three by +${secs(refusedAt - mine[0]!.at)}), ` +
        `gaps between tries ${gaps
          .slice(0, 8)
          .map((g) => secs(g))
          .join(', ')}; ${name} joined ${secs(joinedAt - releasedAt)} after release, ` +
        `withdrawn ${secs(withdrawnAt - joinedAt)} after joining (${refusedMeanwhile} refusals of the frozen Machine meanwhile), kept after the deferral lifted; ` +
        `${events.length} WriteRefused event(s): "${events[0]?.message}"; ${gauge}; Progressing: "${progressing.message}"`,
    );
  });
});
