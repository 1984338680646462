// A list+watch cache of one resource. Why not client-node's informer: it stops for good on any error but
// 410 and has been seen to go silent; it also keeps `managedFields`, which at thousands of Machines is most
// of the memory. This one re-lists on 410 and after any error (with back-off), re-watches when the server
// closes the stream, restarts a watch that stays silent past a liveness limit (the apiserver sends
// bookmarks about once a minute, so silence means a dead stream), and strips what the controller never reads.
import { createInterface } from 'node:readline';
import type { Logger } from 'winston';
import { ApiError, pathOf, type Json, type Resource, type RestClient } from './rest.js';

export type InformerEvent = 'add' | 'update' | 'delete';
export type InformerHandler = (type: InformerEvent, obj: Json, old?: Json) => void;

export interface InformerOptions {
  rest: RestClient;
  resource: Resource;
  /** Human name for logs and metrics (e.g. `machines`). */
  name: string;
  namespace?: string;
  labelSelector?: string;
  log: Logger;
  /** Restart a watch with no bytes for this long. */
  livenessMs: number;
  onEvent: InformerHandler;
  pageSize?: number;
}

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** What the cache keeps of an object: everything but managedFields and the last-applied copy. */
export function slim(obj: Json): Json {
  const meta = obj.metadata;
  if (meta) {
    delete meta.managedFields;
    if (meta.annotations && LAST_APPLIED in meta.annotations) delete meta.annotations[LAST_APPLIED];
  }
  return obj;
}

export const keyOf = (obj: Json): string => `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;

export class Informer {
  readonly store = new Map<string, Json>();
  private rv?: string;
  private stopped = false;
  private abortWatch?: () => void;
  private wake?: () => void;
  private syncedResolve!: () => void;
  readonly synced: Promise<void>;
  hasSynced = false;
  /** Times the list+watch had to start over after an error or a silent stream. */
  restarts = 0;

  constructor(private readonly o: InformerOptions) {
    this.synced = new Promise((r) => (this.syncedResolve = r));
  }

  start(): void {
    void this.loop();
  }

  stop(): void {
    this.stopped = true;
    this.abortWatch?.();
    this.wake?.();
  }

  list(): Json[] {
    return [...this.store.values()];
  }

  private async loop(): Promise<void> {
    let backoff = 500;
    while (!this.stopped) {
      try {
        if (this.rv === undefined) await this.relist();
        backoff = 500;
        await this.watch();
      } catch (e) {
        if (this.stopped) return;
        const gone = e instanceof ApiError && e.code === 410;
        this.rv = undefined;
        this.restarts++;
        if (gone) {
          this.o.log.debug('watch expired, re-listing', { informer: this.o.name });
          continue;
        }
        this.o.log.warn('list/watch failed, restarting', { informer: this.o.name, error: (e as Error).message, retryInMs: backoff });
        await this.sleep(backoff);
        backoff = Math.min(backoff * 2, 30_000);
      }
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

  private async relist(): Promise<void> {
    const seen = new Map<string, Json>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = await this.o.rest.get(this.path(), {
        limit: this.o.pageSize ?? 500,
        continue: cont,
        labelSelector: this.o.labelSelector,
      });
      for (const item of (page.items ?? []) as Json[]) seen.set(keyOf(item), slim(item));
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? rv;
    } while (cont && !this.stopped);
    // Tell the handlers what changed while no watch was open.
    for (const [k, old] of this.store) if (!seen.has(k)) this.emit('delete', old);
    for (const [k, obj] of seen) {
      const old = this.store.get(k);
      this.store.set(k, obj);
      if (!old) this.emit('add', obj);
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.emit('update', obj, old);
    }
    for (const k of [...this.store.keys()]) if (!seen.has(k)) this.store.delete(k);
    this.rv = rv;
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.syncedResolve();
    }
  }

  private async watch(): Promise<void> {
    // Server-side timeouts spread over 4-6 minutes, so that many informers do not re-watch at once.
    const timeoutSeconds = 240 + Math.floor(Math.random() * 120);
    const { res, abort } = await this.o.rest.open('GET', this.path(), {
      query: {
        watch: true,
        resourceVersion: this.rv,
        allowWatchBookmarks: true,
        timeoutSeconds,
        labelSelector: this.o.labelSelector,
      },
    });
    if (res.statusCode !== 200) {
      res.resume();
      throw new ApiError(res.statusCode ?? 0, 'WATCH', this.path(), res.statusMessage ?? '');
    }
    this.abortWatch = abort;
    await new Promise<void>((resolve, reject) => {
      let failure: Error | undefined;
      let liveness: NodeJS.Timeout | undefined;
      const arm = () => {
        clearTimeout(liveness);
        liveness = setTimeout(() => {
          failure = new Error(`watch silent for ${this.o.livenessMs} ms`);
          abort();
        }, this.o.livenessMs);
      };
      arm();
      res.on('data', arm);
      const lines = createInterface({ input: res });
      lines.on('line', (line) => {
        if (failure || line.trim() === '') return;
        try {
          this.onWatchEvent(JSON.parse(line) as Json);
        } catch (e) {
          failure = e as Error;
          abort();
        }
      });
      const finish = () => {
        clearTimeout(liveness);
        this.abortWatch = undefined;
        if (failure) reject(failure);
        else resolve();
      };
      lines.on('close', finish);
      // An aborted stream errors on both; stop() and liveness aborts come through here.
      res.on('error', (e) => (failure ??= e));
      lines.on('error', (e) => (failure ??= e));
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
        slim(obj);
        const k = keyOf(obj);
        const old = this.store.get(k);
        this.store.set(k, obj);
        this.rv = obj.metadata?.resourceVersion ?? this.rv;
        this.emit(old ? 'update' : 'add', obj, old);
        return;
      }
      case 'DELETED': {
        const k = keyOf(obj);
        const old = this.store.get(k) ?? slim(obj);
        this.store.delete(k);
        this.rv = obj.metadata?.resourceVersion ?? this.rv;
        this.emit('delete', old);
        return;
      }
    }
  }

  private emit(type: InformerEvent, obj: Json, old?: Json): void {
    try {
      this.o.onEvent(type, obj, old);
    } catch (e) {
      // A handler only enqueues keys; if one throws anyway, the cache must stay alive.
      this.o.log.error('informer handler threw', { informer: this.o.name, error: (e as Error).message });
    }
  }

  /** Puts a fresher copy (from a write's response or a live read) into the cache. */
  upsert(obj: Json): void {
    const k = keyOf(obj);
    const old = this.store.get(k);
    if (old && Number(old.metadata?.resourceVersion) > Number(obj.metadata?.resourceVersion)) return;
    this.store.set(k, slim(obj));
  }
}
