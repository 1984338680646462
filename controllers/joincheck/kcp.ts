// KubeadmControlPlane's own remediation rules (spec.remediation), so that JoinGuard never asks what KCP
// would refuse. KCP treats a remediation within minHealthyPeriodSeconds (default 1h) of the previous one
// as a retry for the same Machine: it waits retryPeriodSeconds between retries and gives up after
// maxRetry retries (it then says CannotBeRemediated). The count is the larger of what KCP's
// remediation-in-progress annotation says and the chain of JoinGuard's own requests to that KCP.
import type { KcpFacts } from '../../api/capi/model.js';
import type { RemediationRecord } from '../../api/v1alpha1/types.js';
import { iso, latest, ms } from './time.js';

export const KCP_DEFAULT_MIN_HEALTHY_PERIOD_SECONDS = 3600;

export type KcpGate =
  | { kind: 'ok' }
  | { kind: 'wait'; until: number; message: string }
  | { kind: 'refused'; until: number; message: string };

export function kcpGate(kcp: KcpFacts, records: RemediationRecord[], now: number): KcpGate {
  const minHealthy = (kcp.remediation.minHealthyPeriodSeconds ?? KCP_DEFAULT_MIN_HEALTHY_PERIOD_SECONDS) * 1000;
  const retryPeriod = (kcp.remediation.retryPeriodSeconds ?? 0) * 1000;

  // JoinGuard's own requests to this KCP, oldest first; a gap longer than minHealthy starts a new chain.
  const times = records
    .filter((r) => r.owner?.kind === 'KubeadmControlPlane' && r.owner.name === kcp.name)
    .filter((r) => r.path !== 'Report' && r.outcome !== 'DryRun' && r.outcome !== 'Reported')
    .map((r) => ms(r.time))
    .filter((t): t is number => t !== undefined)
    .sort((a, b) => a - b);
  let chain = 0;
  let prev: number | undefined;
  for (const t of times) {
    chain = prev !== undefined && t - prev < minHealthy ? chain + 1 : 1;
    prev = t;
  }

  const last = latest(kcp.remediationInProgress?.timestamp, prev);
  if (last === undefined || now >= last + minHealthy) return { kind: 'ok' };
  if (now < last + retryPeriod) {
    return {
      kind: 'wait',
      until: last + retryPeriod,
      message:
        `KubeadmControlPlane ${kcp.name} remediated at ${iso(last)} and waits retryPeriodSeconds ` +
        `(${kcp.remediation.retryPeriodSeconds}s) before the next retry, until ${iso(last + retryPeriod)}`,
    };
  }
  const retryCount = Math.max(kcp.remediationInProgress?.retryCount ?? 0, chain - 1);
  const maxRetry = kcp.remediation.maxRetry;
  if (maxRetry !== undefined && retryCount >= maxRetry) {
    return {
      kind: 'refused',
      until: last + minHealthy,
      message:
        `KubeadmControlPlane ${kcp.name} can't remediate this machine because the operation already failed ` +
        `${retryCount} times (MaxRetry ${maxRetry}); it would start a new retry sequence after ` +
        `minHealthyPeriodSeconds, at ${iso(last + minHealthy)}`,
    };
  }
  return { kind: 'ok' };
}
