// CAPI upgraded in place under a running JoinGuard (issue 28 item 6): v1.10.10 (v1beta1) to v1.11 (v1beta2), as
// `clusterctl upgrade apply` does it — CAPI's managers replaced, its CRDs and webhooks re-applied, the
// infrastructure provider upgraded to the v1beta2 contract (the simulation restarted with it) — while JoinGuard,
// started on v1.10, keeps running. A Machine that never joins reaches its deadline after the upgrade and before
// JoinGuard's next discovery: JoinGuard, still on v1beta1, writes its mark through v1beta1, which v1.11 keeps under
// status.deprecated.v1beta1 where its owners do not look. Then discovery finds v1beta2, JoinGuard stops and is
// started again (here the spec is its Deployment), and the question is whether the new process writes the mark
// through v1beta2 and the v1.11 MachineSet acts on it. Its own control plane (it changes the release).
import fs from 'node:fs';
import { expect } from 'chai';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { ensureBuilt, startTestEnv, type TestEnv } from '../../hack/testenv/testenv.js';
import { capiApi } from '../sim/capi-api.js';
import { startSim, type Sim } from '../sim/sim.js';
import { createCluster } from '../sim/topology.js';
import {
  conditionOf,
  deleteClusters,
  hasNode,
  isControlPlane,
  joinClockStart,
  listMachines,
  waitFor,
} from '../support/cluster-view.js';
import {
  createCheck,
  describeCheck,
  getCheck,
  installJoinGuardCrd,
  startJoinGuard,
  type CapturedLog,
} from '../support/joinguard.js';
import type { RunningController } from '../../controllers/options.js';

