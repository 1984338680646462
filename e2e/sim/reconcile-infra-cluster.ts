// SimCluster reconciler (test-only): a pretend infrastructure cluster. It fills in the control-plane
// endpoint (the test apiserver, which stands in for every workload cluster) and reports itself provisioned
// after `clusterDelayMs` (status.initialization.provisioned or, v1beta1 contract, status.ready): the
// InfraCluster contract fields that the Cluster controller copies.
import { condition, type Requeue, type SimContext } from './context.js';
import { SIM_CLUSTER } from './crds.js';
import { pathOf } from '../../hack/testenv/kube-client.js';

export async function reconcileSimCluster(ctx: SimContext, namespace: string, name: string): Promise<Requeue> {
  const sc = ctx.caches.simClusters.get(namespace, name);
  if (!sc || sc.metadata.deletionTimestamp) return undefined;
  const path = pathOf(SIM_CLUSTER, namespace, name);

  const endpoint = sc.spec?.controlPlaneEndpoint;
  if (!endpoint?.host || !endpoint?.port) {
    await ctx.kube.mergePatch(path, {
      metadata: { resourceVersion: sc.metadata.resourceVersion },
      spec: { controlPlaneEndpoint: { host: ctx.opts.endpoint.host, port: ctx.opts.endpoint.port } },
    });
    return undefined; // the watch brings the change back
  }
  if (ctx.capi.isProvisioned(sc)) return undefined;

  const waited = Date.now() - Date.parse(sc.metadata.creationTimestamp);
  if (waited < ctx.opts.clusterDelayMs) return ctx.opts.clusterDelayMs - waited;
  await ctx.kube.mergePatch(`${path}/status`, {
    metadata: { resourceVersion: sc.metadata.resourceVersion },
    status: { ...ctx.capi.provisionedStatus(), conditions: [condition('Ready', 'True', 'Provisioned')] },
  });
  ctx.emit({
    type: 'ClusterProvisioned',
    namespace,
    name,
    cluster: name,
    message: `endpoint ${endpoint.host}:${endpoint.port}`,
  });
  return undefined;
}
