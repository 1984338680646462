// CAPI's owners and MachineHealthCheck in the in-memory world (test-only), one step each, modelled on CAPI's code:
// - MachineSet: reconcileUnhealthyMachines (v1.14 core/reconcilers/machineset, v1.10 internal/controllers/machineset):
//   drops OwnerRemediated once HealthCheckSucceeded is True; remediates every Machine with both False that is not
//   deleting — it never looks at nodeRef; defers past the MachineDeployment's remediation.maxInFlight and while its
//   preflight checks fail. v1.10 reads v1beta1 conditions and writes RemediationDeferred only into
//   status.v1beta2.conditions (v1beta1 keeps WaitingForRemediation), MachineDeleting there too, OwnerRemediated=True
//   in v1beta1.
// - KubeadmControlPlane: reconcileUnhealthyMachines and checkRetryLimits (remediation.go): one remediation at a time
//   (remediation-in-progress), the replacement carries remediation-for with the retry count, retryPeriod defers,
//   maxRetry refuses (CannotBeRemediated), an initialized control plane of one Machine cannot be remediated, and it
//   waits while a control-plane Machine provisions or is deleted; it deletes the first control-plane Machine of an
//   uninitialized control plane and scales up again with an init Machine.
// - MachineHealthCheck: the remediate-machine annotation, unhealthyMachineConditions (JoinGuardJoined), and
//   nodeStartupTimeout (from the latest of creation, control plane initialized and infrastructure ready; unset is
//   600 s); a healthy Node sets HealthCheckSucceeded=True.
// The condition times they write are on their own clocks (World.ownerNow: a few seconds behind or ahead of the
// world's, the ownerClock step); what they decide on, and the apiserver's deletionTimestamp, are on the world's.
import type { Json } from '../../../runtime/client/rest.js';
import {
  getCond,
  isFalse,
  isTrue,
  mhcSelects,
  REMEDIATE_MACHINE,
  REMEDIATION_FOR,
  REMEDIATION_IN_PROGRESS,
  removeCond,
  setCond,
} from './objects.js';
import { count, type World } from './world.js';

const ownerOf = (m: Json): { kind: string; name: string } => m.metadata.ownerReferences[0];
const deleting = (m: Json): boolean => m.metadata.deletionTimestamp !== undefined;
const time = (m: Json): number => Date.parse(m.metadata.creationTimestamp);

/** Both: drop OwnerRemediated from a Machine whose HealthCheckSucceeded is True again (the withdrawal's other half). */
function cleanup(w: World, m: Json): void {
  w.change(m, 'owner', () => {
    for (const list of w.release === 'v1.14' ? (['owner'] as const) : (['owner', 'v2'] as const)) {
      if (
        isTrue(getCond(m, w.release, list, 'HealthCheckSucceeded')) &&
        isFalse(getCond(m, w.release, list, 'OwnerRemediated'))
      )
        removeCond(m, w.release, list, 'OwnerRemediated');
    }
  });
}

const unhealthyAndOwnerRemediated = (w: World, m: Json): boolean =>
  isFalse(getCond(m, w.release, 'owner', 'HealthCheckSucceeded')) &&
  isFalse(getCond(m, w.release, 'owner', 'OwnerRemediated'));

/** The owner's answer: v1.14 in the one list; v1.10 v1beta2 reason in status.v1beta2, v1beta1 WaitingForRemediation (or True on deletion). */
function answer(
  w: World,
  m: Json,
  reason: string,
  message: string,
  v1beta1: { status: 'True' | 'False'; reason?: string } | undefined,
): void {
  w.change(m, 'owner', () => {
    setCond(m, w.release, 'v2', { type: 'OwnerRemediated', status: 'False', reason, message }, w.ownerNow());
    if (w.release === 'v1.10' && v1beta1 !== undefined)
      setCond(
        m,
        w.release,
        'owner',
        { type: 'OwnerRemediated', ...v1beta1, ...(v1beta1.status === 'False' ? { message } : {}) },
        w.ownerNow(),
      );
  });
  count(`owner answers: ${reason}`);
}

