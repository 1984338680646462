// What the informers need of any Kubernetes object: its cache key, its resourceVersion as a comparable value,
// and the slimmed form cached by default.
type Json = Record<string, any>;

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** What the cache keeps of an object by default: everything but managedFields and the last-applied copy. */
export function slim(obj: Json): Json {
  const meta = obj.metadata;
  if (meta) {
    delete meta.managedFields;
    if (meta.annotations && LAST_APPLIED in meta.annotations) delete meta.annotations[LAST_APPLIED];
  }
  return obj;
}

export const keyOf = (obj: Json): string => `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;

/** etcd revisions as numbers (compact, comparable); anything else kept as its string. */
export type Version = number | string;
export const versionOf = (obj: Json): Version | undefined => {
  const rv = obj?.metadata?.resourceVersion;
  if (typeof rv !== 'string' || rv === '') return undefined;
  return /^\d{1,15}$/.test(rv) ? Number(rv) : rv;
};
/** True when `a` is known to be older than `b` (not comparable: false). */
export const older = (a: Version | undefined, b: Version | undefined): boolean =>
  typeof a === 'number' && typeof b === 'number' && a < b;
