// The executor's live reads: before any write it reads live the Cluster and the Machines whose new state the plan
// records without a write, so that the plan is made again on them; a Machine a write targets is read by that write
// (guarded by the resourceVersion judged, a 409 reads it with a GET and decides again: a Machine that joined meanwhile
// is left alone, cluster-api #12870). What is read goes back into the caches.
import { capiResource } from '../../../api/capi/resources.js';
import { CHECK_RESOURCE } from '../../../api/v1alpha1/types.js';
import { isNotFound, pathOf, type Json, type Resource } from '../../../runtime/client/rest.js';
import type { Live, MachineTarget, Snapshot } from '../types.js';
import type { LiveReadDeps } from './deps.js';

/**
 * The one rule for the Cluster before a Machine write (DESIGN: "Before any write"): read live after the check's
 * last write — ours, one whose reply was lost, or another writer's record a 409 showed — so a pause stored while
 * the check was written is seen.
 */
export function clusterStale(live: Live): boolean {
  return live.cluster === undefined || live.clusterReadAt !== (live.checkWrites ?? 0);
}

/** Called before each write of the check (status or metadata): the Cluster read before it is stale. */
export function checkWritten(live: Live): void {
  live.checkWrites = (live.checkWrites ?? 0) + 1;
}

/** The check is as the snapshot has it (same uid and resourceVersion, not being deleted). */
export async function checkUnchanged(deps: LiveReadDeps, s: Snapshot): Promise<boolean> {
  const meta = s.check.metadata;
  try {
    const c = await deps.rest.get(pathOf(CHECK_RESOURCE, meta.namespace, meta.name));
    return (
      c.metadata?.uid === meta.uid &&
      c.metadata?.resourceVersion === meta.resourceVersion &&
      c.metadata?.deletionTimestamp === undefined
    );
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}

export function resource(r: { group: string; version: string; plural: string }): Resource {
  return { group: r.group, version: r.version, plural: r.plural, namespaced: true };
}

export async function readLive(
  deps: LiveReadDeps,
  res: Resource,
  s: Snapshot,
  targets: MachineTarget[],
  live: Live,
  withCluster = true,
): Promise<void> {
  const clusterRes = resource(capiResource('Cluster', deps.apiVersion));
  const ns = s.check.metadata.namespace;
  const clusterName = s.check.spec.clusterName;
  const [cluster, ...machines] = await Promise.all([
    withCluster ? getOrNull(deps, pathOf(clusterRes, ns, clusterName)) : Promise.resolve(undefined),
    ...targets.map((t) => getOrNull(deps, pathOf(res, t.namespace, t.name))),
  ]);
  // The live Cluster is used for this pass only, never put in the caches: a live "paused" kept there would hold every
  // later pass on the cached plan (which writes nothing on a paused Cluster, so reads nothing live) until the
  // informer's unpause event — a joined Machine keeping its mark meanwhile (issue 35; docs/decisions/).
  if (withCluster) {
    live.cluster = cluster ?? null;
    live.clusterReadAt = live.checkWrites ?? 0;
  }
  targets.forEach((t, i) => keepLive(deps, live, t, machines[i] ?? null));
}

export async function getOrNull(deps: LiveReadDeps, path: string): Promise<Json | null> {
  try {
    return await deps.rest.get(path);
  } catch (e) {
    if (isNotFound(e)) return null;
    throw e;
  }
}

export function keepLive(deps: LiveReadDeps, live: Live, t: MachineTarget, m: Json | null): void {
  // A Machine of the same name but another uid is a new Machine: the one decided on is gone.
  live.machines.set(t.uid, m !== null && m.metadata?.uid === t.uid ? m : null);
  if (m !== null) deps.remember('machine', m);
}