const NAMESPACE = `jg-capi-upgrade-${process.pid}`;
const CLUSTER = 'cu';
const USER_AGENT = 'joinguard-e2e-capi-upgrade';
const JOIN_TIMEOUT_S = 45;
/** The first JoinGuard asks discovery again after 90 s (±10 %): after the stuck Machine's deadline. */
const FIRST_REDISCOVERY_MS = 90_000;
const WRITES_AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: Metadata
`;
const log = (line: string) => process.stderr.write(`${line}\n`);

interface StatusWrite {
  at: number;
  /** The version the request went through (the audit event's objectRef names the group apart). */
  apiVersion: string;
  code: number;
}

/** JoinGuard's writes of one Machine's status, from the audit log, with the API version they went through. */
function statusWrites(file: string, machine: string): StatusWrite[] {
  const out: StatusWrite[] = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.includes(USER_AGENT)) continue;
    let e: Json;
    try {
      e = JSON.parse(line) as Json;
    } catch {
      continue; // a line being written
    }
    const ref = (e.objectRef ?? {}) as Json;
    if (e.verb !== 'patch' && e.verb !== 'update') continue;
    if (ref.resource !== 'machines' || ref.subresource !== 'status' || ref.name !== machine) continue;
    out.push({ at: Date.parse(e.requestReceivedTimestamp), apiVersion: ref.apiVersion, code: e.responseStatus?.code });
  }
  return out;
}

describe('lifecycle: CAPI v1.10 -> v1.11 in place under a running JoinGuard', function () {
  this.timeout(900_000);
  let env: TestEnv;
  let kube: KubeClient;
  let sim: Sim;
  /** The JoinGuard processes, in order; the spec starts the next when one stops for a CAPI change. */
  const runs: { controller: RunningController; log: CapturedLog; changed?: string }[] = [];
  let restarting: Promise<void> | undefined;

  const startJoinGuardRun = async (rediscoveryMs: number): Promise<void> => {
    const run = await startJoinGuard(env.kubeConfig(), NAMESPACE, {
      userAgent: USER_AGENT,
      capiRediscoveryMs: rediscoveryMs,
      // The Deployment: the process exits after a CAPI change, and is started again.
      onCapiChanged: (why) => {
        Object.assign(run, { changed: why });
        restarting = startJoinGuardRun(5_000);
      },
    });
    runs.push(run);
  };
  /** What the process logged when it found CAPI at start. */
  const found = (run: { log: CapturedLog }) =>
    run.log.lines.map((l) => JSON.parse(l) as Json).find((l) => l.message === 'CAPI found');
  const seen = async () => {
    const capi = capiApi(env.capiApiVersion);
    const ms = await listMachines(kube, capi, NAMESPACE, CLUSTER).catch(() => []);
    const lines = ms.map(
      (m) =>
        `  ${m.metadata.name}: node=${m.status?.nodeRef?.name ?? '-'}${m.metadata.deletionTimestamp ? ' deleting' : ''} ` +
        `conditions=${JSON.stringify((m.status?.conditions ?? []).map((c: Json) => `${c.type}=${c.status}/${c.reason}`))}`,
    );
    const check = await getCheck(kube, NAMESPACE, 'workers').catch(() => undefined);
    return `${lines.join('\n')}\n${check ? describeCheck(check) : ''}\nJoinGuard log:\n${runs.at(-1)?.log.tail(15) ?? ''}`;
  };

  let v111Bin: string;

  before(async function () {
    // Both releases' binaries (build.sh: about 0.05 s each once built; a cold build of each takes minutes).
    this.timeout(3_600_000);
    const v110Bin = await ensureBuilt(log, 'v1.10');
    v111Bin = await ensureBuilt(log, 'v1.11');
    env = await startTestEnv({ capiRelease: 'v1.10', binDir: v110Bin, log, audit: { policy: WRITES_AUDIT_POLICY } });
    kube = env.kube();
    sim = await startSim(env.kube(), { capiApiVersion: 'v1beta1', kubeletPort: env.ports['sim-kubelet'] });
    await installJoinGuardCrd(kube);
    await createCluster(kube, {
      namespace: NAMESPACE,
      name: CLUSTER,
      workers: [{ name: 'md', replicas: 1, labels: { pool: 'workers' } }],
      ca: { certPem: env.caCertPem, keyPem: env.caKeyPem },
      apiVersion: 'v1beta1',
    });
    await waitFor(
      'the v1.10 cluster up, 2 joined Machines',
      async () => {
        const ms = await listMachines(kube, capiApi('v1beta1'), NAMESPACE, CLUSTER);
        return ms.length === 2 && ms.every(hasNode);
      },
      { timeoutMs: 180_000, describe: seen },
    );
  });

  after(async function () {
    this.timeout(120_000);
    await restarting?.catch(() => undefined);
    for (const r of runs) await r.controller.stop();
    if (kube) await deleteClusters(kube, capiApi(env.capiApiVersion), NAMESPACE).catch(() => undefined);
    await sim?.stop();
    kube?.close();
    await env?.stop();
  });

  it('a mark written through v1beta1 after the upgrade is written again through v1beta2 once JoinGuard restarts, and the v1.11 MachineSet replaces the Machine', async () => {
    const v1 = capiApi('v1beta1');
    await startJoinGuardRun(FIRST_REDISCOVERY_MS);
    expect(found(runs[0]!), 'the first JoinGuard').to.deep.include({ apiVersion: 'v1beta1', minor: 10 });
    await createCheck(kube, NAMESPACE, 'workers', {
      clusterName: CLUSTER,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
    });

    // A second worker whose VM never joins, on v1.10.
    const scaledAt = Date.now();
    sim.policy.neverJoin({ namespace: NAMESPACE, role: 'worker', createdAfter: scaledAt - 1000 }, { limit: 1 });
    await kube.mergePatch(v1.path('MachineDeployment', NAMESPACE, `${CLUSTER}-md`), { spec: { replicas: 2 } });
    const stuck = await waitFor(
      'the new worker provisioned (its join clock started)',
      async () => {
        const ms = await listMachines(kube, v1, NAMESPACE, CLUSTER);
        const m = ms.find((x) => !isControlPlane(x) && !hasNode(x));
        return m && conditionOf(m, 'InfrastructureReady')?.status === 'True' ? m : undefined;
      },
      { timeoutMs: 90_000, describe: seen },
    );
    const stuckName = stuck.metadata.name as string;
    const cluster = await kube.get(v1.path('Cluster', NAMESPACE, CLUSTER));
    const deadline = joinClockStart(v1, stuck, cluster) + JOIN_TIMEOUT_S * 1000;

    // clusterctl upgrade apply: v1.10's managers go, v1.11's CRDs, webhooks and managers come; then the
    // infrastructure provider's new release (the simulation, now on the v1beta2 contract).
    const upgradeStart = Date.now();
    await env.upgradeCapi('v1.11', { binDir: v111Bin });
    await sim.stop();
    sim = await startSim(env.kube(), { capiApiVersion: 'v1beta2', kubeletPort: env.ports['sim-kubelet'] });
    sim.policy.neverJoin({ namespace: NAMESPACE, name: stuckName });
    const upgraded = Date.now();
    log(
      `      [capi-upgrade] CAPI ${env.capiVersion} and the v1beta2 sim up in ${((upgraded - upgradeStart) / 1000).toFixed(1)} s; ` +
        `the stuck Machine's deadline is ${((deadline - upgraded) / 1000).toFixed(1)} s later`,
    );
    expect(deadline, 'the deadline falls after the upgrade (else the spec proves nothing)').to.be.above(upgraded);
    expect(runs.length, 'JoinGuard not restarted before the deadline').to.equal(1);

    const v2 = capiApi('v1beta2');
    const view = (m: Json | undefined) => ({
      v1beta2: conditionOf(m, 'HealthCheckSucceeded'),
      deprecated: ((m?.status?.deprecated?.v1beta1?.conditions ?? []) as Json[]).find(
        (c) => c.type === 'HealthCheckSucceeded',
      ),
    });
    // The v1beta1 JoinGuard marks it at its deadline: the mark lands where v1.11's owners do not read.
    const firstWrite = await waitFor(
      'the mark written through v1beta1 (the first JoinGuard, before it rediscovers CAPI)',
      async () => statusWrites(env.auditLog!, stuckName).find((w) => w.code < 300),
      { timeoutMs: JOIN_TIMEOUT_S * 1000 + 60_000, describe: seen },
    );
    expect(firstWrite.apiVersion).to.equal('v1beta1');
    expect(firstWrite.at).to.be.above(upgraded);
    const afterFirst = view(await kube.get(v2.path('Machine', NAMESPACE, stuckName)));
    expect(afterFirst.v1beta2, 'no v1beta2 HealthCheckSucceeded after the v1beta1 write').to.equal(undefined);
    expect(afterFirst.deprecated?.status, 'the v1beta1 mark, kept as a deprecated v1beta1 condition').to.equal('False');

    // Discovery finds v1beta2: the process stops, the Deployment starts it again, it finds v1beta2 and v1.11.
    const restarted = await waitFor('JoinGuard restarted after the CAPI change', async () => runs[1], {
      timeoutMs: FIRST_REDISCOVERY_MS * 1.1 + 30_000,
      describe: seen,
    });
    expect(runs[0]!.changed).to.match(/^API version v1beta1 -> v1beta2/);
    expect(found(restarted)).to.deep.include({ apiVersion: 'v1beta2', minor: 11 });

    // The new process writes the mark through v1beta2; the v1.11 MachineSet deletes the Machine.
    const v2Write = await waitFor(
      'the mark written through v1beta2 by the restarted JoinGuard',
      async () => statusWrites(env.auditLog!, stuckName).find((w) => w.apiVersion === 'v1beta2' && w.code < 300),
      { timeoutMs: 120_000, describe: seen },
    );
    const marked = view(await kube.get(v2.path('Machine', NAMESPACE, stuckName)));
    const gone = await waitFor(
      'the v1.11 MachineSet deletes the marked Machine and its replacement joins',
      async () => {
        const ms = await listMachines(kube, v2, NAMESPACE, CLUSTER);
        const workers = ms.filter((m) => !isControlPlane(m));
        return !ms.some((m) => m.metadata.name === stuckName) && workers.length === 2 && workers.every(hasNode)
          ? Date.now()
          : undefined;
      },
      { timeoutMs: 180_000, describe: seen },
    );
    log(
      `      [capi-upgrade] v1beta1 mark ${((firstWrite.at - deadline) / 1000).toFixed(1)} s after the deadline; ` +
        `JoinGuard restarted; v1beta2 mark ${((v2Write.at - firstWrite.at) / 1000).toFixed(1)} s after the v1beta1 one; ` +
        `Machine replaced ${((gone - v2Write.at) / 1000).toFixed(1)} s after it (v1beta2 HealthCheckSucceeded ` +
        `${marked.v1beta2?.status ?? 'gone'}/${marked.v1beta2?.reason ?? '-'})`,
    );
    const check = await getCheck(kube, NAMESPACE, 'workers');
    const rec = check.status?.remediations?.find((r) => r.machine === stuckName);
    expect(rec, describeCheck(check)).to.include({ path: 'OwnerRemediated', outcome: 'Replaced' });
    expect(check.status?.remediations?.length, 'one remediation, no second Machine asked').to.equal(1);
  });
});
