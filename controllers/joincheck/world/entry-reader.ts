// How each informer keeps an object: read into its facts once, at the informer (the raw JSON is dropped).
import { MalformedObjectError, type CapiApiVersion } from '../../../api/capi/model.js';
import { capiResource, type CapiKind } from '../../../api/capi/resources.js';
import type { Json, Resource } from '../../../runtime/client/rest.js';
import { keyOf } from '../../../runtime/client/objects.js';
import { clusterOf, type Entry } from './cache-entries.js';

export const namespaced = (k: CapiKind, v: CapiApiVersion): Resource => ({ ...capiResource(k, v), namespaced: true });

/** An informer's transform: the object read into its facts once, or kept as malformed with the reader's error. */
export function entryReader<F>(kind: string, apiVersion: string, reader: (obj: Json) => F): (raw: Json) => Entry<F> {
  return (raw) => {
    const key = keyOf(raw);
    const cluster = clusterOf(raw);
    try {
      return {
        key,
        ...(cluster ? { cluster } : {}),
        facts: reader(raw.apiVersion && raw.kind ? raw : { apiVersion, kind, ...raw }),
      };
    } catch (e) {
      const error = e instanceof MalformedObjectError ? e.message : `${kind} ${key}: ${(e as Error).message}`;
      const uid = typeof raw?.metadata?.uid === 'string' ? raw.metadata.uid : undefined;
      return {
        key,
        ...(cluster ? { cluster } : {}),
        malformed: { name: String(raw?.metadata?.name ?? '(unnamed)'), ...(uid ? { uid } : {}), error },
      };
    }
  };
}
