// What e2e specs read back from the test control plane: Machines of a cluster (v1beta2), their
// conditions, and a wait helper that says what it was waiting for when it gives up. Tests may poll;
// the controller under test never does.
import type { Json, Kube } from '../sim/kube.js';

export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Extra text for the failure message (the state seen last). */
  describe?: () => string | Promise<string>;
}

/** Calls fn until it returns something other than undefined/false; throws after the timeout naming `what`. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, opts: WaitOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const seen = opts.describe ? await Promise.resolve(opts.describe()).catch((e) => `(describe failed: ${e})`) : '';
      throw new Error(`timed out after ${opts.timeoutMs ?? 60_000}ms waiting for ${what}` +
        `${lastError ? `; last error: ${lastError instanceof Error ? lastError.message : String(lastError)}` : ''}${seen ? `\n${seen}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 250));
  }
}

export const machinesPath = (namespace: string) => `/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/machines`;

export async function listMachines(kube: Kube, namespace: string, cluster: string): Promise<Json[]> {
  const list = await kube.list(machinesPath(namespace), `${CLUSTER_NAME_LABEL}=${cluster}`);
  return list.items.sort((a, b) => String(a.metadata.creationTimestamp).localeCompare(String(b.metadata.creationTimestamp)) || String(a.metadata.name).localeCompare(String(b.metadata.name)));
}

export const isControlPlane = (m: Json) => m.metadata?.labels?.[CONTROL_PLANE_LABEL] !== undefined;
export const hasNode = (m: Json) => typeof m.status?.nodeRef?.name === 'string' && m.status.nodeRef.name !== '';
export const isDeleting = (m: Json) => m.metadata?.deletionTimestamp !== undefined;
export const conditionOf = (o: Json | undefined, type: string): Json | undefined =>
  ((o?.status?.conditions ?? []) as Json[]).find((c) => c.type === type);

/** One line per Machine: name, phase, node, and the remediation-contract conditions. */
export function describeMachines(machines: Json[]): string {
  return machines.map((m) => {
    const hc = conditionOf(m, 'HealthCheckSucceeded');
    const or = conditionOf(m, 'OwnerRemediated');
    return `  ${m.metadata.name}${isControlPlane(m) ? ' (cp)' : ''}: phase=${m.status?.phase} node=${m.status?.nodeRef?.name ?? '-'}` +
      `${isDeleting(m) ? ' deleting' : ''}${hc ? ` HealthCheckSucceeded=${hc.status}/${hc.reason}` : ''}${or ? ` OwnerRemediated=${or.status}/${or.reason}` : ''}`;
  }).join('\n');
}

/** The Cluster's v1beta2 status.initialization.controlPlaneInitialized. */
export async function controlPlaneInitialized(kube: Kube, namespace: string, cluster: string): Promise<boolean> {
  const c = await kube.get(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/clusters/${cluster}`);
  return c?.status?.initialization?.controlPlaneInitialized === true;
}

/**
 * Marks a Machine with CAPI's remediation contract by hand (v1beta2 status.conditions, as an MHC does):
 * HealthCheckSucceeded=False and OwnerRemediated=False. One write on /status guarded by resourceVersion.
 */
export async function markForRemediation(kube: Kube, namespace: string, name: string, reason = 'JoinTimeout'): Promise<void> {
  const path = `${machinesPath(namespace)}/${name}`;
  const m = await kube.get(path);
  if (!m) throw new Error(`Machine ${namespace}/${name} not found`);
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const others = ((m.status?.conditions ?? []) as Json[]).filter((c) => c.type !== 'HealthCheckSucceeded' && c.type !== 'OwnerRemediated');
  await kube.mergePatch(`${path}/status`, {
    metadata: { resourceVersion: m.metadata.resourceVersion },
    status: {
      conditions: [
        ...others,
        { type: 'HealthCheckSucceeded', status: 'False', reason, message: 'marked by the e2e test', lastTransitionTime: now },
        { type: 'OwnerRemediated', status: 'False', reason: 'WaitingForRemediation', message: 'marked by the e2e test', lastTransitionTime: now },
      ],
    },
  });
}

/**
 * Deletes a namespace's Clusters (CAPI deletes their Machines and the sim their VMs), so that later specs do
 * not share the managers with clusters nobody looks at. The namespace stays: without kube-controller-manager
 * nothing would finalize it, and a terminating namespace refuses the creates CAPI makes while deleting.
 */
export async function deleteClusters(kube: Kube, namespace: string): Promise<void> {
  const path = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/clusters`;
  const clusters = await kube.list(path).catch(() => ({ items: [] as Json[] }));
  for (const c of clusters.items) await kube.delete(`${path}/${c.metadata.name}`).catch(() => false);
}

/**
 * Epoch ms a worker's join clock started, as DESIGN defines it from v1beta2 conditions: the latest of the
 * Machine's creation, InfrastructureReady, BootstrapConfigReady and the Cluster's ControlPlaneInitialized
 * (whole seconds, as conditions store them). Used to measure time from deadline to remediation.
 */
export function joinClockStart(machine: Json, cluster: Json | undefined): number {
  const times = [
    Date.parse(machine.metadata.creationTimestamp),
    Date.parse(conditionOf(machine, 'InfrastructureReady')?.lastTransitionTime ?? ''),
    Date.parse(conditionOf(machine, 'BootstrapConfigReady')?.lastTransitionTime ?? ''),
    Date.parse(conditionOf(cluster, 'ControlPlaneInitialized')?.lastTransitionTime ?? ''),
  ].filter((t) => !Number.isNaN(t));
  return Math.max(...times);
}