function remove(w: World, m: Json): void {
  w.change(m, 'owner', () => (m.metadata.deletionTimestamp = new Date(w.t).toISOString()), { verb: 'delete' });
  if (m.status.nodeRef) count('owner deleted a joined Machine');
}

export function machineSetStep(w: World): void {
  if (w.clusterPaused) return; // CAPI's controllers leave a paused Cluster alone
  const all = w.live().filter((m) => ownerOf(m).kind === 'MachineSet');
  for (const m of all) if (!deleting(m)) cleanup(w, m);
  for (const ms of [...new Set(all.map((m) => ownerOf(m).name))]) {
    const mine = all.filter((m) => ownerOf(m).name === ms);
    // Newest first: a Machine that never came up probably hosts nothing.
    const toRemediate = mine
      .filter((m) => !deleting(m) && unhealthyAndOwnerRemediated(w, m))
      .sort((a, b) => time(b) - time(a) || (a.metadata.name < b.metadata.name ? 1 : -1));
    if (toRemediate.length === 0) continue;
    let tokens = w.setup.mdMaxInFlight ?? Number.MAX_SAFE_INTEGER;
    for (const m of mine) {
      if (!deleting(m)) continue;
      const c = w.release === 'v1.14' ? getCond(m, w.release, 'owner', 'OwnerRemediated') : undefined;
      if (
        w.release === 'v1.14'
          ? c?.status === 'False' && c.reason === 'MachineDeleting'
          : isTrue(getCond(m, w.release, 'owner', 'OwnerRemediated'))
      )
        tokens--;
    }
    const deferMsg = `Waiting because there are already too many remediations in progress (spec.strategy.remediation.maxInFlight is ${w.setup.mdMaxInFlight})`;
    if (tokens <= 0) {
      for (const m of toRemediate) answer(w, m, 'RemediationDeferred', deferMsg, undefined);
      continue;
    }
    const now = toRemediate.slice(0, tokens);
    for (const m of toRemediate.slice(tokens)) answer(w, m, 'RemediationDeferred', deferMsg, undefined);
    if (w.preflightBlocked) {
      for (const m of now)
        answer(w, m, 'RemediationDeferred', '* MachineSet preflight check failed: control plane is upgrading', {
          status: 'False',
          reason: 'WaitingForRemediation',
        });
      continue;
    }
    for (const m of now) {
      answer(w, m, 'MachineDeleting', 'Machine is deleting', { status: 'True' });
      remove(w, m);
    }
  }
}

interface RemediationData {
  machine: string;
  timestamp: string;
  retryCount: number;
}

const parse = (s: string | undefined): RemediationData | undefined => {
  try {
    return s === undefined ? undefined : (JSON.parse(s) as RemediationData);
  } catch {
    return undefined;
  }
};

export function kcpStep(w: World): void {
  if (w.clusterPaused) return;
  const cps = w.live().filter((m) => ownerOf(m).kind === 'KubeadmControlPlane');
  for (const m of cps) if (!deleting(m)) cleanup(w, m);
  const kcp = w.kcp;
  const annotations: Record<string, string> = kcp.metadata.annotations;
  const inProgress = parse(annotations[REMEDIATION_IN_PROGRESS]);
  if (inProgress !== undefined && cps.some((m) => time(m) > Date.parse(inProgress.timestamp))) {
    delete annotations[REMEDIATION_IN_PROGRESS];
    kcp.metadata.resourceVersion = w.nextRv();
  }
  const unhealthy = cps.filter((m) => unhealthyAndOwnerRemediated(w, m));
  if (unhealthy.length === 0 || !remediate(w, cps, unhealthy)) scaleUp(w, cps);
}

