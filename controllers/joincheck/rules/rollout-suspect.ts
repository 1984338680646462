// RolloutSuspect (DESIGN: "Rolling upgrades and ClusterClass"): the evidence that turns the suspicion of the join
// credential into a suspicion of a new template. When the join failures in a row that raise the suspicion all come
// from one template revision of which no Machine joined, while a Machine of an earlier revision of the same owner
// did join, the credential and the network reached those earlier Machines: the new template (image, bootstrap
// settings, version) is the suspect. A revision is a MachineSet of a MachineDeployment (its revision annotation),
// or a version of a KubeadmControlPlane (KCP's Machines carry no template hash: spec.version is what a KCP upgrade
// changes). Pure: the guard, canaries, resume and clearing are the suspicion's own (guards.ts); this file only says
// which suspicion it is, when its rollout is over, and its words.
import type { ClusterFacts, KcpFacts, MachineFacts, MachineSetFacts } from '../../../api/capi/model.js';
import type {
  CheckSettings,
  FailureRecord,
  MachineJoinCheckStatus,
  RolloutEvidence,
} from '../../../api/v1alpha1/types.js';
import { STATUS_LIMITS } from '../../../api/v1alpha1/types.js';
import { endpointOf, listNames, runbook } from '../words.js';
import { formatDuration } from '../time.js';
import type { PlannedEvent } from '../types.js';

/** What the rule reads of the world: the plan's Machines, the settled ones (looked through only here), the owners. */
export interface RolloutWorld {
  machines: readonly MachineFacts[];
  settled?: { find?(pred: (m: MachineFacts) => boolean): MachineFacts | undefined };
  /** Undefined: MachineSets not known (then no MachineDeployment revision is told apart). */
  machineSets?: readonly MachineSetFacts[];
  kcp?: KcpFacts;
}

const joined = (w: RolloutWorld, pred: (m: MachineFacts) => boolean): MachineFacts | undefined =>
  w.machines.find((m) => m.nodeName !== undefined && pred(m)) ??
  w.settled?.find?.((m) => m.nodeName !== undefined && pred(m));

const revisionOf = (ms: MachineSetFacts): number => {
  const n = Number(ms.revision);
  return Number.isInteger(n) && n >= 0 ? n : -1;
};

/** The MachineDeployment's MachineSets that carry a revision, newest first. */
function revisions(w: RolloutWorld, deployment: string): MachineSetFacts[] {
  return (w.machineSets ?? [])
    .filter((x) => x.deployment === deployment && revisionOf(x) >= 0)
    .sort((a, b) => revisionOf(b) - revisionOf(a));
}

/**
 * The revision the failures that raise the suspicion all come from, when no Machine of it joined and a Machine of an
 * earlier revision of the same owner did, and it is still the revision its owner rolls out; else undefined (the
 * suspicion stays BootstrapCredentialSuspect).
 */
export function rolloutSuspect(failures: readonly FailureRecord[], w: RolloutWorld): RolloutEvidence | undefined {
  const first = failures[0];
  if (first?.owner === undefined) return undefined;
  const owner = first.owner;
  if (!failures.every((f) => f.owner?.kind === owner.kind && f.owner.name === owner.name)) return undefined;
  if (owner.kind === 'MachineSet') return machineSetRevision(owner.name, w);
  if (owner.kind === 'KubeadmControlPlane') {
    const version = first.version;
    if (version === undefined || !failures.every((f) => f.version === version)) return undefined;
    return kcpRevision(owner.name, version, w);
  }
  return undefined;
}

function machineSetRevision(name: string, w: RolloutWorld): RolloutEvidence | undefined {
  const ms = w.machineSets?.find((x) => x.name === name);
  if (ms?.deployment === undefined || ms.deletingSince !== undefined || revisionOf(ms) < 0) return undefined;
  const all = revisions(w, ms.deployment);
  if (all[0]?.name !== ms.name) return undefined; // not the revision being rolled out
  const ofSet = (set: string) => (m: MachineFacts) => m.owner.kind === 'MachineSet' && m.owner.name === set;
  if (joined(w, ofSet(ms.name)) !== undefined) return undefined;
  const previous = all.slice(1).find((x) => joined(w, ofSet(x.name)) !== undefined);
  if (previous === undefined) return undefined;
  const changes: string[] = [];
  const diff = (what: string, a: string | undefined, b: string | undefined) => {
    if (a !== b) changes.push(`${what}: ${a ?? '(none)'} -> ${b ?? '(none)'}`);
  };
  diff('spec.template.spec.infrastructureRef', previous.infrastructureTemplate, ms.infrastructureTemplate);
  diff('spec.template.spec.bootstrap.configRef', previous.bootstrapTemplate, ms.bootstrapTemplate);
  diff('spec.template.spec.version', previous.version, ms.version);
  return {
    owner: { kind: 'MachineDeployment', name: ms.deployment },
    revision: ms.revision!,
    machineSet: ms.name,
    previousRevision: previous.revision!,
    previousMachineSet: previous.name,
    changes: changes.slice(0, STATUS_LIMITS.rolloutChanges),
  };
}

function kcpRevision(name: string, version: string, w: RolloutWorld): RolloutEvidence | undefined {
  if (w.kcp?.name !== name || w.kcp.version !== version) return undefined;
  const ofKcp = (m: MachineFacts) => m.owner.kind === 'KubeadmControlPlane' && m.owner.name === name;
  if (joined(w, (m) => ofKcp(m) && m.version === version) !== undefined) return undefined;
  const previous = joined(w, (m) => ofKcp(m) && m.version !== undefined && m.version !== version);
  if (previous === undefined) return undefined;
  return {
    owner: { kind: 'KubeadmControlPlane', name },
    revision: version,
    previousRevision: previous.version!,
    changes: [`spec.version: ${previous.version} -> ${version}`],
  };
}

