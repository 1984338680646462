// How a replacement is asked of CAPI (DESIGN: "How a replacement is asked of CAPI"): the paths as one table, the
// path per strategy, and the marks JoinGuard caused on a Machine (by path, remembered or not). The life of a request
// and what every Machine must carry now are marks.ts.
import type { MachineFacts, MachineHealthCheckFacts } from '../../../api/capi/model.js';
import { matchesSelector } from '../../../api/capi/selector.js';
import type { CheckSettings, OwnerReference, RemediationPath } from '../../../api/v1alpha1/types.js';
import type { CapiInfo, MachineTarget } from '../types.js';
import { byName } from '../words.js';

/** MachineCondition needs CAPI v1.12+ (MHC checks.unhealthyMachineConditions). */
export const MACHINE_CONDITION_MIN_MINOR = 12;

/** HealthCheckSucceeded reasons JoinGuard writes itself. */
const OWN_REASONS = new Set(['JoinTimeout', 'ProvisionTimeout']);
/** The reason a MachineHealthCheck writes for the remediate-machine annotation (v1beta2, v1beta1). */
const ANNOTATION_REASONS = new Set(['HasRemediateAnnotation', 'HasRemediateMachineAnnotation']);

export type Path = Exclude<RemediationPath, 'Report'>;

/** One remediation path: how its request shows on the Machine, who answers it, what it writes and withdraws. */
export interface PathRule {
  /** The write of this path is visible on the Machine. */
  visible: (m: MachineFacts) => boolean;
  /**
   * A MachineHealthCheck answers it for the owner (OwnerRemediated=False/WaitingForRemediation counts as an answer).
   */
  answered: boolean;
  /** Marks a MachineHealthCheck makes because JoinGuard asked (the annotation path: the MHC's own reasons). */
  caused: { annotation: boolean };
  /** What the executor writes (executor.ts writeIntent): a Machine deletion, an annotation, or status conditions. */
  write: 'delete' | 'annotation' | 'ownerRemediated' | 'joinGuardCondition';
  /** What a withdrawal removes besides JoinGuard's own conditions and marker (causedMarks says which are there). */
  withdraw: 'nothing' | 'annotation' | 'conditions';
}

/** Every path, as CAPI_FIELDS is every version: a new path is one entry here (and its word in api/v1alpha1). */
export const PATHS: Readonly<Record<Path, PathRule>> = {
  OwnerRemediated: {
    visible: (m) => m.healthCheckSucceeded?.status === 'False',
    answered: false,
    caused: { annotation: false },
    write: 'ownerRemediated',
    withdraw: 'conditions',
  },
  RemediateAnnotation: {
    visible: (m) => m.remediateAnnotation,
    answered: true,
    caused: { annotation: true },
    write: 'annotation',
    withdraw: 'annotation',
  },
  MachineCondition: {
    visible: (m) => m.joinGuardJoined?.status === 'False',
    answered: true,
    caused: { annotation: false },
    write: 'joinGuardCondition',
    withdraw: 'conditions',
  },
  Delete: {
    visible: (m) => m.deletingSince !== undefined,
    answered: false,
    caused: { annotation: false },
    write: 'delete',
    withdraw: 'nothing',
  },
};

export type PathChoice =
  | { kind: 'report'; why: string }
  /** Auto path, every MHC that selects the Machine is paused: nothing happens, the Paused condition says so. */
  | { kind: 'blocked'; why: string }
  | { kind: 'request'; path: Path; via: string };

export function target(m: MachineFacts): MachineTarget {
  return { name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion };
}

export function ownerRef(m: MachineFacts): OwnerReference | undefined {
  if (m.owner.kind === 'None' || m.owner.name === undefined) return undefined;
  return { kind: m.owner.rawKind ?? m.owner.kind, name: m.owner.name };
}

export function sameOwner(a: OwnerReference | undefined, b: OwnerReference | undefined): boolean {
  return a !== undefined && b !== undefined && a.kind === b.kind && a.name === b.name;
}

export function selectingMhcs(m: MachineFacts, mhcs: readonly MachineHealthCheckFacts[]): MachineHealthCheckFacts[] {
  return mhcs
    .filter(
      (h) => h.clusterName === m.clusterName && h.namespace === m.namespace && matchesSelector(h.selector, m.labels),
    )
    .sort(byName);
}

/**
 * The MachineHealthCheck that acts on a request is paused (every one that would act on it): nobody can answer it, so
 * its unanswered clock stops (marks.ts). The owner paths have no MHC in between (their Cluster's pause stops them).
 */
export function actingMhcPaused(
  path: RemediationPath,
  m: MachineFacts,
  mhcs: readonly MachineHealthCheckFacts[],
): boolean {
  if (path !== 'RemediateAnnotation' && path !== 'MachineCondition') return false;
  const acting = selectingMhcs(m, mhcs).filter((h) => path === 'RemediateAnnotation' || h.watchesJoinGuardCondition);
  return acting.length > 0 && acting.every((h) => h.paused);
}

/**
 * Only owners that re-create Machines on CAPI's remediation contract are asked (MachineSet, a control-plane
 * provider); MachinePool Machines and Machines without such an owner are reported, never written. Delete is for
 * MachineSet Machines only; a control-plane Machine always goes through its provider. Auto hands the Machine to
 * a MachineHealthCheck that selects it (annotation), so the two controllers never fight over the same conditions.
 */
