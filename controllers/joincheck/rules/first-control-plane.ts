// The first control-plane Machine (DESIGN: "The first control-plane Machine"): the control-plane Machine of a
// Cluster that neither the Cluster nor the KubeadmControlPlane says is initialized, whose bootstrap config does
// not join a control plane (kubeadm: no joinConfiguration.controlPlane; an init configuration is not relied on,
// v1beta2 omits it when empty). Once initialized, no Machine is ever "first" again. This file finds it, keeps
// the memory of its replacement (the replacement's join clock waits for the old Machine to be gone — it may hold
// the endpoint's VIP — and must be an init Machine), and decides the endpoint probe before acting on it.
import type { BootstrapConfigFacts, ClusterFacts, MachineFacts } from '../../../api/capi/model.js';
import type { FirstControlPlaneStatus } from '../../../api/v1alpha1/types.js';
import { judgeMachine, type VerdictContext } from './verdict-rules.js';
import { byName } from '../words.js';
import { iso, ms, SECOND } from '../time.js';
import type { MachineVerdict } from '../types.js';

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

/**
 * Once the control plane is initialized, the Machine that was its first (it initialized it, and may hold the endpoint):
 * never marked again (DESIGN: "Once the Cluster ... says initialized, it is never marked again"). A known init Machine
 * (kubeadm: no joinConfiguration.controlPlane) first; without a known one, the Machine that would have been first.
 */
export function formerFirstControlPlane(
  ofCluster: readonly MachineFacts[],
  configs: ReadonlyMap<string, BootstrapConfigFacts>,
  initialized: boolean,
): MachineFacts | undefined {
  if (!initialized) return undefined;
  const init = ofCluster.filter((m) => m.controlPlane && joinsControlPlane(m, configs) === false);
  return findFirstControlPlane(init.length > 0 ? init : ofCluster, configs, false);
}

/** The Cluster's first control-plane Machine, if the control plane is not initialized and there is one. */
export function findFirstControlPlane(
  ofCluster: readonly MachineFacts[],
  configs: ReadonlyMap<string, BootstrapConfigFacts>,
  initialized: boolean,
): MachineFacts | undefined {
  if (initialized) return undefined;
  return (
    ofCluster
      .filter((m) => m.controlPlane && joinsControlPlane(m, configs) !== true)
      // Only one Machine can hold the init lock: prefer a live one, then the oldest.
      .sort(
        (a, b) =>
          Number(a.deletingSince !== undefined) - Number(b.deletingSince !== undefined) ||
          a.createdAt - b.createdAt ||
          byName(a, b),
      )[0]
  );
}

/**
 * The next memory of the first control-plane Machine's replacement: the old Machine's gone time once it is
 * gone; forgotten once the control plane is initialized and a control-plane Machine has joined (the replacement
 * worked). A misconfiguration found after JoinGuard had it replaced is kept until a resume (resume clears it,
 * never the gone-time wait: the VIP may still be on the old Machine).
 */
export function nextFirstControlPlaneMemory(
  prev: FirstControlPlaneStatus | undefined,
  ofCluster: readonly MachineFacts[],
  configs: ReadonlyMap<string, BootstrapConfigFacts>,
  unreadableUids: ReadonlySet<string>,
  initialized: boolean,
  now: number,
): FirstControlPlaneStatus | undefined {
  const next: FirstControlPlaneStatus = { ...(prev ?? {}) };
  const r = next.replaced;
  if (r !== undefined) {
    const liveCpJoined = ofCluster.some(
      (m) => m.controlPlane && m.deletingSince === undefined && m.nodeName !== undefined,
    );
    if (initialized && liveCpJoined) {
      delete next.replaced;
      delete next.misconfigured;
    } else if (r.goneTime === undefined && !ofCluster.some((m) => m.uid === r.uid) && !unreadableUids.has(r.uid)) {
      next.replaced = { ...r, goneTime: iso(now) };
    }
  }
  if (next.replaced !== undefined && next.misconfigured === undefined) {
    const message = replacementMisconfiguration(next.replaced, ofCluster, configs, initialized);
    if (message !== undefined) next.misconfigured = { since: iso(now), message };
  }
  // The extension and the probe belong to a Machine that is still first and not joined.
  if (next.extendedFor !== undefined) {
    const m = ofCluster.find((x) => x.uid === next.extendedFor);
    if (m === undefined || m.nodeName !== undefined || initialized) {
      delete next.extendedFor;
      delete next.extendedUntil;
    }
  }
  return Object.keys(next).length > 0 ? next : undefined;
}

/**
 * After JoinGuard had the first control-plane Machine replaced, the replacement must be an init Machine.
 * Returns the evidence when it is not, or when the Cluster reports initialized with no control-plane Machine
 * left (the old Machine finished initializing as it went: cluster-api #12870).
 */
