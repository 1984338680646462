// One Machine's write (executor.ts calls it for each intent): only what the Machine misses, built from the Machine as
// judged — read live, or as the caches had it — and guarded by its resourceVersion (its uid too for a delete): a 409
// is the live re-read and a new decision (DESIGN: "Before any write"). A mark carries its marker in the same write:
// inside its condition's message on the /status paths, `joinguard.io/requested-by` in the annotation path's one
// metadata patch. A withdrawal's condition write takes the marker with it; an annotation marker (the annotation path,
// or a mark of the previous layout) goes in its metadata patch. 404 is gone, 409 a conflict to decide again; a lost
// leadership throws; any other refusal is this Machine's.
import {
  markForRemediation,
  setJoinGuardCondition,
  statusPatch,
  withdrawConditions,
} from '../../../api/capi/remediation-writes.js';
import { carriesAnyMark, type MachineFacts } from '../../../api/capi/model.js';
import { ANNOTATION_REQUESTED_BY, CAPI_ANNOTATION_REMEDIATE_MACHINE } from '../../../api/v1alpha1/types.js';
import { isConflict, isNotFound, pathOf, type Json, type Resource } from '../../../runtime/client/rest.js';
import type { MarkIntent, Snapshot } from '../types.js';
import type { WriteDeps } from './deps.js';
import { causedMarks, PATHS } from '../requests/paths.js';

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
      const marker = i.marker !== undefined && (m.requestedBy === i.marker || m.markerAnnotation === i.marker);
      return c.healthCheck || c.annotation || c.condition || marker;
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

/** The write replaces `status.conditions` (a merge patch replaces a list whole): it needs the list as judged. */
function writesConditions(i: MarkIntent, m: MachineFacts): boolean {
  if (i.want === 'mark') return PATHS[i.path].write !== 'annotation';
  if (i.want === 'delete') return false;
  const c = causedMarks(m, i.path);
  return c.healthCheck || c.condition;
}

/** The Machine as the caches had it when the decision was made: what a write is built from, and guarded by. */
function asJudged(m: MachineFacts, list: boolean): Json | undefined {
  if (list && m.conditions === undefined) return undefined;
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      ...(m.generation !== undefined ? { generation: m.generation } : {}),
    },
    status: { conditions: [...(m.conditions ?? [])] },
  };
}

export async function converge(
  deps: WriteDeps,
  res: Resource,
  i: MarkIntent,
  live: { machines: ReadonlyMap<string, Json | null> },
  s: Snapshot,
): Promise<Converged> {
  const read = live.machines.get(i.machine.uid);
  const facts = factsOf(s, i.machine.uid);
  if (read === null) return 'gone';
  if (!needsWrite(i, facts)) return 'none';
  const raw = read ?? asJudged(facts!, writesConditions(i, facts!));
  if (raw === undefined) return 'unread'; // the caches kept no list to build the write from: read it first
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
        if (PATHS[i.path].write === 'annotation') {
          // The mark and its marker in one metadata patch.
          const marker = i.marker !== undefined ? { [ANNOTATION_REQUESTED_BY]: i.marker } : {};
          deps.remember(
            'machine',
            await deps.rest.mergePatch(path, {
              metadata: { resourceVersion: rv, annotations: { ...marker, [CAPI_ANNOTATION_REMEDIATE_MACHINE]: '' } },
            }),
          );
          break;
        }
        // One write on /status: the mark, its marker inside the condition's message (marks.ts markedMessage).
        const write =
          PATHS[i.path].write === 'joinGuardCondition'
            ? setJoinGuardCondition(raw, deps.apiVersion, { status: 'False', reason: i.kind, message: i.message, now })
            : markForRemediation(raw, deps.apiVersion, {
                kind: i.kind,
                message: i.message,
                now,
                setOwnerRemediated: true,
              });
        deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(raw, write)));
        break;
      }
      case 'withdraw': {
        const c = causedMarks(facts!, i.path);
        const conditions = c.healthCheck || c.condition;
        // The marker as an annotation (the annotation path, or a mark of the previous layout); one inside a
        // condition's message goes with the condition's withdrawal.
        const marker = i.marker !== undefined && facts!.markerAnnotation === i.marker;
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
