// Withdrawal: a mark is not a deletion. Owners defer, and a Machine may join while it waits; if a Machine
// JoinGuard marked gets a Node before it is deleted, the mark is withdrawn (HealthCheckSucceeded=True,
// annotation or condition removed) so that the owner does not replace a Machine that works
// (cluster-api #12870). A Delete request has nothing to withdraw: the executor re-reads the Machine
// live before deleting and a joined Machine is left alone, so only the record and the event change.
import type { Work } from './context.js';
import { isJoined } from './first-control-plane.js';
import { target } from './paths.js';
import { isOpen } from './records.js';
import { iso } from './time.js';

export function withdraw(w: Work): void {
  // Withdrawing is a Machine write: not while paused, not in a dry run.
  if (!w.canAct || w.settings.dryRun) return;
  const records = w.next.remediations ?? [];
  w.next.remediations = records.map((r) => {
    if (!isOpen(r)) return r;
    const m = w.machinesByUid.get(r.uid);
    if (m === undefined || m.deletingSince !== undefined || !isJoined(m, w.s.workloadNodes)) return r;
    if (r.path !== 'Delete') w.actions.push({ type: 'Withdraw', machine: target(m), path: r.path });
    const node = m.nodeName !== undefined ? `Node ${m.nodeName}` : 'a Node with its providerID';
    w.actions.push({
      type: 'MachineEvent',
      machine: target(m),
      reason: 'RemediationWithdrawn',
      message: `Machine ${m.name} joined (${node}) before it was replaced; JoinGuard withdraws its ${r.path} request.`,
      warning: false,
    });
    return { ...r, outcome: 'Withdrawn' as const, finishedTime: iso(w.now) };
  });
}
