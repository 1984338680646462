// A list+watch cache of one resource that cannot go blind. Why not client-node's informer: it stops for good
// on any error but 410, has been seen to go silent, and keeps whole objects. Here:
// - a watch ends on ANY end of its response or request (end, close, error, abort, the liveness abort), once;
//   it never waits on a readline `close` (Node 24 does not emit it for an aborted response);
// - then it re-watches from the last resourceVersion with client-go's back-off (0.8 s doubling to 30 s,
//   jitter x1-2, reset after 2 min without failure); a 410 re-lists at once; a LIST has a request timeout;
// - a watch with no bytes for `livenessMs` is aborted (kube-apiserver v1.36 sends a bookmark about every 60 s to a
//   watch that asks for them, so silence past the bound means a dead stream) and the informer RE-LISTS at once,
//   unlike client-go, which re-watches from its resourceVersion: a path that silences watches (a proxy, a load
//   balancer) would silence that one too, and a list is the only read that shows the world through it;
// - health() is not ok while nothing came for longer than `livenessMs`: no list answered, no byte on a watch
//   (a watch answered 200 and then silent is not evidence of a current view);
// - each object is turned into its cached form once, here (`transform`), and an update that changes nothing
//   the controller reads (`same`) emits nothing.
import type { IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type { Logger } from 'winston';
import { ApiError, pathOf, reasonOf, statusMessage, type Json, type Resource, type RestClient } from './rest.js';

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
  pageSize?: number;
  /** Timeout of each LIST page request. Default 60 s (kube-apiserver's own --request-timeout). */
  listTimeoutMs?: number;
  /** Monotonic ms; default performance.now. */
  monotonic?: () => number;
}

/** A watch that gets no byte for this long is dead: 3 missed bookmarks of kube-apiserver (~60 s each). */
export const DEFAULT_LIVENESS_MS = 3 * 60_000;

/** client-go's reflector back-off and watch timeout. */
const BACKOFF = { initialMs: 800, capMs: 30_000, resetMs: 120_000 } as const;
const MIN_WATCH_TIMEOUT_S = 300;

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
type Version = number | string;
const versionOf = (obj: Json): Version | undefined => {
  const rv = obj?.metadata?.resourceVersion;
  if (typeof rv !== 'string' || rv === '') return undefined;
  return /^\d{1,15}$/.test(rv) ? Number(rv) : rv;
};
/** True when `a` is known to be older than `b` (not comparable: false). */
const older = (a: Version | undefined, b: Version | undefined): boolean => typeof a === 'number' && typeof b === 'number' && a < b;

class WatchEnded extends Error {}
/** A watch aborted for silence (no header or no byte within the liveness bound). */
class WatchSilent extends Error {}

export class Informer<T = Json> {
  readonly store = new Map<string, T>();
  /** key -> resourceVersion of the cached value (the value itself may no longer carry it). */
  private readonly versions = new Map<string, Version>();
  private rv?: string;
  private stopped = false;
  private abortWatch?: (why: Error) => void;
  private wake?: () => void;
  private syncedResolve!: () => void;
  readonly synced: Promise<void>;
  hasSynced = false;
  /** Times the list/watch had to start over after an error, an expiry or a silent stream. */
  restarts = 0;
  /** Last evidence that the cache is current: a byte on the watch, a watch opened, a LIST page. */
  private liveAt: number;
  private readonly now: () => number;
  private readonly transform: (raw: Json) => T;

  constructor(private readonly o: InformerOptions<T>) {
    this.synced = new Promise((r) => (this.syncedResolve = r));
    this.now = o.monotonic ?? (() => performance.now());
    this.liveAt = this.now();
    this.transform = o.transform ?? ((raw) => slim(raw) as T);
  }

  start(): void {
    this.liveAt = this.now();
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.abortWatch?.(new WatchEnded('informer stopped'));
    this.wake?.();
  }

  list(): T[] {
    return [...this.store.values()];
  }

  /** ok=false when nothing came (a list answered, a byte on a watch) for longer than livenessMs. */
  health(): { ok: boolean; why?: string } {
    const silentMs = this.now() - this.liveAt;
    if (silentMs <= this.o.livenessMs) return { ok: true };
    return { ok: false, why: `informer ${this.o.name}: no live watch for ${Math.round(silentMs / 1000)} s (bound ${Math.round(this.o.livenessMs / 1000)} s)` };
  }

