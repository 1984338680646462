// SimBootstrapConfig reconciler (test-only): pretend worker bootstrap data. Like CABPK for a joining
// worker, it waits for the Cluster's control plane to be initialized, then (after `bootstrapDelayMs`)
// writes the data secret and reports it (`status.initialization.dataSecretCreated` or, v1beta1 contract,
// `status.ready`, with `status.dataSecretName`): the bootstrap contract fields that CAPI's Machine controller
// copies to the Machine.
import { isConflict, pathOf } from '../../hack/testenv/kube-client.js';
import { clusterOf, condition, ownerMachine, type Requeue, type SimContext } from './context.js';
import { SIM_BOOTSTRAP } from './crds.js';

// Configs already reported waiting, by uid (cache objects are replaced on every update).
const waitingLogged = new Set<string>();

export async function reconcileSimBootstrap(ctx: SimContext, namespace: string, name: string): Promise<Requeue> {
  const bc = ctx.caches.simBootstrapConfigs.get(namespace, name);
  if (!bc || bc.metadata.deletionTimestamp) return undefined;
  if (ctx.capi.isDataSecretCreated(bc)) return undefined;
  const machine = ownerMachine(ctx, bc);
  if (!machine) return undefined; // CAPI sets the owner reference; the Machine's watch event brings us back
  const clusterName = machine.spec?.clusterName as string;
  const cluster = clusterOf(ctx, namespace, clusterName);
  if (!ctx.capi.controlPlaneInitialized(cluster)) {
    if (!waitingLogged.has(bc.metadata.uid)) {
      waitingLogged.add(bc.metadata.uid);
      ctx.emit({
        type: 'WaitingForControlPlane',
        namespace,
        name: machine.metadata.name,
        cluster: clusterName,
        message: 'join data waits for the control plane to be initialized',
      });
    }
    return undefined; // a Cluster change re-queues every config of its namespace
  }
  const waited = Date.now() - Date.parse(bc.metadata.creationTimestamp);
  if (waited < ctx.opts.bootstrapDelayMs) return ctx.opts.bootstrapDelayMs - waited;

  try {
    await ctx.kube.create(`/api/v1/namespaces/${namespace}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'cluster.x-k8s.io/secret',
      metadata: {
        name,
        namespace,
        labels: { 'cluster.x-k8s.io/cluster-name': clusterName },
        ownerReferences: [{ apiVersion: bc.apiVersion, kind: bc.kind, name, uid: bc.metadata.uid, controller: true }],
      },
      // Opaque to everyone but the sim: JoinGuard never reads it.
      stringData: {
        value: `#cloud-config\n# SIMULATION: join data for ${namespace}/${machine.metadata.name}\n`,
        format: 'cloud-config',
      },
    });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  await ctx.kube.mergePatch(`${pathOf(SIM_BOOTSTRAP, namespace, name)}/status`, {
    metadata: { resourceVersion: bc.metadata.resourceVersion },
    status: { ...ctx.capi.dataSecretStatus(name), conditions: [condition('Ready', 'True', 'DataSecretAvailable')] },
  });
  waitingLogged.delete(bc.metadata.uid);
  ctx.emit({
    type: 'BootstrapDataCreated',
    namespace,
    name: machine.metadata.name,
    cluster: clusterName,
    message: `data secret ${name}`,
  });
  return undefined;
}
