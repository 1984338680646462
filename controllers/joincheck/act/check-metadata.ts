// The check's own metadata, written by the executor in one merge patch guarded by the resourceVersion.
import {
  ANNOTATION_MEMORY,
  ANNOTATION_REQUESTED_BY,
  ANNOTATION_RESUME,
  CHECK_RESOURCE,
  CLUSTERCTL_ANNOTATION_BLOCK_MOVE,
  FINALIZER,
} from '../../../api/v1alpha1/types.js';
import { isConflict, isNotFound, pathOf, type Json } from '../../../runtime/client/rest.js';
import { DELETION_BOUND_MS } from '../requests/deletion.js';
import { checkWritten } from './live-reads.js';
import type { ExecutorDeps } from './deps.js';
import type { Plan, Snapshot, Live } from '../types.js';

/**
 * The check's own metadata: resume acted on, the Cluster as owner, clusterctl move's block-move and memory, the
 * finalizer. False when the check changed or went since (the next reconcile decides again).
 */
export async function writeCheckMetadata(deps: ExecutorDeps, s: Snapshot, p: Plan, live: Live): Promise<boolean> {
  const c = p.check;
  const meta = s.check.metadata;
  const annotations: Record<string, string | null> = {};
  const have = meta.annotations ?? {};
  if (c.removeResume !== undefined && have[ANNOTATION_RESUME] === c.removeResume) annotations[ANNOTATION_RESUME] = null;
  if (c.carryMemory !== undefined) {
    if (have[ANNOTATION_MEMORY] !== c.carryMemory) annotations[ANNOTATION_MEMORY] = c.carryMemory;
    if (CLUSTERCTL_ANNOTATION_BLOCK_MOVE in have) annotations[CLUSTERCTL_ANNOTATION_BLOCK_MOVE] = null;
  }
  if (c.blockMove) {
    if (!(CLUSTERCTL_ANNOTATION_BLOCK_MOVE in have)) annotations[CLUSTERCTL_ANNOTATION_BLOCK_MOVE] = 'joinguard.io';
    if (ANNOTATION_MEMORY in have) annotations[ANNOTATION_MEMORY] = null;
  }
  const body: Json = { metadata: { resourceVersion: meta.resourceVersion } };
  if (Object.keys(annotations).length > 0) body['metadata'].annotations = annotations;
  // A merge patch replaces the list whole, guarded by the resourceVersion: other controllers' finalizers are kept.
  const finalizers = meta.finalizers ?? [];
  if (c.addFinalizer && !finalizers.includes(FINALIZER)) body['metadata'].finalizers = [...finalizers, FINALIZER];
  if (c.removeFinalizer && finalizers.includes(FINALIZER))
    body['metadata'].finalizers = finalizers.filter((f) => f !== FINALIZER);
  // A merge patch replaces a list whole: the Cluster is added to the owners the check already has.
  if (c.ownerCluster !== undefined)
    body['metadata'].ownerReferences = [...(meta.ownerReferences ?? []), { ...c.ownerCluster, kind: 'Cluster' }];
  if (Object.keys(body['metadata']).length === 1) return true;
  checkWritten(live);
  try {
    const written = await deps.rest.mergePatch(pathOf(CHECK_RESOURCE, meta.namespace, meta.name), body);
    live.check = written;
    deps.remember('check', written);
    deps.writeMetric('check-metadata', 'ok');
    if (c.removeFinalizer) {
      const left = c.marksLeftBehind ?? [];
      deps.log.info(
        left.length > 0
          ? 'the deleted check goes with marks left (bound passed)'
          : 'every mark withdrawn: the deleted check goes',
        { left },
      );
      if (left.length > 0) {
        const message =
          `The check is deleted after ${DELETION_BOUND_MS / 60_000}m ` +
          `with JoinGuard's mark still on ${left.join(', ')} (writes ` +
          `refused, or the Machine unreadable). Each mark carries ${ANNOTATION_REQUESTED_BY} ` +
          `with this check's uid: a check whose scope holds the Machine ` +
          `withdraws it; withdraw it by hand otherwise (docs/runbook.md).`;
        deps.emit({ on: 'Check', reason: 'MarksLeftBehind', warning: true, message }, s.check);
      }
    }
  } catch (e) {
    if (!isConflict(e) && !isNotFound(e)) throw e;
    deps.writeMetric('check-metadata', isConflict(e) ? 'conflict' : 'gone');
    // The check changed since: read again into the cache, so the next reconcile decides on it even when its watch
    // event is late (a cache that lags would meet the same 409 every pass).
    if (isConflict(e)) await rememberLiveCheck(deps, meta.namespace, meta.name);
    return false;
  }
  return true;
}

async function rememberLiveCheck(deps: ExecutorDeps, namespace: string, name: string): Promise<void> {
  try {
    deps.remember('check', await deps.rest.get(pathOf(CHECK_RESOURCE, namespace, name)));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