  private async loop(): Promise<void> {
    let failures = 0;
    let lastFailure = -Infinity;
    while (!this.stopped) {
      try {
        if (this.rv === undefined) await this.relist();
        await this.watch();
        continue; // the server ended the watch (its timeout): watch again from rv
      } catch (e) {
        if (this.stopped) return;
        const err = e as Error;
        if (err instanceof ApiError && err.code === 410) {
          this.rv = undefined;
          this.restart(`expired: ${err.reason}`, 'info', {});
          continue;
        }
        if (err instanceof WatchSilent) {
          // A list now, without back-off: its answer is the liveness evidence; a failed list backs off below.
          this.rv = undefined;
          this.restart(`${err.message}; re-listing`, 'warn', {});
          continue;
        }
        if (this.now() - lastFailure > BACKOFF.resetMs) failures = 0;
        lastFailure = this.now();
        const base = Math.min(BACKOFF.initialMs * 2 ** failures, BACKOFF.capMs);
        const delay = Math.round(base * (1 + Math.random()));
        failures++;
        this.restart(err.message, 'warn', { retryInMs: delay });
        await this.sleep(delay);
      }
    }
  }

  private restart(why: string, level: 'info' | 'warn', fields: Json): void {
    this.restarts++;
    this.o.log[level]('list/watch restarting', { informer: this.o.name, reason: why, ...fields });
    try {
      this.o.onRestart?.(why);
    } catch (e) {
      this.o.log.error('informer onRestart threw', { informer: this.o.name, error: (e as Error).message });
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  private path(): string {
    return pathOf(this.o.resource, this.o.namespace);
  }

  private convert(raw: Json): T | undefined {
    try {
      return this.transform(raw);
    } catch (e) {
      this.o.log.error('informer transform threw; object left out of the cache', { informer: this.o.name, object: keyOf(raw), error: (e as Error).message });
      return undefined;
    }
  }

  private async relist(): Promise<void> {
    const seen = new Map<string, { value: T; version: Version | undefined }>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = await this.o.rest.get(
        this.path(),
        { limit: this.o.pageSize ?? 500, continue: cont, labelSelector: this.o.labelSelector },
        { timeoutMs: this.o.listTimeoutMs ?? 60_000 },
      );
      this.liveAt = this.now();
      for (const item of (page.items ?? []) as Json[]) {
        const version = versionOf(item);
        const key = keyOf(item);
        const value = this.convert(item);
        if (value !== undefined) seen.set(key, { value, version });
      }
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont && !this.stopped);
    if (this.stopped) return;
    // Tell the handlers what changed while no watch was open.
    for (const [k, old] of this.store) {
      if (seen.has(k)) continue;
      this.store.delete(k);
      this.versions.delete(k);
      this.emit('delete', old);
    }
    for (const [k, { value, version }] of seen) this.put(k, value, version, true);
    this.rv = rv;
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.syncedResolve();
    }
  }

  /** Caches a value and emits add/update, unless an upsert already cached a newer version. */
  private put(key: string, value: T, version: Version | undefined, relisted: boolean): void {
    const old = this.store.get(key);
    const had = this.versions.get(key);
    if (old !== undefined && older(version, had)) return;
    this.store.set(key, value);
    if (version === undefined) this.versions.delete(key);
    else this.versions.set(key, version);
    if (old === undefined) this.emit('add', value);
    else if (relisted && version !== undefined && version === had) return;
    else if (!this.o.same?.(old, value)) this.emit('update', value, old);
  }

