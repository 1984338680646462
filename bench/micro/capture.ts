// `npx tsx bench/micro/capture.ts`: records the objects the micro-benchmark's fake apiserver serves, as CAPI
// v1.14's real managers write them (managedFields and all), into testing/fixtures.json:
//   machineRunning   a worker Machine that joined (a Node with its providerID exists; CAPI set nodeRef)
//   machineJoining   a worker Machine that is Provisioned and has no Node
//   cluster          its Cluster (initialized, connected)
//   mhc              a MachineHealthCheck over it, as CAPI left it after reconciling
// One control plane (hack/testenv), one Cluster of the benchmark's fleet (bench/fleet.ts), a few minutes.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from '../../hack/testenv/testenv.js';
import { installBenchCrds } from '../crds.js';
import { startBenchEnv } from '../env.js';
import {
  clusterName,
  createClusters,
  createMachine,
  createNamespace,
  fleetShape,
  NAMESPACE,
  restingMachines,
  type MachineSpec,
} from '../fleet.js';
import type { Json } from '../../hack/testenv/kube-client.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const CAPI = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${NAMESPACE}`;
let lastSeen: Json | undefined;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 180_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(500);
  }
}

async function main(): Promise<void> {
  const log = (l: string) => process.stderr.write(`${l}\n`);
  const bench = await startBenchEnv(log, await ensureBuilt(log));
  try {
    const kube = bench.driver;
    await installBenchCrds(kube);
    await createNamespace(kube);
    const shape = { ...fleetShape(40), clusters: 1 };
    // Its Cluster with the MHCs a ClusterClass makes (bench/fleet-objects.ts): `<cluster>-rest` selects the workers.
    const msUids = await createClusters(kube, shape, {
      server: new URL(bench.env.server),
      kubeconfigYaml: bench.workloadKubeconfigYaml,
    });
    const [joined, joining] = restingMachines(shape)
      .filter((m) => m.pool.endsWith('-rest'))
      .slice(0, 2) as [MachineSpec, MachineSpec];
    for (const m of [joined, joining]) await createMachine(kube, m, msUids);
    const provisioned = (name: string) => async () => {
      const m = await kube.get(`${CAPI}/machines/${name}`);
      return m?.status?.phase === 'Provisioned' ? m : undefined;
    };
    await until('Machines Provisioned', provisioned(joining.name));
    await until('Machines Provisioned', provisioned(joined.name));
    // The joined Machine's Node, in the "workload cluster" (the same apiserver): CAPI sets nodeRef from it.
    const node = `node-${joined.name}`;
    await kube.create('/api/v1/nodes', {
      metadata: { name: node, labels: { 'kubernetes.io/hostname': node } },
      spec: { providerID: `bench://${NAMESPACE}/${joined.name}` },
    });
    const now = new Date().toISOString();
    await kube.mergePatch(`/api/v1/nodes/${node}/status`, {
      status: {
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status',
            lastHeartbeatTime: now,
            lastTransitionTime: now,
          },
          ...['MemoryPressure', 'DiskPressure', 'PIDPressure'].map((type) => ({
            type,
            status: 'False',
            reason: `KubeletHasNo${type}`,
            message: '',
            lastHeartbeatTime: now,
            lastTransitionTime: now,
          })),
        ],
        addresses: [
          { type: 'InternalIP', address: '10.0.0.10' },
          { type: 'Hostname', address: node },
        ],
        nodeInfo: {
          machineID: 'a'.repeat(32),
          systemUUID: 'b'.repeat(32),
          bootID: 'c'.repeat(32),
          kernelVersion: '6.8.0-45-generic',
          osImage: 'Ubuntu 24.04.1 LTS',
          containerRuntimeVersion: 'containerd://1.7.22',
          kubeletVersion: 'v1.33.4',
          kubeProxyVersion: 'v1.33.4',
          operatingSystem: 'linux',
          architecture: 'amd64',
        },
      },
    });
    const machineRunning = await until('the joined Machine Running with its nodeRef', async () => {
      const m = await kube.get(`${CAPI}/machines/${joined.name}`);
      const healthy = (m?.status?.conditions ?? []).some((c: Json) => c.type === 'NodeHealthy' && c.status === 'True');
      lastSeen = m;
      return m?.status?.nodeRef?.name && m.status?.phase === 'Running' && healthy ? m : undefined;
    });
    await sleep(20_000); // the MHC's rate-limited reconciles write its status
    const fixtures = {
      capturedAt: new Date().toISOString(),
      from: 'CAPI v1.14.2 managers on hack/testenv (bench/micro/capture.ts)',
      machineRunning,
      machineJoining: await kube.get(`${CAPI}/machines/${joining.name}`),
      cluster: await kube.get(`${CAPI}/clusters/${clusterName(0)}`),
      mhc: await kube.get(`${CAPI}/machinehealthchecks/${joined.pool}`),
    };
    fs.writeFileSync(path.join(here, '..', '..', 'testing', 'fixtures.json'), `${JSON.stringify(fixtures, null, 1)}\n`);
    process.stderr.write(`wrote ${path.join(here, '..', '..', 'testing', 'fixtures.json')}\n`);
  } catch (e) {
    process.stderr.write(`last seen: ${JSON.stringify(lastSeen?.status)}\n`);
    throw e;
  } finally {
    await bench.stop();
  }
}

main().catch((e: Error) => {
  process.stderr.write(`FAILED: ${e.stack ?? e.message}\n`);
  process.exitCode = 1;
});
