// Machine (cluster.x-k8s.io v1beta2 and v1beta1) -> MachineFacts, through the table of fields per API
// version (fields.ts). Field names are those of the Go types in sigs.k8s.io/cluster-api/api core/v1beta2
// and core/v1beta1 (machine_types.go).
import {
  ANNOTATION_REQUESTED_BY,
  ANNOTATION_SKIP,
  CAPI_ANNOTATION_PAUSED,
  CAPI_ANNOTATION_REMEDIATE_MACHINE,
  CAPI_ANNOTATION_SKIP_REMEDIATION,
  CONDITION_JOINGUARD_JOINED,
} from '../v1alpha1/types.js';
import { toCond, type ParsedCondition } from './conditions.js';
import { readRemediationData } from './control-plane.js';
import { markerIn } from './remediation-writes.js';
import { CAPI_FIELDS, ConditionLists, readRefGroup, readTimedFact, type CapiFields } from './fields.js';
import {
  CABPK_GROUP,
  CAPI_GROUP,
  KCP_GROUP,
  type CapiApiVersion,
  type MachineFacts,
  type ObjectRef,
  type OwnerFacts,
} from './model.js';
import { isObj, kindOf, ObjectReader } from './reader.js';
import {
  CAPI_LABEL_CLUSTER_NAME,
  CAPI_LABEL_CONTROL_PLANE,
  CAPI_LABEL_POOL_NAME,
  groupOf,
  KCP_ANNOTATION_REMEDIATION_FOR,
  KEPT_ANNOTATION_PREFIXES,
} from './resources.js';

/** CAPI's reason on NodeReady/NodeHealthy (v1beta2 conditions) while the workload cluster cannot be reached. */
export const REASON_CONNECTION_DOWN = 'ConnectionDown';

export function readMachine(obj: unknown, v: CapiApiVersion): MachineFacts {
  const r: ObjectReader = ObjectReader.of(obj, 'Machine');
  const f = CAPI_FIELDS[v].machine;
  const meta = readMeta(r, KEPT_ANNOTATION_PREFIXES);
  const clusterName = r.string('spec.clusterName') || meta.labels[CAPI_LABEL_CLUSTER_NAME];
  if (!clusterName) r.fail('spec.clusterName', `is required (or the ${CAPI_LABEL_CLUSTER_NAME} label)`);
  const controlPlane = CAPI_LABEL_CONTROL_PLANE in meta.labels;
  const owner = readOwner(r, controlPlane);

  const lists = new ConditionLists(r);
  const conds = lists.list(f.ownerConditions);
  const facts: MachineFacts = {
    ...meta,
    clusterName,
    owner,
    controlPlane,
    infrastructureReady: readTimedFact(r, lists, f.infrastructureReady),
    bootstrapReady: readTimedFact(r, lists, f.bootstrapReady),
    nodeConnectionDown: connectionDown(lists.list(f.connectionConditions)) || inspectionFailed(lists, f),
    remediateAnnotation: CAPI_ANNOTATION_REMEDIATE_MACHINE in meta.annotations,
    machinePool: CAPI_LABEL_POOL_NAME in meta.labels || owner.kind === 'MachinePool',
  };
  const phase = r.string('status.phase');
  if (phase) facts.phase = phase;
  const providerID = r.string('spec.providerID');
  if (providerID) facts.providerID = providerID;
  const nodeName = r.string('status.nodeRef.name');
  if (nodeName) facts.nodeName = nodeName;
  const ref = configRef(r, f);
  if (ref) facts.bootstrapConfigRef = ref;
  const version = r.string('spec.version');
  if (version) facts.version = version;
  const dataSecretName = r.string('spec.bootstrap.dataSecretName');
  if (dataSecretName) facts.dataSecretName = dataSecretName;
  const hc = toCond(conds.get('HealthCheckSucceeded'));
  if (hc) facts.healthCheckSucceeded = hc;
  const or = toCond(lists.first(f.ownerAnswer));
  if (or) facts.ownerRemediated = or;
  const jg = toCond(conds.get(CONDITION_JOINGUARD_JOINED));
  if (jg) facts.joinGuardJoined = jg;
  // The marker: inside JoinGuard's own condition (the mark's write), else the annotation (the annotation path, and a
  // mark of the previous layout: the annotation beside a /status mark).
  const markerAnnotation = meta.annotations[ANNOTATION_REQUESTED_BY];
  if (markerAnnotation) facts.markerAnnotation = markerAnnotation;
  const requestedBy =
    (hc?.status === 'False' ? markerIn(hc.message) : undefined) ??
    (jg?.status === 'False' ? markerIn(jg.message) : undefined) ??
    markerAnnotation;
  if (requestedBy) facts.requestedBy = requestedBy;
  const list = r.list('status.conditions');
  if (list !== undefined) facts.conditions = list;
  const skip = skipReason(meta.annotations);
  if (skip) facts.skipReason = skip;
  const remediationFor = meta.annotations[KCP_ANNOTATION_REMEDIATION_FOR];
  if (remediationFor !== undefined) facts.remediationFor = readRemediationData(remediationFor);
  return facts;
}

