// The check's persisted memory, read back with suspicion. Status is user-writable (`kubectl edit --subresource
// status`), so nothing in it is trusted as is: counts are clamped to int32 (one the lists cannot justify is kept,
// bounded: a hand-written value), times in the future come back as now, entries of the wrong shape are dropped, lists
// are bounded — each with a
// note the controller logs. A check moved by `clusterctl move` arrives with an empty status and its memory in
// the `joinguard.io/memory` annotation (written when the move paused its Cluster): it is restored from there.
import type { MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import { ANNOTATION_MEMORY, CLUSTERCTL_ANNOTATION_BLOCK_MOVE, STATUS_LIMITS } from '../../../api/v1alpha1/types.js';
import type { CheckMetadataIntent, Snapshot } from '../types.js';
import { iso, MINUTE } from '../time.js';
import {
  failure,
  Fields,
  firstControlPlane,
  isObj,
  joinDurations,
  observation,
  ownerWindow,
  remediation,
  request,
  suspicion,
  type Obj,
} from './memory-fields.js';

/** The parts of the status that decide; carried across `clusterctl move` (conditions and counts are recomputed). */
const DECISIVE = [
  'everJoined',
  'consecutiveJoinFailures',
  'failuresSinceResume',
  'recentFailures',
  'remediations',
  'requests',
  'ownerWindows',
  'suspicion',
  'joinDurations',
  'observations',
  'firstControlPlane',
  'controlPlaneInitializedSeen',
  'lastResume',
] as const satisfies readonly (keyof MachineJoinCheckStatus)[];

/** Annotations share 256 KiB per object: past this, the display lists are left out of the carried memory. */
const CARRY_LIMIT_BYTES = 200 * 1024;

export interface ReadMemory {
  status: MachineJoinCheckStatus;
  notes: string[];
  /** The memory came from the `joinguard.io/memory` annotation (a moved check). */
  restored: boolean;
}

/** The persisted status, validated; or, for a moved check whose status is empty, the carried memory. */
export function readMemory(rawStatus: unknown, carried: string | undefined, now: number): ReadMemory {
  const notes: string[] = [];
  if (isEmptyStatus(rawStatus) && carried !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(carried);
    } catch {
      notes.push('annotation joinguard.io/memory: not JSON, ignored');
    }
    if (isObj(parsed)) return { status: sanitize(parsed, now, notes, 'joinguard.io/memory'), notes, restored: true };
  }
  return { status: sanitize(isObj(rawStatus) ? rawStatus : {}, now, notes, 'status'), notes, restored: false };
}

/** The decisive memory as one JSON value for the `joinguard.io/memory` annotation. */
export function carriedMemory(status: MachineJoinCheckStatus): string {
  const pick = (keys: readonly string[]) =>
    Object.fromEntries(keys.filter((k) => (status as Obj)[k] !== undefined).map((k) => [k, (status as Obj)[k]]));
  const all = JSON.stringify(pick(DECISIVE));
  if (all.length <= CARRY_LIMIT_BYTES) return all;
  return JSON.stringify(
    pick(DECISIVE.filter((k) => k !== 'remediations' && k !== 'recentFailures' && k !== 'joinDurations')),
  );
}

function isEmptyStatus(v: unknown): boolean {
  return !isObj(v) || DECISIVE.every((k) => v[k] === undefined);
}

