// The controller's REST client: JSON over node:https with the credentials of a @kubernetes/client-node
// KubeConfig (every auth kind it supports), one keep-alive agent, a User-Agent so the apiserver's metrics
// and audit can tell JoinGuard apart, and status codes as values. Written here rather than through the
// generated client because the controller needs exact control of patch content types, preconditions,
// subresources and long-lived watch streams (and their timeouts), which the generated API hides.
import https from 'node:https';
import http from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { KubeConfig } from '@kubernetes/client-node';

export type Json = Record<string, any>;

/** A non-2xx answer (or a transport failure: code 0). */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly method: string,
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${method} ${path}: ${code === 0 ? 'no answer' : code} ${reason}`);
    this.name = 'ApiError';
  }
}

export const isNotFound = (e: unknown): boolean => e instanceof ApiError && e.code === 404;
export const isConflict = (e: unknown): boolean => e instanceof ApiError && e.code === 409;
export const isGone = (e: unknown): boolean => e instanceof ApiError && e.code === 410;

export const CONTENT = {
  json: 'application/json',
  merge: 'application/merge-patch+json',
  jsonPatch: 'application/json-patch+json',
} as const;

export interface Resource {
  group: string; // '' for the core group
  version: string;
  plural: string;
  namespaced: boolean;
}

export function pathOf(r: Resource, namespace?: string, name?: string, sub?: string): string {
  const base = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const obj = name === undefined ? '' : `/${encodeURIComponent(name)}`;
  return `${base}${ns}/${r.plural}${obj}${name !== undefined && sub ? `/${sub}` : ''}`;
}

export interface RequestOptions {
  body?: unknown;
  contentType?: string;
  query?: Record<string, string | number | boolean | undefined>;
  timeoutMs?: number;
}

export class RestClient {
  readonly server: URL;
  private readonly agent: https.Agent | http.Agent;
  private base?: Promise<https.RequestOptions>;
  /** Requests made, by verb (for the benchmark and the debug log). */
  readonly counts = new Map<string, number>();

  constructor(
    private readonly kc: KubeConfig,
    readonly userAgent: string,
  ) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    this.server = new URL(cluster.server);
    this.agent = this.server.protocol === 'http:' ? new http.Agent({ keepAlive: true }) : new https.Agent({ keepAlive: true, maxSockets: 16 });
  }

  private options(): Promise<https.RequestOptions> {
    this.base ??= (async () => {
      const o: https.RequestOptions = {};
      await this.kc.applyToHTTPSOptions(o);
      return o;
    })();
    return this.base;
  }

  /** Opens a request; the caller reads the response stream. Used by `request` and by watches. */
  async open(method: string, path: string, opts: RequestOptions = {}): Promise<{ res: IncomingMessage; abort: () => void }> {
    const base = await this.options();
    const url = new URL(path, this.server);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const data = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const headers: Record<string, string | number> = {
      ...(base.headers as Record<string, string>),
      Accept: CONTENT.json,
      'User-Agent': this.userAgent,
    };
    if (data !== undefined) {
      headers['Content-Type'] = opts.contentType ?? CONTENT.json;
      headers['Content-Length'] = Buffer.byteLength(data);
    }
    this.counts.set(method, (this.counts.get(method) ?? 0) + 1);
    const lib = this.server.protocol === 'http:' ? http : https;
    return new Promise((resolve, reject) => {
      const req = lib.request(url, { ...base, method, headers, agent: this.agent }, (res) => resolve({ res, abort: () => req.destroy() }));
      if (opts.timeoutMs !== undefined) req.setTimeout(opts.timeoutMs, () => req.destroy(new Error(`timed out after ${opts.timeoutMs} ms`)));
      req.on('error', (e) => reject(new ApiError(0, method, path, e.message)));
      if (data !== undefined) req.write(data);
      req.end();
    });
  }

  async request<T = Json>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const { res } = await this.open(method, path, { timeoutMs: 30_000, ...opts });
    const text = await readAll(res).catch((e: Error) => {
      throw new ApiError(0, method, path, e.message);
    });
    const code = res.statusCode ?? 0;
    if (code < 200 || code >= 300) throw new ApiError(code, method, path, reasonOf(text));
    return (text === '' ? {} : JSON.parse(text)) as T;
  }

  get<T = Json>(path: string, query?: RequestOptions['query']): Promise<T> {
    return this.request<T>('GET', path, { query });
  }

  mergePatch<T = Json>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PATCH', path, { body, contentType: CONTENT.merge });
  }

  jsonPatch<T = Json>(path: string, ops: unknown[]): Promise<T> {
    return this.request<T>('PATCH', path, { body: ops, contentType: CONTENT.jsonPatch });
  }

  post<T = Json>(path: string, body: unknown): Promise<T> {
    return this.request<T>('POST', path, { body });
  }

  put<T = Json>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PUT', path, { body });
  }

  /** DELETE with uid and resourceVersion preconditions: a mismatch is 409, a missing object 404. */
  deleteWithPreconditions(path: string, uid: string, resourceVersion: string): Promise<Json> {
    return this.request('DELETE', path, {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid, resourceVersion } },
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('response aborted')));
  });
}

function reasonOf(text: string): string {
  try {
    const s = JSON.parse(text) as Json;
    if (typeof s.message === 'string') return s.message;
  } catch {
    // not a Status
  }
  return text.slice(0, 200);
}
