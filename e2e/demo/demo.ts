// `npm run demo`: JoinGuard on the local control plane (real kube-apiserver, etcd and CAPI managers) with a
// simulated infrastructure provider. A demo cluster (1 control plane, 3 workers) comes up; then
//   act 1: one worker never joins — JoinGuard asks CAPI to replace it, the MachineSet does, it joins;
//   act 2: the join credential expires — the first failure is rebuilt, the second stalls the check with
//          BootstrapCredentialSuspect instead of rebuilding forever;
//   act 3: the credential is rotated — the canary joins, the suspicion clears, the rest is replaced;
//   act 4: a rolling upgrade of the pool (a new image, maxSurge 1, maxUnavailable 0) whose first new VM fails to
//          join — JoinGuard asks the new MachineSet for it, the rollout completes, no old Machine is touched.
// It ends by itself and stops everything it started. JoinGuard's JSON log goes to a file (path printed). Each act's
// closing line (acts.ts) is printed only once the cluster and the check's status show it; otherwise the demo exits 1
// naming what is missing (CI runs it: e2e/demo/demo.test.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestEnv } from '../../hack/testenv/testenv.js';
import { conditionOf, hasNode, isControlPlane, listMachines, waitFor } from '../support/cluster-view.js';
import { checkCondition, createCheck, getCheck, installJoinGuardCrd, startJoinGuard } from '../support/joinguard.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { capiApi } from '../sim/capi-api.js';
import { startSim, type Sim } from '../sim/sim.js';
import { createCluster, rollWorkerPool } from '../sim/topology.js';
import { Screen } from './screen.js';
import { ACT_ENDS, actEnded } from './acts.js';
import type { RunningController } from '../../controllers/options.js';

const NS = 'demo';
const CLUSTER = 'demo';
const JOIN_TIMEOUT_S = 15;
const JOIN_TIMEOUT = `${JOIN_TIMEOUT_S}s`;
const PROBE_INTERVAL = '30s';
/** How long the check's status may take to say what the cluster already shows (display status is coalesced). */
const STATUS_WAIT_MS = 60_000;

type Remediation = {
  machine: string;
  uid: string;
  time: string;
  outcome: string;
  canary?: boolean;
  owner?: { name?: string };
};
const remediationsOf = (check: Json): Remediation[] => (check.status?.remediations ?? []) as Remediation[];
/** The records a set of earlier ones lacks (the history is bounded: compared by Machine uid and time). */
const newSince = (now: Remediation[], before: Remediation[]) => {
  const seen = new Set(before.map((r) => `${r.uid}|${r.time}`));
  return now.filter((r) => !seen.has(`${r.uid}|${r.time}`));
};