function sanitize(s: Obj, now: number, notes: string[], where: string): MachineJoinCheckStatus {
  const f = new Fields(now, notes, where);
  const out: MachineJoinCheckStatus = {};
  const set = <K extends keyof MachineJoinCheckStatus>(k: K, v: MachineJoinCheckStatus[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set('observedGeneration', f.count(s, 'observedGeneration'));
  for (const k of ['expectedMachines', 'joinedMachines', 'joiningMachines', 'stuckMachines', 'heldMachines'] as const)
    set(k, f.count(s, k));
  set('heldReason', f.str(s, 'heldReason'));
  // Not read: timedMachines is display only, made again on every pass (timed.ts); nothing written there is trusted.
  set('everJoined', f.bool(s, 'everJoined'));
  set('consecutiveJoinFailures', f.count(s, 'consecutiveJoinFailures'));
  set('failuresSinceResume', f.count(s, 'failuresSinceResume'));
  set(
    'recentFailures',
    f.list(s, 'recentFailures', STATUS_LIMITS.recentFailures, (e, c) => failure(c, e)),
  );
  set(
    'remediations',
    f.list(s, 'remediations', STATUS_LIMITS.remediations, (e, c) => remediation(c, e)),
  );
  set(
    'requests',
    f.list(s, 'requests', STATUS_LIMITS.requests, (e, c) => request(c, e)),
  );
  set(
    'ownerWindows',
    f.list(s, 'ownerWindows', STATUS_LIMITS.ownerWindows, (e, c) => ownerWindow(c, e)),
  );
  set('suspicion', isObj(s['suspicion']) ? suspicion(f.in('suspicion'), s['suspicion']) : undefined);
  set(
    'joinDurations',
    isObj(s['joinDurations']) ? joinDurations(f.in('joinDurations'), s['joinDurations']) : undefined,
  );
  set(
    'observations',
    f.list(s, 'observations', STATUS_LIMITS.observations, (e, c) => observation(c, e)),
  );
  set(
    'firstControlPlane',
    isObj(s['firstControlPlane']) ? firstControlPlane(f.in('firstControlPlane'), s['firstControlPlane']) : undefined,
  );
  for (const k of ['connectionDownSeen', 'connectionRestoredSeen', 'controlPlaneInitializedSeen'] as const)
    set(k, f.time(s, k));
  if (isObj(s['lastResume']) && typeof s['lastResume']['value'] === 'string') {
    const t = f.in('lastResume').time(s['lastResume'], 'time');
    set('lastResume', {
      value: s['lastResume']['value'],
      time: t ?? iso(now),
      ...(s['lastResume']['removed'] === true ? { removed: true } : {}),
    });
  }
  if (Array.isArray(s['conditions']))
    out.conditions = s['conditions'].filter(isObj) as unknown as MachineJoinCheckStatus['conditions'];
  return out;
}

/** The check's own metadata: an ownerReference to its Cluster, and clusterctl move's block-move protocol. */
export function checkMetadata(s: Snapshot, next: MachineJoinCheckStatus, check: CheckMetadataIntent): void {
  const cluster = s.cluster!;
  const meta = s.check.metadata;
  const owned = (meta.ownerReferences ?? []).some((o) => o.kind === 'Cluster' && o.uid === cluster.uid);
  if (!owned)
    check.ownerCluster = { apiVersion: `cluster.x-k8s.io/${s.capi.apiVersion}`, name: cluster.name, uid: cluster.uid };
  const annotations = meta.annotations ?? {};
  if (cluster.paused) {
    const carry = carriedMemory(next);
    if (annotations[ANNOTATION_MEMORY] !== carry || CLUSTERCTL_ANNOTATION_BLOCK_MOVE in annotations)
      check.carryMemory = carry;
  } else if (!(CLUSTERCTL_ANNOTATION_BLOCK_MOVE in annotations) || ANNOTATION_MEMORY in annotations) {
    check.blockMove = true;
  }
}

/** How long after a moved check its Machines may still be created by clusterctl move (they come after it). */
export const MOVED_WITH_CHECK_MS = 10 * MINUTE;

/**
 * clusterctl move re-creates every Machine with a new uid (same name). While the check carries the memory annotation
 * (from the move's pause until its first pass on an unpaused Cluster), a record whose uid names no Machine but whose
 * Machine of the same name is there with another uid is that Machine's: its uid follows, so nothing the memory holds
 * about a Machine — its request (and so its budget slot and its mark), its observation, its failure — is lost.
 */
export function followMovedUids(
  status: MachineJoinCheckStatus,
  byName: ReadonlyMap<string, string>,
  known: ReadonlySet<string>,
): number {
  let moved = 0;
  const follow = <T extends { machine: string; uid: string }>(list: T[] | undefined): T[] | undefined =>
    list?.map((r) => {
      const uid = byName.get(r.machine);
      if (known.has(r.uid) || uid === undefined || uid === r.uid) return r;
      moved++;
      // A request's answer went with the status clusterctl did not copy: it is waited for again, its clock anew.
      if ('markedTime' in r) {
        const { markedTime: _wiped, ...rest } = r as T & { markedTime?: string };
        return { ...rest, uid } as T;
      }
      return { ...r, uid };
    });
  for (const k of ['requests', 'observations', 'recentFailures', 'remediations'] as const) {
    const list = follow<{ machine: string; uid: string }>(status[k]);
    if (list !== undefined) (status as Record<string, unknown>)[k] = list;
  }
  const replaced = status.firstControlPlane?.replaced;
  if (replaced !== undefined) status.firstControlPlane!.replaced = follow([replaced])![0]!;
  return moved;
}
