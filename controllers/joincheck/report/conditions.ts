// The check's conditions and counts (DESIGN: "Status", "What users see"). Progressing is False with the stop of
// highest precedence met (the order of guards.ts's STOPS) — each with a message that names the evidence and links
// its runbook section — else True/Remediating while a request is in flight, else True/AsExpected.
// lastTransitionTime moves only when a condition's status does; every condition carries the check's generation.
import type { ClusterFacts } from '../../../api/capi/model.js';
import type {
  Condition,
  JoinDurationsStatus,
  MachineJoinCheckStatus,
  StopMeaning,
  StopReason,
} from '../../../api/v1alpha1/types.js';
import {
  ANNOTATION_WITHDRAW_ALL,
  CONDITION_PAUSED,
  CONDITION_PROGRESSING,
  CONDITION_READY,
  PausedReason,
  ReadyReason,
  STATUS_LIMITS,
  STOP_MEANINGS,
} from '../../../api/v1alpha1/types.js';
import { stopMessage, STOPS_IN_ORDER, type StopContext } from '../guards/guards.js';
import { formatDuration, iso, MINUTE, SECOND } from '../time.js';
import { countVerdicts } from './counts.js';
import type { MachineVerdict, RefusedWrite } from '../types.js';
import { listNames, runbook, said } from '../words.js';

/** What the rules met in one plan: per stop, what was seen and which Machines it holds back. */
export class Stops {
  private readonly map = new Map<StopReason, { notes: string[]; machines: string[] }>();
  readonly waits: string[] = [];

  add(reason: StopReason, note: string, machine?: string): void {
    const s = this.map.get(reason) ?? { notes: [], machines: [] };
    if (note !== '' && !s.notes.includes(note)) s.notes.push(note);
    if (machine !== undefined && !s.machines.includes(machine)) s.machines.push(machine);
    this.map.set(reason, s);
  }

  wait(note: string): void {
    if (!this.waits.includes(note)) this.waits.push(note);
  }

  /** The stop of highest precedence, if any. */
  first(): { reason: StopReason; notes: string[]; machines: string[] } | undefined {
    for (const reason of STOPS_IN_ORDER) {
      const s = this.map.get(reason);
      if (s !== undefined) return { reason, ...s };
    }
    return undefined;
  }

  /** Names of the Machines a stop holds back. */
  machinesHeld(): string[] {
    const all = new Set<string>();
    for (const s of this.map.values()) for (const m of s.machines) all.add(m);
    return [...all];
  }
}

// ---- join durations ----

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1] as number;
}

/** A joinTimeout that the observed joins fit in: 1.5 × p95, rounded up to a minute, at least 2m. */
export function suggestedJoinTimeout(p95Seconds: number): string {
  return formatDuration(Math.max(2, Math.ceil((1.5 * p95Seconds * SECOND) / MINUTE)) * MINUTE);
}

export function addJoinDuration(prev: JoinDurationsStatus | undefined, seconds: number): JoinDurationsStatus {
  const recentSeconds = [...(prev?.recentSeconds ?? []), seconds].slice(-STATUS_LIMITS.joinDurationSamples);
  const sorted = [...recentSeconds].sort((a, b) => a - b);
  const p95 = percentile(sorted, 95);
  return {
    count: Math.min((prev?.count ?? 0) + 1, STATUS_LIMITS.count),
    p50Seconds: percentile(sorted, 50),
    p95Seconds: p95,
    maxSeconds: Math.max(prev?.maxSeconds ?? 0, seconds),
    suggestedJoinTimeout: suggestedJoinTimeout(p95),
    recentSeconds,
  };
}

// ---- conditions ----

export interface ConditionInput {
  type: string;
  status: Condition['status'];
  reason: string;
  message: string;
}

