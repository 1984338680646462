// A list+watch cache of one resource that cannot go blind. Why not client-node's informer: it stops for good
// on any error but 410, has been seen to go silent, and keeps whole objects. Here:
// - the view is built by WatchList where the apiserver serves it (one watch with sendInitialEvents: every object
//   as an ADDED event, then a bookmark that says the initial events ended, then the watch goes on), else by a paged
//   LIST; either way one object at a time (json-items.ts), never a page as one string (issue 18);
// - the view is CURRENT once such a sync completed, and stops being current at any failure of the list or the
//   watch; the next attempt syncs again (a re-watch from the last resourceVersion would not say when it caught
//   up). Decisions wait for every informer they read to be current (the controller's gate). The server's normal
//   end of a watch (its timeout) keeps the view current and re-watches from the last resourceVersion;
// - a watch ends on ANY end of its response or request, once (watch-stream.ts);
// - after a failure it waits as backoff.ts says (at most 4 s; Retry-After honoured; a 410 or a silent watch syncs
//   at once the first time); a LIST page has a request timeout;
// - a watch with no bytes for `livenessMs` is aborted (kube-apiserver v1.36 sends a bookmark about every 60 s to a
//   watch that asks for them, so silence past the bound means a dead stream) and the informer syncs again;
// - health() is not ok while nothing came for longer than `livenessMs`: no list answered, no byte on a watch
//   (a watch answered 200 and then silent is not evidence of a current view);
// - each object is turned into its cached form once, here (`transform`), and an update that changes nothing
//   the controller reads (`same`) emits nothing.
import { Backoff } from './backoff.js';
import { JsonItemScanner } from '../client/json-items.js';
import { ApiError, pathOf, type Json } from '../client/rest.js';
import { keyOf, older, slim, versionOf, type Version } from '../client/objects.js';
import { readWatch, WatchSilent } from './watch-stream.js';

import type { InformerEvent, InformerOptions } from './informer-options.js';

/** client-go's watch timeout: from 5 minutes (to 10). */
const MIN_WATCH_TIMEOUT_S = 300;
/** The bookmark that ends a WatchList's initial events (metav1.InitialEventsAnnotationKey). */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

class WatchEnded extends Error {}
/** The apiserver does not serve WatchList (refused, or a watch without the initial events' end). */
class WatchListRefused extends Error {}