/** One remediation, as reconcileUnhealthyMachines; false when it did nothing (then KCP goes on to scale). */
function remediate(w: World, cps: Json[], unhealthy: Json[]): boolean {
  const pick = [...unhealthy].sort(
    (a, b) =>
      Number(REMEDIATE_MACHINE in b.metadata.annotations) - Number(REMEDIATE_MACHINE in a.metadata.annotations) ||
      Number(Boolean(a.status.nodeRef)) - Number(Boolean(b.status.nodeRef)) ||
      time(a) - time(b) ||
      (a.metadata.name < b.metadata.name ? -1 : 1),
  )[0]!;
  if (deleting(pick) || w.kcp.metadata.annotations[REMEDIATION_IN_PROGRESS] !== undefined) return false;
  const spec = w.release === 'v1.14' ? w.kcp.spec.remediation : w.kcp.spec.remediationStrategy;
  const seconds = (x: unknown): number | undefined =>
    typeof x === 'number' ? x : typeof x === 'string' ? Number(x.replace(/s$/, '')) : undefined;
  const minHealthy = (w.release === 'v1.14' ? spec.minHealthyPeriodSeconds : seconds(spec.minHealthyPeriod)) ?? 3600;
  const retryPeriod = (w.release === 'v1.14' ? spec.retryPeriodSeconds : seconds(spec.retryPeriod)) ?? 0;
  const data: RemediationData = { machine: pick.metadata.name, timestamp: new Date(w.t).toISOString(), retryCount: 0 };
  const last = parse(pick.metadata.annotations[REMEDIATION_FOR]);
  if (last !== undefined) {
    const lastTime = Date.parse(last.timestamp);
    if (lastTime + minHealthy * 1000 > w.t) {
      data.retryCount = last.retryCount;
      if (lastTime + retryPeriod * 1000 > w.t) {
        answer(
          w,
          pick,
          'RemediationDeferred',
          `KubeadmControlPlane can't remediate this machine because the operation already failed in the latest ${retryPeriod}s (RetryPeriodSeconds)`,
          { status: 'False', reason: 'WaitingForRemediation' },
        );
        return true;
      }
      if (spec.maxRetry !== undefined && data.retryCount >= spec.maxRetry) {
        answer(
          w,
          pick,
          'CannotBeRemediated',
          `KubeadmControlPlane can't remediate this machine because the operation already failed ${spec.maxRetry} times (MaxRetry)`,
          { status: 'False', reason: 'WaitingForRemediation' },
        );
        return true;
      }
      data.retryCount++;
    }
  }
  if (w.initialized) {
    const waiting = { status: 'False' as const, reason: 'WaitingForRemediation' };
    if (cps.length <= 1)
      return (
        answer(
          w,
          pick,
          'CannotBeRemediated',
          "KubeadmControlPlane can't remediate if current replicas are less or equal to 1",
          waiting,
        ),
        true
      );
    const provisioning = cps.some(
      (m) => !isFalse(getCond(m, w.release, 'owner', 'HealthCheckSucceeded')) && !m.status.nodeRef,
    );
    if (provisioning)
      return (
        answer(
          w,
          pick,
          'RemediationDeferred',
          'KubeadmControlPlane waiting for control plane Machine provisioning to complete before triggering remediation',
          waiting,
        ),
        true
      );
    if (cps.some(deleting))
      return (
        answer(
          w,
          pick,
          'RemediationDeferred',
          'KubeadmControlPlane waiting for control plane Machine deletion to complete before triggering remediation',
          waiting,
        ),
        true
      );
  }
  remove(w, pick);
  answer(w, pick, 'MachineDeleting', 'Machine is deleting', { status: 'False', reason: 'RemediationInProgress' });
  w.kcp.metadata.annotations[REMEDIATION_IN_PROGRESS] = JSON.stringify(data);
  w.kcp.metadata.resourceVersion = w.nextRv();
  count('KCP remediations');
  return true;
}

/** KCP scales up one Machine at a time, never while one is deleting or has no Node yet; before init, one init Machine. */
function scaleUp(w: World, cps: Json[]): void {
  const alive = cps.filter((m) => !deleting(m));
  if (cps.some(deleting) || alive.some((m) => !m.status.nodeRef)) return;
  if (alive.length >= (w.initialized ? w.kcp.spec.replicas : 1)) return;
  const rip = w.kcp.metadata.annotations[REMEDIATION_IN_PROGRESS];
  w.create('kcp', {
    controlPlane: true,
    init: !w.initialized,
    ...(rip !== undefined ? { annotations: { [REMEDIATION_FOR]: rip } } : {}),
  });
}

