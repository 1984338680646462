// One Machine's write (executor.ts calls it for each intent): only what the live Machine misses, guarded by the
// resourceVersion the decision was made on (and its uid for a delete); the marker first, then the mark as its path
// writes it (PATHS), a withdrawal's marker last. 404 is gone, 409 a conflict to decide again; a lost leadership
// throws; any other refusal is this Machine's.
import type { Logger } from 'winston';
import {
  markForRemediation,
  setJoinGuardCondition,
  statusPatch,
  withdrawConditions,
} from '../../api/capi/remediation-writes.js';
import { carriesAnyMark, type CapiApiVersion, type MachineFacts } from '../../api/capi/model.js';
import { ANNOTATION_REQUESTED_BY, CAPI_ANNOTATION_REMEDIATE_MACHINE } from '../../api/v1alpha1/types.js';
import { isConflict, isNotFound, pathOf, type Json, type Resource, type RestClient } from '../../runtime/rest.js';
import { causedMarks, PATHS } from './marks.js';
import type { MarkIntent, Snapshot } from './types.js';

/** What a Machine write needs of the executor's dependencies. */
export interface WriteDeps {
  rest: RestClient;
  apiVersion: CapiApiVersion;
  log: Logger;
  writeMetric: (kind: string, result: 'ok' | 'conflict' | 'gone' | 'error' | 'forbidden') => void;
  remember: (kind: 'check' | 'machine' | 'cluster', raw: Json) => void;
  now: () => number;
}

export type Refused = { want: MarkIntent['want']; error: Error };
export type Converged = 'ok' | 'none' | 'gone' | 'conflict' | 'unread' | Refused;

/** Whether the Machine, as these facts show it, still misses what the intent wants. */
export function needsWrite(i: MarkIntent, m: MachineFacts | undefined): boolean {
  if (m === undefined || m.deletingSince !== undefined) return false;
  switch (i.want) {
    case 'delete':
      // Not over someone else's mark (JoinGuard's Delete path writes none): its owner replaces it already.
      return m.healthCheckSucceeded?.status !== 'False' && !m.remediateAnnotation;
    case 'withdraw': {
      const c = causedMarks(m, i.path);
      return c.healthCheck || c.annotation || c.condition || (i.marker !== undefined && m.requestedBy === i.marker);
    }
    case 'mark':
      // Only where the Machine carries no mark at all: never over someone else's, never re-asserting an owner's —
      // but the annotation path's own mark whose marker names another uid (a moved check's, clusterctl move) gets it.
      return (
        !carriesAnyMark(m) ||
        (i.path === 'RemediateAnnotation' &&
          i.marker !== undefined &&
          m.remediateAnnotation &&
          m.requestedBy !== undefined &&
          m.requestedBy !== i.marker)
      );
  }
}

export function ref(t: { name: string; namespace: string }) {
  return { namespace: t.namespace, name: t.name };
}

export function factsOf(s: Snapshot, uid: string): MachineFacts | undefined {
  return s.machines.find((m) => m.uid === uid);
}

export async function converge(
  deps: WriteDeps,
  res: Resource,
  i: MarkIntent,
  live: { machines: ReadonlyMap<string, Json | null> },
  s: Snapshot,
): Promise<Converged> {
  const raw = live.machines.get(i.machine.uid);
  const facts = factsOf(s, i.machine.uid);
  if (raw === null) return 'gone';
  if (!needsWrite(i, facts)) return 'none';
  if (raw === undefined) return 'unread'; // never written from the cache alone
  const path = pathOf(res, i.machine.namespace, i.machine.name);
  const rv: string = raw.metadata.resourceVersion;
  const now = new Date(deps.now());
  const log = { Machine: ref(i.machine), write: i.want };
  try {
    switch (i.want) {
      case 'delete':
        await deps.rest.deleteWithPreconditions(path, i.machine.uid, rv);
        break;
      case 'mark': {
        // The marker first (recognisable from the Machine alone), then the mark; the annotation path in one patch.
        const marker =
          i.marker !== undefined && facts!.requestedBy !== i.marker ? { [ANNOTATION_REQUESTED_BY]: i.marker } : {};
        if (PATHS[i.path].write === 'annotation') {
          deps.remember(
            'machine',
            await deps.rest.mergePatch(path, {
              metadata: { resourceVersion: rv, annotations: { ...marker, [CAPI_ANNOTATION_REMEDIATE_MACHINE]: '' } },
            }),
          );
          break;
        }
        let current = raw;
        if (Object.keys(marker).length > 0) {
          current = await deps.rest.mergePatch(path, { metadata: { resourceVersion: rv, annotations: marker } });
          deps.remember('machine', current);
        }
        const write =
          PATHS[i.path].write === 'joinGuardCondition'
            ? setJoinGuardCondition(current, deps.apiVersion, {
                status: 'False',
                reason: i.kind,
                message: i.message,
                now,
              })
            : markForRemediation(current, deps.apiVersion, {
                kind: i.kind,
                message: i.message,
                now,
                setOwnerRemediated: true,
              });
        deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(current, write)));
        break;
      }
      case 'withdraw': {
        const c = causedMarks(facts!, i.path);
        const conditions = c.healthCheck || c.condition;
        const marker = i.marker !== undefined && facts!.requestedBy === i.marker;
        let current = raw;
        if (c.annotation || (marker && !conditions)) {
          // First the annotation, so the MachineHealthCheck stops marking it; then the conditions; the marker last.
          const annotations = {
            ...(c.annotation ? { [CAPI_ANNOTATION_REMEDIATE_MACHINE]: null } : {}),
            ...(marker && !conditions ? { [ANNOTATION_REQUESTED_BY]: null } : {}),
          };
          current = await deps.rest.mergePatch(path, { metadata: { resourceVersion: rv, annotations } });
          deps.remember('machine', current);
        }
        if (conditions) {
          const write = withdrawConditions(current, deps.apiVersion, now, {
            healthCheck: c.healthCheck,
            condition: c.condition,
          });
          current = await deps.rest.mergePatch(`${path}/status`, statusPatch(current, write));
          deps.remember('machine', current);
          if (marker)
            deps.remember(
              'machine',
              await deps.rest.mergePatch(path, {
                metadata: {
                  resourceVersion: current.metadata.resourceVersion,
                  annotations: { [ANNOTATION_REQUESTED_BY]: null },
                },
              }),
            );
        }
        break;
      }
    }
    deps.writeMetric(i.want, 'ok');
    deps.log.info(`${i.want} written`, log);
    return 'ok';
  } catch (e) {
    if (isNotFound(e)) {
      deps.writeMetric(i.want, 'gone');
      return 'gone';
    }
    if (isConflict(e)) {
      deps.writeMetric(i.want, 'conflict');
      deps.log.debug(`${i.want}: the Machine changed since the decision, deciding again`, log);
      return 'conflict';
    }
    if ((e as Error).name === 'WritesForbiddenError') {
      deps.writeMetric(i.want, 'forbidden');
      throw e; // leadership lost: nothing more is written, at once
    }
    deps.writeMetric(i.want, 'error');
    return { want: i.want, error: e as Error };
  }
}
