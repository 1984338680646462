// A small JSON client for the simulation (test-only). It speaks plain REST over node:https with the
// credentials of a @kubernetes/client-node KubeConfig, so that the sim controls every detail it relies
// on: subresources (/status), merge patches with a resourceVersion guard, 404/409 as values, and watch
// streams it can abort and restart itself.
import https from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

export type Json = Record<string, any>;

export interface KubeList {
  items: Json[];
  metadata: { resourceVersion?: string; continue?: string };
}

/** A non-2xx answer of the apiserver (or a transport error, code 0). */
export class KubeError extends Error {
  constructor(
    readonly code: number,
    readonly method: string,
    readonly path: string,
    readonly body: string,
  ) {
    super(`${method} ${path}: ${code} ${summarize(body)}`);
    this.name = 'KubeError';
  }
}

function summarize(body: string): string {
  try {
    const status = JSON.parse(body) as Json;
    if (typeof status.message === 'string') return status.message;
  } catch {
    // not JSON
  }
  return body.slice(0, 300);
}

export const isNotFound = (err: unknown) => err instanceof KubeError && err.code === 404;
export const isConflict = (err: unknown) => err instanceof KubeError && err.code === 409;

/** Where a resource lives: core (`group: ''`) or a named group. */
export interface Resource {
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
}

/** The REST path of a collection, an object, or an object's subresource. */
export function pathOf(r: Resource, namespace?: string, name?: string, sub?: string): string {
  const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const obj = name ? `/${encodeURIComponent(name)}` : '';
  return `${base}${ns}/${r.plural}${obj}${name && sub ? `/${sub}` : ''}`;
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Json;
}

export class Kube {
  private constructor(
    readonly server: URL,
    private readonly agent: https.Agent,
    private readonly requestTimeoutMs: number,
  ) {}

  /** A client with the current context's cluster and user of kc. */
  static async from(kc: KubeConfig, requestTimeoutMs = 15_000): Promise<Kube> {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('KubeConfig has no current cluster');
    const opts: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    const agent = new https.Agent({
      ca: opts.ca, cert: opts.cert, key: opts.key,
      rejectUnauthorized: !cluster.skipTLSVerify,
      keepAlive: true, maxSockets: 16,
    });
    return new Kube(new URL(cluster.server), agent, requestTimeoutMs);
  }

  /** A client from kubeconfig YAML (a `<cluster>-kubeconfig` secret's `value`). */
  static async fromYaml(yaml: string, requestTimeoutMs = 5_000): Promise<Kube> {
    const kc = new KubeConfig();
    kc.loadFromString(yaml);
    return Kube.from(kc, requestTimeoutMs);
  }

  request<T = Json>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<T>((resolve, reject) => {
      const req = https.request({
        host: this.server.hostname, port: this.server.port, path, method, agent: this.agent,
        timeout: this.requestTimeoutMs,
        headers: {
          Accept: 'application/json',
          ...(payload === undefined ? {} : { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) }),
        },
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => reject(new KubeError(0, method, path, String(err))));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const code = res.statusCode ?? 0;
          if (code < 200 || code > 299) return reject(new KubeError(code, method, path, text));
          try {
            resolve((text ? JSON.parse(text) : {}) as T);
          } catch {
            reject(new KubeError(code, method, path, `unparsable answer: ${text.slice(0, 200)}`));
          }
        });
      });
      req.on('timeout', () => req.destroy(new Error(`timed out after ${this.requestTimeoutMs}ms`)));
      req.on('error', (err) => reject(new KubeError(0, method, path, err.message)));
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  /** GET; undefined on 404. */
  async get(path: string): Promise<Json | undefined> {
    try {
      return await this.request('GET', path);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  list(path: string, labelSelector?: string): Promise<KubeList> {
    const q = labelSelector ? `?labelSelector=${encodeURIComponent(labelSelector)}` : '';
    return this.request<KubeList>('GET', `${path}${q}`);
  }

  create(collectionPath: string, obj: Json): Promise<Json> {
    return this.request('POST', collectionPath, obj);
  }

  /** JSON merge patch (RFC 7386). Put metadata.resourceVersion in the patch to make it conditional. */
  mergePatch(path: string, patch: Json): Promise<Json> {
    return this.request('PATCH', path, patch, 'application/merge-patch+json');
  }

  replace(path: string, obj: Json): Promise<Json> {
    return this.request('PUT', path, obj);
  }

  /** DELETE; false when the object was already gone. */
  async delete(path: string, options?: Json): Promise<boolean> {
    try {
      await this.request('DELETE', path, options);
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /**
   * One watch request from resourceVersion; resolves when the server or signal ends the stream, rejects
   * on a transport or HTTP error. An `ERROR` event (e.g. 410 Gone) is handed to onEvent like any other.
   */
  watch(path: string, resourceVersion: string, onEvent: (e: WatchEvent) => void, signal: AbortSignal, timeoutSeconds = 60): Promise<void> {
    const q = `?watch=1&allowWatchBookmarks=true&timeoutSeconds=${timeoutSeconds}&resourceVersion=${encodeURIComponent(resourceVersion)}`;
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return resolve();
      const req = https.request({
        host: this.server.hostname, port: this.server.port, path: `${path}${q}`, method: 'GET', agent: this.agent,
        headers: { Accept: 'application/json' }, signal,
      }, (res) => {
        if (res.statusCode !== 200) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => reject(new KubeError(res.statusCode ?? 0, 'WATCH', path, Buffer.concat(chunks).toString('utf8'))));
          return;
        }
        let partial = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          const lines = (partial + chunk).split('\n');
          partial = lines.pop() ?? '';
          for (const line of lines) {
            if (!line.trim()) continue;
            try {
              onEvent(JSON.parse(line) as WatchEvent);
            } catch {
              // a half line can only be the last one, kept in `partial`
            }
          }
        });
        res.on('end', () => resolve());
        res.on('error', (err) => (signal.aborted ? resolve() : reject(err)));
      });
      req.on('error', (err) => (signal.aborted ? resolve() : reject(new KubeError(0, 'WATCH', path, err.message))));
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}