export function replacementMisconfiguration(
  replaced: NonNullable<FirstControlPlaneStatus['replaced']>,
  ofCluster: readonly MachineFacts[],
  configs: ReadonlyMap<string, BootstrapConfigFacts>,
  initialized: boolean,
): string | undefined {
  const liveCp = ofCluster.filter((m) => m.controlPlane && m.deletingSince === undefined);
  if (initialized && liveCp.length === 0) {
    return (
      `the Cluster reports its control plane initialized but no control-plane Machine is left after JoinGuard had ` +
      `the first control-plane Machine ${replaced.machine} replaced`
    );
  }
  if (replaced.goneTime === undefined) return undefined;
  const since = ms(replaced.time) ?? 0;
  const joining = liveCp.find(
    (m) => m.uid !== replaced.uid && m.createdAt >= since && joinsControlPlane(m, configs) === true,
  );
  if (joining === undefined) return undefined;
  const ref = joining.bootstrapConfigRef;
  return (
    `the replacement control-plane Machine ${joining.name} has a bootstrap config ` +
    `(${ref ? `${ref.kind}/${ref.name}` : 'unknown'}) with joinConfiguration.controlPlane: it would join a control ` +
    `plane that does not exist instead of initializing one (replacing ${replaced.machine})`
  );
}

export type ProbeDecision =
  | { kind: 'act'; why: string }
  | { kind: 'probe'; ask: boolean; retryAt: number; host: string; port: number }
  | { kind: 'extend'; until: number };

/**
 * Before acting on a first control-plane Machine that timed out joining: if the control plane answers at the
 * Cluster's endpoint, initialization may be finishing (cluster-api #12870), so it gets one more joinTimeout,
 * once per Machine. The probe is asked of the executor, whose answer arrives in a later snapshot; the request
 * is remembered so that replanning does not ask twice within a minute.
 */
export function probeDecision(
  v: MachineVerdict,
  cluster: ClusterFacts,
  memory: FirstControlPlaneStatus | undefined,
  probe: { reachable: boolean; at: number } | undefined,
  joinTimeoutMs: number,
  now: number,
): ProbeDecision {
  const ep = cluster.controlPlaneEndpoint;
  if (ep === undefined || ep.host === '')
    return { kind: 'act', why: 'the Cluster has no controlPlaneEndpoint to probe' };
  if (memory?.extendedFor === v.uid)
    return { kind: 'act', why: 'it was already given another joinTimeout after the endpoint answered' };
  const deadline = v.deadline ?? now;
  if (probe !== undefined && probe.at >= truncated(deadline)) {
    if (probe.reachable) return { kind: 'extend', until: truncated(now + joinTimeoutMs) };
    return { kind: 'act', why: `the control-plane endpoint ${ep.host}:${ep.port} did not answer at ${iso(probe.at)}` };
  }
  const asked = ms(memory?.probeRequested);
  if (asked !== undefined && asked >= truncated(deadline) && now < asked + PROBE_RETRY_MS) {
    return { kind: 'probe', ask: false, retryAt: asked + PROBE_RETRY_MS, host: ep.host, port: ep.port };
  }
  return { kind: 'probe', ask: true, retryAt: truncated(now) + PROBE_RETRY_MS, host: ep.host, port: ep.port };
}

/** Status times keep whole seconds: compare and store at that precision, so a restart sees the same. */
function truncated(t: number): number {
  return Math.floor(t / SECOND) * SECOND;
}

export interface FirstControlPlaneJudgment {
  verdict: MachineVerdict;
  /** Ask the executor to probe the endpoint. */
  probe?: { host: string; port: number };
  /** When the probe's answer is due (replan then). */
  retryAt?: number;
  /** Why JoinGuard waits (said in Progressing). */
  wait?: string;
}

/**
 * The first control-plane rule, judged in its own stage: a first control-plane Machine whose join timed out, that
 * JoinGuard may act on, is held while its endpoint is probed, and judged again with one more joinTimeout when the
 * endpoint answered. `memory` is the next status's firstControlPlane memory, updated in place.
 */
export function judgeFirstControlPlane(
  m: MachineFacts,
  ctx: VerdictContext,
  o: {
    act: boolean;
    handled: boolean;
    memory: () => FirstControlPlaneStatus;
    probe: { reachable: boolean; at: number } | undefined;
  },
): FirstControlPlaneJudgment {
  const v = judgeMachine(m, ctx);
  const { settings, cluster, now } = ctx;
  const memory = o.memory();
  const mayAct =
    o.act && settings.firstControlPlane === 'Remediate' && memory.misconfigured === undefined && !o.handled;
  if (v.state !== 'Stuck' || v.failureKind !== 'JoinTimeout' || !mayAct) {
    delete memory.probeRequested;
    return { verdict: v };
  }
  const d = probeDecision(v, cluster, memory, o.probe, settings.joinTimeoutMs, now);
  if (d.kind === 'act') {
    delete memory.probeRequested;
    return { verdict: v };
  }
  if (d.kind === 'extend') {
    delete memory.probeRequested;
    Object.assign(memory, { extendedFor: m.uid, extendedUntil: iso(d.until) });
    return { verdict: judgeMachine(m, { ...ctx, extension: { uid: m.uid, until: d.until } }) };
  }
  if (d.ask) memory.probeRequested = iso(now);
  return {
    verdict: {
      ...v,
      state: 'Held',
      hold: 'EndpointProbe',
      pastDeadline: true,
      reason: `${v.reason}; probing the control-plane endpoint before acting`,
    },
    ...(d.ask ? { probe: { host: d.host, port: d.port } } : {}),
    retryAt: d.retryAt,
    wait:
      `probing the control-plane endpoint ${d.host}:${d.port} before ` +
      `acting on the first control-plane Machine ${m.name}`,
  };
}
