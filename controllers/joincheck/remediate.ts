// The remediation loop: every Stuck Machine not handled before, oldest deadline first. For each: record
// the failure once (this is what the guards count), then the first control-plane stop, the path (a report
// or a paused MHC ends here), the guards, and finally the request — recorded in the same plan that makes
// it (write-ahead: the executor writes the status before the Machine).
import type { MachineFacts } from '../../api/capi/model.js';
import type { RemediationRecord } from '../../api/v1alpha1/types.js';
import { addStop, type Work } from './context.js';
import { appendFailure, failureEvent, failureRecord, hasFailure, lastJoinFailures } from './failures.js';
import { guard, type CanarySlot } from './guards.js';
import { choosePath, requestAction, target, type PathChoice, type WriteAction } from './paths.js';
import { addOwners, alreadyHandled, boundRecords, observeRecord, ownerRef } from './records.js';
import { addSuspectMachine, raiseSuspicion, spendCanary, suspicionMessage } from './suspicion.js';
import { iso, ms } from './time.js';
import type { MachineVerdict } from './types.js';

/** A recorded request whose write is not visible after this long is made again (the write was lost). */
export const REQUEST_RETRY_MS = 60 * 1000;

export function remediate(w: Work): void {
  if (!w.canAct) return;
  retryUnseenRequests(w);
  const candidates = w.inScope
    .map((m) => ({ m, v: w.verdicts.get(m.uid) as MachineVerdict }))
    .filter(({ m, v }) => v.state === 'Stuck' && !alreadyHandled(w.next.remediations ?? [], m.uid, w.settings.dryRun))
    .sort((a, b) => (a.v.deadline ?? 0) - (b.v.deadline ?? 0) || (a.m.name < b.m.name ? -1 : 1));

  const slot: CanarySlot = { taken: false };
  for (const { m, v } of candidates) {
    const raisedNow = recordFailure(w, m, v);
    if (v.firstControlPlane && w.next.firstControlPlaneMisconfigured !== undefined) {
      addStop(w, 'FirstControlPlaneReplacementMisconfigured', '', m.name);
      continue;
    }
    const choice = choosePath(m, { settings: w.settings, mhcs: w.s.mhcs, capi: w.s.capi, firstControlPlane: v.firstControlPlane === true });
    if (choice.kind === 'report') {
      report(w, m, v, choice.why);
      continue;
    }
    if (choice.kind === 'blocked') {
      w.pausedMhcs.push(`${choice.why}: ${m.name} is left to it`);
      continue;
    }
    const g = guard(w, m, v, raisedNow, slot);
    if (!g.go) continue;
    request(w, m, v, choice, g.canary);
  }
}

/**
 * Write-ahead means a crash (or a conflict) can leave a request recorded and not made. The record is the
 * intent: while it is Requested and its write is not visible, the same write is made again, spaced by
 * REQUEST_RETRY_MS. This is not acting twice: the mark is the same, and nothing is made once it shows.
 */
function retryUnseenRequests(w: Work): void {
  if (w.settings.dryRun) return;
  const check = `${w.s.check.metadata.namespace}/${w.s.check.metadata.name}`;
  w.next.remediations = (w.next.remediations ?? []).map((r) => {
    if (r.outcome !== 'Requested' || r.finishedTime !== undefined || r.path === 'Report') return r;
    const m = w.machinesByUid.get(r.uid);
    if (m === undefined || m.deletingSince !== undefined || m.nodeName !== undefined) return r;
    const due = (ms(r.lastAttempt ?? r.time) ?? w.now) + REQUEST_RETRY_MS;
    if (w.now < due) {
      w.wake.push(due);
      return r;
    }
    const action = WRITE_OF_PATH[r.path];
    w.actions.push(requestAction(m, action, r.kind, `JoinGuard (MachineJoinCheck ${check}): ${r.kind}, requested at ${r.time} (made again: not visible yet)`));
    w.wake.push(w.now + REQUEST_RETRY_MS);
    return { ...r, lastAttempt: iso(w.now) };
  });
}

const WRITE_OF_PATH: Record<Exclude<RemediationRecord['path'], 'Report'>, WriteAction> = {
  OwnerRemediated: 'MarkOwnerRemediated',
  RemediateAnnotation: 'AnnotateRemediate',
  MachineCondition: 'SetJoinGuardCondition',
  Delete: 'DeleteMachine',
};

