// The check's conditions and counts. Progressing is False with the highest-precedence stop met, each with
// a message that names the evidence and points at the runbook section; else True/Remediating while a
// request is in flight, else True/AsExpected. lastTransitionTime moves only when a condition's status
// does; every condition carries the check's generation.
import type { Condition, MachineJoinCheckStatus } from '../../api/v1alpha1/types.js';
import { CONDITION_PAUSED, CONDITION_PROGRESSING, CONDITION_READY } from '../../api/v1alpha1/types.js';
import { addStop, type StopNotes, type StopReason, type Work } from './context.js';
import { endpointOf, failureEvidence, listNames, runbook } from './messages.js';
import { neverJoinedActive } from './guards.js';
import { isInFlight } from './records.js';
import { suspicionMessage } from './suspicion.js';
import { formatDuration, iso } from './time.js';
import type { MachineVerdict } from './types.js';

/** Highest first. */
export const STOP_PRECEDENCE: StopReason[] = [
  'FirstControlPlaneReplacementMisconfigured',
  'ControlPlaneEndpointUnreachable',
  'NeverJoined',
  'BootstrapCredentialSuspect',
  'RemediationRefusedByOwner',
  'RemediationBudgetExhausted',
  'DryRun',
];

/** Stops that announce themselves with a RemediationRestricted event when they begin. */
export const RESTRICTING: ReadonlySet<string> = new Set(['NeverJoined', 'BootstrapCredentialSuspect', 'RemediationRefusedByOwner', 'RemediationBudgetExhausted']);

export function countVerdicts(verdicts: MachineVerdict[]): { joined: number; joining: number; stuck: number } {
  let joined = 0;
  let joining = 0;
  let stuck = 0;
  for (const v of verdicts) {
    if (v.state === 'Joined') joined++;
    else if (v.state === 'Provisioning' || v.state === 'Joining' || v.state === 'Held' || v.state === 'Unobservable') joining++;
    else if (v.state === 'Stuck' || v.state === 'Remediating') stuck++;
  }
  return { joined, joining, stuck };
}

export interface ConditionInput {
  type: string;
  status: Condition['status'];
  reason: string;
  message: string;
}

