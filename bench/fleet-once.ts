// The fleet made once and restored per run (bench/fleet-cache.ts holds the cache's pure parts): what a restored
// control plane needs before and after CAPI's managers start. Every start has new certificates and ports, so the
// saved `<cluster>-kubeconfig` Secrets and BenchClusters' endpoints are re-pointed before the managers start, and
// the saved Leases (held by the build's managers, stopped) are deleted so the new managers lead at once instead of
// waiting out the old leases.
import type { Json, KubeClient } from '../hack/testenv/kube-client.js';
import { BENCH_CLUSTER } from './crds.js';
import { CAPI_LEASE_NAMESPACE } from './env.js';
import { clusterName, listWithRetry, pool, type FleetShape, type Owners } from './fleet.js';
import { benchPath, capiPath, kcpPath, NAMESPACE } from './fleet-objects.js';

const leasesPath = `/apis/coordination.k8s.io/v1/namespaces/${CAPI_LEASE_NAMESPACE}/leases`;
/** The apiserver's own identity Leases share the namespace; they are its, not CAPI's. */
const capiLease = (l: Json) => !String(l.metadata.name).startsWith('apiserver-');

export async function repointRestored(
  rest: KubeClient,
  shape: FleetShape,
  workloadKubeconfigYaml: string,
  server: URL,
  moreClusters: string[] = [],
): Promise<void> {
  const value = Buffer.from(workloadKubeconfigYaml).toString('base64');
  // Every saved Cluster: the fleet's and the burst's (bench/fleet.ts burstFleet).
  const names = [...Array.from({ length: shape.clusters }, (_, i) => clusterName(i)), ...moreClusters];
  await pool(names, 8, async (c) => {
    await rest.mergePatch(`/api/v1/namespaces/${NAMESPACE}/secrets/${c}-kubeconfig`, { data: { value } });
    await rest.mergePatch(benchPath(BENCH_CLUSTER, c), {
      spec: { controlPlaneEndpoint: { host: server.hostname, port: Number(server.port) } },
    });
  });
  for (const l of (await rest.list(leasesPath)).items.filter(capiLease))
    await rest.delete(`${leasesPath}/${l.metadata.name}`);
}

/** CAPI's three managers each hold a Lease (they elect anew after a restore). */
export async function capiLeasesHeld(rest: KubeClient): Promise<boolean> {
  const held = (await rest.list(leasesPath)).items.filter((l) => capiLease(l) && l.spec?.holderIdentity);
  return held.length >= 3;
}

/**
 * After a restore the apiserver answers 429 "storage is (re)initializing" for a while for each custom resource
 * (its watch cache fills from etcd): waits until each of the fleet's lists answers.
 */
export async function storageReady(rest: KubeClient, timeoutMs = 120_000): Promise<void> {
  const paths = ['machines', 'machinesets', 'clusters', 'machinehealthchecks'].map((p) => capiPath(p));
  paths.push(
    kcpPath(),
    benchPath(BENCH_CLUSTER),
    `/apis/joinguard.io/v1alpha1/namespaces/${NAMESPACE}/machinejoinchecks`,
  );
  const deadline = Date.now() + timeoutMs;
  for (const p of paths)
    for (;;) {
      const res = await rest.send('GET', `${p}?limit=1`);
      if (res.status === 200) break;
      if (res.status !== 429 || Date.now() > deadline)
        throw new Error(`GET ${p}: ${res.status} ${res.body.slice(0, 200)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
}

/** The owners of the fleet's Machines as saved: MachineSets and KubeadmControlPlanes by name. */
export async function readOwners(rest: KubeClient): Promise<Owners> {
  const owners: Owners = new Map();
  for (const p of [capiPath('machinesets'), kcpPath()])
    for (const o of (await listWithRetry(rest, p)).items as Json[]) owners.set(o.metadata.name, o.metadata.uid);
  return owners;
}
