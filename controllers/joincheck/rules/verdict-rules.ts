// The per-Machine verdict rules (DESIGN: "How a Machine is judged"), from management-cluster state only: which
// Machines a check looks at, what each Machine is this pass (a target: joined, provisioned, in scope), and one
// verdict per Machine from its clocks (clocks.ts). The planner's judge stage (plan/judge.ts) applies them.
import {
  carriesAnyMark,
  type ClusterFacts,
  type KcpFacts,
  type MachineFacts,
  type WorkloadNodeFacts,
} from '../../../api/capi/model.js';
import { matchesSelector } from '../../../api/capi/selector.js';
import type { CheckSettings } from '../../../api/v1alpha1/types.js';
import { formatDuration, iso, ms } from '../time.js';

import { joinClockStart, provisionClockStart } from './clocks.js';
import type { ConnectionState } from './connection.js';
import type { MachineVerdict } from '../types.js';

// ---- scope ----

/** Facts objects are immutable (a new one per update, from the informer): per-object answers are kept by identity. */
const inScopeOf = new WeakMap<MachineFacts, { selector: CheckSettings['selector']; ok: boolean }>();

/** The Machines a check judges: its Cluster's Machines (all given, sorted by name) that its selector matches. */
export function machinesInScope(ofCluster: readonly MachineFacts[], settings: CheckSettings): MachineFacts[] {
  return ofCluster.filter((m) => {
    const known = inScopeOf.get(m);
    if (known !== undefined && known.selector === settings.selector) return known.ok;
    const ok = matchesSelector(settings.selector, m.labels);
    inScopeOf.set(m, { selector: settings.selector, ok });
    return ok;
  });
}

/** One Machine of the Cluster as this pass sees it: what it is is computed once, here. */
export interface Target {
  readonly m: MachineFacts;
  /** A Node is known for it (nodeRef, or a workload Node with its providerID). */
  readonly joined: boolean;
  readonly provisioned: boolean;
  /** The check's selector chooses it. */
  readonly inScope: boolean;
}

/** One target per Machine, what it is computed once; `joined` answers for settled Machines too (memoized). */
export function targetsOf(
  ofCluster: readonly MachineFacts[],
  settings: CheckSettings | undefined,
  nodes: readonly WorkloadNodeFacts[] | undefined,
): { targets: Map<string, Target>; inScope: MachineFacts[]; joined: (m: MachineFacts) => boolean } {
  const joinedOf = new Map<string, boolean>();
  const joined = (m: MachineFacts): boolean => {
    let j = joinedOf.get(m.uid);
    if (j === undefined) joinedOf.set(m.uid, (j = isJoined(m, nodes)));
    return j;
  };
  const chosen = new Set(settings !== undefined ? machinesInScope(ofCluster, settings) : []);
  const targets = new Map(
    ofCluster.map((m) => [
      m.uid,
      { m, joined: joined(m), provisioned: isProvisioned(m), inScope: chosen.has(m) } satisfies Target,
    ]),
  );
  return { targets, inScope: ofCluster.filter((m) => chosen.has(m)), joined };
}

export function isJoined(m: MachineFacts, nodes: readonly WorkloadNodeFacts[] | undefined): boolean {
  if (m.nodeName !== undefined) return true;
  return m.providerID !== undefined && m.providerID !== '' && (nodes ?? []).some((n) => n.providerID === m.providerID);
}

/**
 * Settled: joined for good (nodeRef is never cleared), not being deleted, carrying no remediation mark of anyone,
 * not opted out, not a control-plane Machine (the first control-plane rules look at those), and CAPI sees its Node.
 * Nothing can come of such a Machine for JoinGuard but a count, until it changes.
 */
export function isSettled(m: MachineFacts): boolean {
  return (
    m.nodeName !== undefined &&
    m.deletingSince === undefined &&
    !m.controlPlane &&
    !m.nodeConnectionDown &&
    m.skipReason === undefined &&
    !carriesAnyMark(m) &&
    m.requestedBy === undefined
  );
}

export function isProvisioned(m: MachineFacts): boolean {
  return m.infrastructureReady.value && m.bootstrapReady.value;
}

/** Either the Cluster or the KubeadmControlPlane says so (set once, never reset). */
export function controlPlaneInitialized(cluster: ClusterFacts, kcp: KcpFacts | undefined): boolean {
  return cluster.controlPlaneInitialized.value || kcp?.initialized === true;
}

// ---- verdicts ----

