// Cluster (cluster.x-k8s.io v1beta2 and v1beta1) -> ClusterFacts. Field names from core/v1beta2 and
// core/v1beta1 cluster_types.go.
import { CAPI_ANNOTATION_PAUSED } from '../v1alpha1/types.js';
import { readConditions, timedFact, type ParsedCondition } from './conditions.js';
import type { CapiApiVersion, ClusterFacts, ObjectRef, TimedFact } from './model.js';
import { ObjectReader } from './reader.js';
import { groupOf } from './resources.js';

export function readCluster(obj: unknown, v: CapiApiVersion): ClusterFacts {
  const r: ObjectReader = ObjectReader.of(obj, 'Cluster');
  const annotations = r.stringMap('metadata.annotations');
  r.requiredTime('metadata.creationTimestamp');
  const conds = readConditions(r, 'status.conditions');
  const v2 = v === 'v1beta2' ? conds : readConditions(r, 'status.v1beta2.conditions');

  // ControlPlaneInitialized is set once and never reset: either signal is enough.
  const cpFlag = v === 'v1beta2' ? r.bool('status.initialization.controlPlaneInitialized') : r.bool('status.controlPlaneReady');
  const cpCond = conds.get('ControlPlaneInitialized') ?? v2.get('ControlPlaneInitialized');
  const controlPlaneInitialized = timedFact(cpFlag === true || cpCond?.status === 'True', cpCond);
  const infraFlag = v === 'v1beta2' ? r.bool('status.initialization.infrastructureProvisioned') : r.bool('status.infrastructureReady');
  const infrastructureReady: TimedFact = timedFact(infraFlag, conds.get('InfrastructureReady'));

  const facts: ClusterFacts = {
    name: r.requiredString('metadata.name'),
    namespace: r.requiredString('metadata.namespace'),
    uid: r.requiredString('metadata.uid'),
    resourceVersion: r.requiredString('metadata.resourceVersion'),
    paused: r.bool('spec.paused') === true || CAPI_ANNOTATION_PAUSED in annotations,
    deleting: r.time('metadata.deletionTimestamp') !== undefined,
    controlPlaneInitialized,
    infrastructureReady,
  };
  const host = r.string('spec.controlPlaneEndpoint.host');
  const port = r.int('spec.controlPlaneEndpoint.port');
  // CAPI's APIEndpoint.IsValid: a host and a port; half an endpoint is no endpoint to probe.
  if (host && port !== undefined && port > 0) facts.controlPlaneEndpoint = { host, port };
  const ref = controlPlaneRef(r, v);
  if (ref) facts.controlPlaneRef = ref;
  const probe = remoteConnection(v2.get('RemoteConnectionProbe'));
  if (probe) facts.remoteConnection = probe;
  return facts;
}

function controlPlaneRef(r: ObjectReader, v: CapiApiVersion): ObjectRef | undefined {
  if (!r.object('spec.controlPlaneRef')) return undefined;
  const kind = r.string('spec.controlPlaneRef.kind');
  const name = r.string('spec.controlPlaneRef.name');
  if (!kind || !name) return undefined;
  // v1beta2 {apiGroup, kind, name}; v1beta1 corev1.ObjectReference {apiVersion, kind, name, namespace}.
  const apiGroup = v === 'v1beta2' ? (r.string('spec.controlPlaneRef.apiGroup') ?? '') : groupOf(r.string('spec.controlPlaneRef.apiVersion') ?? '');
  return { apiGroup, kind, name };
}

/**
 * RemoteConnectionProbe: True means CAPI reaches the workload cluster (since: when it came back); False
 * or Unknown means it does not, or does not know, and a Node it cannot see must not be taken for no Node.
 */
function remoteConnection(c: ParsedCondition | undefined): ClusterFacts['remoteConnection'] {
  if (!c) return undefined;
  if (c.status !== 'True') return { value: false };
  return c.since !== undefined ? { value: true, since: c.since } : { value: true };
}
