// How a replacement is asked of CAPI (DESIGN: "How a replacement is asked of CAPI"): the paths as one table, the
// path per strategy, and the marks JoinGuard caused on a Machine (by path, remembered or not). The life of a request
// and what every Machine must carry now are marks.ts.
import type { MachineFacts, MachineHealthCheckFacts } from '../../../api/capi/model.js';
import { matchesSelector } from '../../../api/capi/selector.js';
import { STRATEGY_MIN_CAPI_MINOR } from '../../../api/v1alpha1/defaults.js';
import type {
  CheckSettings,
  OwnerReference,
  RemediationPath,
  RemediationStrategy,
} from '../../../api/v1alpha1/types.js';
import { CAPI_ANNOTATION_REMEDIATE_MACHINE } from '../../../api/v1alpha1/types.js';
import type { CapiInfo, MachineTarget } from '../types.js';
import { byName } from '../words.js';

/** MachineCondition needs CAPI v1.12+ (MHC checks.unhealthyMachineConditions): the webhook's number, one home. */
const MACHINE_CONDITION_MIN_MINOR = STRATEGY_MIN_CAPI_MINOR.MachineCondition ?? 0;

/** HealthCheckSucceeded reasons JoinGuard writes itself. */
const OWN_REASONS = new Set(['JoinTimeout', 'ProvisionTimeout']);
/** The reason a MachineHealthCheck writes for the remediate-machine annotation (v1beta2, v1beta1). */
const ANNOTATION_REASONS = new Set(['HasRemediateAnnotation', 'HasRemediateMachineAnnotation']);

export type Path = Exclude<RemediationPath, 'Report'>;

/**
 * The marks a request may leave on a Machine that JoinGuard caused, each withdrawn when it did: HealthCheckSucceeded
 * False (JoinGuard's, or a MachineHealthCheck's because JoinGuard asked), the remediate-machine annotation,
 * JoinGuardJoined False.
 */
export const MARK_KINDS = ['healthCheck', 'annotation', 'condition'] as const;
export type MarkKind = (typeof MARK_KINDS)[number];

/** One remediation path: how its request shows on the Machine, who answers it, what it writes. */
export interface PathRule {
  /** The write of this path is visible on the Machine. */
  visible: (m: MachineFacts) => boolean;
  /**
   * A MachineHealthCheck answers it for the owner (OwnerRemediated=False/WaitingForRemediation counts as an answer).
   */
  answered: boolean;
  /**
   * The MachineHealthChecks that act on its request (a paused one stops its unanswered clock): none (the owner acts
   * directly), any that selects the Machine, or those that watch JoinGuardJoined.
   */
  actingMhcs: 'none' | 'selecting' | 'watchingJoinGuardJoined';
  /**
   * When the Machine says its mark was made (the mark's own time: its condition's lastTransitionTime, the deletion's
   * timestamp), while visible; none where the mark carries no time (the annotation). Written by whoever wrote the
   * Machine: never trusted as it is (marks.ts markedFrom clamps it).
   */
  markedAt: (m: MachineFacts) => number | undefined;
  /**
   * What the executor writes (machine-writes.ts converge): a Machine deletion, or the mark of that kind. What a
   * withdrawal removes follows from it (MARKS: the mark it wrote, and what a MachineHealthCheck marked because of it).
   */
  write: 'delete' | MarkKind;
}

/** Every path, as CAPI_FIELDS is every version: a new path is one entry here (and its word in api/v1alpha1). */
export const PATHS = {
  OwnerRemediated: {
    visible: (m) => m.healthCheckSucceeded?.status === 'False',
    answered: false,
    actingMhcs: 'none',
    markedAt: (m) => (m.healthCheckSucceeded?.status === 'False' ? m.healthCheckSucceeded.since : undefined),
    write: 'healthCheck',
  },
  RemediateAnnotation: {
    visible: (m) => m.remediateAnnotation,
    answered: true,
    actingMhcs: 'selecting',
    markedAt: () => undefined,
    write: 'annotation',
  },
  MachineCondition: {
    visible: (m) => m.joinGuardJoined?.status === 'False',
    answered: true,
    actingMhcs: 'watchingJoinGuardJoined',
    markedAt: (m) => (m.joinGuardJoined?.status === 'False' ? m.joinGuardJoined.since : undefined),
    write: 'condition',
  },
  Delete: {
    visible: (m) => m.deletingSince !== undefined,
    answered: false,
    actingMhcs: 'none',
    markedAt: (m) => m.deletingSince,
    write: 'delete',
  },
} as const satisfies Record<Path, PathRule>;

/** One kind of mark: whether JoinGuard caused it on a Machine asked on a path, and how a withdrawal removes it. */
interface MarkRule {
  /** The mark is on the Machine, whoever made it. */
  on: (m: MachineFacts) => boolean;
  /** `rule`: the path JoinGuard asked on, if it remembers asking. */
  caused: (m: MachineFacts, rule: PathRule | undefined) => boolean;
  /** An annotation (removed first, in one metadata patch) or a part of withdrawConditions (on /status). */
  removed: { annotation: string } | { conditions: 'healthCheck' | 'condition' };
}

