// The words every message is made of (DESIGN: "What users see"): names, evidence and runbook links, bounded
// whatever the fleet size, and sorted so that no message depends on the order the caches list Machines in.
import type { ClusterFacts } from '../../api/capi/model.js';
import type { FailureRecord } from '../../api/v1alpha1/types.js';
import { RUNBOOK_URL } from '../../api/v1alpha1/types.js';

/** The runbook section of a reason: an absolute, release-pinned link, readable from inside a cluster. */
export function runbook(reason: string): string {
  return `See ${RUNBOOK_URL}#${reason.toLowerCase()}.`;
}

export function endpointOf(cluster: ClusterFacts | undefined): string {
  const ep = cluster?.controlPlaneEndpoint;
  return ep === undefined || ep.host === '' ? '(not set)' : `${ep.host}:${ep.port}`;
}

/** "m1 (spec.bootstrap.configRef KubeadmConfig/m1, dataSecretName m1), ..." */
export function failureEvidence(failures: readonly FailureRecord[]): string {
  return failures
    .map((f) => {
      const bits = [
        `spec.bootstrap.configRef ${f.bootstrapConfig ?? '(none)'}`,
        `dataSecretName ${f.dataSecretName ?? '(none)'}`,
      ];
      if (f.owner !== undefined) bits.push(`owner ${f.owner.kind}/${f.owner.name}`);
      return `${f.machine} (${bits.join(', ')})`;
    })
    .join('; ');
}

/** "a, b, c, d, e and 3 more": names in a message stay bounded whatever the fleet size. */
export function listNames(names: readonly string[], max = 5): string {
  // Sorted: a message must not depend on the order the caches list Machines in (it would rewrite status for nothing).
  const shown = [...names].sort().slice(0, max).join(', ');
  return names.length > max ? `${shown} and ${names.length - max} more` : shown;
}

/** Bounded, so that a large fleet cannot make a condition message unbounded. */
export function said(notes: readonly string[]): string {
  const shown = notes.slice(0, 3).join('; ');
  return notes.length > 3 ? `${shown}; and ${notes.length - 3} more` : shown;
}

export function heldBack(machines: readonly string[]): string {
  return machines.length > 0 ? ` Held back: ${listNames(machines)}.` : '';
}

/** The one sort by name (code-unit order, as Go's sort.Strings): lists and messages never depend on cache order. */
export function byName<T extends { name: string }>(a: T, b: T): number {
  return compareText(a.name, b.name);
}

export function compareText(a: string, b: string): number {
  if (a < b) return -1;
  return a > b ? 1 : 0;
}
