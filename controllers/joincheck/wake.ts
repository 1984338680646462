// The next moment the plan would change with no watch event: the nearest running deadline, the next
// canary, the end of a connection grace, a KCP retry period, a budget window freeing, an unanswered probe.
// Undefined when nothing is pending (everything else arrives as a watch event).
import type { Work } from './context.js';
import { earliestAfter, ms } from './time.js';
import type { MachineVerdict } from './types.js';

export function wakeAt(w: Work, verdicts: MachineVerdict[], graceUntil: number | undefined): number | undefined {
  const times: (number | undefined)[] = [...w.wake, graceUntil];
  for (const v of verdicts) {
    // A held verdict has no running clock; Unobservable waits for the connection (a watch event).
    if (v.state === 'Provisioning' || v.state === 'Joining') times.push(v.deadline);
  }
  if (w.canAct && w.next.suspicion !== undefined) times.push(ms(w.next.suspicion.nextCanaryTime));
  times.push(ms(w.next.firstControlPlaneExtendedUntil));
  return earliestAfter(w.now, times);
}
