// Whether CAPI can see the workload cluster. While it cannot, a Machine without a Node may simply be a
// Machine whose Node CAPI cannot see, so no Machine but the first control-plane one gets a verdict; once
// the connection is back, verdicts resume only after a grace period (CAPI's own conditions need a moment
// to catch up). Before the control plane is initialized CAPI does not connect at all (the probe says
// "not established yet"), so the connection means nothing then and is ignored.
import type { ClusterFacts, MachineFacts } from '../../api/capi/model.js';
import type { MachineJoinCheckStatus } from '../../api/v1alpha1/types.js';
import { listNames } from './messages.js';
import { iso, latest, ms } from './time.js';

export const DEFAULT_CONNECTION_GRACE_MS = 2 * 60 * 1000;

export interface ConnectionState {
  down: boolean;
  /** Verdicts are held until then (the connection came back less than a grace period ago). */
  graceUntil?: number;
  /** What was seen, for messages. */
  evidence?: string;
}

export interface ConnectionMemory {
  connectionDownSeen?: string;
  connectionRestoredSeen?: string;
}

export function connectionState(
  cluster: ClusterFacts,
  ofCluster: MachineFacts[],
  initialized: boolean,
  prev: MachineJoinCheckStatus,
  now: number,
  graceMs: number,
): { state: ConnectionState; memory: ConnectionMemory } {
  if (!initialized) return { state: { down: false }, memory: {} };

  const probeDown = cluster.remoteConnection?.value === false;
  const machinesDown = ofCluster.filter((m) => m.nodeConnectionDown && m.deletingSince === undefined).map((m) => m.name);
  if (probeDown || machinesDown.length > 0) {
    const parts: string[] = [];
    if (probeDown) parts.push(`the Cluster's RemoteConnectionProbe is False`);
    if (machinesDown.length > 0) parts.push(`NodeReady is ConnectionDown on ${listNames(machinesDown)}`);
    return {
      state: { down: true, evidence: parts.join(' and ') },
      memory: { connectionDownSeen: prev.connectionDownSeen ?? iso(now) },
    };
  }

  // Back up. A probe transition time says when; without one, the first time we saw it back (only if we
  // saw it down: a connection never seen down needs no grace).
  let restored = prev.connectionRestoredSeen;
  if (prev.connectionDownSeen !== undefined && restored === undefined) restored = iso(now);
  const start = latest(cluster.remoteConnection?.since, ms(restored));
  if (start !== undefined && now < start + graceMs) {
    return {
      state: { down: false, graceUntil: start + graceMs, evidence: `the workload connection came back at ${iso(start)}` },
      memory: { connectionRestoredSeen: restored },
    };
  }
  // Grace over: forget the memory, the objects say the rest.
  return { state: { down: false }, memory: {} };
}
