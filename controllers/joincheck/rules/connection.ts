// Whether CAPI can see the workload cluster (DESIGN: "How a Machine is judged"): while it cannot, and for a grace
// period after it can again, no Machine but the first control-plane one gets a verdict: its Node may exist unseen.
import type { ClusterFacts, MachineFacts } from '../../../api/capi/model.js';
import type { MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import { iso, latest, ms, trusted } from '../time.js';
import { listNames } from '../words.js';

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

/**
 * Whether CAPI can see the workload cluster. Before the control plane is initialized CAPI does not connect at
 * all (the probe says "not established yet"), so the connection means nothing then and is ignored.
 */
export function connectionState(
  cluster: ClusterFacts,
  ofCluster: readonly MachineFacts[],
  initialized: boolean,
  prev: MachineJoinCheckStatus,
  now: number,
  graceMs: number,
): { state: ConnectionState; memory: ConnectionMemory } {
  if (!initialized) return { state: { down: false }, memory: {} };
  const probeDown = cluster.remoteConnection?.value === false;
  const machinesDown = ofCluster
    .filter((m) => m.nodeConnectionDown && m.deletingSince === undefined)
    .map((m) => m.name);
  if (probeDown || machinesDown.length > 0) {
    const parts: string[] = [];
    if (probeDown) parts.push(`the Cluster's RemoteConnectionProbe is False`);
    if (machinesDown.length > 0) parts.push(`NodeReady is ConnectionDown on ${listNames(machinesDown)}`);
    return {
      state: { down: true, evidence: parts.join(' and ') },
      memory: { connectionDownSeen: prev.connectionDownSeen ?? iso(now) },
    };
  }
  // Back up: the probe's transition time says when; without one (or one in the future), the first time we saw
  // it back — only if we saw it down: a connection never seen down needs no grace.
  let restored = prev.connectionRestoredSeen;
  if (prev.connectionDownSeen !== undefined && restored === undefined) restored = iso(now);
  const start = latest(trusted(cluster.remoteConnection?.since, now), ms(restored));
  if (start !== undefined && now < start + graceMs) {
    return {
      state: {
        down: false,
        graceUntil: start + graceMs,
        evidence: `the workload connection came back at ${iso(start)}`,
      },
      memory: restored !== undefined ? { connectionRestoredSeen: restored } : {},
    };
  }
  return { state: { down: false }, memory: {} };
}
