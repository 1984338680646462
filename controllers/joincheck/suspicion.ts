// The suspicion: consecutive Machines, across Machines and owners, that reached Joining and timed out
// with no Node, and no Machine joined in between. The cause is then most likely not in the Machines (an
// expired join credential, a broken network path to the endpoint), so rebuilds stall; one canary is
// rebuilt after probeInterval, then after twice that, up to maxProbeInterval. The join blob is opaque:
// nothing here parses a token. Clearing (a join, a resume) lives with the rules that see those.
import type { ClusterFacts } from '../../api/capi/model.js';
import type { CheckSettings, FailureRecord, SuspicionStatus } from '../../api/v1alpha1/types.js';
import { endpointOf, failureEvidence, listNames, runbook } from './messages.js';
import { formatDuration, iso, ms } from './time.js';

const MACHINE_NAMES_LIMIT = 10;

/** Wait before the next canary after `spent` canaries: probeInterval × 2^spent, capped. */
export function canaryDelay(settings: CheckSettings, spent: number): number {
  return Math.min(settings.probeIntervalMs * 2 ** spent, settings.maxProbeIntervalMs);
}

export function raiseSuspicion(now: number, settings: CheckSettings, machines: string[]): SuspicionStatus {
  return {
    reason: 'BootstrapCredentialSuspect',
    since: iso(now),
    nextCanaryTime: iso(now + canaryDelay(settings, 0)),
    canariesSpent: 0,
    machines: machines.slice(-MACHINE_NAMES_LIMIT),
  };
}

export function canaryDue(s: SuspicionStatus, now: number): boolean {
  const next = ms(s.nextCanaryTime);
  return next !== undefined && now >= next;
}

export function spendCanary(s: SuspicionStatus, now: number, settings: CheckSettings): SuspicionStatus {
  const spent = s.canariesSpent + 1;
  return { ...s, canariesSpent: spent, nextCanaryTime: iso(now + canaryDelay(settings, spent)) };
}

export function addSuspectMachine(s: SuspicionStatus, name: string): SuspicionStatus {
  if (s.machines.includes(name)) return s;
  return { ...s, machines: [...s.machines, name].slice(-MACHINE_NAMES_LIMIT) };
}

export function suspicionMessage(
  s: SuspicionStatus,
  consecutive: number,
  failures: FailureRecord[],
  cluster: ClusterFacts | undefined,
  settings: CheckSettings,
  heldBack: string[] = [],
): string {
  const names = new Set(s.machines);
  const evidence = failures.filter((f) => f.kind === 'JoinTimeout' && names.has(f.machine));
  const controlPlane = evidence.some((f) => f.controlPlane === true);
  const parts = [
    `${Math.max(consecutive, s.machines.length)} Machines in a row reached Joining and timed out with no Node ` +
      `(joinTimeout ${formatDuration(settings.joinTimeoutMs)}): ${failureEvidence(evidence) || s.machines.join(', ')}.`,
    `CAPI itself still reaches the Cluster's controlPlaneEndpoint ${endpointOf(cluster)}, so the fault is most likely ` +
      `not in the Machines: the join credential in their bootstrap data (expired or revoked), or the network path ` +
      `from the Machines to that endpoint.`,
  ];
  if (controlPlane) {
    parts.push(
      'Control-plane Machines failed: an etcd member left behind by a failed control-plane join also makes every ' +
        'later control-plane join fail (cluster-api #13221).',
    );
  }
  parts.push(
    `Rebuilds stalled since ${s.since}; ${s.canariesSpent} canaries spent, next canary at ${s.nextCanaryTime ?? 'n/a'}. ` +
      `Clears when a Machine joins, or with the joinguard.io/resume annotation.`,
  );
  if (heldBack.length > 0) parts.push(`Held back: ${listNames(heldBack)}.`);
  parts.push(runbook('BootstrapCredentialSuspect'));
  return parts.join(' ');
}
