// Guards 3 to 5 of DESIGN.md, in order, for one Stuck Machine whose remediation path is known (guards 1
// and 2, pause and unobservable/first-control-plane, are settled before). Each guard either lets the
// Machine through or notes the stop that holds it, so the Progressing condition can name it.
import type { MachineFacts } from '../../api/capi/model.js';
import type { CheckSettings, MachineJoinCheckStatus } from '../../api/v1alpha1/types.js';
import { budgetCheck } from './budget.js';
import { addStop, type Work } from './context.js';
import { kcpGate } from './kcp.js';
import { ownerRef, sameOwner } from './records.js';
import { canaryDue } from './suspicion.js';
import type { MachineVerdict } from './types.js';

/** While nothing in scope ever joined, neverJoinedLimit failures since the last resume stop everything. */
export function neverJoinedActive(status: MachineJoinCheckStatus, settings: CheckSettings): boolean {
  return settings.neverJoinedLimit > 0 && status.everJoined !== true && (status.failuresSinceResume ?? 0) >= settings.neverJoinedLimit;
}

export interface CanarySlot {
  /** At most one canary per plan: the oldest stuck join-timeout Machine that reaches the budget. */
  taken: boolean;
}

export type GuardResult = { go: true; canary: boolean } | { go: false };

export function guard(w: Work, m: MachineFacts, v: MachineVerdict, raisedNow: boolean, slot: CanarySlot): GuardResult {
  const { next, settings, now } = w;

  // 3. Never joined: a cluster misconfigured from the start; rebuilding would repeat it.
  if (neverJoinedActive(next, settings)) {
    addStop(w, 'NeverJoined', '', m.name);
    return { go: false };
  }

  // 4. Suspicion: join timeouts stall, except one canary when it is due. Provision timeouts are not
  // evidence about the join credential and are still remediated.
  let canary = false;
  if (v.failureKind === 'JoinTimeout' && next.suspicion !== undefined) {
    if (raisedNow || !canaryDue(next.suspicion, now)) {
      addStop(w, 'BootstrapCredentialSuspect', '', m.name);
      return { go: false };
    }
    canary = true;
  }

  // 5a. An owner that refused is asked nothing more until a resume; KCP is not asked what it would refuse.
  const owner = ownerRef(m.owner);
  const refused = (next.refusedOwners ?? []).find((o) => sameOwner(o, owner));
  if (refused !== undefined) {
    addStop(w, 'RemediationRefusedByOwner', `${refused.kind}/${refused.name} refused an earlier request (CannotBeRemediated)`, m.name);
    return { go: false };
  }
  const kcp = w.s.kcp;
  if (m.owner.kind === 'KubeadmControlPlane' && kcp !== undefined && kcp.name === m.owner.name) {
    const gate = kcpGate(kcp, next.remediations ?? [], now);
    if (gate.kind === 'wait') {
      w.waits.push(`${m.name}: ${gate.message}`);
      w.wake.push(gate.until);
      return { go: false };
    }
    if (gate.kind === 'refused') {
      addStop(w, 'RemediationRefusedByOwner', gate.message, m.name);
      w.wake.push(gate.until);
      return { go: false };
    }
  }

  // The canary slot is taken by the first join-timeout Machine that gets this far.
  if (canary) {
    if (slot.taken) {
      addStop(w, 'BootstrapCredentialSuspect', '', m.name);
      return { go: false };
    }
    slot.taken = true;
  }

  // 5b. Budgets.
  const b = budgetCheck(next.remediations ?? [], owner, settings, w.expected, now, next.lastResume?.time);
  if (!b.ok) {
    addStop(w, 'RemediationBudgetExhausted', b.message, m.name);
    w.wake.push(b.frees);
    return { go: false };
  }
  return { go: true, canary };
}
