// `status.timedMachines` (DESIGN, "What users see"): the Machines being timed and when each one is due, nearest
// deadline first, and the ones held back with what holds them. Display only: made again from the verdicts on every
// pass and never read back (memory.ts does not read it), so nothing a user writes there decides anything. No entry
// holds a value that moves with the clock (no countdown, no "now"): an entry changes only when its Machine enters or
// leaves the list, changes clock or hold, which are changes the status carries anyway; a check at rest writes nothing
// for it. The marks in flight are not repeated here: `remediations` has them, with their owners' answers.
import type { MachineFacts } from '../../../api/capi/model.js';
import type { Hold, StopReason, TimedMachine } from '../../../api/v1alpha1/types.js';
import { STATUS_LIMITS, STOP_MEANINGS } from '../../../api/v1alpha1/types.js';
import { isProvisioned } from '../rules/verdict-rules.js';
import { iso, SECOND } from '../time.js';
import type { HoldReason, MachineVerdict } from '../types.js';
import { compareText } from '../words.js';

// Every verdict hold is a word of the list's vocabulary: a HoldReason added in types.ts and not in api/'s HOLDS
// fails to compile here.
const _verdictHoldsListed: [HoldReason] extends [Hold] ? true : never = true;

/** The hold a stop puts on a Machine it holds back: STOP_MEANINGS (api/v1alpha1) says it beside the stop's reason. */
export const HOLD_OF_STOP = Object.fromEntries(
  Object.entries(STOP_MEANINGS).map(([reason, m]) => [reason, m.hold ?? undefined]),
) as Readonly<Record<StopReason, Hold | undefined>>;

export interface TimedInput {
  inScope: readonly MachineFacts[];
  /** By index of `inScope`. */
  verdicts: readonly MachineVerdict[];
  /** Machines (uids) JoinGuard asked about: their request is in `remediations`, not here. */
  asked: ReadonlySet<string>;
  /** Machines (uids) past their deadline and not asked, and what held each back (the remediate stage). */
  held: ReadonlyMap<string, Hold>;
  /** Why nothing is asked at all now, if so (a pause, the Cluster deleting, marks being withdrawn). */
  notActing?: Hold;
}

export interface Timed {
  /** The list, bounded: nearest deadline first, Machines with no clock last, then by name. */
  list: TimedMachine[];
  /** Machines of the whole list (not only the bounded part) that something holds back: `heldMachines`. */
  held: number;
  /** The hold of the first held Machine by name (a `heldReason` when no stop says more). */
  firstHold?: Hold;
}

export function timedMachines(i: TimedInput): Timed {
  // The nearest K kept in order as the Machines go by (a fleet scaling up has thousands on a clock: no full sort, and
  // only the K entries written are made).
  const top: Listed[] = [];
  let held = 0;
  let first: Listed | undefined;
  i.inScope.forEach((m, k) => {
    const x = listed(m, i.verdicts[k]!, i);
    if (x === undefined) return;
    if (x.hold !== undefined) {
      held++;
      if (first === undefined || compareText(m.name, first.m.name) < 0) first = x;
    }
    const limit = STATUS_LIMITS.timedMachines;
    if (top.length === limit && nearestFirst(x, top[limit - 1]!) >= 0) return;
    let at = top.length;
    while (at > 0 && nearestFirst(x, top[at - 1]!) < 0) at--;
    top.splice(at, 0, x);
    if (top.length > limit) top.pop();
  });
  return {
    list: top.map(entry),
    held,
    ...(first?.hold !== undefined ? { firstHold: first.hold } : {}),
  };
}

/** A Machine the list may show: its verdict, what holds it, its deadline in whole seconds (as written). */
interface Listed {
  m: MachineFacts;
  v: MachineVerdict;
  hold: Hold | undefined;
  dueSecond: number | undefined;
}

/** The Machine as the list may show it, or not at all: joined, deleting, skipped, asked about, or on no clock. */
function listed(m: MachineFacts, v: MachineVerdict, i: TimedInput): Listed | undefined {
  let hold: Hold | undefined;
  switch (v.state) {
    case 'Joined':
    case 'Deleting':
    case 'Skipped':
      return undefined;
    case 'Remediating':
      if (i.asked.has(m.uid)) return undefined;
      hold = 'AlreadyMarked';
      break;
    case 'Stuck':
      if (i.asked.has(m.uid)) return undefined;
      hold = i.held.get(m.uid) ?? i.notActing;
      break;
    case 'Held':
    case 'Unobservable':
      hold = v.hold;
      break;
    case 'Provisioning':
      // Without provisionTimeout a provisioning Machine is on no clock: counted as joining, not timed.
      if (v.deadline === undefined) return undefined;
      break;
    case 'Joining':
      break;
  }
  const dueSecond = v.deadline === undefined ? undefined : Math.floor(v.deadline / SECOND);
  return { m, v, hold, dueSecond };
}

function entry({ m, v, hold }: Listed): TimedMachine {
  return {
    machine: m.name,
    phase: v.failureKind === 'ProvisionTimeout' || !isProvisioned(m) ? 'Provisioning' : 'Joining',
    ...(v.clockStart !== undefined ? { since: iso(v.clockStart) } : {}),
    ...(v.deadline !== undefined ? { until: iso(v.deadline) } : {}),
    ...(hold !== undefined ? { onHold: hold } : {}),
  };
}

/** Nearest deadline first (whole seconds, as written), Machines with no clock last; then by name. */
function nearestFirst(a: Listed, b: Listed): number {
  if (a.dueSecond !== b.dueSecond) {
    if (a.dueSecond === undefined) return 1;
    if (b.dueSecond === undefined) return -1;
    return a.dueSecond - b.dueSecond;
  }
  return compareText(a.m.name, b.m.name);
}