/** Every mark kind: causedMarks, anyMark and the withdrawal (machine-writes.ts) are derived from it. */
export const MARKS: Readonly<Record<MarkKind, MarkRule>> = {
  healthCheck: {
    on: (m) => m.healthCheckSucceeded?.status === 'False',
    caused: (m, rule) => {
      const hc = m.healthCheckSucceeded;
      if (hc?.status !== 'False') return false;
      const own = OWN_REASONS.has(hc.reason ?? '');
      const viaAnnotation = rule?.write === 'annotation' && ANNOTATION_REASONS.has(hc.reason ?? '');
      const viaCondition = hc.reason === 'UnhealthyMachine' && namesOnlyJoinGuardCondition(hc.message);
      return own || viaAnnotation || viaCondition;
    },
    removed: { conditions: 'healthCheck' },
  },
  // CAPI's annotation: JoinGuard's only when its path wrote it.
  annotation: {
    on: (m) => m.remediateAnnotation,
    caused: (m, rule) => rule?.write === 'annotation' && m.remediateAnnotation,
    removed: { annotation: CAPI_ANNOTATION_REMEDIATE_MACHINE },
  },
  condition: {
    on: (m) => m.joinGuardJoined?.status === 'False',
    caused: (m) => m.joinGuardJoined?.status === 'False',
    removed: { conditions: 'condition' },
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
  const by = path === 'Report' ? 'none' : PATHS[path].actingMhcs;
  if (by === 'none') return false;
  const acting = selectingMhcs(m, mhcs).filter((h) => by === 'selecting' || h.watchesJoinGuardCondition);
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
  const ownerName = `${o.rawKind ?? o.kind}/${o.name ?? '?'}`;
  const recreates =
    o.kind === 'MachineSet' || o.kind === 'KubeadmControlPlane' || (o.kind === 'Other' && o.controlPlane);
  if (!recreates)
    return { kind: 'report', why: `its owner ${ownerName} does not re-create Machines on CAPI's remediation contract` };
  return STRATEGY_PATH[settings.strategy]({ m, mhcs, capi, ownerName });
}

/** What a strategy's choice sees: a Machine whose owner re-creates Machines on CAPI's remediation contract. */
interface StrategyInput {
  m: MachineFacts;
  mhcs: readonly MachineHealthCheckFacts[];
  capi: CapiInfo;
  /** `Kind/name` of the owner. */
  ownerName: string;
}

const viaOwner = (ownerName: string): PathChoice => ({
  kind: 'request',
  path: 'OwnerRemediated',
  via: `its owner ${ownerName}`,
});

/** The path each strategy chooses: a Record, so a new strategy does not compile until it says its path. */
const STRATEGY_PATH: Readonly<Record<RemediationStrategy, (i: StrategyInput) => PathChoice>> = {
  OwnerRemediated: ({ ownerName }) => viaOwner(ownerName),
  Delete: ({ m, ownerName }) => {
    if (m.controlPlane || m.owner.controlPlane) return viaOwner(ownerName); // never Delete a control-plane Machine
    if (m.owner.kind === 'MachineSet')
      return { kind: 'request', path: 'Delete', via: `deleting it (owner ${ownerName})` };
    return { kind: 'report', why: `strategy Delete is for MachineSet Machines only (owner ${ownerName})` };
  },
  MachineCondition: ({ m, mhcs, capi }) => {
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
  },
  Auto: ({ m, mhcs, ownerName }) => {
    const sel = selectingMhcs(m, mhcs);
    if (sel.length === 0) return viaOwner(ownerName);
    const active = sel.filter((h) => !h.paused);
    if (active.length === 0)
      return {
        kind: 'blocked',
        why: `MachineHealthCheck ${sel.map((h) => h.name).join(', ')} selects it and is paused`,
      };
    return { kind: 'request', path: 'RemediateAnnotation', via: `MachineHealthCheck ${active[0]!.name}` };
  },
};

/** The marks on a Machine that JoinGuard caused, given the path it asked on (if it remembers asking). */
export type CausedMarks = Record<MarkKind, boolean>;

export function causedMarks(m: MachineFacts, path: RemediationPath | undefined): CausedMarks {
  const rule = path !== undefined && path !== 'Report' ? PATHS[path] : undefined;
  return Object.fromEntries(MARK_KINDS.map((k) => [k, MARKS[k].caused(m, rule)])) as CausedMarks;
}

export const anyMark = (c: CausedMarks): boolean => MARK_KINDS.some((k) => c[k]);

/** A remediation mark of anyone's, of every kind MARKS knows (carriesAnyMark in api/capi, derived). */
export const carriesMark = (m: MachineFacts): boolean => MARK_KINDS.some((k) => MARKS[k].on(m));

/** The caused marks a withdrawal removes on /status (withdrawConditions' parts), and whether there is any. */
export function conditionMarks(c: CausedMarks): { healthCheck: boolean; condition: boolean; any: boolean } {
  const parts = { healthCheck: false, condition: false };
  for (const k of MARK_KINDS) {
    const removed = MARKS[k].removed;
    if (c[k] && 'conditions' in removed) parts[removed.conditions] = true;
  }
  return { ...parts, any: parts.healthCheck || parts.condition };
}

/** The caused marks a withdrawal removes from the metadata: their annotations' keys. */
export function annotationMarks(c: CausedMarks): string[] {
  return MARK_KINDS.flatMap((k) => {
    const removed = MARKS[k].removed;
    return c[k] && 'annotation' in removed ? [removed.annotation] : [];
  });
}

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
