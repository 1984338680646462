// KubeadmControlPlane (controlplane.cluster.x-k8s.io v1beta2 and v1beta1) -> KcpFacts. Field names from
// controlplane/kubeadm/v1beta2 and v1beta1 kubeadm_control_plane_types.go; the remediation-in-progress
// annotation's JSON is KCP's RemediationData (machine, timestamp, retryCount).
import { DurationError, parseDuration } from '../v1alpha1/duration.js';
import type { CapiApiVersion, KcpFacts, KcpRemediationSpec } from './model.js';
import { isObj, parseTime, ObjectReader } from './reader.js';
import { KCP_ANNOTATION_REMEDIATION_IN_PROGRESS } from './resources.js';

export function readKubeadmControlPlane(obj: unknown, v: CapiApiVersion): KcpFacts {
  const r: ObjectReader = ObjectReader.of(obj, 'KubeadmControlPlane');
  const annotations = r.stringMap('metadata.annotations');
  const facts: KcpFacts = {
    name: r.requiredString('metadata.name'),
    namespace: r.requiredString('metadata.namespace'),
    uid: r.requiredString('metadata.uid'),
    initialized: (v === 'v1beta2' ? r.bool('status.initialization.controlPlaneInitialized') : r.bool('status.initialized')) === true,
    remediation: v === 'v1beta2' ? remediationV1beta2(r) : remediationV1beta1(r),
  };
  const replicas = r.int('spec.replicas');
  if (replicas !== undefined) facts.replicas = replicas;
  const rip = annotations[KCP_ANNOTATION_REMEDIATION_IN_PROGRESS];
  if (rip !== undefined) facts.remediationInProgress = remediationData(rip);
  return facts;
}

function remediationV1beta2(r: ObjectReader): KcpRemediationSpec {
  const out: KcpRemediationSpec = {};
  const maxRetry = r.int('spec.remediation.maxRetry');
  const retry = r.int('spec.remediation.retryPeriodSeconds');
  const minHealthy = r.int('spec.remediation.minHealthyPeriodSeconds');
  if (maxRetry !== undefined) out.maxRetry = maxRetry;
  if (retry !== undefined) out.retryPeriodSeconds = retry;
  if (minHealthy !== undefined) out.minHealthyPeriodSeconds = minHealthy;
  return out;
}

/** v1beta1 spec.remediationStrategy carries metav1.Durations (`retryPeriod`, `minHealthyPeriod`). */
function remediationV1beta1(r: ObjectReader): KcpRemediationSpec {
  const out: KcpRemediationSpec = {};
  const maxRetry = r.int('spec.remediationStrategy.maxRetry');
  if (maxRetry !== undefined) out.maxRetry = maxRetry;
  const seconds = (path: string): number | undefined => {
    const s = r.string(path);
    if (s === undefined || s === '') return undefined;
    try {
      return parseDuration(s) / 1000;
    } catch (e) {
      r.fail(path, e instanceof DurationError ? e.message : String(e));
    }
  };
  const retry = seconds('spec.remediationStrategy.retryPeriod');
  const minHealthy = seconds('spec.remediationStrategy.minHealthyPeriod');
  if (retry !== undefined) out.retryPeriodSeconds = retry;
  if (minHealthy !== undefined) out.minHealthyPeriodSeconds = minHealthy;
  return out;
}

/** What KCP wrote; a value that is not its JSON still says a remediation is in progress. */
function remediationData(text: string): NonNullable<KcpFacts['remediationInProgress']> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return {};
  }
  if (!isObj(data)) return {};
  const out: NonNullable<KcpFacts['remediationInProgress']> = {};
  if (typeof data['machine'] === 'string' && data['machine'] !== '') out.machine = data['machine'];
  const ts = typeof data['timestamp'] === 'string' ? parseTime(data['timestamp']) : undefined;
  if (ts !== undefined) out.timestamp = ts;
  if (typeof data['retryCount'] === 'number' && Number.isInteger(data['retryCount'])) out.retryCount = data['retryCount'];
  return out;
}