/**
 * Why the suspect revision is over — no longer rolled out (rolled back, or a newer revision) and none of its Machines
 * left but those being deleted — or undefined while it is not. Until its owner has scaled its Machines away they stay
 * held: once cleared, a stuck Machine of it would be asked for, only for its owner to delete what it deletes anyway.
 */
export function rolloutOver(e: RolloutEvidence, w: RolloutWorld): string | undefined {
  const why = revisionLeft(e, w);
  if (why === undefined) return undefined;
  const ofRevision = (m: MachineFacts) =>
    e.owner.kind === 'KubeadmControlPlane'
      ? m.owner.kind === 'KubeadmControlPlane' &&
        m.owner.name === e.owner.name &&
        m.version === e.revision &&
        m.nodeName === undefined
      : m.owner.kind === 'MachineSet' && m.owner.name === e.machineSet;
  return w.machines.some((m) => ofRevision(m) && m.deletingSince === undefined) ? undefined : why;
}

function revisionLeft(e: RolloutEvidence, w: RolloutWorld): string | undefined {
  if (e.owner.kind === 'KubeadmControlPlane') {
    if (w.kcp?.name !== e.owner.name || w.kcp.version === undefined || w.kcp.version === e.revision) return undefined;
    return `KubeadmControlPlane ${e.owner.name} now rolls out version ${w.kcp.version}, not ${e.revision}`;
  }
  if (w.machineSets === undefined || e.machineSet === undefined) return undefined;
  const ms = w.machineSets.find((x) => x.name === e.machineSet);
  if (ms === undefined || ms.deletingSince !== undefined)
    return `MachineSet ${e.machineSet} of revision ${e.revision} is gone`;
  const current = revisions(w, e.owner.name)[0];
  if (current === undefined || current.name === e.machineSet) return undefined;
  return (
    `MachineDeployment ${e.owner.name} now rolls out revision ` +
    `${current.revision} (MachineSet ${current.name}), not revision ` +
    e.revision
  );
}

/**
 * A RolloutSuspect whose revision is no longer rolled out clears: its Machines are being scaled away, and no failure
 * of it can recur. The count restarts with it (its failures were the revision's, not the credential's).
 */
export function clearRolloutIfOver(next: MachineJoinCheckStatus, w: RolloutWorld, events: PlannedEvent[]): void {
  const e = next.suspicion?.rollout;
  if (next.suspicion?.reason !== 'RolloutSuspect' || e === undefined) return;
  const why = rolloutOver(e, w);
  if (why === undefined) return;
  events.push({
    on: 'Check',
    reason: 'SuspicionCleared',
    warning: false,
    message: `${why}: the RolloutSuspect raised at ${next.suspicion.since} is cleared.`,
  });
  delete next.suspicion;
  next.consecutiveJoinFailures = 0;
}

/** The words of a RolloutSuspect: the revision, the failing Machines, what differs, what to do. */
const UNREADABLE_CHANGES =
  'nothing JoinGuard can read (the infrastructure or bootstrap templates behind the same names)';

export function rolloutMessage(
  status: MachineJoinCheckStatus,
  failures: readonly FailureRecord[],
  cluster: ClusterFacts | undefined,
  settings: CheckSettings,
  heldBack: string[] = [],
): string {
  const s = status.suspicion!;
  const e = s.rollout!;
  const names = new Set(s.machines);
  const failed = failures.filter((f) => f.kind === 'JoinTimeout' && names.has(f.machine)).map((f) => f.machine);
  const md = e.owner.kind === 'MachineDeployment';
  const rev = md
    ? `revision ${e.revision} of MachineDeployment ${e.owner.name} (MachineSet ${e.machineSet})`
    : `version ${e.revision} of KubeadmControlPlane ${e.owner.name}`;
  const prev = md
    ? `revision ${e.previousRevision} (MachineSet ${e.previousMachineSet})`
    : `version ${e.previousRevision}`;
  const parts = [
    `${Math.max(status.consecutiveJoinFailures ?? 0, s.machines.length)} ` +
      `Machines in a row timed out joining (joinTimeout ${formatDuration(settings.joinTimeoutMs)}), ` +
      (`all of ${rev}: ${listNames(failed.length > 0 ? failed : s.machines)}. ` +
        `No Machine of it has joined, while Machines of ${prev} did, ` +
        `through the same `) +
      `credential and endpoint ${endpointOf(cluster)}: the new template is the suspect, not the join credential.`,
    `It differs from ${prev} in: ${e.changes.length > 0 ? e.changes.join('; ') : UNREADABLE_CHANGES}.`,
    md
      ? `Fix the template (a new one, and point the MachineDeployment ` +
        `at it) or roll back (point spec.template back at ${prev}'s ` +
        `templates).`
      : `Fix the KubeadmControlPlane's machine template or kubeadm ` +
        `settings, or roll back spec.version to ${e.previousRevision}.`,
    `No more Machines of this revision are rebuilt: ${s.canariesSpent} ` +
      `canaries spent, next canary at ${s.nextCanaryTime ?? 'n/a'}. ` +
      (`Clears when a Machine joins, when the revision is no longer ` +
        `rolled out, or with the joinguard.io/resume annotation.`),
  ];
  if (heldBack.length > 0) parts.push(`Held back: ${listNames(heldBack)}.`);
  parts.push(runbook('RolloutSuspect'));
  return parts.join(' ');
}