export function mhcStep(w: World, healthy: boolean): void {
  const mhc = w.mhc;
  if (mhc === undefined || w.clusterPaused || 'cluster.x-k8s.io/paused' in (mhc.metadata.annotations ?? {})) return;
  const timeoutS =
    w.release === 'v1.14'
      ? (mhc.spec.checks.nodeStartupTimeoutSeconds ?? 600)
      : mhc.spec.nodeStartupTimeout !== undefined
        ? Number(String(mhc.spec.nodeStartupTimeout).replace(/s$/, ''))
        : 600;
  const watches =
    w.release === 'v1.14' &&
    (mhc.spec.checks.unhealthyMachineConditions ?? []).some((c: Json) => c.type === 'JoinGuardJoined');
  for (const m of w.live()) {
    if (deleting(m) || !mhcSelects(mhc, m)) continue;
    const cp = 'cluster.x-k8s.io/control-plane' in m.metadata.labels;
    const mark = (reason: string, v1beta1Reason: string, message: string, because: boolean) => {
      w.change(
        m,
        'mhc',
        () => {
          setCond(m, w.release, 'v2', { type: 'HealthCheckSucceeded', status: 'False', reason, message }, w.ownerNow());
          if (w.release === 'v1.10')
            setCond(
              m,
              w.release,
              'owner',
              { type: 'HealthCheckSucceeded', status: 'False', reason: v1beta1Reason, message },
              w.ownerNow(),
            );
          for (const list of w.release === 'v1.14' ? (['owner'] as const) : (['owner', 'v2'] as const)) {
            const or = getCond(m, w.release, list, 'OwnerRemediated');
            if (or === undefined || isTrue(or))
              setCond(
                m,
                w.release,
                list,
                {
                  type: 'OwnerRemediated',
                  status: 'False',
                  reason: 'WaitingForRemediation',
                  ...(list === 'v2' || w.release === 'v1.14' ? { message: 'Waiting for remediation' } : {}),
                },
                w.ownerNow(),
              );
          }
        },
        { becauseOfJoinGuard: because },
      );
    };
    if (REMEDIATE_MACHINE in m.metadata.annotations) {
      mark(
        'HasRemediateAnnotation',
        'HasRemediateMachineAnnotation',
        'Health check failed: marked for remediation via cluster.x-k8s.io/remediate-machine annotation',
        w.annotatedByJoinGuard.has(m.metadata.uid),
      );
      continue;
    }
    if (!w.initialized && !cp) continue;
    const jg = getCond(m, w.release, 'owner', 'JoinGuardJoined');
    if (watches && isFalse(jg)) {
      mark(
        'UnhealthyMachine',
        'UnhealthyMachineCondition',
        `Health check failed:\n  * Condition JoinGuardJoined on Machine is reporting status False with reason ${jg!.reason} for more than 0s`,
        true,
      );
      continue;
    }
    if (!m.status.nodeRef) {
      if (timeoutS === 0) continue;
      const infra = getCond(m, w.release, 'v2', 'InfrastructureReady');
      const since = Math.max(
        time(m),
        w.clusterTruth.initializedAt ?? 0,
        isTrue(infra) ? Date.parse(infra!.lastTransitionTime) : 0,
      );
      if (w.t > since + timeoutS * 1000) {
        mark(
          'NodeStartupTimeout',
          'NodeStartupTimeout',
          `Health check failed:\n  * Node failed to report startup in ${timeoutS}s`,
          false,
        );
        count('MHC nodeStartupTimeout marks');
      }
      continue;
    }
    if (healthy) {
      w.change(m, 'mhc', () => {
        setCond(
          m,
          w.release,
          'v2',
          { type: 'HealthCheckSucceeded', status: 'True', reason: 'HealthCheckSucceeded' },
          w.ownerNow(),
        );
        if (w.release === 'v1.10')
          setCond(m, w.release, 'owner', { type: 'HealthCheckSucceeded', status: 'True' }, w.ownerNow());
      });
    }
  }
}