export interface VerdictContext {
  settings: CheckSettings;
  cluster: ClusterFacts;
  now: number;
  initialized: boolean;
  controlPlaneInitializedAt?: number;
  /** The Cluster's first control-plane Machine (only while not initialized). */
  firstControlPlane?: MachineFacts;
  /** The first control-plane Machine exists and has not joined: it holds back every other Machine. */
  firstControlPlanePending: boolean;
  /** The last first-CP replacement: its replacement's clock starts once the old Machine is gone. */
  previousFirstControlPlane?: { uid: string; machine: string; goneTime?: string };
  /** One more joinTimeout for the first control-plane Machine after its endpoint answered. */
  extension?: { uid: string; until: number };
  connection: ConnectionState;
  nodes?: readonly WorkloadNodeFacts[];
  /** Joined, as the planner computed it once per Machine (else from `nodes`). */
  joined?: (m: MachineFacts) => boolean;
  /** UIDs whose replacement JoinGuard asked for and keeps asking (open requests). */
  openRequests: ReadonlySet<string>;
  /** The readiness time of each provisioned Machine (from `readiness`). */
  readyAt: ReadonlyMap<string, number>;
}

/** Deleting and joined-by-nodeRef verdicts depend on the Machine alone (most of a large fleet): made once per facts. */
const settled = new WeakMap<MachineFacts, MachineVerdict>();

/** One Machine -> one verdict: Deleting, Joined, Skipped, Remediating, then the clock verdicts and the holds. */
export function judgeMachine(m: MachineFacts, ctx: VerdictContext): MachineVerdict {
  const v = (state: MachineVerdict['state'], reason: string): MachineVerdict => ({
    machine: m.name,
    uid: m.uid,
    state,
    reason,
  });
  if (m.deletingSince !== undefined || m.nodeName !== undefined) {
    let known = settled.get(m);
    if (known === undefined) {
      known =
        m.deletingSince !== undefined
          ? v('Deleting', `being deleted since ${iso(m.deletingSince)}`)
          : v('Joined', `Node ${m.nodeName}`);
      settled.set(m, known);
    }
    return known;
  }
  if (ctx.joined?.(m) ?? isJoined(m, ctx.nodes))
    return v('Joined', `a workload Node has its providerID ${m.providerID}`);
  if (ctx.cluster.paused) return v('Skipped', `the Cluster ${ctx.cluster.name} is paused`);
  if (m.skipReason !== undefined) return v('Skipped', `annotation ${m.skipReason}`);
  const marked = remediationMark(m, ctx.openRequests);
  if (marked !== undefined) return v('Remediating', marked);

  const isFirst = ctx.firstControlPlane?.uid === m.uid;
  const u = clockVerdict(m, ctx, isFirst);
  const held = (hold: MachineVerdict['hold'], state: 'Held' | 'Unobservable', reason: string): MachineVerdict => ({
    ...u,
    state,
    hold,
    pastDeadline: u.state === 'Stuck',
    reason,
  });
  if (!isFirst && ctx.connection.down)
    return held('ConnectionDown', 'Unobservable', `no verdict while ${ctx.connection.evidence}`);
  if (!isFirst && ctx.connection.graceUntil !== undefined) {
    return held(
      'ConnectionGrace',
      'Held',
      `${ctx.connection.evidence}: verdicts resume at ${iso(ctx.connection.graceUntil)}`,
    );
  }
  const unnamed = (ctx.nodes ?? []).filter((n) => n.providerID === undefined || n.providerID === '');
  if (unnamed.length > 0 && u.state !== 'Held') {
    return held(
      'NodeWithoutProviderID',
      'Held',
      `a Node has no providerID yet (${unnamed
        .map((n) => n.name)
        .sort()
        .join(', ')}): it may be this Machine's`,
    );
  }
  return u;
}

/** Already asked to be replaced, by JoinGuard or by someone else: never acted on twice. */
export function remediationMark(m: MachineFacts, openRequests: ReadonlySet<string>): string | undefined {
  if (openRequests.has(m.uid)) return 'JoinGuard asked for its replacement';
  if (m.healthCheckSucceeded?.status === 'False')
    return (
      `already marked for remediation: HealthCheckSucceeded is ` +
      `False (${m.healthCheckSucceeded.reason ?? 'no reason'})`
    );
  if (m.remediateAnnotation) return 'already marked for remediation: annotation cluster.x-k8s.io/remediate-machine';
  if (m.joinGuardJoined?.status === 'False') return 'already marked: JoinGuardJoined is False';
  return undefined;
}

const EXTENDED_ONCE = ', extended once after the endpoint answered';

function clockVerdict(m: MachineFacts, ctx: VerdictContext, isFirst: boolean): MachineVerdict {
  const base: MachineVerdict = {
    machine: m.name,
    uid: m.uid,
    state: 'Joining',
    reason: '',
    ...(isFirst ? { firstControlPlane: true } : {}),
  };
  if (!ctx.initialized && !isFirst) return heldForInitialization(base, ctx);
  const readyAt = ctx.readyAt.get(m.uid);
  if (!isProvisioned(m) || readyAt === undefined) return provisionVerdict(m, ctx, isFirst, base);
  return joinVerdict(m, ctx, isFirst, base, readyAt);
}

