// The first control-plane Machine: the one that initializes the control plane. It is a control-plane
// Machine while neither the Cluster nor the KubeadmControlPlane says initialized, whose bootstrap config
// does not join a control plane (kubeadm: no joinConfiguration.controlPlane; an init configuration is not
// relied on, v1beta2 omits it when empty). Once initialized, no Machine is ever "first" again.
// This file finds it, keeps the memory of its remediation (the replacement's clock waits for the old
// Machine to be gone, the replacement must be an init Machine) and decides the endpoint probe.
import type { BootstrapConfigFacts, ClusterFacts, MachineFacts, WorkloadNodeFacts } from '../../api/capi/model.js';
import type { MachineJoinCheckStatus } from '../../api/v1alpha1/types.js';
import type { MachineVerdict, Snapshot } from './types.js';
import { SECOND, iso, ms } from './time.js';

/** An unanswered probe is asked again after this long. */
export const PROBE_RETRY_MS = 60 * 1000;

export function joinsControlPlane(
  m: MachineFacts,
  configs: ReadonlyMap<string, BootstrapConfigFacts>,
): boolean | undefined {
  const ref = m.bootstrapConfigRef;
  if (ref === undefined) return undefined;
  return configs.get(`${ref.kind}/${ref.name}`)?.joinsControlPlane;
}

export function isJoined(m: MachineFacts, nodes: WorkloadNodeFacts[] | undefined): boolean {
  if (m.nodeName !== undefined) return true;
  return m.providerID !== undefined && m.providerID !== '' && (nodes ?? []).some((n) => n.providerID === m.providerID);
}

/** The Cluster's first control-plane Machine, if the control plane is not initialized and there is one. */
export function findFirstControlPlane(
  ofCluster: MachineFacts[],
  configs: ReadonlyMap<string, BootstrapConfigFacts>,
  initialized: boolean,
): MachineFacts | undefined {
  if (initialized) return undefined;
  const candidates = ofCluster
    .filter((m) => m.controlPlane && joinsControlPlane(m, configs) !== true)
    // Only one Machine can hold the init lock: prefer a live one, then the oldest.
    .sort((a, b) =>
      Number(a.deletingSince !== undefined) - Number(b.deletingSince !== undefined) ||
      a.createdAt - b.createdAt ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
    );
  return candidates[0];
}

type Memory = NonNullable<MachineJoinCheckStatus['firstControlPlaneRemediation']>;

/**
 * The memory of the last first-CP remediation: finished when the old Machine is gone; forgotten once the
 * control plane is initialized and a control-plane Machine has joined (the replacement worked).
 */
export function nextFirstControlPlaneMemory(
  prev: Memory | undefined,
  ofCluster: MachineFacts[],
  unreadable: ReadonlySet<string>,
  initialized: boolean,
  now: number,
): Memory | undefined {
  if (prev === undefined) return undefined;
  if (initialized && ofCluster.some((m) => m.controlPlane && m.deletingSince === undefined && m.nodeName !== undefined)) {
    return undefined;
  }
  if (prev.finishedTime === undefined && !ofCluster.some((m) => m.uid === prev.uid) && !unreadable.has(prev.machine)) {
    return { ...prev, finishedTime: iso(now) };
  }
  return prev;
}

/**
 * After JoinGuard had the first control-plane Machine replaced, the replacement must be an init Machine.
 * Returns the evidence when it is not, or when the Cluster reports initialized with no control-plane
 * Machine left (the old Machine finished initializing as it went: cluster-api #12870).
 */
export function replacementMisconfiguration(
  memory: Memory | undefined,
  ofCluster: MachineFacts[],
  configs: ReadonlyMap<string, BootstrapConfigFacts>,
  initialized: boolean,
): string | undefined {
  if (memory === undefined) return undefined;
  const liveCp = ofCluster.filter((m) => m.controlPlane && m.deletingSince === undefined);
  if (initialized && liveCp.length === 0) {
    return (
      `the Cluster reports its control plane initialized but no control-plane Machine is left after JoinGuard had ` +
      `the first control-plane Machine ${memory.machine} replaced`
    );
  }
  if (memory.finishedTime === undefined) return undefined;
  const since = ms(memory.time) ?? 0;
  const joining = liveCp.find((m) => m.uid !== memory.uid && m.createdAt >= since && joinsControlPlane(m, configs) === true);
  if (joining !== undefined) {
    const ref = joining.bootstrapConfigRef;
    return (
      `the replacement control-plane Machine ${joining.name} has a bootstrap config ` +
      `(${ref ? `${ref.kind}/${ref.name}` : 'unknown'}) with joinConfiguration.controlPlane: it would join a control ` +
      `plane that does not exist instead of initializing one (replacing ${memory.machine})`
    );
  }
  return undefined;
}

export type ProbeDecision =
  | { kind: 'act'; why: string }
  | { kind: 'probe'; emit: boolean; retryAt: number; host: string; port: number }
  | { kind: 'extend'; until: number };

/**
 * Before acting on a first control-plane Machine that timed out joining: if the control plane answers at
 * the Cluster's endpoint, initialization may be finishing, so it gets one more joinTimeout (once).
 */
export function probeDecision(
  v: MachineVerdict,
  s: Snapshot,
  cluster: ClusterFacts,
  status: MachineJoinCheckStatus,
  joinTimeoutMs: number,
): ProbeDecision {
  const ep = cluster.controlPlaneEndpoint;
  if (ep === undefined || ep.host === '') return { kind: 'act', why: 'the Cluster has no controlPlaneEndpoint to probe' };
  if (status.firstControlPlaneExtendedFor === v.uid) {
    return { kind: 'act', why: `it was already given another joinTimeout after the endpoint answered` };
  }
  const deadline = v.deadline ?? s.now;
  const probe = s.endpointProbe;
  if (probe !== undefined && probe.at >= deadline) {
    if (probe.reachable) return { kind: 'extend', until: s.now + joinTimeoutMs };
    return { kind: 'act', why: `the control-plane endpoint ${ep.host}:${ep.port} did not answer at ${iso(probe.at)}` };
  }
  const requested = ms(status.endpointProbeRequested);
  if (requested !== undefined && requested >= truncated(deadline) && s.now < requested + PROBE_RETRY_MS) {
    return { kind: 'probe', emit: false, retryAt: requested + PROBE_RETRY_MS, host: ep.host, port: ep.port };
  }
  return { kind: 'probe', emit: true, retryAt: s.now + PROBE_RETRY_MS, host: ep.host, port: ep.port };
}

/** Status times keep whole seconds: compare a stored time with a deadline at that precision. */
function truncated(t: number): number {
  return Math.floor(t / SECOND) * SECOND;
}
