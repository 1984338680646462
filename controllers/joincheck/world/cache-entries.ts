// What the caches hold (cache.ts): one entry per object — its facts, or why it could not be read — filed under its
// Cluster; a check with its parsed settings; and the options the caches are built with.
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'winston';
import type { CapiApiVersion } from '../../../api/capi/model.js';
import type { CheckSettings } from '../../../api/v1alpha1/types.js';
import type { Json, RestClient } from '../../../runtime/client/rest.js';

const CLUSTER_LABEL = 'cluster.x-k8s.io/cluster-name';

/** One cached object: its facts, or why it could not be read; and the Cluster it belongs to. */
export type Entry<F> =
  | { key: string; cluster?: string; facts: F; malformed?: undefined }
  | { key: string; cluster?: string; facts?: undefined; malformed: { name: string; uid?: string; error: string } };

/** A check as cached: the raw object (its status is written back whole) and its parsed settings. */
export interface CheckEntry {
  raw: Json;
  settings?: CheckSettings;
  settingsError?: string;
}

export interface CacheOptions {
  rest: RestClient;
  apiVersion: CapiApiVersion;
  kubeadm: { controlPlane: boolean; bootstrap: boolean };
  namespace?: string;
  watchFilter?: string;
  log: Logger;
  livenessMs: number;
  /** A check needs a reconcile (by key). */
  enqueue: (key: string) => void;
  onRestart?: (informer: string, why: string) => void;
  /** An informer's view stopped being current (a list/watch failed) or is current again (a sync completed). */
  onCurrent?: (informer: string, current: boolean) => void;
}

/** The Cluster an object belongs to: spec.clusterName or the cluster-name label. */
export function clusterOf(obj: Json): string | undefined {
  const spec = obj?.spec?.clusterName;
  if (typeof spec === 'string' && spec !== '') return spec;
  const label = obj?.metadata?.labels?.[CLUSTER_LABEL];
  return typeof label === 'string' && label !== '' ? label : undefined;
}

export const clusterKey = (namespace: string, cluster: string): string => `${namespace}/${cluster}`;

/**
 * Facts equal but for the resourceVersion and the raw conditions a write is built from (kept current in the store,
 * they decide nothing): nothing the controller reads changed.
 */
export function sameEntry<F>(a: Entry<F>, b: Entry<F>): boolean {
  if (a.malformed || b.malformed) return isDeepStrictEqual(a, b);
  const decides = (f: F) => ({ ...(f as object), resourceVersion: '', conditions: undefined });
  return a.cluster === b.cluster && isDeepStrictEqual(decides(a.facts), decides(b.facts));
}
