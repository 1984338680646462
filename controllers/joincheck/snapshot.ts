// Raw objects (from the caches, or read live) -> the planner's Snapshot. Pure: no I/O. Every object goes
// through api/capi's readers; what a reader cannot understand is set aside with the field it tripped on,
// logged by the caller, and never acted on.
import { readBootstrapConfig, readCluster, readKubeadmControlPlane, readMachine, readMachineHealthCheck } from '../../api/capi/readers.js';
import { CABPK_GROUP, MalformedObjectError } from '../../api/capi/model.js';
import type { BootstrapConfigFacts, KcpFacts, MachineFacts, MachineHealthCheckFacts, WorkloadNodeFacts } from '../../api/capi/model.js';
import { parseSettings } from '../../api/v1alpha1/settings.js';
import type { MachineJoinCheck } from '../../api/v1alpha1/types.js';
import type { CapiInfo, Snapshot } from './types.js';

type Json = Record<string, any>;

export interface RawSnapshot {
  check: Json;
  cluster?: Json;
  /** Machines of the check's namespace labelled with its Cluster. */
  machines: Json[];
  mhcs: Json[];
  kcps: Json[];
  bootstrapConfigs: Json[];
  capi: CapiInfo;
  now: number;
  endpointProbe?: { reachable: boolean; at: number };
  workloadNodes?: WorkloadNodeFacts[];
  connectionGraceMs?: number;
}

export interface Problem {
  kind: string;
  name: string;
  error: string;
}

export function buildSnapshot(raw: RawSnapshot): { snapshot: Snapshot; problems: Problem[] } {
  const problems: Problem[] = [];
  const v = raw.capi.apiVersion;
  const check = raw.check as MachineJoinCheck;
  const parsed = parseSettings(check.spec);
  const settingsError = parsed.settings ? undefined : parsed.errors.map((e) => `${e.field}: ${e.message}`).join('; ');

  const read = <T>(kind: string, obj: Json, f: () => T): T | undefined => {
    try {
      return f();
    } catch (e) {
      const name = typeof obj?.metadata?.name === 'string' ? obj.metadata.name : '(unnamed)';
      problems.push({ kind, name, error: e instanceof MalformedObjectError ? e.message : `${kind} ${name}: ${(e as Error).message}` });
      return undefined;
    }
  };

  const machines: MachineFacts[] = [];
  const malformed: Snapshot['malformed'] = [];
  for (const m of raw.machines) {
    const facts = read('Machine', m, () => readMachine(withKind(m, `cluster.x-k8s.io/${v}`, 'Machine'), v));
    if (facts) machines.push(facts);
    else malformed.push({ name: String(m?.metadata?.name ?? '(unnamed)'), error: problems[problems.length - 1]!.error });
  }

  const cluster = raw.cluster ? read('Cluster', raw.cluster, () => readCluster(withKind(raw.cluster!, `cluster.x-k8s.io/${v}`, 'Cluster'), v)) : undefined;

  let kcp: KcpFacts | undefined;
  const ref = cluster?.controlPlaneRef;
  if (ref && ref.kind === 'KubeadmControlPlane') {
    const obj = raw.kcps.find((k) => k.metadata?.name === ref.name);
    if (obj) kcp = read('KubeadmControlPlane', obj, () => readKubeadmControlPlane(withKind(obj, `controlplane.cluster.x-k8s.io/${v}`, 'KubeadmControlPlane'), v));
  }

  const bootstrapConfigs = new Map<string, BootstrapConfigFacts>();
  for (const b of raw.bootstrapConfigs) {
    const facts = read('KubeadmConfig', b, () => readBootstrapConfig(withKind(b, `${CABPK_GROUP}/${v}`, 'KubeadmConfig')));
    if (facts) bootstrapConfigs.set(`${facts.kind}/${facts.name}`, facts);
  }

  const mhcs: MachineHealthCheckFacts[] = [];
  for (const h of raw.mhcs) {
    const facts = read('MachineHealthCheck', h, () => readMachineHealthCheck(withKind(h, `cluster.x-k8s.io/${v}`, 'MachineHealthCheck'), v));
    if (facts) mhcs.push(facts);
  }

  const snapshot: Snapshot = {
    check,
    ...(parsed.settings ? { settings: parsed.settings } : {}),
    ...(settingsError !== undefined ? { settingsError } : {}),
    ...(cluster ? { cluster } : {}),
    machines,
    malformed,
    bootstrapConfigs,
    ...(kcp ? { kcp } : {}),
    mhcs,
    capi: raw.capi,
    ...(raw.endpointProbe ? { endpointProbe: raw.endpointProbe } : {}),
    ...(raw.workloadNodes ? { workloadNodes: raw.workloadNodes } : {}),
    ...(raw.connectionGraceMs !== undefined ? { connectionGraceMs: raw.connectionGraceMs } : {}),
    now: raw.now,
  };
  return { snapshot, problems };
}

/** List items may come without apiVersion/kind; the readers want them. */
function withKind(obj: Json, apiVersion: string, kind: string): Json {
  if (obj.apiVersion && obj.kind) return obj;
  return { apiVersion, kind, ...obj };
}
