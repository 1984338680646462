// The executor's live reads: before any write it reads live the Cluster and the Machines a write targets, so that
// the plan is made again on them (a Machine that joined meanwhile is left alone, cluster-api #12870). A Machine to be
// marked is read by writing its marker, which asks nothing, guarded by the cached resourceVersion: accepted, the
// answer is the live Machine; a 409 or any other answer reads it with a GET. What is read goes back into the caches.
import type { Logger } from 'winston';
import { capiResource } from '../../api/capi/resources.js';
import type { CapiApiVersion } from '../../api/capi/model.js';
import { ANNOTATION_REQUESTED_BY, CHECK_RESOURCE } from '../../api/v1alpha1/types.js';
import {
  ApiError,
  isConflict,
  isNotFound,
  pathOf,
  type Json,
  type Resource,
  type RestClient,
} from '../../runtime/rest.js';
import { factsOf, needsWrite, ref } from './machine-writes.js';
import { PATHS } from './marks.js';
import type { MachineTarget, MarkIntent, Plan, Snapshot } from './types.js';

/** What the live reads need of the executor's dependencies. */
export interface LiveReadDeps {
  rest: RestClient;
  apiVersion: CapiApiVersion;
  log: Logger;
  writeMetric: (kind: string, result: 'ok' | 'conflict' | 'gone' | 'error' | 'forbidden') => void;
  /** Fresher objects read or written go back into the caches. */
  remember: (kind: 'check' | 'machine' | 'cluster', raw: Json) => void;
}

/** Objects read live in this reconcile (null: read as gone). */
export interface Live {
  machines: Map<string, Json | null>;
  cluster?: Json | null;
  check?: Json;
}

/** The controller's view of one check: a snapshot from its caches, with the live objects in place of cached ones. */
export interface SnapshotSource {
  build(live: Live): Snapshot | undefined;
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
  if (withCluster) {
    live.cluster = cluster ?? null;
    if (cluster) deps.remember('cluster', cluster);
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

/**
 * The mark intent whose marker can be the Machine's live read: a mark on a status path (the annotation path carries
 * its marker in the mark's own patch), on a Machine the plan has from the cache only, whose marker is missing.
 */
export type MarkMarkIntent = Extract<MarkIntent, { want: 'mark' }> & { marker: string };

export function markerRead(p: Plan, s: Snapshot, uid: string): MarkMarkIntent | undefined {
  const i = p.intents.find((x) => x.machine.uid === uid);
  if (i === undefined || i.want !== 'mark' || i.marker === undefined || PATHS[i.path].write === 'annotation')
    return undefined;
  const f = factsOf(s, uid);
  return f !== undefined && f.requestedBy !== i.marker && needsWrite(i, f) ? { ...i, marker: i.marker } : undefined;
}

/**
 * Each Machine's marker, guarded by the resourceVersion the plan was made on (the cache's), in parallel: accepted,
 * the cached Machine was the live one and the answer is the live Machine (with the marker, which asks nothing); a
 * 409, or any other answer but a lost leadership (a Machine gone, a refusal, no answer), reads it with a GET.
 */
export async function readByMarker(
  deps: LiveReadDeps,
  res: Resource,
  intents: MarkMarkIntent[],
  live: Live,
): Promise<void> {
  await Promise.all(
    intents.map(async (i) => {
      const path = pathOf(res, i.machine.namespace, i.machine.name);
      try {
        const m = await deps.rest.mergePatch(path, {
          metadata: {
            resourceVersion: i.machine.resourceVersion,
            annotations: { [ANNOTATION_REQUESTED_BY]: i.marker },
          },
        });
        deps.writeMetric('marker', 'ok');
        return keepLive(deps, live, i.machine, m);
      } catch (e) {
        if (!(e instanceof ApiError)) throw e; // a lost leadership (WritesForbiddenError): nothing more, at once
        const result = isNotFound(e) ? 'gone' : 'error';
        deps.writeMetric('marker', isConflict(e) ? 'conflict' : result);
        deps.log.debug('the marker as the live read was not accepted: reading the Machine', {
          Machine: ref(i.machine),
          err: e.message,
        });
      }
      keepLive(deps, live, i.machine, await getOrNull(deps, path));
    }),
  );
}