export function choosePath(
  m: MachineFacts,
  settings: CheckSettings,
  mhcs: readonly MachineHealthCheckFacts[],
  capi: CapiInfo,
  firstControlPlane: boolean,
): PathChoice {
  if (firstControlPlane && settings.firstControlPlane === 'Report')
    return { kind: 'report', why: 'it is the first control-plane Machine and firstControlPlane is Report' };
  const o = m.owner;
  if (m.machinePool || o.kind === 'MachinePool') {
    return {
      kind: 'report',
      why: 'MachinePool Machines are reported, never remediated: no MachinePool owner acts on the remediation contract',
    };
  }
  if (o.kind === 'None') return { kind: 'report', why: 'it has no owner that could re-create it' };
  const controlPlane = m.controlPlane || o.controlPlane;
  const ownerName = `${o.rawKind ?? o.kind}/${o.name ?? '?'}`;
  const recreates =
    o.kind === 'MachineSet' || o.kind === 'KubeadmControlPlane' || (o.kind === 'Other' && o.controlPlane);
  if (!recreates)
    return { kind: 'report', why: `its owner ${ownerName} does not re-create Machines on CAPI's remediation contract` };

  const owner: PathChoice = { kind: 'request', path: 'OwnerRemediated', via: `its owner ${ownerName}` };
  switch (settings.strategy) {
    case 'Delete':
      if (controlPlane) return owner; // never Delete a control-plane Machine
      if (o.kind === 'MachineSet') return { kind: 'request', path: 'Delete', via: `deleting it (owner ${ownerName})` };
      return { kind: 'report', why: `strategy Delete is for MachineSet Machines only (owner ${ownerName})` };
    case 'MachineCondition': {
      if (capi.minor !== undefined && capi.minor < MACHINE_CONDITION_MIN_MINOR) {
        return {
          kind: 'report',
          why:
            `strategy MachineCondition needs CAPI v1.${MACHINE_CONDITION_MIN_MINOR} ` +
            `or later; this management cluster runs v1.${capi.minor}`,
        };
      }
      const watching = selectingMhcs(m, mhcs).filter((h) => h.watchesJoinGuardCondition && !h.paused);
      const via =
        watching[0] !== undefined
          ? `MachineHealthCheck ${watching[0].name}`
          : 'a MachineHealthCheck watching JoinGuardJoined (none selects it now)';
      return { kind: 'request', path: 'MachineCondition', via };
    }
    case 'Auto': {
      const sel = selectingMhcs(m, mhcs);
      if (sel.length === 0) return owner;
      const active = sel.filter((h) => !h.paused);
      if (active.length === 0)
        return {
          kind: 'blocked',
          why: `MachineHealthCheck ${sel.map((h) => h.name).join(', ')} selects it and is paused`,
        };
      return { kind: 'request', path: 'RemediateAnnotation', via: `MachineHealthCheck ${active[0]!.name}` };
    }
    case 'OwnerRemediated':
    default:
      return owner;
  }
}

/** The marks on a Machine that JoinGuard caused, given the path it asked on (if it remembers asking). */
export interface CausedMarks {
  /** HealthCheckSucceeded=False written by JoinGuard, or by a MachineHealthCheck because JoinGuard asked it. */
  healthCheck: boolean;
  /** cluster.x-k8s.io/remediate-machine, set by JoinGuard. */
  annotation: boolean;
  /** JoinGuardJoined=False. */
  condition: boolean;
}

export function causedMarks(m: MachineFacts, path: RemediationPath | undefined): CausedMarks {
  const hc = m.healthCheckSucceeded;
  const hcFalse = hc?.status === 'False';
  const own = hcFalse && OWN_REASONS.has(hc.reason ?? '');
  const rule = path !== undefined && path !== 'Report' ? PATHS[path] : undefined;
  const viaAnnotation = hcFalse && rule?.caused.annotation === true && ANNOTATION_REASONS.has(hc.reason ?? '');
  const viaCondition = hcFalse && hc.reason === 'UnhealthyMachine' && namesOnlyJoinGuardCondition(hc.message);
  return {
    healthCheck: own || viaAnnotation || viaCondition,
    annotation: rule?.caused.annotation === true && m.remediateAnnotation,
    condition: m.joinGuardJoined?.status === 'False',
  };
}

export const anyMark = (c: CausedMarks): boolean => c.healthCheck || c.annotation || c.condition;

/** HealthCheckSucceeded=False as a MachineHealthCheck writes it in answer to a remediate-machine annotation. */
export const answersAnnotation = (m: MachineFacts): boolean =>
  m.healthCheckSucceeded?.status === 'False' && ANNOTATION_REASONS.has(m.healthCheckSucceeded.reason ?? '');

/** The MHC's message lists each failed check on a line `* Condition X on Machine ...`; all of them JoinGuardJoined. */
function namesOnlyJoinGuardCondition(message: string | undefined): boolean {
  const lines = (message ?? '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('*'));
  return lines.length > 0 && lines.every((l) => l.includes('Condition JoinGuardJoined on Machine'));
}