export function setCondition(list: Condition[] | undefined, c: ConditionInput, now: number, generation: number | undefined): Condition[] {
  const prev = (list ?? []).find((x) => x.type === c.type);
  const next: Condition = {
    ...c,
    lastTransitionTime: prev !== undefined && prev.status === c.status ? prev.lastTransitionTime : iso(now),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  const out = (list ?? []).filter((x) => x.type !== c.type);
  out.push(next);
  const order = [CONDITION_READY, CONDITION_PROGRESSING, CONDITION_PAUSED];
  return out.sort((a, b) => rank(order, a.type) - rank(order, b.type) || (a.type < b.type ? -1 : 1));
}

function rank(order: string[], t: string): number {
  const i = order.indexOf(t);
  return i < 0 ? order.length : i;
}

export function conditionOf(status: MachineJoinCheckStatus | undefined, type: string): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

/** The stops whose evidence is state (not a single plan's notes), with their messages. */
function stateStops(w: Work, verdicts: MachineVerdict[]): void {
  const { next, settings } = w;
  if (next.firstControlPlaneMisconfigured !== undefined) {
    addStop(w, 'FirstControlPlaneReplacementMisconfigured', next.firstControlPlaneMisconfigured.message);
  }
  const held = verdicts.filter((v) => (v.hold === 'ConnectionDown' || v.hold === 'ConnectionGrace') && v.pastDeadline === true);
  for (const v of held) addStop(w, 'ControlPlaneEndpointUnreachable', '', v.machine);
  if (neverJoinedActive(next, settings)) addStop(w, 'NeverJoined', '');
  if (next.suspicion !== undefined) addStop(w, 'BootstrapCredentialSuspect', '');
  for (const o of next.refusedOwners ?? []) addStop(w, 'RemediationRefusedByOwner', `${o.kind}/${o.name} answered CannotBeRemediated`);
  if (settings.dryRun) {
    const would = (next.remediations ?? []).filter((r) => r.outcome === 'DryRun' && w.verdicts.get(r.uid)?.state === 'Stuck');
    for (const r of would) addStop(w, 'DryRun', `${r.machine} via ${r.path}`);
  }
}

/** Bounded, so that a large fleet cannot make a condition message unbounded. */
function said(notes: string[]): string {
  const shown = notes.slice(0, 3).join('; ');
  return notes.length > 3 ? `${shown}; and ${notes.length - 3} more` : shown;
}

function held(machines: string[]): string {
  return machines.length > 0 ? ` Held back: ${listNames(machines)}.` : '';
}

function stopMessage(w: Work, reason: StopReason, stop: StopNotes): string {
  const { next, settings, cluster } = w;
  const notes = stop.notes;
  switch (reason) {
    case 'FirstControlPlaneReplacementMisconfigured':
      return `JoinGuard stopped remediating the first control-plane Machine: ${notes[0] ?? 'its replacement is not an init Machine'}.${held(stop.machines)} ${runbook(reason)}`;
    case 'ControlPlaneEndpointUnreachable': {
      const seen = w.connection.down
        ? `CAPI cannot see the workload cluster: ${w.connection.evidence}`
        : `${w.connection.evidence ?? 'the workload connection came back'}, less than the grace period (${formatDuration(w.graceMs)}) ago`;
      return (
        `${seen} (controlPlaneEndpoint ${endpointOf(cluster)}). Past their deadline without a Node: ${listNames(stop.machines)}; ` +
        `a Machine whose Node CAPI cannot see is never taken for one that never joined, so there is no verdict until ` +
        `the connection has been back for ${formatDuration(w.graceMs)}. ${runbook(reason)}`
      );
    }
    case 'NeverJoined': {
      const since = next.lastResume?.time;
      const failures = (next.recentFailures ?? []).filter((f) => since === undefined || f.time >= since);
      return (
        `No Machine in scope has ever joined and ${next.failuresSinceResume ?? 0} failures happened` +
        `${since !== undefined ? ` since the resume at ${since}` : ''} (neverJoinedLimit ${settings.neverJoinedLimit}): ` +
        `${failureEvidence(failures.slice(-settings.neverJoinedLimit))}. The cluster looks misconfigured from the start ` +
        `(image, bootstrap settings, an endpoint ${endpointOf(cluster)} the Machines cannot reach); rebuilding would repeat ` +
        `it, so all remediation stopped.${held(stop.machines)} Fix the templates, then resume with joinguard.io/resume. ${runbook(reason)}`
      );
    }
    case 'BootstrapCredentialSuspect':
      return suspicionMessage(next.suspicion!, next.consecutiveJoinFailures ?? 0, next.recentFailures ?? [], cluster, settings, stop.machines);
    case 'RemediationRefusedByOwner':
      return `An owner refuses remediation, so JoinGuard does not ask it until a resume: ${said(notes)}.${held(stop.machines)} ${runbook(reason)}`;
    case 'RemediationBudgetExhausted':
      return `A remediation budget holds back requests: ${said(notes)}.${held(stop.machines)} ${runbook(reason)}`;
    case 'DryRun':
      return `spec.dryRun is true: JoinGuard would ask for the replacement of ${listNames(notes)}, and changes no Machine. ${runbook(reason)}`;
  }
}

export function progressing(w: Work, verdicts: MachineVerdict[]): ConditionInput {
  stateStops(w, verdicts);
  for (const reason of STOP_PRECEDENCE) {
    const stop = w.stops.get(reason);
    if (stop !== undefined) {
      return { type: CONDITION_PROGRESSING, status: 'False', reason, message: stopMessage(w, reason, stop) };
    }
  }
  const waits = w.waits.length > 0 ? ` Waiting: ${said(w.waits)}.` : '';
  const flying = (w.next.remediations ?? []).filter(isInFlight);
  if (flying.length > 0) {
    const list = flying
      .map((r) => `${r.machine} (${r.path}, ${r.outcome}${r.ownerReason !== undefined ? `, owner says ${r.ownerReason}${r.ownerMessage ? `: ${r.ownerMessage}` : ''}` : ''})`)
    return { type: CONDITION_PROGRESSING, status: 'True', reason: 'Remediating', message: `Replacements in flight: ${said(list)}.${waits} ${runbook('Remediating')}` };
  }
  const c = countVerdicts(verdicts);
  return {
    type: CONDITION_PROGRESSING,
    status: 'True',
    reason: 'AsExpected',
    message: `${c.joined} of ${w.expected} Machines joined, ${c.joining} on their way, ${c.stuck} stuck.${waits}`,
  };
}

export function paused(w: Work, verdicts: MachineVerdict[]): ConditionInput {
  const t = CONDITION_PAUSED;
  if (w.settings.paused) return { type: t, status: 'True', reason: 'SpecPaused', message: 'spec.paused is true: JoinGuard changes nothing and only reports.' };
  if (w.cluster.paused) return { type: t, status: 'True', reason: 'ClusterPaused', message: `the Cluster ${w.cluster.name} is paused: its Machines are left alone.` };
  if (w.pausedMhcs.length > 0) return { type: t, status: 'True', reason: 'MachineHealthCheckPaused', message: `${said(w.pausedMhcs)}.` };
  const skipped = verdicts.filter((v) => v.state === 'Skipped').map((v) => `${v.machine} (${v.reason})`);
  return {
    type: t,
    status: 'False',
    reason: 'NotPaused',
    message: skipped.length > 0 ? `Not paused; skipped by annotation: ${listNames(skipped)}.` : 'Not paused.',
  };
}

export function ready(w: Work): ConditionInput {
  const malformed = w.s.malformed;
  const base = `Watching ${w.inScope.length} of the ${w.ofCluster.length} Machines of Cluster ${w.cluster.name}.`;
  const bad =
    malformed.length > 0
      ? ` ${malformed.length} Machines could not be read and are never acted on: ${listNames(malformed.map((x) => `${x.name} (${x.error})`), 3)}.`
      : '';
  return { type: CONDITION_READY, status: 'True', reason: 'AsExpected', message: base + bad };
}

