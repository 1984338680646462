// ClusterClass (b): KubeadmControlPlane refuses while a topology version upgrade waits to be propagated. A Cluster
// from a ClusterClass scales its control plane to 3; the second Machine never joins. The operator asks for a new
// version meanwhile (the Cluster webhook allows it: the control plane and the workers are at the old version),
// and the operator's upgrade orchestration holds it with CAPI's BeforeClusterUpgrade lifecycle hook (a Runtime
// Extension: e2e/support/upgrade-hold.ts), so the topology controller does not propagate it to the control plane.
// JoinGuard asks (through the class's MachineHealthCheck); the real KCP answers "can't remediate while waiting for
// a version upgrade to v1.36.4 to be propagated from Cluster.spec.topology" (RemediationDeferred). JoinGuard
// records that answer and says so in the check's status, never asks again, never takes another path. Once the
// hook lets the upgrade go, KCP acts on the request that stood all along, and the upgrade completes.
//
// (Without a hook the Cluster webhook refuses a version change while the control plane or a MachineDeployment has
// not finished the previous one, and the topology controller propagates an accepted change at once: KCP's check
// answers only while something holds the propagation.)
import { expect } from 'chai';
import type { Json } from '../../hack/testenv/kube-client.js';
import { hasNode, isControlPlane, isDeleting, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, describeCheck } from '../support/joinguard.js';
import { MachineRecord, REMEDIATE_ANNOTATION } from '../support/machine-record.js';
import { useScenario } from '../support/scenario.js';
import { extensionDiscovered, startUpgradeHold, type UpgradeHold } from '../support/upgrade-hold.js';
import { changeTopology } from '../sim/cluster-class.js';
import { DEFAULT_K8S_VERSION } from '../sim/topology.js';

const JOIN_TIMEOUT_S = 20;
const V2 = 'v1.36.4';
const REFUSAL = `KubeadmControlPlane can't remediate while waiting for a version upgrade to ${V2} to be propagated from Cluster.spec.topology`;

