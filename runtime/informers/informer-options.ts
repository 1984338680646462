// What an Informer is given (informer.ts): the resource, how objects are read and kept, who hears of changes, and
// the timings of its watch.
import type { Logger } from 'winston';
import type { Json, Resource, RestClient } from '../client/rest.js';

export type InformerEvent = 'add' | 'update' | 'delete';

export interface InformerOptions<T> {
  rest: RestClient;
  resource: Resource;
  /** Human name for logs and metrics (e.g. `machines`). */
  name: string;
  namespace?: string;
  labelSelector?: string;
  log: Logger;
  /** A watch silent this long (no event, no bookmark) is restarted; health() fails past it without a live watch. */
  livenessMs: number;
  /** Parse once at the informer; must not throw. Default: `slim` (the JSON without managedFields). */
  transform?: (raw: Json) => T;
  /** An update whose value is `same` as the cached one emits nothing. */
  same?: (a: T, b: T) => boolean;
  onEvent: (type: InformerEvent, obj: T, old?: T) => void;
  /** Called on every restart of the list/watch (for joinguard_watch_restarts_total). */
  onRestart?: (why: string) => void;
  /** Called when the view becomes current (a sync completed) and when it stops being current (a failure). */
  onCurrent?: (current: boolean) => void;
  pageSize?: number;
  /** Timeout of each LIST page request. Default 60 s (kube-apiserver's own --request-timeout). */
  listTimeoutMs?: number;
  /** Sync by WatchList where the apiserver serves it. Default true. */
  watchList?: boolean;
  /** Monotonic ms; default performance.now. */
  monotonic?: () => number;
  /** [0, 1) for the back-off's jitter; default Math.random. */
  random?: () => number;
}

/** A watch that gets no byte for this long is dead: 3 missed bookmarks of kube-apiserver (~60 s each). */
export const DEFAULT_LIVENESS_MS = 3 * 60_000;
