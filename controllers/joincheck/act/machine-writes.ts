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
import type { MachineFacts } from '../../../api/capi/model.js';
import { ANNOTATION_REQUESTED_BY, CAPI_ANNOTATION_REMEDIATE_MACHINE } from '../../../api/v1alpha1/types.js';
import { isConflict, isNotFound, pathOf, type Json, type Resource } from '../../../runtime/client/rest.js';
import type { MarkIntent, Snapshot } from '../types.js';
import type { WriteDeps } from './deps.js';
import { annotationMarks, anyMark, carriesMark, causedMarks, conditionMarks, MARKS, PATHS } from '../requests/paths.js';
import { assertNever } from '../types.js';

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
      return anyMark(c) || marker;
    }
    case 'mark':
      // Only where the Machine carries no mark at all: never over someone else's, never re-asserting an owner's —
      // but the annotation path's own mark whose marker names another uid (a moved check's, clusterctl move) gets it.
      return (
        !carriesMark(m) ||
        (PATHS[i.path].write === 'annotation' &&
          i.marker !== undefined &&
          m.remediateAnnotation &&
          m.requestedBy !== undefined &&
          m.requestedBy !== i.marker)
      );
  }
  return assertNever(i, 'intent');
}

export function ref(t: { name: string; namespace: string }) {
  return { namespace: t.namespace, name: t.name };
}

export function factsOf(s: Snapshot, uid: string): MachineFacts | undefined {
  return s.machines.find((m) => m.uid === uid);
}

/** The write replaces `status.conditions` (a merge patch replaces a list whole): it needs the list as judged. */
function writesConditions(i: MarkIntent, m: MachineFacts): boolean {
  if (i.want === 'mark') return 'conditions' in MARKS[PATHS[i.path].write].removed;
  if (i.want === 'delete') return false;
  return conditionMarks(causedMarks(m, i.path)).any;
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
    await write(deps, i, facts!, { path, rv, raw, now });
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

/** Where a Machine write goes and what it is built from: the Machine's path, its resourceVersion judged, the Machine. */
interface WriteOn {
  path: string;
  rv: string;
  raw: Json;
  now: Date;
}

/** The intent's write: a deletion guarded by uid and resourceVersion, a mark, or a withdrawal. */
async function write(deps: WriteDeps, i: MarkIntent, facts: MachineFacts, on: WriteOn): Promise<void> {
  switch (i.want) {
    case 'delete':
      await deps.rest.deleteWithPreconditions(on.path, i.machine.uid, on.rv);
      return;
    case 'mark':
      return writeMark(deps, i, on);
    case 'withdraw':
      return writeWithdrawal(deps, i, facts, on);
  }
  return assertNever(i, 'intent');
}

/** A request's mark, with its marker, in one write: the path's write kind (PATHS) says which. */
async function writeMark(deps: WriteDeps, i: Extract<MarkIntent, { want: 'mark' }>, on: WriteOn): Promise<void> {
  const { path, rv, raw, now } = on;
  const kind = PATHS[i.path].write;
  switch (kind) {
    case 'annotation': {
      // The mark and its marker in one metadata patch.
      const marker = i.marker !== undefined ? { [ANNOTATION_REQUESTED_BY]: i.marker } : {};
      deps.remember(
        'machine',
        await deps.rest.mergePatch(path, {
          metadata: { resourceVersion: rv, annotations: { ...marker, [CAPI_ANNOTATION_REMEDIATE_MACHINE]: '' } },
        }),
      );
      return;
    }
    // One write on /status: the mark, its marker inside the condition's message (marks.ts markedMessage).
    case 'condition': {
      const write = setJoinGuardCondition(raw, deps.apiVersion, {
        status: 'False',
        reason: i.kind,
        message: i.message,
        now,
      });
      deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(raw, write)));
      return;
    }
    case 'healthCheck': {
      const write = markForRemediation(raw, deps.apiVersion, {
        kind: i.kind,
        message: i.message,
        now,
        setOwnerRemediated: true,
      });
      deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(raw, write)));
      return;
    }
  }
  assertNever(kind, 'write kind');
}

/** Every mark JoinGuard caused (MARKS), and the marker: the annotations first, then the conditions, the marker last. */
async function writeWithdrawal(
  deps: WriteDeps,
  i: Extract<MarkIntent, { want: 'withdraw' }>,
  facts: MachineFacts,
  on: WriteOn,
): Promise<void> {
  const { path, rv, raw, now } = on;
  const c = causedMarks(facts, i.path);
  const conditions = conditionMarks(c);
  const keys = annotationMarks(c);
  // The marker as an annotation (the annotation path, or a mark of the previous layout); one inside a
  // condition's message goes with the condition's withdrawal.
  const marker = i.marker !== undefined && facts.markerAnnotation === i.marker;
  let current = raw;
  if (keys.length > 0 || (marker && !conditions.any)) {
    // First the annotation, so the MachineHealthCheck stops marking it; then the conditions; the marker last.
    const annotations = {
      ...Object.fromEntries(keys.map((k) => [k, null])),
      ...(marker && !conditions.any ? { [ANNOTATION_REQUESTED_BY]: null } : {}),
    };
    current = await deps.rest.mergePatch(path, { metadata: { resourceVersion: rv, annotations } });
    deps.remember('machine', current);
  }
  if (!conditions.any) return;
  const write = withdrawConditions(current, deps.apiVersion, now, {
    healthCheck: conditions.healthCheck,
    condition: conditions.condition,
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