async function main(): Promise<void> {
  const t0 = Date.now();
  const logFile = path.join(os.tmpdir(), `joinguard-demo-${process.pid}.log`);
  console.log('Starting the local control plane (the first run builds it from Go modules: minutes, with progress) ...');
  const env = await startTestEnv({ log: (l) => console.log(l) });
  let sim: Sim | undefined;
  let jg: RunningController | undefined;
  let kube: KubeClient | undefined;
  const capi = capiApi(env.capiApiVersion);
  let timer: NodeJS.Timeout | undefined;
  try {
    kube = env.kube();
    sim = await startSim(env.kube(), {
      provisionDelayMs: 1500,
      bootDelayMs: 1500,
      capiApiVersion: env.capiApiVersion,
      kubeletPort: env.ports['sim-kubelet'],
    });
    await installJoinGuardCrd(kube);
    const log = fs.createWriteStream(logFile);
    const started = await startJoinGuard(env.kubeConfig(), NS, { logLevel: 'info' });
    jg = started.controller;
    const flush = setInterval(() => {
      for (const l of started.log.lines.splice(0)) log.write(`${l}\n`);
    }, 500);

    const screen = new Screen();
    let act = 'the demo cluster comes up (1 control plane, 3 workers)';
    const draw = async () => {
      const [machines, cluster, sims, check, events] = await Promise.all([
        listMachines(kube!, capi, NS, CLUSTER),
        kube!.get(capi.path('Cluster', NS, CLUSTER)),
        kube!.list(`/apis/infrastructure.sim.joinguard.io/v1alpha1/namespaces/${NS}/simmachines`),
        getCheck(kube!, NS, 'workers').catch(() => undefined),
        kube!.list(`/api/v1/namespaces/${NS}/events`),
      ]);
      screen.draw({
        act,
        elapsedS: (Date.now() - t0) / 1000,
        machines,
        cluster,
        joinTimeoutMs: JOIN_TIMEOUT_S * 1000,
        simMachines: new Map(sims.items.map((s) => [s.metadata.name as string, s])),
        check,
        // Creation order (resourceVersion): events of one second keep the order they were made in.
        k8sEvents: events.items
          .filter((e) => e.source?.component === 'joinguard')
          .sort((a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion)),
        simEvents: sim!.eventsOf(NS),
      });
    };
    timer = setInterval(() => void draw().catch(() => undefined), 1000);
    const step = (text: string) => {
      act = text;
      screen.say(`\n>>> ${text}`);
    };

    const workers = async () => (await listMachines(kube!, capi, NS, CLUSTER)).filter((m) => !isControlPlane(m));
    const firstWorker = await (async () => {
      await createCluster(kube, {
        namespace: NS,
        name: CLUSTER,
        ca: { certPem: env.caCertPem, keyPem: env.caKeyPem },
        apiVersion: capi.version,
        workers: [
          {
            name: 'md',
            replicas: 3,
            labels: { pool: 'workers' },
            image: 'sim-image-1.0',
            rollout: { maxSurge: 1, maxUnavailable: 0 },
          },
        ],
      });
      return waitFor('the first worker', async () => (await workers())[0]?.metadata.name as string | undefined, {
        timeoutMs: 60_000,
      });
    })();
    sim.policy.neverJoin({ namespace: NS, name: firstWorker });
    await createCheck(kube, NS, 'workers', {
      clusterName: CLUSTER,
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: JOIN_TIMEOUT,
      suspicion: { probeInterval: PROBE_INTERVAL, maxProbeInterval: '2m' },
    });

    step(`act 1: worker ${firstWorker} never joins; joinTimeout is ${JOIN_TIMEOUT}`);
    await waitFor(
      'the stuck worker replaced and 3 workers joined',
      async () => {
        const w = await workers();
        return !w.some((m) => m.metadata.name === firstWorker) && w.length === 3 && w.every(hasNode);
      },
      { timeoutMs: 180_000 },
    );
    // JoinGuard's own record says it asked, and that the old Machine is gone (not someone else's deletion).
    await waitFor(
      `act 1's end: the check records ${firstWorker} as Replaced`,
      async () =>
        remediationsOf(await getCheck(kube!, NS, 'workers')).some(
          (r) => r.machine === firstWorker && r.outcome === 'Replaced',
        ),
      { timeoutMs: STATUS_WAIT_MS },
    ).catch((e: Error) => actEnded(ACT_ENDS[0], [e.message]));
    step(ACT_ENDS[0]);
    await pause(4000);

    step('act 2: the join credential expires; the pool scales from 3 to 5 workers');
    const beforeAct2 = remediationsOf(await getCheck(kube, NS, 'workers'));
    sim.policy.expireCredential({ namespace: NS });
    await kube.mergePatch(capi.path('MachineDeployment', NS, `${CLUSTER}-md`), { spec: { replicas: 5 } });
    await waitFor(
      'BootstrapCredentialSuspect',
      async () =>
        checkCondition(await getCheck(kube!, NS, 'workers'), 'Progressing')?.reason === 'BootstrapCredentialSuspect',
      { timeoutMs: 120_000 },
    );
    {
      // The first failure rebuilt, the second not: exactly one rebuild of act 2 that is not a canary.
      const c = await getCheck(kube, NS, 'workers');
      const rebuilt = newSince(remediationsOf(c), beforeAct2).filter((r) => !r.canary);
      actEnded(ACT_ENDS[1], [
        (c.status?.consecutiveJoinFailures ?? 0) < 2 &&
          `consecutiveJoinFailures is ${c.status?.consecutiveJoinFailures ?? 0}, not 2 or more`,
        rebuilt.length !== 1 &&
          `${rebuilt.length} Machines rebuilt in act 2 (${rebuilt.map((r) => r.machine).join(', ')}), not one`,
      ]);
    }
    step(ACT_ENDS[1]);
    screen.say('    (one canary rebuilt after 30s while suspected)');
    await pause(12_000);

    step('act 3: the credential is rotated; the canary will join and clear the suspicion');
    sim.policy.rotateCredential({ namespace: NS });
    await waitFor(
      'all 5 workers joined and the check back to AsExpected',
      async () => {
        const w = await workers();
        const c = await getCheck(kube!, NS, 'workers');
        return (
          w.length === 5 &&
          w.every(hasNode) &&
          checkCondition(c, 'Progressing')?.reason === 'AsExpected' &&
          !w.some((m) => conditionOf(m, 'HealthCheckSucceeded')?.status === 'False')
        );
      },
      { timeoutMs: 240_000 },
    );
    // Failed VMs stay failed (the sim, like kubeadm): only a canary rebuilt while suspected can have cleared it.
    actEnded(ACT_ENDS[2], [
      !remediationsOf(await getCheck(kube, NS, 'workers')).some((r) => r.canary) && 'no canary in status.remediations',
    ]);
    step(ACT_ENDS[2]);
    await pause(4000);

    step('act 4: a rolling upgrade; the pool moves to image sim-image-1.1 and its first new VM fails to join');
    const oldWorkers = new Set((await workers()).map((m) => m.metadata.uid as string));
    const oldOwners = new Set(
      (await workers()).flatMap((m) => ((m.metadata.ownerReferences ?? []) as Json[]).map((o) => o.name as string)),
    );
    const beforeAct4 = remediationsOf(await getCheck(kube, NS, 'workers'));
    sim.policy.neverJoin({ namespace: NS, image: 'sim-image-1.1' }, { limit: 1 });
    await rollWorkerPool(kube, {
      namespace: NS,
      cluster: CLUSTER,
      pool: 'md',
      revision: 'r2',
      image: 'sim-image-1.1',
      apiVersion: capi.version,
    });
    await waitFor(
      'all 5 workers on the new image, joined',
      async () => {
        const w = await workers();
        const images = await kube!.list(`/apis/infrastructure.sim.joinguard.io/v1alpha1/namespaces/${NS}/simmachines`);
        const onNew = new Set(
          images.items.filter((x) => x.spec?.image === 'sim-image-1.1').map((x) => x.metadata.name as string),
        );
        return (
          w.length === 5 &&
          w.every((m) => hasNode(m) && !oldWorkers.has(m.metadata.uid) && onNew.has(m.spec.infrastructureRef.name))
        );
      },
      { timeoutMs: 300_000 },
    );
    {
      const asked = newSince(remediationsOf(await getCheck(kube, NS, 'workers')), beforeAct4);
      actEnded(ACT_ENDS[3], [
        asked.length === 0 && 'no remediation recorded during the rollout',
        ...asked.map(
          (r) =>
            (oldWorkers.has(r.uid) && `${r.machine}, an old Machine, was asked for`) ||
            ((!r.owner?.name || oldOwners.has(r.owner.name)) &&
              `${r.machine} was asked of ${r.owner?.name ?? 'no owner'}, not the new MachineSet`),
        ),
      ]);
    }
    step(ACT_ENDS[3]);
    await draw();
    clearInterval(timer);
    timer = undefined;
    clearInterval(flush);
    for (const l of started.log.lines.splice(0)) log.write(`${l}\n`);
    log.end();
    const c = await getCheck(kube, NS, 'workers');
    summary(c.status?.remediations ?? [], (Date.now() - t0) / 1000, logFile);
  } finally {
    if (timer) clearInterval(timer);
    await jg?.stop().catch(() => undefined);
    await sim?.stop().catch(() => undefined);
    kube?.close();
    await env.stop();
  }
}

function summary(remediations: Json[], elapsedS: number, logFile: string): void {
  console.log('\nWhat JoinGuard did:');
  for (const r of remediations)
    console.log(`  ${r.time}  ${r.machine}  ${r.kind}  ${r.path}  ${r.outcome}${r.canary ? '  (canary)' : ''}`);
  console.log(
    `\nDemo finished in ${elapsedS.toFixed(0)}s. JoinGuard's log: ${logFile}. Everything it started has stopped.`,
  );
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`demo failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