/** Records the failure the first time the Machine is Stuck; returns true when it raised the suspicion. */
function recordFailure(w: Work, m: MachineFacts, v: MachineVerdict): boolean {
  const { next, settings, now } = w;
  const obs = w.observationsByUid.get(m.uid);
  if (obs?.failedAt !== undefined || hasFailure(next.recentFailures, m.uid)) return false;
  if (obs !== undefined) obs.failedAt = iso(now);
  next.recentFailures = appendFailure(next.recentFailures, failureRecord(m, v, now), w.machinesByUid);
  w.actions.push(failureEvent(m, v));
  next.failuresSinceResume = (next.failuresSinceResume ?? 0) + 1;
  if (v.failureKind !== 'JoinTimeout') return false; // provision timeouts neither count nor reset

  const count = (next.consecutiveJoinFailures ?? 0) + 1;
  next.consecutiveJoinFailures = count;
  if (next.suspicion !== undefined) {
    next.suspicion = addSuspectMachine(next.suspicion, m.name);
    return false;
  }
  const threshold = settings.consecutiveJoinFailures;
  if (threshold <= 0 || count < threshold) return false;
  // The failure that reaches the threshold is not rebuilt.
  const names = lastJoinFailures(next.recentFailures, count).map((f) => f.machine);
  next.suspicion = raiseSuspicion(now, settings, names);
  w.actions.push({
    type: 'CheckEvent',
    reason: 'SuspicionRaised',
    message: suspicionMessage(next.suspicion, count, next.recentFailures ?? [], w.cluster, settings),
    warning: true,
  });
  return true;
}

function report(w: Work, m: MachineFacts, v: MachineVerdict, why: string): void {
  const owner = ownerRef(m.owner);
  w.next.remediations = boundRecords([
    ...(w.next.remediations ?? []),
    {
      machine: m.name,
      uid: m.uid,
      ...(owner ? { owner } : {}),
      time: iso(w.now),
      path: 'Report',
      outcome: 'Reported',
      kind: v.failureKind ?? 'JoinTimeout',
      ...(v.firstControlPlane ? { firstControlPlane: true } : {}),
    },
  ]);
  w.actions.push({
    type: 'MachineEvent',
    machine: target(m),
    reason: 'RemediationSkipped',
    message: `Machine ${m.name}: ${v.reason}. JoinGuard does not remediate it: ${why}. Reported only.`,
    warning: true,
  });
}

function request(w: Work, m: MachineFacts, v: MachineVerdict, choice: Extract<PathChoice, { kind: 'request' }>, canary: boolean): void {
  const { next, now, settings } = w;
  const kind = v.failureKind ?? 'JoinTimeout';
  const owner = ownerRef(m.owner);
  const check = `${w.s.check.metadata.namespace}/${w.s.check.metadata.name}`;
  // What the Machine already shows (an owner's earlier answer) is applied now, as the next plan would.
  const seen = observeRecord(
    {
      machine: m.name,
      uid: m.uid,
      ...(owner ? { owner } : {}),
      time: iso(now),
      path: choice.path,
      outcome: settings.dryRun ? 'DryRun' : 'Requested',
      kind,
      ...(canary ? { canary: true } : {}),
      ...(v.firstControlPlane ? { firstControlPlane: true } : {}),
    },
    m,
    now,
  );
  next.remediations = boundRecords([...(next.remediations ?? []), seen.record]);
  if (seen.refused && owner !== undefined) next.refusedOwners = addOwners(next.refusedOwners, [owner]);
  if (canary && next.suspicion !== undefined) next.suspicion = spendCanary(next.suspicion, now, settings);
  const what = `${canary ? 'as a canary, ' : ''}via ${choice.via} (path ${choice.path})`;
  if (settings.dryRun) {
    w.actions.push({
      type: 'MachineEvent',
      machine: target(m),
      reason: 'RemediationSkipped',
      message: `dry run: Machine ${m.name}: ${v.reason}. JoinGuard would ask for its replacement ${what}.`,
      warning: false,
    });
    return;
  }
  if (v.firstControlPlane) next.firstControlPlaneRemediation = { machine: m.name, uid: m.uid, time: iso(now) };
  w.actions.push(requestAction(m, choice.action, kind, `JoinGuard (MachineJoinCheck ${check}): ${v.reason}`));
  w.actions.push({
    type: 'MachineEvent',
    machine: target(m),
    reason: 'RemediationRequested',
    message: `Machine ${m.name}: ${v.reason}. JoinGuard asks for its replacement ${what}.`,
    warning: true,
  });
}