/** Every Machine but the first control-plane one waits for the control plane's initialization. */
function heldForInitialization(base: MachineVerdict, ctx: VerdictContext): MachineVerdict {
  const first = ctx.firstControlPlane;
  return ctx.firstControlPlanePending && first !== undefined
    ? {
        ...base,
        state: 'Held',
        hold: 'FirstControlPlane',
        reason: `waiting for the first control-plane Machine ${first.name}`,
      }
    : {
        ...base,
        state: 'Held',
        hold: 'ControlPlaneNotInitialized',
        reason: 'waiting for the control plane to be initialized',
      };
}

/** Not provisioned yet: the provision clock. */
function provisionVerdict(
  m: MachineFacts,
  ctx: VerdictContext,
  isFirst: boolean,
  base: MachineVerdict,
): MachineVerdict {
  const { settings, now } = ctx;
  // Bootstrap providers create a worker's data only once the control plane is initialized (CABPK
  // handleClusterNotInitialized): but for the first control-plane Machine, the clock starts no earlier.
  const start = provisionClockStart(m, isFirst, ctx.controlPlaneInitializedAt);
  const from = start === m.createdAt ? 'creation' : `the control plane's initialization at ${iso(start)}`;
  const deadline = settings.provisionTimeoutMs === undefined ? undefined : start + settings.provisionTimeoutMs;
  const what = !m.infrastructureReady.value ? 'infrastructure' : 'bootstrap data';
  if (deadline !== undefined && now >= deadline) {
    return {
      ...base,
      state: 'Stuck',
      failureKind: 'ProvisionTimeout',
      clockStart: start,
      deadline,
      reason:
        `${what} not ready ${formatDuration(now - start)} after ${from} ` +
        `(provisionTimeout ${formatDuration(settings.provisionTimeoutMs as number)})`,
    };
  }
  return {
    ...base,
    state: 'Provisioning',
    clockStart: start,
    ...(deadline !== undefined ? { deadline } : {}),
    reason: `waiting for ${what}`,
  };
}

/** Provisioned: the join clock, its one extension, and the first control-plane replacement's wait. */
function joinVerdict(
  m: MachineFacts,
  ctx: VerdictContext,
  isFirst: boolean,
  base: MachineVerdict,
  readyAt: number,
): MachineVerdict {
  const prevFirst = ctx.previousFirstControlPlane;
  const replacing = isFirst && prevFirst !== undefined && prevFirst.uid !== m.uid;
  if (replacing && prevFirst.goneTime === undefined) {
    return {
      ...base,
      state: 'Held',
      hold: 'PreviousFirstControlPlane',
      reason:
        `the previous first control-plane Machine ${prevFirst.machine} ` +
        `is not gone yet (it may still hold the endpoint)`,
    };
  }
  const start = joinClockStart(m, {
    firstControlPlane: isFirst,
    readyAt,
    ...(ctx.controlPlaneInitializedAt !== undefined
      ? { controlPlaneInitializedAt: ctx.controlPlaneInitializedAt }
      : {}),
    ...(replacing ? { notBefore: ms(prevFirst.goneTime) } : {}),
  });
  return joinDeadlineVerdict(m, ctx, base, start);
}

/** The join clock started at `start`: its deadline (extended once after the endpoint answered), passed or not. */
function joinDeadlineVerdict(
  m: MachineFacts,
  ctx: VerdictContext,
  base: MachineVerdict,
  start: number,
): MachineVerdict {
  const { settings, now } = ctx;
  let deadline = start + settings.joinTimeoutMs;
  const ext = ctx.extension;
  const extended = ext !== undefined && ext.uid === m.uid && ext.until > deadline;
  if (extended) deadline = ext.until;
  const timed = { ...base, clockStart: start, deadline };
  if (extended && now < deadline) {
    return {
      ...timed,
      state: 'Held',
      hold: 'EndpointAnswered',
      reason:
        `the control plane answered at its endpoint, so initialization ` +
        `may be finishing: given another joinTimeout until ${iso(deadline)}`,
    };
  }
  if (now >= deadline) {
    return {
      ...timed,
      state: 'Stuck',
      failureKind: 'JoinTimeout',
      reason:
        `no Node ${formatDuration(now - start)} after its join clock started at ${iso(start)} ` +
        `(joinTimeout ${formatDuration(settings.joinTimeoutMs)}${extended ? EXTENDED_ONCE : ''})`,
    };
  }
  return {
    ...timed,
    state: 'Joining',
    reason: `no Node yet; join clock started at ${iso(start)}, deadline ${iso(deadline)}`,
  };
}