describe('ClusterClass (b): KCP defers remediation while a topology version upgrade waits to be propagated', function () {
  this.timeout(600_000);
  const s = useScenario({
    prefix: 'jg-ccdefer',
    cluster: 'ccdefer',
    checkName: 'control-plane',
    workers: [],
    waitJoined: true,
    topology: { controlPlaneReplicas: 1, workers: [{ name: 'md', replicas: 1 }] },
  });
  const seen = s.seen();
  let record: MachineRecord | undefined;
  let hold: UpgradeHold | undefined;
  after(async () => {
    await record?.stop();
    await hold?.stop();
  });

  it("records the owner's answer, says so, never re-asks or takes another path; KCP acts once the version is propagated", async () => {
    const { kube, capi, sim, namespace, cluster } = s;
    const kcp = async () => (await kube.list(capi.path('KubeadmControlPlane', namespace))).items[0] as Json;
    const cp = async () => (await s.machines()).filter(isControlPlane);
    record = await MachineRecord.start(kube, capi, namespace);
    hold = await startUpgradeHold(s.env, kube, namespace);
    await waitFor('CAPI discovered the upgrade hook', () => extensionDiscovered(kube, namespace), {
      timeoutMs: 60_000,
      describe: seen,
    });
    await createCheck(kube, namespace, 'control-plane', {
      clusterName: cluster,
      selector: { matchLabels: { 'cluster.x-k8s.io/control-plane': '' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });
    await s.startJoinGuard();

    // 1. Scale the control plane to 3; its second Machine never joins.
    const broken = sim.policy.neverJoin(
      { namespace, role: 'control-plane', version: DEFAULT_K8S_VERSION },
      { limit: 1 },
    );
    await changeTopology(kube, { namespace, name: cluster, apiVersion: capi.version, controlPlaneReplicas: 3 });
    const stuck = await waitFor(
      'the second control-plane Machine, its join failed',
      async () => {
        const name = broken.applied[0];
        return (
          name !== undefined &&
          sim.eventsOf(namespace, 'JoinFailed').some((e) => e.name === name) &&
          (await cp()).find((m) => m.metadata.name === name)
        );
      },
      { timeoutMs: 180_000, describe: seen },
    );

    // 2. Before its deadline, the operator asks for V2; the upgrade hook holds it.
    await changeTopology(kube, { namespace, name: cluster, apiVersion: capi.version, version: V2 });
    const bumpedAt = Date.now();
    await waitFor('the hook asked (and holding)', async () => hold!.calls.some((c) => c.held && c.to === V2), {
      timeoutMs: 60_000,
      describe: seen,
    });

    // 3. JoinGuard asks; KCP answers that it waits for V2 to be propagated (the hook holds it).
    const deferred = await waitFor(
      "KCP's answer: RemediationDeferred, waiting for the version upgrade",
      async () =>
        record!
          .of(stuck.metadata.uid)
          .find((c) => c.ownerRemediated === 'False/RemediationDeferred' && (c.ownerMessage ?? '').includes(REFUSAL)),
      { timeoutMs: 120_000, describe: seen },
    );
    expect(deferred.annotations[REMEDIATE_ANNOTATION], "asked through the class's MachineHealthCheck").to.not.equal(
      undefined,
    );
    expect((await kcp()).spec.version, 'the topology holds the control plane back').to.equal(DEFAULT_K8S_VERSION);

    const recorded = await waitFor(
      "the answer in the check's status",
      async () => {
        const c = await s.check();
        const r = c.status?.remediations?.find((x) => x.uid === stuck.metadata.uid);
        const p = checkCondition(c, 'Progressing');
        return r?.ownerReason === 'RemediationDeferred' && p?.message.includes('RemediationDeferred') && c;
      },
      { timeoutMs: 60_000, describe: seen },
    );
    const rec = recorded.status!.remediations!.find((x) => x.uid === stuck.metadata.uid)!;
    expect(rec, describeCheck(recorded)).to.include({ path: 'RemediateAnnotation', outcome: 'Deferred' });
    expect(rec.ownerMessage).to.contain(REFUSAL);
    const progressing = checkCondition(recorded, 'Progressing')!;

    // 4. A while of KCP refusing: one request, no second write, no other path (no deletion, no JoinGuardJoined).
    await new Promise((r) => setTimeout(r, 30_000));
    const mine = record.of(stuck.metadata.uid);
    expect(
      mine.some((c) => c.deleting),
      'deleted while KCP deferred',
    ).to.equal(false);
    const annotated = mine.map((c) => c.annotations[REMEDIATE_ANNOTATION] !== undefined);
    expect(
      annotated.slice(annotated.indexOf(true)).every(Boolean),
      'the annotation was never taken back and written again',
    ).to.equal(true);
    const writes = s.jg!.log.lines.filter((l) => l.includes('"mark written"') && l.includes(stuck.metadata.name));
    expect(writes, 'JoinGuard wrote its mark once').to.have.length(1);
    expect(
      mine.every((c) => !/JoinGuardJoined/.test(JSON.stringify(c))),
      'no other path',
    ).to.equal(true);
    const whileDeferred = await s.check();
    expect(whileDeferred.status?.remediations?.filter((x) => x.uid === stuck.metadata.uid)).to.have.length(1);
    expect(
      record.ownerAnswers(stuck.metadata.uid).filter((a) => a.includes(REFUSAL)).length,
      'KCP kept its answer',
    ).to.be.at.least(1);

    // 5. The hook lets the upgrade go; the topology propagates V2; KCP acts on the standing request.
    hold.release();
    const removed = await waitFor(
      'KCP deleting the stuck Machine once V2 is propagated',
      async () => record!.of(stuck.metadata.uid).find((c) => c.deleting),
      { timeoutMs: 240_000, describe: seen },
    );
    const done = await waitFor(
      `3 control-plane Machines and the worker at ${V2}, joined`,
      async () => {
        const ms = await s.machines();
        return ms.length === 4 && ms.every((m) => m.spec.version === V2 && hasNode(m) && !isDeleting(m)) && ms;
      },
      { timeoutMs: 420_000, describe: seen },
    );
    expect(done.filter(isControlPlane)).to.have.length(3);
    const final = await waitFor(
      'the check at AsExpected, the request Replaced',
      async () => {
        const c = await s.check();
        const r = c.status?.remediations?.find((x) => x.uid === stuck.metadata.uid);
        return checkCondition(c, 'Progressing')?.reason === 'AsExpected' && r?.outcome === 'Replaced' && c;
      },
      { timeoutMs: 60_000, describe: seen },
    );
    expect(final.status?.remediations, describeCheck(final)).to.have.length(1);
    expect(new Set(record.marked('joinguard').keys())).to.deep.equal(new Set([stuck.metadata.uid]));
    process.stderr.write(
      `[clusterclass-deferred] KCP: "${deferred.ownerMessage}" (${((deferred.at - bumpedAt) / 1000).toFixed(1)}s after the bump); ` +
        `JoinGuard: ${progressing.message.slice(0, 300)}; deferred for ${((removed.at - deferred.at) / 1000).toFixed(1)}s until the version was propagated; ` +
        `all at ${V2} ${((Date.now() - bumpedAt) / 1000).toFixed(1)}s after the bump\n`,
    );
  });
});
