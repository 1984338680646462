// What e2e specs read back from the test control plane: Machines of a cluster, their conditions, and the
// remediation contract written by hand, all in the CAPI API version of the release under test (capi-api.ts):
// through v1beta2 on v1.11+, through v1beta1 on v1.10, where `status.conditions` are CAPI's v1beta1
// conditions (what v1.10's owners read) and the metav1 ones are under `status.v1beta2`.
import { retryOnConflict, type Json, type KubeClient } from '../../hack/testenv/kube-client.js';
import type { CapiApi } from '../sim/capi-api.js';

export { waitFor, type WaitOptions } from '../../hack/testenv/wait.js';

export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';

export async function listMachines(
  kube: KubeClient,
  capi: CapiApi,
  namespace: string,
  cluster: string,
): Promise<Json[]> {
  const list = await kube.list(capi.path('Machine', namespace), `${CLUSTER_NAME_LABEL}=${cluster}`);
  return list.items.sort(
    (a, b) =>
      String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)) ||
      String(a.metadata.name).localeCompare(String(b.metadata.name)),
  );
}

export const isControlPlane = (m: Json) => m.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined;
export const hasNode = (m: Json) => typeof m.status?.nodeRef?.name === 'string' && m.status.nodeRef.name !== '';
export const isDeleting = (m: Json) => m.metadata?.deletionTimestamp !== undefined;
/** A condition of `status.conditions` in the API version the object was read through. */
export const conditionOf = (o: Json | undefined, type: string): Json | undefined =>
  ((o?.status?.conditions ?? []) as Json[]).find((c) => c.type === type);

/** One line per Machine: name, phase, node, and the remediation-contract conditions. */
export function describeMachines(machines: Json[]): string {
  return machines
    .map((m) => {
      const hc = conditionOf(m, 'HealthCheckSucceeded');
      const or = conditionOf(m, 'OwnerRemediated');
      const or2 = (m.status?.v1beta2?.conditions as Json[] | undefined)?.find((c) => c.type === 'OwnerRemediated');
      return (
        `  ${m.metadata.name}${isControlPlane(m) ? ' (cp)' : ''}: phase=${m.status?.phase} node=${m.status?.nodeRef?.name ?? '-'}` +
        `${isDeleting(m) ? ' deleting' : ''}${hc ? ` HealthCheckSucceeded=${hc.status}/${hc.reason}` : ''}${or ? ` OwnerRemediated=${or.status}/${or.reason}` : ''}` +
        (or2 ? ` (v1beta2 OwnerRemediated=${or2.status}/${or2.reason})` : '')
      );
    })
    .join('\n');
}

export async function controlPlaneInitialized(
  kube: KubeClient,
  capi: CapiApi,
  namespace: string,
  cluster: string,
): Promise<boolean> {
  return capi.controlPlaneInitialized(await kube.get(capi.path('Cluster', namespace, cluster)));
}

/**
 * Marks a Machine with CAPI's remediation contract by hand, as an MHC does: HealthCheckSucceeded=False and
 * OwnerRemediated=False in the conditions the release's owners read (v1beta1 ones carry a severity). One
 * write on /status guarded by resourceVersion; a 409 (an owner wrote the Machine meanwhile) reads it again.
 */
export async function markForRemediation(
  kube: KubeClient,
  capi: CapiApi,
  namespace: string,
  name: string,
  reason = 'JoinTimeout',
): Promise<void> {
  return retryOnConflict(() => markOnce(kube, capi, namespace, name, reason));
}

async function markOnce(kube: KubeClient, capi: CapiApi, namespace: string, name: string, reason: string) {
  const path = capi.path('Machine', namespace, name);
  const m = await kube.get(path);
  if (!m) throw new Error(`Machine ${namespace}/${name} not found`);
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const severity = capi.version === 'v1beta1' ? { severity: 'Warning' } : {};
  const others = ((m.status?.conditions ?? []) as Json[]).filter(
    (c) => c.type !== 'HealthCheckSucceeded' && c.type !== 'OwnerRemediated',
  );
  await kube.mergePatch(`${path}/status`, {
    metadata: { resourceVersion: m.metadata.resourceVersion },
    status: {
      conditions: [
        ...others,
        {
          type: 'HealthCheckSucceeded',
          status: 'False',
          reason,
          message: 'marked by the e2e test',
          lastTransitionTime: now,
          ...severity,
        },
        {
          type: 'OwnerRemediated',
          status: 'False',
          reason: 'WaitingForRemediation',
          message: 'marked by the e2e test',
          lastTransitionTime: now,
          ...severity,
        },
      ],
    },
  });
}

/**
 * Deletes a namespace's Clusters (CAPI deletes their Machines and the sim their VMs), so that later specs do
 * not share the managers with clusters nobody looks at. The namespace stays: without kube-controller-manager
 * nothing would finalize it, and a terminating namespace refuses the creates CAPI makes while deleting.
 */
export async function deleteClusters(kube: KubeClient, capi: CapiApi, namespace: string): Promise<void> {
  const path = capi.path('Cluster', namespace);
  const clusters = await kube.list(path).catch(() => ({ items: [] as Json[] }));
  for (const c of clusters.items) await kube.delete(`${path}/${c.metadata.name}`).catch(() => false);
}

/**
 * Epoch ms a worker's join clock started, as DESIGN defines it: the latest of the Machine's creation, its
 * infrastructure and bootstrap conditions and the Cluster's ControlPlaneInitialized (whole seconds, as
 * conditions store them). Used to measure time from deadline to remediation.
 */
export function joinClockStart(capi: CapiApi, machine: Json, cluster: Json | undefined): number {
  const c = capi.clockConditions;
  const times = [
    Date.parse(machine.metadata.creationTimestamp),
    Date.parse(conditionOf(machine, c.infrastructure)?.lastTransitionTime ?? ''),
    Date.parse(conditionOf(machine, c.bootstrap)?.lastTransitionTime ?? ''),
    Date.parse(conditionOf(cluster, c.controlPlaneInitialized)?.lastTransitionTime ?? ''),
  ].filter((t) => !Number.isNaN(t));
  return Math.max(...times);
}
