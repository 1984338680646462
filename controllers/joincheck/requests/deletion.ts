// Deleting a check, and the marks recognised from the Machine alone (DESIGN: "Recognisable marks", "Deleting a
// check"). Every mark JoinGuard writes carries `joinguard.io/requested-by: <check uid>`; a mark whose uid names no
// live check of the namespace was left by a deleted check, and the check whose scope holds the Machine withdraws
// it (joined or not: a deleted check never leaves a mark an owner would later act on). Every check carries a
// finalizer: once deleted, it asks nothing, withdraws every mark it made, says what it waits for, and goes when
// none is left — or, bounded in time, with the Machines it could not clean named.
import type { MachineFacts } from '../../../api/capi/model.js';
import { FINALIZER, type MachineJoinCheck } from '../../../api/v1alpha1/types.js';
import { iso, ms, MINUTE } from '../time.js';
import type { CheckMetadataIntent } from '../types.js';

/** How long a deleted check waits for its marks to be withdrawn (refused writes are retried meanwhile). */
export const DELETION_BOUND_MS = 10 * MINUTE;

/** Whose mark a Machine carries, by its marker: this check's, another live check's, a deleted check's, or unmarked. */
export type MarkOwner = 'this' | 'other' | 'orphan' | 'unmarked';

export function markOwner(
  m: MachineFacts,
  checkUid: string | undefined,
  liveChecks: ReadonlySet<string> | undefined,
): MarkOwner {
  const by = m.requestedBy;
  if (by === undefined) return 'unmarked';
  if (by === checkUid) return 'this';
  // Not knowing which checks live, another uid is another check's: never touched.
  return liveChecks === undefined || liveChecks.has(by) ? 'other' : 'orphan';
}

export interface Deletion {
  since: number;
  /** The finalizer goes at the latest then. */
  until: number;
}

export function deletionOf(check: MachineJoinCheck): Deletion | undefined {
  const since = ms(check.metadata.deletionTimestamp);
  return since === undefined ? undefined : { since, until: since + DELETION_BOUND_MS };
}

/** "the check is being deleted: ..." for the Paused condition while its marks are withdrawn. */
export function deletionNote(d: Deletion): string {
  return (
    `the check is being deleted: JoinGuard asks nothing and withdraws ` +
    `every mark it made before it goes (finalizer ${FINALIZER}, ` +
    `at most until ${iso(d.until)})`
  );
}

/**
 * The finalizer: added to every check (not while its Cluster is paused: clusterctl move deletes the source's
 * checks after removing their finalizers); removed from a deleted check once `left` (Machines still carrying
 * one of its marks, or unreadable) is empty, or once the bound passed — not while the Cluster is paused, and not
 * while a withdrawal left is one the apiserver has not refused (`unrefused`: a 409 or a write not tried yet, say
 * after the bound ran out during a move's pause, is finished on a later pass, not left behind; seed 220707176).
 */
export function finalizerIntent(
  check: MachineJoinCheck,
  deletion: Deletion | undefined,
  left: readonly string[],
  clusterPaused: boolean,
  now: number,
  unrefused: boolean,
): Pick<CheckMetadataIntent, 'addFinalizer' | 'removeFinalizer' | 'marksLeftBehind'> {
  const has = (check.metadata.finalizers ?? []).includes(FINALIZER);
  if (deletion === undefined) return !has && !clusterPaused ? { addFinalizer: true } : {};
  if (!has) return {};
  if (left.length === 0) return { removeFinalizer: true };
  // Nothing is written to a paused Cluster's Machines: the bound waits for the unpause (clusterctl move strips the
  // finalizers of what it moves itself).
  if (clusterPaused) return {};
  return now >= deletion.until && !unrefused ? { removeFinalizer: true, marksLeftBehind: [...left].sort() } : {};
}
