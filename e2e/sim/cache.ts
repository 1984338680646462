// A list+watch cache of one resource, all namespaces (test-only). It re-lists on 410 Gone and after any
// error (with a short pause), re-watches when the server closes the stream, and tells the simulation
// which objects changed. Handlers run synchronously and must not throw; objects handed out are the
// cache's own: copy before mutating.
import { pathOf, type Json, type KubeClient, type Resource, type WatchEvent } from '../../hack/testenv/kube-client.js';

export type ChangeHandler = (type: 'upsert' | 'delete', obj: Json) => void;

const keyOf = (obj: Json) => `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name}`;

export class ResourceCache {
  private readonly store = new Map<string, Json>();
  private readonly abort = new AbortController();
  private resourceVersion = '';
  private synced!: Promise<void>;
  private loop?: Promise<void>;

  constructor(
    private readonly kube: KubeClient,
    readonly resource: Resource,
    private readonly onChange: ChangeHandler,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** Starts the list+watch loop; resolves after the first successful list. */
  start(): Promise<void> {
    let markSynced!: () => void;
    this.synced = new Promise<void>((resolve) => (markSynced = resolve));
    this.loop = this.run(markSynced);
    return this.synced;
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
  }

  get(namespace: string | undefined, name: string): Json | undefined {
    return this.store.get(`${namespace ?? ''}/${name}`);
  }

  list(namespace?: string): Json[] {
    const all = [...this.store.values()];
    return namespace === undefined ? all : all.filter((o) => o.metadata?.namespace === namespace);
  }

  private async run(markSynced: () => void): Promise<void> {
    const path = pathOf(this.resource);
    let needList = true;
    while (!this.abort.signal.aborted) {
      try {
        if (needList) {
          await this.relist(path);
          markSynced();
          needList = false;
        }
        let gone = false;
        await this.kube.watch(
          path,
          this.resourceVersion,
          (e) => {
            if (this.apply(e) === 'gone') gone = true;
          },
          this.abort.signal,
        );
        if (gone) needList = true;
      } catch (err) {
        if (this.abort.signal.aborted) break;
        this.onError(err);
        needList = true;
        await sleep(500, this.abort.signal);
      }
    }
  }

  private async relist(path: string): Promise<void> {
    const list = await this.kube.list(path);
    const seen = new Set<string>();
    for (const item of list.items) {
      const key = keyOf(item);
      seen.add(key);
      const old = this.store.get(key);
      this.store.set(key, item);
      if (old?.metadata?.resourceVersion !== item.metadata?.resourceVersion) this.onChange('upsert', item);
    }
    for (const [key, old] of this.store) {
      if (!seen.has(key)) {
        this.store.delete(key);
        this.onChange('delete', old);
      }
    }
    this.resourceVersion = list.metadata.resourceVersion ?? '';
  }

  private apply(e: WatchEvent): 'gone' | undefined {
    if (e.type === 'ERROR') return 'gone'; // 410 Gone or another watch error: list again
    const rv = e.object?.metadata?.resourceVersion as string | undefined;
    if (rv) this.resourceVersion = rv;
    if (e.type === 'BOOKMARK') return undefined;
    const key = keyOf(e.object);
    if (e.type === 'DELETED') {
      this.store.delete(key);
      this.onChange('delete', e.object);
    } else {
      this.store.set(key, e.object);
      this.onChange('upsert', e.object);
    }
    return undefined;
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', done);
      resolve();
    }, ms);
    const done = () => {
      clearTimeout(t);
      resolve();
    };
    signal?.addEventListener('abort', done, { once: true });
  });
}
