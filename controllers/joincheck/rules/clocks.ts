// The clocks of a Machine's verdict (DESIGN: "How a Machine is judged"): when the control plane was initialized,
// when a Machine was ready to join, and when its provision and join clocks start. A time that is missing, in the
// future, or that moved later while its flag stayed true is not trusted: the first time seen stands, and only then is
// a time kept in status (observations[].readySeen, controlPlaneInitializedSeen).
import type { ClusterFacts, MachineFacts } from '../../../api/capi/model.js';
import type { MachineJoinCheckStatus, MachineObservation } from '../../../api/v1alpha1/types.js';
import { iso, latest, ms, trusted } from '../time.js';
import type { PreviousView } from '../types.js';

/**
 * When the control plane was initialized: the condition's time, else the first time we saw it. A time kept in status
 * stands; one that moved later while the Cluster stayed initialized (its status rebuilt) is not trusted — the first
 * time seen stands, and is kept in status from then on (as readiness times are).
 */
export function controlPlaneInitializedAt(
  cluster: ClusterFacts,
  initialized: boolean,
  prev: MachineJoinCheckStatus,
  now: number,
  before?: number,
): { at?: number; seen?: string } {
  if (!initialized) return {};
  const pinned = ms(prev.controlPlaneInitializedSeen);
  if (pinned !== undefined) return { at: pinned, seen: prev.controlPlaneInitializedSeen! };
  const since = trusted(cluster.controlPlaneInitialized.since, now);
  if (since === undefined) {
    const at = before ?? now;
    return { at, seen: iso(at) };
  }
  if (before !== undefined && since > before) return { at: before, seen: iso(before) }; // moved later: not trusted
  return { at: since };
}

/**
 * The readiness time of a provisioned Machine's join clock (the later of infrastructure and bootstrap data
 * ready), and the observation to keep when the conditions' times cannot be trusted.
 */
export function readiness(
  m: MachineFacts,
  obs: MachineObservation | undefined,
  previous: PreviousView | undefined,
  now: number,
): { at: number; pin?: string } {
  const pinned = ms(obs?.readySeen);
  if (pinned !== undefined) return { at: pinned, pin: obs!.readySeen };
  const infra = trusted(m.infrastructureReady.since, now);
  const boot = trusted(m.bootstrapReady.since, now);
  const before = previous?.readyAt.get(m.uid);
  if (infra === undefined || boot === undefined) {
    // Missing, in the future, or the condition is not True while its flag is (a flicker): the first time seen.
    const at = before ?? now;
    return { at, pin: iso(at) };
  }
  const at = Math.max(infra, boot);
  if (before !== undefined && at > before) return { at: before, pin: iso(before) }; // moved later: not trusted
  return { at };
}

export interface JoinClockInputs {
  firstControlPlane: boolean;
  readyAt: number;
  /** When the control plane was initialized (ignored for the first control-plane Machine). */
  controlPlaneInitializedAt?: number;
  /** The first control-plane replacement: not before the old Machine was gone. */
  notBefore?: number;
}

/**
 * The provision clock: from creation, and for every Machine but the first control-plane one not before initialization.
 */
export function provisionClockStart(
  m: MachineFacts,
  firstControlPlane: boolean,
  controlPlaneInitializedAt: number | undefined,
): number {
  return latest(m.createdAt, firstControlPlane ? undefined : controlPlaneInitializedAt) as number;
}

export function joinClockStart(m: MachineFacts, i: JoinClockInputs): number {
  return latest(
    m.createdAt,
    i.readyAt,
    i.firstControlPlane ? undefined : i.controlPlaneInitializedAt,
    i.notBefore,
  ) as number;
}
