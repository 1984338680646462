// Message pieces shared by the rules: runbook links and the evidence (Machines, bootstrap config, data
// secret, endpoint) that a user needs to act on a condition without reading the controller's logs.
import type { ClusterFacts } from '../../api/capi/model.js';
import type { FailureRecord } from '../../api/v1alpha1/types.js';
import { RUNBOOK_URL } from '../../api/v1alpha1/types.js';

/** `docs/runbook.md#<reason in lower case>`: the runbook has one section per Progressing reason. */
export function runbook(reason: string): string {
  return `See ${RUNBOOK_URL}#${reason.toLowerCase()}.`;
}

export function endpointOf(cluster: ClusterFacts | undefined): string {
  const ep = cluster?.controlPlaneEndpoint;
  return ep === undefined || ep.host === '' ? '(not set)' : `${ep.host}:${ep.port}`;
}

/** "m1 (spec.bootstrap.configRef KubeadmConfig/m1, dataSecretName m1), ..." */
export function failureEvidence(failures: FailureRecord[]): string {
  return failures
    .map((f) => {
      const bits: string[] = [];
      bits.push(`spec.bootstrap.configRef ${f.bootstrapConfig ?? '(none)'}`);
      bits.push(`dataSecretName ${f.dataSecretName ?? '(none)'}`);
      if (f.owner !== undefined) bits.push(`owner ${f.owner.kind}/${f.owner.name}`);
      return `${f.machine} (${bits.join(', ')})`;
    })
    .join('; ');
}

/** "a, b, c, d, e and 3 more": names in a message stay bounded whatever the fleet size. */
export function listNames(names: string[], max = 5): string {
  const shown = names.slice(0, max).join(', ');
  return names.length > max ? `${shown} and ${names.length - max} more` : shown;
}
