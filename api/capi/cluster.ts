// Cluster (cluster.x-k8s.io v1beta2 and v1beta1) -> ClusterFacts, through the table of fields per API
// version (fields.ts). Field names from core/v1beta2 and core/v1beta1 cluster_types.go.
import { CAPI_ANNOTATION_PAUSED } from '../v1alpha1/types.js';
import { timedFact, type ParsedCondition } from './conditions.js';
import { CAPI_FIELDS, ConditionLists, readRefGroup, readTimedFact, type CapiFields } from './fields.js';
import { keepOnly } from './machine.js';
import type { CapiApiVersion, ClusterFacts, ObjectRef } from './model.js';
import { ObjectReader } from './reader.js';
import { KEPT_ANNOTATION_PREFIXES } from './resources.js';

export function readCluster(obj: unknown, v: CapiApiVersion): ClusterFacts {
  const r: ObjectReader = ObjectReader.of(obj, 'Cluster');
  const f = CAPI_FIELDS[v].cluster;
  const annotations = r.stringMap('metadata.annotations');
  r.requiredTime('metadata.creationTimestamp');
  const lists = new ConditionLists(r);

  // ControlPlaneInitialized is set once and never reset: either signal is enough.
  const cpFlag = r.bool(f.controlPlaneInitialized.flag);
  const cpCond = lists.first(f.controlPlaneInitialized.conditions);
  const controlPlaneInitialized = timedFact(cpFlag === true || cpCond?.status === 'True', cpCond);

  const facts: ClusterFacts = {
    name: r.requiredString('metadata.name'),
    namespace: r.requiredString('metadata.namespace'),
    uid: r.requiredString('metadata.uid'),
    resourceVersion: r.requiredString('metadata.resourceVersion'),
    // A value that is no string fails the read above (stringMap), as a Machine's; keys outside the prefixes
    // (`__proto__` among them) are dropped. Frozen: read once here, never written after.
    annotations: Object.freeze(keepOnly(annotations, KEPT_ANNOTATION_PREFIXES)),
    paused: r.bool('spec.paused') === true || CAPI_ANNOTATION_PAUSED in annotations,
    deleting: r.time('metadata.deletionTimestamp') !== undefined,
    controlPlaneInitialized,
    infrastructureReady: readTimedFact(r, lists, f.infrastructureReady),
  };
  const host = r.string('spec.controlPlaneEndpoint.host');
  const port = r.int('spec.controlPlaneEndpoint.port');
  // CAPI's APIEndpoint.IsValid: a host and a port; half an endpoint is no endpoint to probe.
  if (host && port !== undefined && port > 0) facts.controlPlaneEndpoint = { host, port };
  const ref = controlPlaneRef(r, f);
  if (ref) facts.controlPlaneRef = ref;
  const probe = remoteConnection(lists.get(f.remoteConnectionProbe));
  if (probe) facts.remoteConnection = probe;
  return facts;
}

function controlPlaneRef(r: ObjectReader, f: CapiFields['cluster']): ObjectRef | undefined {
  if (!r.object('spec.controlPlaneRef')) return undefined;
  const kind = r.string('spec.controlPlaneRef.kind');
  const name = r.string('spec.controlPlaneRef.name');
  if (!kind || !name) return undefined;
  return { apiGroup: readRefGroup(r, f.controlPlaneRefGroup), kind, name };
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
