// The planner's working state for one plan: the inputs, the next status being built and what the rules
// noted on the way (stops, waits, wake-up times). Rule files read and extend it; only planner.ts creates it.
import type { ClusterFacts, MachineFacts } from '../../api/capi/model.js';
import type { CheckSettings, MachineJoinCheckStatus, MachineObservation, ProgressingReason } from '../../api/v1alpha1/types.js';
import type { ConnectionState } from './connection.js';
import type { Action, MachineVerdict, Snapshot } from './types.js';

/** Progressing=False reasons: something keeps JoinGuard from remediating. */
export type StopReason = Exclude<ProgressingReason, 'AsExpected' | 'Remediating'>;

export interface Work {
  s: Snapshot;
  settings: CheckSettings;
  cluster: ClusterFacts;
  now: number;
  /** The check's persisted status as read (never modified). */
  prev: MachineJoinCheckStatus;
  /** The next status, built rule by rule. */
  next: MachineJoinCheckStatus;
  actions: Action[];
  /** Actions are allowed (not paused, Cluster not paused or deleting). */
  canAct: boolean;
  /** Every Machine of the snapshot by UID (records follow Machines that left the scope too). */
  machinesByUid: Map<string, MachineFacts>;
  ofCluster: MachineFacts[];
  inScope: MachineFacts[];
  expected: number;
  verdicts: Map<string, MachineVerdict>;
  /** The next status's observations by UID (the same objects: rules may update them in place). */
  observationsByUid: Map<string, MachineObservation>;
  /** The Progressing=False reasons met in this plan: what was seen, and which Machines it holds back. */
  stops: Map<StopReason, StopNotes>;
  /** Notes for things that wait without being a stop (KCP retry period, endpoint probe). */
  waits: string[];
  /** Paused MachineHealthChecks that keep a Machine from being remediated. */
  pausedMhcs: string[];
  wake: (number | undefined)[];
  /** What CAPI's view of the workload cluster is, and the grace after it comes back. */
  connection: ConnectionState;
  graceMs: number;
}

export interface StopNotes {
  notes: string[];
  machines: string[];
}

export function addStop(w: Work, reason: StopReason, note: string, machine?: string): void {
  const s = w.stops.get(reason) ?? { notes: [], machines: [] };
  if (note !== '' && !s.notes.includes(note)) s.notes.push(note);
  if (machine !== undefined && !s.machines.includes(machine)) s.machines.push(machine);
  w.stops.set(reason, s);
}
