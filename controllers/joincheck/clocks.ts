// When a Machine's clocks start. The provision clock runs from creation until infrastructure and bootstrap
// data are ready. The join clock starts at the latest of creation, infrastructure ready, bootstrap data
// ready and (for every Machine but the first control-plane one) the control plane initialized: a worker
// cannot join before there is a control plane, so its clock must not run before then. Transition times
// come from the objects; where one is missing, the first time the controller saw the state, kept in
// status so a restarted controller starts the clock at the same moment.
import type { ClusterFacts, KcpFacts, MachineFacts } from '../../api/capi/model.js';
import type { CheckSettings, MachineJoinCheckStatus, MachineObservation } from '../../api/v1alpha1/types.js';
import { byName } from './scope.js';
import { iso, latest, ms } from './time.js';

export function isProvisioned(m: MachineFacts): boolean {
  return m.infrastructureReady.value && m.bootstrapReady.value;
}

/** Either the Cluster or the KubeadmControlPlane says so (set once, never reset). */
export function controlPlaneInitialized(cluster: ClusterFacts, kcp: KcpFacts | undefined): boolean {
  return cluster.controlPlaneInitialized.value || kcp?.initialized === true;
}

/** When the control plane was initialized: the condition's time, else the first time we saw it. */
export function controlPlaneInitializedAt(cluster: ClusterFacts, status: MachineJoinCheckStatus): number | undefined {
  return cluster.controlPlaneInitialized.since ?? ms(status.controlPlaneInitializedSeen);
}

/** The fallback memory for a control plane seen initialized without a transition time. */
export function nextControlPlaneInitializedSeen(
  cluster: ClusterFacts,
  initialized: boolean,
  prev: MachineJoinCheckStatus,
  now: number,
): string | undefined {
  if (!initialized) return undefined;
  if (cluster.controlPlaneInitialized.since !== undefined) return undefined;
  return prev.controlPlaneInitializedSeen ?? iso(now);
}

export function provisionDeadline(m: MachineFacts, settings: CheckSettings): number | undefined {
  return settings.provisionTimeoutMs === undefined ? undefined : m.createdAt + settings.provisionTimeoutMs;
}

export interface JoinClockInputs {
  firstControlPlane: boolean;
  /** When the control plane was initialized (ignored for the first control-plane Machine). */
  controlPlaneInitializedAt?: number;
  /** First time seen with infrastructure and bootstrap data ready (when a condition has no time). */
  readySeen?: number;
  /** The first control-plane replacement: not before the old Machine was gone. */
  notBefore?: number;
}

export function joinClockStart(m: MachineFacts, inputs: JoinClockInputs): number {
  const infra = m.infrastructureReady.since ?? inputs.readySeen;
  const boot = m.bootstrapReady.since ?? inputs.readySeen;
  const cp = inputs.firstControlPlane ? undefined : inputs.controlPlaneInitializedAt;
  return latest(m.createdAt, infra, boot, cp, inputs.notBefore) as number;
}

/**
 * The next status.observations: one entry per in-scope Machine not joined yet (that it was seen not joined
 * is what makes a later join a "join event"); entries of joined and gone Machines are dropped.
 */
export function nextObservations(
  inScope: MachineFacts[],
  joinedUids: ReadonlySet<string>,
  prev: MachineObservation[] | undefined,
  firstControlPlaneUid: string | undefined,
  now: number,
): MachineObservation[] {
  const prevByUid = new Map((prev ?? []).map((o) => [o.uid, o]));
  const out: MachineObservation[] = [];
  for (const m of inScope) {
    if (joinedUids.has(m.uid)) continue;
    const o: MachineObservation = { ...(prevByUid.get(m.uid) ?? { machine: m.name, uid: m.uid }) };
    const needsFallback = m.infrastructureReady.since === undefined || m.bootstrapReady.since === undefined;
    if (isProvisioned(m) && needsFallback && o.readySeen === undefined) o.readySeen = iso(now);
    if (m.uid === firstControlPlaneUid) o.firstControlPlane = true;
    out.push(o);
  }
  return out.sort((a, b) => byName({ name: a.machine }, { name: b.machine }));
}

export function observationsByUid(obs: MachineObservation[] | undefined): Map<string, MachineObservation> {
  return new Map((obs ?? []).map((o) => [o.uid, o]));
}