  private async watch(): Promise<void> {
    // client-go's watch timeout: random in [5, 10] minutes, so informers do not all re-watch at once.
    const timeoutSeconds = MIN_WATCH_TIMEOUT_S + Math.floor(Math.random() * MIN_WATCH_TIMEOUT_S);
    const ac = new AbortController();
    const opened = this.now();
    let events = 0;
    // One timer bounds the wait for the response headers and then each silence on the stream.
    let liveness: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(liveness);
      liveness = setTimeout(() => ac.abort(new WatchSilent(`watch silent for ${this.o.livenessMs} ms`)), this.o.livenessMs);
    };
    this.abortWatch = (why) => ac.abort(why);
    arm();
    let res: IncomingMessage;
    try {
      ({ res } = await this.o.rest.open('GET', this.path(), {
        query: { watch: true, resourceVersion: this.rv, allowWatchBookmarks: true, timeoutSeconds, labelSelector: this.o.labelSelector },
        signal: ac.signal,
      }));
    } catch (e) {
      clearTimeout(liveness);
      this.abortWatch = undefined;
      throw ac.signal.aborted ? reasonOf(ac.signal) : e;
    }
    if (res.statusCode !== 200) {
      clearTimeout(liveness);
      this.abortWatch = undefined;
      const body = await readSome(res);
      throw new ApiError(res.statusCode ?? 0, 'WATCH', this.path(), body);
    }
    arm();
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      let buffered = '';
      const decoder = new StringDecoder('utf8');
      const finish = (failure?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(liveness);
        this.abortWatch = undefined;
        if (!res.destroyed) res.destroy();
        if (failure) reject(failure);
        else resolve();
      };
      const onLine = (line: string) => {
        if (line.trim() === '') return;
        events++;
        this.onWatchEvent(JSON.parse(line) as Json);
      };
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        this.liveAt = this.now();
        arm();
        buffered += decoder.write(chunk);
        let nl: number;
        try {
          while (!settled && (nl = buffered.indexOf('\n')) >= 0) {
            const line = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 1);
            onLine(line);
          }
        } catch (e) {
          finish(e as Error);
        }
      });
      res.once('end', () => {
        try {
          onLine(buffered + decoder.end());
        } catch (e) {
          return finish(e as Error);
        }
        // client-go's VeryShortWatchError: a watch closed at once with nothing in it is a failure (back-off).
        if (events === 0 && this.now() - opened < 1_000) finish(new Error('very short watch: closed within a second with no event'));
        else finish();
      });
      res.once('error', (e) => finish(ac.signal.aborted ? reasonOf(ac.signal) : e));
      res.once('aborted', () => finish(new Error('watch response aborted')));
      res.once('close', () => finish(ac.signal.aborted ? reasonOf(ac.signal) : new Error('watch stream closed before its end')));
      ac.signal.addEventListener('abort', () => finish(reasonOf(ac.signal)), { once: true });
    });
  }

  private onWatchEvent(ev: Json): void {
    const obj = ev.object as Json;
    switch (ev.type) {
      case 'BOOKMARK':
        this.rv = obj?.metadata?.resourceVersion ?? this.rv;
        return;
      case 'ERROR': {
        const code = typeof obj?.code === 'number' ? obj.code : 0;
        throw new ApiError(code, 'WATCH', this.path(), String(obj?.message ?? 'watch error'));
      }
      case 'ADDED':
      case 'MODIFIED': {
        const version = versionOf(obj);
        const key = keyOf(obj);
        this.rv = obj.metadata?.resourceVersion ?? this.rv;
        const value = this.convert(obj);
        if (value !== undefined) this.put(key, value, version, false);
        return;
      }
      case 'DELETED': {
        const k = keyOf(obj);
        this.rv = obj.metadata?.resourceVersion ?? this.rv;
        const old = this.store.get(k) ?? this.convert(obj);
        this.store.delete(k);
        this.versions.delete(k);
        if (old !== undefined) this.emit('delete', old);
        return;
      }
    }
  }

  private emit(type: InformerEvent, obj: T, old?: T): void {
    try {
      this.o.onEvent(type, obj, old);
    } catch (e) {
      // A handler only enqueues keys; if one throws anyway, the cache must stay alive.
      this.o.log.error('informer handler threw', { informer: this.o.name, error: (e as Error).message });
    }
  }

  /** A fresher raw object (a write's response, a live read) into the cache if its resourceVersion is newer. */
  upsert(raw: Json): void {
    const key = keyOf(raw);
    const version = versionOf(raw);
    const had = this.versions.get(key);
    if (this.store.has(key) && (version === undefined || version === had || older(version, had))) return;
    const value = this.convert(raw);
    if (value === undefined) return;
    this.store.set(key, value);
    if (version === undefined) this.versions.delete(key);
    else this.versions.set(key, version);
  }
}

/** Up to 200 characters of an error body, for the message; never waits past the response's own end. */
function readSome(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const done = () => resolve(statusMessage(text));
    res.on('data', (c: Buffer) => (text.length < 4096 ? (text += c.toString('utf8')) : undefined));
    res.once('end', done);
    res.once('error', done);
    res.once('close', done);
  });
}
