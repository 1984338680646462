// Fault injection (issue 10, finding 4 and deliverable 3): JoinGuard never asks what KubeadmControlPlane
// refuses. `kubeadm init` fails on every first control-plane Machine; the KCP has `remediation.maxRetry: 1`.
// The first Machine is marked by someone else (the test, as an MHC or an operator would); KCP counts that
// remediation like any other, with the `remediation-for` annotation on each replacement (checkRetryLimits),
// so it remediates one retry and answers CannotBeRemediated for the third Machine. JoinGuard must mark the
// retry and leave the third alone: no Machine may ever carry JoinGuard's mark together with
// OwnerRemediated=False/CannotBeRemediated. Judged from a watch on the Machines (every change).
import { expect } from 'chai';
import { createCluster } from '../sim/topology.js';
import { isControlPlane, joinClockStart, markForRemediation, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck } from '../support/joinguard.js';
import { carriesJoinGuardMark } from './machine-history.js';
import { figure, secs, sleep, useFaultScenario } from './harness.js';

const JOIN_TIMEOUT_S = 10;
const REMEDIATION_FOR = 'controlplane.cluster.x-k8s.io/remediation-for';

describe('faults (e): a KubeadmControlPlane with remediation.maxRetry 1', function () {
  this.timeout(360_000);
  const cluster = 'fe';
  const f = useFaultScenario({
    prefix: 'jg-fe',
    cluster,
    checkName: 'control-plane',
    workers: [],
    createClusterFirst: false,
  });
  const { s, seen } = f;
  afterEach(() => s.sim.policy.allowInitControlPlane());

  it('counts a remediation it did not ask for as KCP does: marks the one retry left, never the Machine KCP would refuse', async () => {
    const { kube, sim, namespace, env } = s;
    sim.policy.neverJoinInitControlPlane({ namespace });
    await createCheck(kube, namespace, 'control-plane', {
      clusterName: cluster,
      selector: { matchLabels: { 'cluster.x-k8s.io/control-plane': '' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      suspicion: { consecutiveJoinFailures: 0 },
      neverJoinedLimit: 0,
    });
    const h = await f.recordMachines();
    await f.startBehindProxy();
    const t0 = Date.now();
    await createCluster(kube, {
      namespace,
      name: cluster,
      workers: [],
      kcpRemediation: { maxRetry: 1 },
      ca: { certPem: env.caCertPem, keyPem: env.caKeyPem },
    });

    // The first control-plane Machine, its kubeadm init failed: marked by hand before JoinGuard's deadline.
    const first = await waitFor(
      'the first control-plane Machine, its init failed',
      async () => {
        const cp = (await s.machines()).filter(isControlPlane);
        return (
          cp.length === 1 && sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === cp[0]!.metadata.name) && cp[0]
        );
      },
      { timeoutMs: 120_000, describe: seen },
    );
    await waitFor(
      `${first.metadata.name} marked by hand`,
      () => markForRemediation(kube, s.capi, namespace, first.metadata.name, 'NodeStartupTimeout').then(() => true),
      { timeoutMs: 20_000 },
    );

    const refused = () =>
      h.where((x) => carriesJoinGuardMark(x) && (x.ownerRemediated ?? '').startsWith('False/CannotBeRemediated'));
    // The third control-plane Machine carries retryCount 1 in remediation-for: KCP refuses to remediate it.
    const third = await waitFor(
      "the third control-plane Machine (KCP's last allowed retry used)",
      async () => {
        if (refused().length) return refused()[0]!.name;
        const cps = (await s.machines()).filter(isControlPlane);
        return cps.find((m) => JSON.parse(m.metadata.annotations?.[REMEDIATION_FOR] ?? '{}').retryCount === 1)?.metadata
          .name as string | undefined;
      },
      { timeoutMs: 240_000, describe: seen },
    );
    // Past its deadline and the first control plane's one extension (the endpoint answers), with room to act.
    const m3 = await waitFor(
      `${third} provisioned`,
      async () => {
        const m = (await s.machines()).find((x) => x.metadata.name === third);
        return m && m.status?.initialization?.infrastructureProvisioned && m;
      },
      { timeoutMs: 60_000, describe: seen },
    ).catch(() => undefined);
    const cl = await kube.get(s.capi.path('Cluster', namespace, cluster));
    const until = m3 ? joinClockStart(s.capi, m3, cl) + 2 * JOIN_TIMEOUT_S * 1000 + 15_000 : Date.now() + 45_000;
    while (Date.now() < until && refused().length === 0) await sleep(500);

    const markedNames = h.distinct(carriesJoinGuardMark);
    const check = await s.check();
    const progressing = checkCondition(check, 'Progressing');
    figure(
      'e',
      `first ${first.metadata.name} marked by the test; control-plane Machines marked by JoinGuard: ${markedNames.join(', ') || 'none'} (by +${secs(Date.now() - t0)}); third ${third}: ` +
        `${markedNames.includes(third) ? `MARKED, owner answered ${h.last(third)?.ownerRemediated ?? '-'}` : 'not marked'}; ` +
        `check Progressing=${progressing?.status}/${progressing?.reason}: ${progressing?.message.slice(0, 200)}`,
    );

    const problems: string[] = [];
    for (const r of [...new Map(refused().map((x) => [x.uid, x])).values()]) {
      problems.push(`${r.name} carried JoinGuard's mark and KCP answered ${r.ownerRemediated}: ${r.ownerMessage}`);
    }
    if (!markedNames.some((n) => n !== third))
      problems.push('JoinGuard did not mark the second Machine: KCP would have remediated that retry');
    if (h.restarts.length)
      problems.push(
        `the Machine watch started over ${h.restarts.length} times (a change may be missing): ${h.restarts[0]}`,
      );
    expect(problems, await seen()).to.deep.equal([]);
  });
});
