// What "stuck" (and joined, joining) means: the one table from a Machine's verdict to the count it falls in. The
// status counts (`kubectl get mjc`: JOINED, JOINING, STUCK) and the metric `joinguard_machines{state}` are both
// computed from it, so the dashboard and kubectl cannot disagree (counts.test.ts holds them together).
import type { MachineState } from '../types.js';

/** The status count a Machine falls in; Skipped and Deleting Machines are in none (Deleting is not even expected). */
export type MachineCount = 'Joined' | 'Joining' | 'Stuck' | 'Skipped' | 'Deleting';

/**
 * A record keyed by verdict, so a new verdict left out is a compile error. A Machine being remediated is still
 * stuck (past its deadline, or asked to be replaced, with no Node) until it is gone: counted once, as Stuck. A held
 * verdict is on its way, as far as anyone knows (heldMachines says how many of them are held, and why).
 */
export const COUNTED_AS: Readonly<Record<MachineState, MachineCount>> = {
  Joined: 'Joined',
  Provisioning: 'Joining',
  Joining: 'Joining',
  Held: 'Joining',
  Unobservable: 'Joining',
  Stuck: 'Stuck',
  Remediating: 'Stuck',
  Skipped: 'Skipped',
  Deleting: 'Deleting',
};

/** The status counts of a plan's verdicts (settled joined Machines are added by the caller). */
export function countVerdicts(verdicts: readonly { state: MachineState }[]): {
  joined: number;
  joining: number;
  stuck: number;
} {
  const c = { joined: 0, joining: 0, stuck: 0 };
  for (const v of verdicts) {
    const n = COUNTED_AS[v.state];
    if (n === 'Joined') c.joined++;
    else if (n === 'Joining') c.joining++;
    else if (n === 'Stuck') c.stuck++;
  }
  return c;
}