type Meta = Pick<
  MachineFacts,
  | 'name'
  | 'namespace'
  | 'uid'
  | 'resourceVersion'
  | 'generation'
  | 'createdAt'
  | 'deletingSince'
  | 'labels'
  | 'annotations'
>;

/**
 * The metadata every reader needs: name, namespace, uid, resourceVersion and creation are required. With
 * `keepAnnotations`, only annotations whose key starts with one of those prefixes are kept.
 */
export function readMeta(r: ObjectReader, keepAnnotations?: readonly string[]): Meta {
  const annotations = r.stringMap('metadata.annotations');
  const meta: Meta = {
    name: r.requiredString('metadata.name'),
    namespace: r.requiredString('metadata.namespace'),
    uid: r.requiredString('metadata.uid'),
    resourceVersion: r.requiredString('metadata.resourceVersion'),
    createdAt: r.requiredTime('metadata.creationTimestamp'),
    labels: r.stringMap('metadata.labels'),
    annotations: keepAnnotations ? keepOnly(annotations, keepAnnotations) : annotations,
  };
  const generation = r.int('metadata.generation');
  if (generation !== undefined) meta.generation = generation;
  const deleting = r.time('metadata.deletionTimestamp');
  if (deleting !== undefined) meta.deletingSince = deleting;
  return meta;
}

/** The controller owner reference (`controller: true`), classified. */
export function readOwner(r: ObjectReader, controlPlaneLabel: boolean): OwnerFacts {
  const refs = r.list('metadata.ownerReferences') ?? [];
  for (const [i, ref] of refs.entries()) {
    const at = `metadata.ownerReferences[${i}]`;
    if (!isObj(ref)) r.fail(at, `must be an owner reference object, found ${kindOf(ref)}`);
    if (ref['controller'] !== true) continue;
    const field = (k: string): string => {
      const v = ref[k];
      if (typeof v !== 'string' || v === '')
        r.fail(`${at}.${k}`, `is required (a non-empty string), found ${kindOf(v)}`);
      return v;
    };
    const rawKind = field('kind');
    const group = groupOf(field('apiVersion'));
    const kind = ownerKind(group, rawKind);
    return {
      kind,
      rawKind,
      name: field('name'),
      uid: field('uid'),
      controlPlane: kind === 'KubeadmControlPlane' || (kind === 'Other' && controlPlaneLabel),
    };
  }
  return { kind: 'None', controlPlane: false };
}

export function keepOnly(annotations: Record<string, string>, prefixes: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(annotations)) if (prefixes.some((p) => k.startsWith(p))) out[k] = v;
  return out;
}

function configRef(r: ObjectReader, f: CapiFields['machine']): ObjectRef | undefined {
  const ref = r.object('spec.bootstrap.configRef');
  if (!ref) return undefined;
  const kind = r.string('spec.bootstrap.configRef.kind');
  const name = r.string('spec.bootstrap.configRef.name');
  if (!kind || !name) return undefined;
  const apiGroup = readRefGroup(r, f.configRefGroup);
  return { apiGroup: apiGroup || (kind === 'KubeadmConfig' ? CABPK_GROUP : ''), kind, name };
}

function connectionDown(conds: Map<string, ParsedCondition>): boolean {
  return ['NodeReady', 'NodeHealthy'].some((t) => conds.get(t)?.reason === REASON_CONNECTION_DOWN);
}

function inspectionFailed(lists: ConditionLists, f: CapiFields['machine']): boolean {
  if (!f.nodeInspectionFailed) return false;
  const c = lists.get(f.nodeInspectionFailed);
  return c?.status === 'Unknown' && c.reason === f.nodeInspectionFailed.reason;
}

export function skipReason(annotations: Record<string, string>): MachineFacts['skipReason'] {
  for (const a of [ANNOTATION_SKIP, CAPI_ANNOTATION_SKIP_REMEDIATION, CAPI_ANNOTATION_PAUSED] as const) {
    if (a in annotations) return a;
  }
  return undefined;
}

/** The owner kinds JoinGuard tells apart, by API group and kind; any other owner is Other. */
function ownerKind(group: string | undefined, rawKind: string | undefined): OwnerFacts['kind'] {
  if (group === CAPI_GROUP && rawKind === 'MachineSet') return 'MachineSet';
  if (group === KCP_GROUP && rawKind === 'KubeadmControlPlane') return 'KubeadmControlPlane';
  if (group === CAPI_GROUP && rawKind === 'MachinePool') return 'MachinePool';
  return 'Other';
}
