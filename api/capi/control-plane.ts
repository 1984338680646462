// KubeadmControlPlane (controlplane.cluster.x-k8s.io v1beta2 and v1beta1) -> KcpFacts, through the table of
// fields per API version (fields.ts). The remediation annotations' JSON is KCP's RemediationData (machine,
// timestamp, retryCount): remediation-in-progress on the KCP, remediation-for on a replacement Machine.
import { CAPI_FIELDS, readPeriodSeconds } from './fields.js';
import type { CapiApiVersion, KcpFacts, KcpRemediationSpec, RemediationData } from './model.js';
import { isObj, parseTime, ObjectReader } from './reader.js';
import { KCP_ANNOTATION_REMEDIATION_IN_PROGRESS } from './resources.js';

export function readKubeadmControlPlane(obj: unknown, v: CapiApiVersion): KcpFacts {
  const r: ObjectReader = ObjectReader.of(obj, 'KubeadmControlPlane');
  const f = CAPI_FIELDS[v].kubeadmControlPlane;
  const annotations = r.stringMap('metadata.annotations');
  const facts: KcpFacts = {
    name: r.requiredString('metadata.name'),
    namespace: r.requiredString('metadata.namespace'),
    uid: r.requiredString('metadata.uid'),
    initialized: r.bool(f.initialized) === true,
    remediation: remediationSpec(r, f),
  };
  const replicas = r.int('spec.replicas');
  if (replicas !== undefined) facts.replicas = replicas;
  const version = r.string('spec.version');
  if (version) facts.version = version;
  const rip = annotations[KCP_ANNOTATION_REMEDIATION_IN_PROGRESS];
  if (rip !== undefined) facts.remediationInProgress = readRemediationData(rip);
  return facts;
}

function remediationSpec(
  r: ObjectReader,
  f: (typeof CAPI_FIELDS)[CapiApiVersion]['kubeadmControlPlane'],
): KcpRemediationSpec {
  const out: KcpRemediationSpec = {};
  const maxRetry = r.int(f.maxRetry);
  const retry = readPeriodSeconds(r, f.retryPeriod);
  const minHealthy = readPeriodSeconds(r, f.minHealthyPeriod);
  if (maxRetry !== undefined) out.maxRetry = maxRetry;
  if (retry !== undefined) out.retryPeriodSeconds = retry;
  if (minHealthy !== undefined) out.minHealthyPeriodSeconds = minHealthy;
  return out;
}

/** What KCP wrote; a value that is not its JSON still says the annotation is there. */
export function readRemediationData(text: string): RemediationData {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return {};
  }
  if (!isObj(data)) return {};
  const out: RemediationData = {};
  if (typeof data['machine'] === 'string' && data['machine'] !== '') out.machine = data['machine'];
  // metav1.Time: RFC 3339, or null for the zero time (KCP then treats the periods as expired).
  const ts = typeof data['timestamp'] === 'string' ? parseTime(data['timestamp']) : undefined;
  if (ts !== undefined) out.timestamp = ts;
  if (typeof data['retryCount'] === 'number' && Number.isInteger(data['retryCount']))
    out.retryCount = data['retryCount'];
  return out;
}
