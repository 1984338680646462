// Before acting on a first control-plane Machine that timed out joining, ask whether the control plane
// answers at the Cluster's endpoint: if it does, initialization may be finishing (cluster-api #12870), and
// the Machine gets one more joinTimeout. The probe is an action the executor performs and answers in the
// next snapshot; the request is remembered so replanning does not ask twice.
import type { Work } from './context.js';
import { probeDecision } from './first-control-plane.js';
import { alreadyHandled } from './records.js';
import { iso, ms } from './time.js';

export function settleFirstControlPlane(w: Work): void {
  const { next, now, settings } = w;
  // The extension belongs to one Machine; forget it when that Machine is gone or no longer first.
  if (next.firstControlPlaneExtendedFor !== undefined) {
    const m = w.machinesByUid.get(next.firstControlPlaneExtendedFor);
    if (m === undefined || m.nodeName !== undefined) {
      delete next.firstControlPlaneExtendedFor;
      delete next.firstControlPlaneExtendedUntil;
    }
  }

  const first = w.inScope.find((m) => w.verdicts.get(m.uid)?.firstControlPlane === true);
  const v = first === undefined ? undefined : w.verdicts.get(first.uid);
  const pending =
    w.canAct &&
    first !== undefined &&
    v !== undefined &&
    v.state === 'Stuck' &&
    v.failureKind === 'JoinTimeout' &&
    settings.firstControlPlane === 'Remediate' &&
    next.firstControlPlaneMisconfigured === undefined &&
    !alreadyHandled(next.remediations ?? [], first.uid, settings.dryRun);
  if (!pending) {
    delete next.endpointProbeRequested;
    return;
  }

  const d = probeDecision(v, w.s, w.cluster, next, settings.joinTimeoutMs);
  switch (d.kind) {
    case 'act':
      delete next.endpointProbeRequested;
      return;
    case 'probe':
      if (d.emit) {
        w.actions.push({ type: 'ProbeEndpoint', host: d.host, port: d.port });
        next.endpointProbeRequested = iso(now);
      }
      w.wake.push(d.retryAt);
      w.waits.push(`probing the control-plane endpoint ${d.host}:${d.port} before acting on the first control-plane Machine ${first.name}`);
      w.verdicts.set(first.uid, { ...v, state: 'Held', hold: 'EndpointProbe', pastDeadline: true, reason: `${v.reason}; probing the control-plane endpoint before acting` });
      return;
    case 'extend': {
      // Kept at the precision status stores, so a restarted controller sees the same deadline.
      const until = ms(iso(d.until)) as number;
      delete next.endpointProbeRequested;
      next.firstControlPlaneExtendedUntil = iso(until);
      next.firstControlPlaneExtendedFor = first.uid;
      w.verdicts.set(first.uid, {
        ...v,
        state: 'Held',
        hold: 'EndpointAnswered',
        deadline: until,
        pastDeadline: false,
        reason: `the control plane answered at its endpoint, so initialization may be finishing: given another joinTimeout until ${iso(until)}`,
      });
      return;
    }
  }
}
