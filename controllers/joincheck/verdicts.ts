// One Machine -> one verdict, in a fixed order: Deleting, Joined, Skipped, Remediating (never act twice),
// then the clock verdicts (Provisioning, Joining, Stuck, or Held when a rule says the Machine cannot be
// judged yet), which a lost workload connection turns into Unobservable and a recent reconnection into
// Held. Management-cluster state only, plus workload Nodes when the opt-in check is on.
import type { ClusterFacts, MachineFacts, WorkloadNodeFacts } from '../../api/capi/model.js';
import type { CheckSettings, MachineObservation } from '../../api/v1alpha1/types.js';
import { isProvisioned, joinClockStart, provisionDeadline } from './clocks.js';
import type { ConnectionState } from './connection.js';
import { isJoined } from './first-control-plane.js';
import { formatDuration, iso, ms } from './time.js';
import type { MachineVerdict } from './types.js';

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
  /** The last first-CP remediation: its replacement's clock starts once the old Machine is gone. */
  previousFirstControlPlane?: { uid: string; machine: string; finishedTime?: string };
  connection: ConnectionState;
  nodes?: WorkloadNodeFacts[];
  /** UIDs with a remediation JoinGuard requested and that is not finished. */
  openRecordUids: ReadonlySet<string>;
  observations: ReadonlyMap<string, MachineObservation>;
  extension?: { uid: string; until: number };
}

export function judge(m: MachineFacts, ctx: VerdictContext): MachineVerdict {
  const v = (state: MachineVerdict['state'], reason: string, extra: Partial<MachineVerdict> = {}): MachineVerdict => ({
    machine: m.name,
    uid: m.uid,
    state,
    reason,
    ...extra,
  });

  if (m.deletingSince !== undefined) return v('Deleting', `being deleted since ${iso(m.deletingSince)}`);
  if (isJoined(m, ctx.nodes)) {
    return v('Joined', m.nodeName !== undefined ? `Node ${m.nodeName}` : `a workload Node has its providerID ${m.providerID}`);
  }
  if (ctx.cluster.paused) return v('Skipped', `the Cluster ${ctx.cluster.name} is paused`);
  if (m.skipReason !== undefined) return v('Skipped', `annotation ${m.skipReason}`);
  const marked = remediationMark(m, ctx.openRecordUids);
  if (marked !== undefined) return v('Remediating', marked);

  const isFirst = ctx.firstControlPlane?.uid === m.uid;
  const u = clockVerdict(m, ctx, isFirst);
  if (!isFirst && ctx.connection.down) {
    return { ...u, state: 'Unobservable', hold: 'ConnectionDown', pastDeadline: u.state === 'Stuck', reason: `no verdict while ${ctx.connection.evidence}` };
  }
  if (!isFirst && ctx.connection.graceUntil !== undefined) {
    return {
      ...u,
      state: 'Held',
      hold: 'ConnectionGrace',
      pastDeadline: u.state === 'Stuck',
      reason: `${ctx.connection.evidence}: verdicts resume at ${iso(ctx.connection.graceUntil)}`,
    };
  }
  const unnamed = (ctx.nodes ?? []).filter((n) => n.providerID === undefined || n.providerID === '');
  if (unnamed.length > 0) {
    return {
      ...u,
      state: 'Held',
      hold: 'NodeWithoutProviderID',
      pastDeadline: u.state === 'Stuck',
      reason: `a Node has no providerID yet (${unnamed.map((n) => n.name).sort().join(', ')}): it may be this Machine's`,
    };
  }
  return u;
}

/** Already asked to be replaced, by JoinGuard or by someone else: never act twice. */
function remediationMark(m: MachineFacts, openRecordUids: ReadonlySet<string>): string | undefined {
  if (openRecordUids.has(m.uid)) return 'JoinGuard asked for its replacement';
  if (m.healthCheckSucceeded?.status === 'False') {
    return `already marked for remediation: HealthCheckSucceeded is False (${m.healthCheckSucceeded.reason ?? 'no reason'})`;
  }
  if (m.remediateAnnotation) return 'already marked for remediation: annotation cluster.x-k8s.io/remediate-machine';
  if (m.joinGuardJoined?.status === 'False') return 'already marked: JoinGuardJoined is False';
  return undefined;
}

function clockVerdict(m: MachineFacts, ctx: VerdictContext, isFirst: boolean): MachineVerdict {
  const base = { machine: m.name, uid: m.uid, ...(isFirst ? { firstControlPlane: true } : {}) };
  const { settings, now } = ctx;

  if (!ctx.initialized && !isFirst) {
    const first = ctx.firstControlPlane;
    return ctx.firstControlPlanePending && first !== undefined
      ? { ...base, state: 'Held', hold: 'FirstControlPlane', reason: `waiting for the first control-plane Machine ${first.name}` }
      : { ...base, state: 'Held', hold: 'ControlPlaneNotInitialized', reason: 'waiting for the control plane to be initialized' };
  }

  if (!isProvisioned(m)) {
    const deadline = provisionDeadline(m, settings);
    const what = !m.infrastructureReady.value ? 'infrastructure' : 'bootstrap data';
    if (deadline !== undefined && now >= deadline) {
      return {
        ...base,
        state: 'Stuck',
        failureKind: 'ProvisionTimeout',
        clockStart: m.createdAt,
        deadline,
        reason: `${what} not ready ${formatDuration(now - m.createdAt)} after creation (provisionTimeout ${formatDuration(settings.provisionTimeoutMs as number)})`,
      };
    }
    return { ...base, state: 'Provisioning', clockStart: m.createdAt, deadline, reason: `waiting for ${what}` };
  }

  const prevFirst = ctx.previousFirstControlPlane;
  const replacing = isFirst && prevFirst !== undefined && prevFirst.uid !== m.uid;
  if (replacing && prevFirst.finishedTime === undefined) {
    return {
      ...base,
      state: 'Held',
      hold: 'PreviousFirstControlPlane',
      reason: `the previous first control-plane Machine ${prevFirst.machine} is not gone yet (it may still hold the endpoint)`,
    };
  }

  const start = joinClockStart(m, {
    firstControlPlane: isFirst,
    controlPlaneInitializedAt: ctx.controlPlaneInitializedAt,
    readySeen: ms(ctx.observations.get(m.uid)?.readySeen),
    notBefore: replacing ? ms(prevFirst.finishedTime) : undefined,
  });
  let deadline = start + settings.joinTimeoutMs;
  const extended = ctx.extension !== undefined && ctx.extension.uid === m.uid && ctx.extension.until > deadline;
  if (extended) deadline = (ctx.extension as { until: number }).until;
  const timed = { ...base, clockStart: start, deadline };
  if (extended && now < deadline) {
    return {
      ...timed,
      state: 'Held',
      hold: 'EndpointAnswered',
      reason: `the control plane answered at its endpoint, so initialization may be finishing: given another joinTimeout until ${iso(deadline)}`,
    };
  }
  if (now >= deadline) {
    return {
      ...timed,
      state: 'Stuck',
      failureKind: 'JoinTimeout',
      reason:
        `no Node ${formatDuration(now - start)} after its join clock started at ${iso(start)} ` +
        `(joinTimeout ${formatDuration(settings.joinTimeoutMs)}${extended ? ', extended once after the endpoint answered' : ''})`,
    };
  }
  return { ...timed, state: 'Joining', reason: `no Node yet; join clock started at ${iso(start)}, deadline ${iso(deadline)}` };
}