export function setCondition(
  list: Condition[] | undefined,
  c: ConditionInput,
  now: number,
  generation: number | undefined,
): Condition[] {
  const prev = (list ?? []).find((x) => x.type === c.type);
  const next: Condition = {
    ...c,
    lastTransitionTime:
      prev !== undefined && prev.status === c.status && typeof prev.lastTransitionTime === 'string'
        ? prev.lastTransitionTime
        : iso(now),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  const order = [CONDITION_READY, CONDITION_PROGRESSING, CONDITION_PAUSED];
  const rank = (t: string) => (order.indexOf(t) < 0 ? order.length : order.indexOf(t));
  return [...(list ?? []).filter((x) => x.type !== c.type), next].sort(
    (a, b) => rank(a.type) - rank(b.type) || (a.type < b.type ? -1 : 1),
  );
}

export function conditionOf(status: MachineJoinCheckStatus | undefined, type: string): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

export interface ProgressingInput extends StopContext {
  stops: Stops;
  expected: number;
  verdicts: readonly MachineVerdict[];
  /** Joined Machines in scope left out of `verdicts` (settled). */
  settledJoined: number;
  /** Requests in flight: "name (path, what the owner says)". */
  flying: string[];
  /** Machines whose writes the apiserver refuses now: said after whatever else Progressing says. */
  refused?: readonly RefusedWrite[];
}

/** " Writes refused, retried with back-off: m (mark: 422 ...) since T; ..." — or nothing. */
export function refusedNote(refused: readonly RefusedWrite[] | undefined): string {
  if (refused === undefined || refused.length === 0) return '';
  return (
    ` Writes refused, each retried with back-off (other Machines ` +
    `are not held back): ${said(refused.map((r) => `${r.machine} (${r.write}: ${r.message}) since ${iso(r.since)}`))}.`
  );
}

export function progressing(i: ProgressingInput): ConditionInput {
  const c = progressingOf(i);
  return { ...c, message: c.message + refusedNote(i.refused) };
}

function progressingOf(i: ProgressingInput): ConditionInput {
  const stop = i.stops.first();
  if (stop !== undefined)
    return {
      type: CONDITION_PROGRESSING,
      status: 'False',
      reason: stop.reason,
      message: stopMessage(stop.reason, i, stop.notes, stop.machines),
    };
  const waits = i.stops.waits.length > 0 ? ` Waiting: ${said(i.stops.waits)}.` : '';
  if (i.flying.length > 0) {
    return {
      type: CONDITION_PROGRESSING,
      status: 'True',
      reason: 'Remediating',
      message: `Replacements in flight: ${said(i.flying)}.${waits} ${runbook('Remediating')}`,
    };
  }
  const c = countVerdicts(i.verdicts);
  const holds = i.verdicts.filter((v) => v.state === 'Held' || v.state === 'Unobservable');
  const held =
    holds.length > 0 ? ` ${holds.length} held: ${said([...new Set(holds.map((v) => v.reason))].sort())}.` : '';
  return {
    type: CONDITION_PROGRESSING,
    status: 'True',
    reason: 'AsExpected',
    message:
      `${c.joined + i.settledJoined} of ${i.expected} Machines ` +
      `joined, ${c.joining} on their way, ${c.stuck} stuck.${held}` +
      waits,
  };
}

export function pausedCondition(o: {
  specPaused: boolean;
  cluster: ClusterFacts;
  pausedMhcs: string[];
  verdicts: readonly MachineVerdict[];
  withdrawing?: { left: string[]; deleting: string[]; note?: string };
}): ConditionInput {
  const t = CONDITION_PAUSED;
  if (o.withdrawing !== undefined) {
    // What an uninstall waits for: MarksWithdrawn says no Machine carries a mark JoinGuard made.
    const w = o.withdrawing;
    const deleting =
      w.deleting.length > 0 ? ` Already being deleted at JoinGuard's request: ${listNames(w.deleting)}.` : '';
    // The check being deleted (its finalizer) says so; else withdraw-all.
    const why = w.note ?? `${ANNOTATION_WITHDRAW_ALL}: JoinGuard asks nothing and withdraws its marks`;
    if (w.left.length > 0)
      return {
        type: t,
        status: 'True',
        reason: PausedReason.WithdrawingMarks,
        message: `${why}; still carrying one: ${listNames(w.left)}.${deleting}`,
      };
    return {
      type: t,
      status: 'True',
      reason: PausedReason.MarksWithdrawn,
      message:
        `${w.note ?? `${ANNOTATION_WITHDRAW_ALL}: JoinGuard asks nothing`}; ` +
        `no Machine carries a mark it made.${deleting}`,
    };
  }
  // CAPI's reason (util/paused), and every cause in the message, as CAPI joins them.
  const causes = [
    ...(o.specPaused
      ? [
          'spec.paused is true: JoinGuard changes nothing and only ' +
            'reports (it still withdraws its own marks from Machines ' +
            'that joined)',
        ]
      : []),
    ...(o.cluster.paused ? [`the Cluster ${o.cluster.name} is paused: its Machines are left alone`] : []),
    ...(o.pausedMhcs.length > 0 ? [said(o.pausedMhcs)] : []),
  ];
  if (causes.length > 0)
    return { type: t, status: 'True', reason: PausedReason.Paused, message: `${causes.join('; ')}.` };
  const skipped = o.verdicts.filter((v) => v.state === 'Skipped').map((v) => `${v.machine} (${v.reason})`);
  return {
    type: t,
    status: 'False',
    reason: PausedReason.NotPaused,
    message: skipped.length > 0 ? `Not paused; skipped by annotation: ${listNames(skipped)}.` : 'Not paused.',
  };
}

/** Why strategy Delete deletes nothing here: the condition names the flag (and the install variable that sets it). */
export function machineDeleteNotAllowed(held: readonly string[]): string {
  const which = held.length > 0 ? ` Held back: ${listNames(held)}.` : '';
  return (
    'remediation.strategy is Delete, but JoinGuard runs without --allow-machine-delete (installed without ' +
    ('JOINGUARD_ALLOW_MACHINE_DELETE=true, which also grants the ' +
      'Machine delete role): it deletes no Machine, and stuck MachineSet ' +
      'Machines ') +
    `wait.${which} Enable the flag, or choose another strategy. ${runbook(ReadyReason.MachineDeleteNotAllowed)}`
  );
}

/**
 * Ready summarises the check in CAPI's v1beta2 form (util/conditions NewSummaryCondition): False/NotReady while
 * remediation stalls, with the issue in the message as `* Progressing: ...`; False with a reason of its own when the
 * check cannot work as written. DryRun is not a stall (the user chose it): Ready stays True. Neither is pacing: the
 * budget stop while maxInFlight remediations are in flight frees by itself as each finishes (docs/decisions/
 * day-two-pacing-alerts-dashboard-gitops.md, "Pacing is not a stall").
 */
export function readyCondition(o: {
  inScope: number;
  ofCluster: number;
  cluster: string;
  malformed: { name: string; error: string }[];
  progressing: ConditionInput;
  /** Strategy Delete without --allow-machine-delete: the Machines it holds back. */
  deleteNotAllowed?: readonly string[];
  /** Remediations in flight now, and the maxInFlight limit they count against. */
  inFlight?: { count: number; limit: number };
}): ConditionInput {
  const issues: { reason: string; line: string }[] = [];
  if (o.deleteNotAllowed !== undefined)
    issues.push({
      reason: ReadyReason.MachineDeleteNotAllowed,
      line: `* Remediation: ${machineDeleteNotAllowed(o.deleteNotAllowed)}`,
    });
  const pacing = pacedByMaxInFlight(o.progressing, o.inFlight);
  if (o.progressing.status === 'False' && turnsReadyFalse(o.progressing.reason, pacing))
    issues.push({ reason: ReadyReason.NotReady, line: `* ${CONDITION_PROGRESSING}: ${o.progressing.message}` });
  if (issues.length > 0)
    return {
      type: CONDITION_READY,
      status: 'False',
      reason: issues[0]!.reason,
      message: issues.map((x) => x.line).join('\n'),
    };
  const base = `Watching ${o.inScope} of the ${o.ofCluster} Machines of Cluster ${o.cluster}.`;
  const bad =
    o.malformed.length > 0
      ? ` ${o.malformed.length} Machines could not be read and are never acted on: ${listNames(
          o.malformed.map((x) => `${x.name} (${x.error})`),
          3,
        )}.`
      : '';
  const paced = pacing
    ? ` Replacing at the pace of maxInFlight ${o.inFlight!.limit}: ${o.inFlight!.count} in flight, the other stuck ` +
      `Machines wait for one to finish (Progressing names them).`
    : '';
  return { type: CONDITION_READY, status: 'True', reason: ReadyReason.Ready, message: base + bad + paced };
}

const meaningOf = (reason: string): StopMeaning | undefined =>
  (STOP_MEANINGS as Partial<Record<string, StopMeaning>>)[reason];

/** Whether Progressing=False for this reason turns Ready False: its stop's meaning (STOP_MEANINGS) says. */
function turnsReadyFalse(reason: string, pacing: boolean): boolean {
  const ready = meaningOf(reason)?.ready ?? 'NotReady';
  return ready === 'NotReady' || (ready === 'NotReadyUnlessPaced' && !pacing);
}

/**
 * The budget stop is pacing, not a stall, when maxInFlight is what holds: remediations are in flight up to the limit
 * (the budget gate tries maxInFlight first, so then every budget note is that one), and the next one is asked as one
 * finishes. A per-owner budget reached with fewer in flight waits for the window: a stall.
 */
function pacedByMaxInFlight(p: ConditionInput, inFlight: { count: number; limit: number } | undefined): boolean {
  return (
    p.status === 'False' &&
    meaningOf(p.reason)?.ready === 'NotReadyUnlessPaced' &&
    inFlight !== undefined &&
    inFlight.count > 0 &&
    inFlight.count >= inFlight.limit
  );
}
