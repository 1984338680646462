// How a replacement is asked of CAPI, per strategy. Only owners that re-create Machines on CAPI's
// remediation contract are asked (MachineSet, a control-plane provider); a Machine with any other owner,
// or in a MachinePool, is reported and never written. Delete is for MachineSet Machines only: a
// control-plane Machine always goes through its provider. Auto hands the Machine to a MachineHealthCheck
// that selects it (annotation), so that the two controllers never fight over the same conditions.
import type { MachineFacts, MachineHealthCheckFacts } from '../../api/capi/model.js';
import type { CheckSettings, FailureKind, RemediationPath } from '../../api/v1alpha1/types.js';
import { matchesSelector } from './scope.js';
import type { Action, CapiInfo, MachineTarget } from './types.js';

export type WriteAction = 'MarkOwnerRemediated' | 'AnnotateRemediate' | 'SetJoinGuardCondition' | 'DeleteMachine';

export type PathChoice =
  | { kind: 'report'; why: string }
  /** Auto path, every MHC that selects the Machine is paused: nothing happens, the Paused condition says so. */
  | { kind: 'blocked'; mhcs: string[]; why: string }
  | { kind: 'request'; path: Exclude<RemediationPath, 'Report'>; action: WriteAction; via: string };

export interface PathContext {
  settings: CheckSettings;
  mhcs: MachineHealthCheckFacts[];
  capi: CapiInfo;
  firstControlPlane: boolean;
}

/** MachineCondition needs CAPI v1.12+ (MHC checks.unhealthyMachineConditions). */
export const MACHINE_CONDITION_MIN_MINOR = 12;

export function selectingMhcs(m: MachineFacts, mhcs: MachineHealthCheckFacts[]): MachineHealthCheckFacts[] {
  return mhcs
    .filter((h) => h.clusterName === m.clusterName && h.namespace === m.namespace && matchesSelector(m.labels, h.selector))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export function choosePath(m: MachineFacts, ctx: PathContext): PathChoice {
  const { settings, firstControlPlane } = ctx;
  if (firstControlPlane && settings.firstControlPlane === 'Report') {
    return { kind: 'report', why: 'it is the first control-plane Machine and firstControlPlane is Report' };
  }
  if (m.machinePool || m.owner.kind === 'MachinePool') {
    return { kind: 'report', why: 'MachinePool Machines are reported, never remediated: no MachinePool owner acts on the remediation contract' };
  }
  const o = m.owner;
  if (o.kind === 'None') return { kind: 'report', why: 'it has no owner that could re-create it' };
  const controlPlane = m.controlPlane || o.controlPlane;
  const recreates = o.kind === 'MachineSet' || o.kind === 'KubeadmControlPlane' || (o.kind === 'Other' && o.controlPlane);
  const ownerName = `${o.rawKind ?? o.kind}/${o.name ?? '?'}`;
  if (!recreates) return { kind: 'report', why: `its owner ${ownerName} does not re-create Machines on CAPI's remediation contract` };

  const owner: PathChoice = { kind: 'request', path: 'OwnerRemediated', action: 'MarkOwnerRemediated', via: `its owner ${ownerName}` };
  switch (settings.strategy) {
    case 'Delete':
      if (o.kind === 'MachineSet' && !controlPlane) return { kind: 'request', path: 'Delete', action: 'DeleteMachine', via: `deleting it (owner ${ownerName})` };
      if (controlPlane) return owner; // never Delete a control-plane Machine
      return { kind: 'report', why: `strategy Delete is for MachineSet Machines only (owner ${ownerName})` };
    case 'MachineCondition': {
      const minor = ctx.capi.minor;
      if (minor !== undefined && minor < MACHINE_CONDITION_MIN_MINOR) {
        return { kind: 'report', why: `strategy MachineCondition needs CAPI v1.${MACHINE_CONDITION_MIN_MINOR} or later; this management cluster runs v1.${minor}` };
      }
      const watching = selectingMhcs(m, ctx.mhcs).filter((h) => h.watchesJoinGuardCondition);
      const via = watching.length > 0 ? `MachineHealthCheck ${watching[0]?.name}` : 'a MachineHealthCheck watching JoinGuardJoined (none selects it yet)';
      return { kind: 'request', path: 'MachineCondition', action: 'SetJoinGuardCondition', via };
    }
    case 'Auto': {
      const sel = selectingMhcs(m, ctx.mhcs);
      if (sel.length === 0) return owner;
      const active = sel.filter((h) => !h.paused);
      if (active.length === 0) {
        const names = sel.map((h) => h.name);
        return { kind: 'blocked', mhcs: names, why: `MachineHealthCheck ${names.join(', ')} selects it and is paused` };
      }
      return { kind: 'request', path: 'RemediateAnnotation', action: 'AnnotateRemediate', via: `MachineHealthCheck ${active[0]?.name}` };
    }
    case 'OwnerRemediated':
    default:
      return owner;
  }
}

export function target(m: MachineFacts): MachineTarget {
  return { name: m.name, namespace: m.namespace, uid: m.uid, resourceVersion: m.resourceVersion };
}

export function requestAction(m: MachineFacts, action: WriteAction, kind: FailureKind, message: string): Action {
  const t = target(m);
  switch (action) {
    case 'MarkOwnerRemediated':
      // Never re-assert OwnerRemediated once the owner has changed it.
      return {
        type: 'MarkOwnerRemediated',
        machine: t,
        kind,
        message,
        setOwnerRemediated: m.ownerRemediated === undefined || m.ownerRemediated.status === 'True',
      };
    case 'AnnotateRemediate':
      return { type: 'AnnotateRemediate', machine: t, kind, message };
    case 'SetJoinGuardCondition':
      return { type: 'SetJoinGuardCondition', machine: t, kind, message };
    case 'DeleteMachine':
      return { type: 'DeleteMachine', machine: t, kind };
  }
}