/** A sync in progress: what it has seen so far. */
type Seen<T> = Map<string, { value: T; version: Version | undefined }>;

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
  /** The view is current: a sync completed and nothing failed since; else since when it is not. */
  private isCurrent = false;
  private behindSince: number;
  /** Times the list/watch had to start over after an error, an expiry or a silent stream. */
  restarts = 0;
  /** Syncs completed, by how (WatchList or paged LIST). */
  readonly syncs = { watchList: 0, list: 0 };
  /** The apiserver refused WatchList: lists from now on. */
  private watchListRefused = false;
  /** The last failure was a silent watch: the next sync is a LIST (a path that silences watches silences WatchList). */
  private listNext = false;
  /** Last evidence that the cache is current: a byte on the watch, a LIST chunk. */
  private liveAt: number;
  private readonly now: () => number;
  private readonly transform: (raw: Json) => T;
  private readonly backoff: Backoff;

  constructor(private readonly o: InformerOptions<T>) {
    this.synced = new Promise((r) => (this.syncedResolve = r));
    this.now = o.monotonic ?? (() => performance.now());
    this.liveAt = this.now();
    this.behindSince = this.liveAt;
    this.transform = o.transform ?? ((raw) => slim(raw) as T);
    this.backoff = new Backoff(this.now, o.random ?? Math.random);
    if (o.watchList === false) this.watchListRefused = true;
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

  /** A sync (WatchList or LIST) completed and no list or watch failed since. */
  get current(): boolean {
    return this.isCurrent;
  }

  /**
   * ok=false when nothing came (a list answered, a byte on a watch) for longer than livenessMs, or when no sync
   * completed for that long since a failure though bytes came (a list whose later pages fail: decisions wait).
   */
  health(): { ok: boolean; why?: string } {
    const silentMs = this.now() - this.liveAt;
    const s = (ms: number) => Math.round(ms / 1000);
    if (silentMs > this.o.livenessMs)
      return {
        ok: false,
        why: `informer ${this.o.name}: no live watch for ${s(silentMs)} s (bound ${s(this.o.livenessMs)} s)`,
      };
    const behindMs = this.isCurrent || !this.hasSynced ? 0 : this.now() - this.behindSince;
    if (behindMs > this.o.livenessMs)
      return {
        ok: false,
        why:
          `informer ${this.o.name}: not re-listed for ${s(behindMs)} ` +
          `s since its list/watch failed (bound ${s(this.o.livenessMs)} ` +
          `s)`,
      };
    return { ok: true };
  }

  private async loop(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.isCurrent) {
          const listNext = this.listNext;
          this.listNext = false;
          if (!this.watchListRefused && !listNext && (await this.watch(true))) continue;
          if (this.stopped) return;
          await this.relist();
        }
        await this.watch(false);
        // The server ended the watch (its timeout): the view is still current; watch again from rv.
      } catch (e) {
        if (this.stopped) return;
        this.setCurrent(false);
        const err = e as Error;
        const gone = err instanceof ApiError && err.code === 410;
        if (gone) this.rv = undefined;
        this.listNext = err instanceof WatchSilent;
        const retryAfterS = err instanceof ApiError ? err.retryAfterS : undefined;
        const delay = this.backoff.next({
          immediateFirst: gone || err instanceof WatchSilent,
          ...(retryAfterS !== undefined ? { retryAfterS } : {}),
        });
        let why = err instanceof WatchSilent ? `${err.message}; re-listing` : err.message;
        if (gone) why = `expired: ${err.reason}`;
        this.restart(why, gone ? 'info' : 'warn', { retryInMs: delay });
        if (delay > 0) await this.sleep(delay);
      }
    }
  }

  private setCurrent(v: boolean): void {
    if (this.isCurrent === v) return;
    this.isCurrent = v;
    if (!v) this.behindSince = this.now();
    try {
      this.o.onCurrent?.(v);
    } catch (e) {
      this.o.log.error('informer onCurrent threw', { informer: this.o.name, error: (e as Error).message });
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
      this.o.log.error('informer transform threw; object left out of the cache', {
        informer: this.o.name,
        object: keyOf(raw),
        error: (e as Error).message,
      });
      return undefined;
    }
  }

  private see(seen: Seen<T>, raw: Json): void {
    const value = this.convert(raw);
    if (value !== undefined) seen.set(keyOf(raw), { value, version: versionOf(raw) });
  }

  /** A paged LIST, each page read one object at a time. */
  private async relist(): Promise<void> {
    const seen: Seen<T> = new Map();
    let cont: string | undefined;
    let rv = '';
    do {
      let meta: Json | undefined;
      const scanner = new JsonItemScanner({
        mode: 'list',
        onItem: (item: Json) => this.see(seen, item),
        onField: (k, v) => (k === 'metadata' ? (meta = v as Json) : undefined),
      });
      await this.o.rest.getStream(
        this.path(),
        { limit: this.o.pageSize ?? 500, continue: cont, labelSelector: this.o.labelSelector },
        { timeoutMs: this.o.listTimeoutMs ?? 60_000, retries: 0 },
        (chunk) => {
          this.liveAt = this.now();
          scanner.write(chunk);
        },
      );
      scanner.end();
      this.liveAt = this.now();
      cont = meta?.continue || undefined;
      rv = meta?.resourceVersion ?? rv;
    } while (cont && !this.stopped);
    if (this.stopped) return;
    this.syncs.list++;
    this.replace(seen, rv);
  }

  /** The view is what a sync saw: tell the handlers what changed while no watch was open. */
  private replace(seen: Seen<T>, rv: string): void {
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
    this.setCurrent(true);
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

  /**
   * A watch until the server ends it. `initial`: a WatchList (sendInitialEvents) that syncs the view first; false
   * when the apiserver does not serve WatchList (the caller lists instead). Throws on every other end.
   */
  private async watch(initial: boolean): Promise<boolean> {
    const opened = this.now();
    // The initial events of a WatchList: the view is replaced once their end is announced.
    let sync: Seen<T> | undefined = initial ? new Map() : undefined;
    const onEvent = (ev: Json) => {
      if (sync === undefined) return this.onWatchEvent(ev);
      const obj = ev.object as Json;
      if (ev.type === 'BOOKMARK') {
        if (obj?.metadata?.annotations?.[INITIAL_EVENTS_END] !== 'true')
          throw new WatchListRefused('a bookmark before the end of the initial events');
        const seen = sync;
        sync = undefined;
        this.syncs.watchList++;
        this.replace(seen, obj.metadata.resourceVersion ?? this.rv ?? '');
      } else if (ev.type === 'ADDED' || ev.type === 'MODIFIED') this.see(sync, obj);
      else if (ev.type === 'DELETED') sync.delete(keyOf(obj));
      else this.onWatchEvent(ev); // ERROR throws
    };
    let events: number;
    try {
      ({ events } = await readWatch({
        rest: this.o.rest,
        path: this.path(),
        query: {
          watch: true,
          resourceVersion: this.rv,
          allowWatchBookmarks: true,
          // client-go's watch timeout: random in [5, 10] minutes, so informers do not all re-watch at once.
          timeoutSeconds: MIN_WATCH_TIMEOUT_S + Math.floor(Math.random() * MIN_WATCH_TIMEOUT_S),
          labelSelector: this.o.labelSelector,
          ...(initial ? { sendInitialEvents: true, resourceVersionMatch: 'NotOlderThan' } : {}),
        },
        livenessMs: this.o.livenessMs,
        now: this.now,
        onEvent,
        onBytes: () => (this.liveAt = this.now()),
        setAbort: (abort) => (this.abortWatch = abort),
      }));
    } catch (e) {
      // An apiserver with the WatchList gate off answers 422 (Invalid: sendInitialEvents is forbidden); older ones 400.
      if (initial && e instanceof ApiError && (e.code === 422 || e.code === 400)) return this.refuseWatchList(e.reason);
      if (e instanceof WatchListRefused) return this.refuseWatchList(e.message);
      throw e;
    }
    // client-go's VeryShortWatchError: a watch closed at once with nothing in it is a failure (back-off).
    if (events === 0 && this.now() - opened < 1_000)
      throw new Error('very short watch: closed within a second with no event');
    if (sync !== undefined) throw new Error('the watch ended before its initial events did');
    return true;
  }

  private refuseWatchList(why: string): false {
    this.watchListRefused = true;
    this.o.log.info('The apiserver does not serve WatchList; listing in pages instead', {
      informer: this.o.name,
      reason: why,
    });
    return false;
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
