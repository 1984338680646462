// The controller's REST client: JSON over node:https with a ClusterAccess's credentials, one keep-alive agent,
// a User-Agent so the apiserver's metrics and audit can tell JoinGuard apart, and status codes as values.
// Written here rather than through a generated client because the controller needs exact control of patch
// content types, preconditions, subresources and long-lived watch streams (and their timeouts). Like
// client-go's rest client it has a client-side token bucket (qps/burst), a hook per request for
// controller-runtime's rest_client_* metrics, a write gate: the one place where "no write after leadership is
// lost" is enforced; client-go's retry of an answer that says when to come back (429, or 5xx with Retry-After),
// and the apiserver's warnings (Warning: 299 headers) handed to a handler, as CAPI's managers install one.
import https from 'node:https';
import http from 'node:http';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { ClusterAccess } from './kubeconfig.js';
import { abortableSleep, drain, readAll, readError, reasonOf, statusMessage } from './http-body.js';
import { TokenBucket } from './token-bucket.js';
import { parseWarningHeaders } from './warnings.js';

export type Json = Record<string, any>;

/** A non-2xx answer (or a transport failure: code 0). */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly method: string,
    readonly path: string,
    readonly reason: string,
    /** The answer's Retry-After (whole seconds), when it had one. */
    readonly retryAfterS?: number,
  ) {
    super(`${method} ${path}: ${code === 0 ? 'no answer' : code} ${reason}`);
    this.name = 'ApiError';
  }
}

/** A write refused before it was sent, because the write gate (leadership) said no. */
export class WritesForbiddenError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
  ) {
    super(`${method} ${path}: not sent, writes are forbidden (leadership lost or not held)`);
    this.name = 'WritesForbiddenError';
  }
}

export const isNotFound = (e: unknown): boolean => e instanceof ApiError && e.code === 404;
export const isConflict = (e: unknown): boolean => e instanceof ApiError && e.code === 409;

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
  /** `request`: the whole exchange, body included (default 30 s). `open`: until the response headers. */
  timeoutMs?: number;
  /** Aborts the request (and, for `open`, the stream) when it fires. */
  signal?: AbortSignal;
  /** Retries after an answer that says when to come back; default the client's `maxRetries` (informers pass 0). */
  retries?: number;
  /** A watch: it holds its connection for minutes, so it gets one of its own, outside the pool requests share. */
  stream?: boolean;
}

/** One request as controller-runtime's rest_client_* metrics see it. */
export interface RequestRecord {
  method: string;
  /** host:port of the server. */
  host: string;
  /** The HTTP status as a string, or "<error>" when no response came (client-go's label values). */
  code: string;
  /** Until the response headers (client-go's request latency). */
  seconds: number;
}

export interface RestClientOptions {
  userAgent: string;
  /** Client-side rate limit, as client-go's token bucket; <= 0 or Infinity turns it off. Default 100/s. */
  qps?: number;
  /** Tokens the bucket holds (the burst allowed at once). Default 400. */
  burst?: number;
  /** Checked right before every request that is not a GET is sent: false => WritesForbiddenError, nothing sent. */
  writeGate?: () => boolean;
  onRequest?: (r: RequestRecord) => void;
  /** Default whole-request timeout of `request` (ms). Default 30 s. */
  timeoutMs?: number;
  /** Retries of a request answered 429, or 5xx with Retry-After, after the time it names. Default 10 (client-go). */
  maxRetries?: number;
  /** Each warning (code 299) the apiserver attached to an answer. */
  onWarning?: (text: string) => void;
}

/**
 * CAPI v1.14's managers: --kube-api-qps=100, --kube-api-burst=200 (core/main.go). The burst is 400 here: a first pass
 * after install writes two requests per check
 * (docs/decisions/runtime-client-informers-leader-election.md, "Client-side rate limit").
 */
export const DEFAULT_QPS = 100;
export const DEFAULT_BURST = 400;
const DEFAULT_TIMEOUT_MS = 30_000;
/** client-go's Request.maxRetries. */
export const DEFAULT_MAX_RETRIES = 10;

/**
 * Seconds the answer asks the client to wait before it retries, when it is retryable as client-go's `checkWait`
 * sees it: 429 or any 5xx, with a Retry-After of whole seconds.
 */
export function retryAfterOf(code: number, header: string | string[] | undefined): number | undefined {
  if (code !== 429 && code < 500) return undefined;
  const h = Array.isArray(header) ? header[0] : header;
  if (h === undefined || !/^\s*\d+\s*$/.test(h)) return undefined;
  return Number(h);
}

/** Connections requests share (watches aside): a reconcile's parallel reads times the workers, with room. */
export const REQUEST_SOCKETS = 16;

export class RestClient {
  readonly server: URL;
  readonly userAgent: string;
  private readonly agent: https.Agent | http.Agent;
  private readonly streamAgent: https.Agent | http.Agent;
  private readonly limiter?: TokenBucket;
  /** Requests sent, by verb (for the benchmark and the debug log). */
  readonly counts = new Map<string, number>();

  constructor(
    private readonly access: ClusterAccess,
    private readonly o: RestClientOptions,
  ) {
    this.server = access.server;
    this.userAgent = o.userAgent;
    const tls: https.AgentOptions = {
      ...(access.ca ? { ca: access.ca } : {}),
      ...(access.cert && access.key ? { cert: access.cert, key: access.key } : {}),
      ...(access.tlsServerName ? { servername: access.tlsServerName } : {}),
      rejectUnauthorized: !access.insecureSkipTLSVerify,
    };
    const agent = (pool: http.AgentOptions) =>
      this.server.protocol === 'http:' ? new http.Agent(pool) : new https.Agent({ ...pool, ...tls });
    // Requests share a bounded pool; each watch has a connection of its own, or seven informers' watches would
    // hold seven of the pool's sockets for minutes and leave the workers' requests queued for the rest.
    this.agent = agent({ keepAlive: true, maxSockets: REQUEST_SOCKETS });
    this.streamAgent = agent({ keepAlive: false });
    const qps = o.qps ?? DEFAULT_QPS;
    if (qps > 0 && Number.isFinite(qps)) this.limiter = new TokenBucket(qps, Math.max(1, o.burst ?? DEFAULT_BURST));
  }

  /**
   * Opens a request; the caller reads the response stream. Used by `request` and by watches. An answer that says
   * when to come back (429, or 5xx with Retry-After) is drained and sent again after that time, up to `retries`
   * times, as client-go does; each attempt passes the rate limiter and the write gate again.
   */
  async open(method: string, path: string, opts: RequestOptions = {}): Promise<Opened> {
    const retries = opts.retries ?? this.o.maxRetries ?? DEFAULT_MAX_RETRIES;
    for (let attempt = 0; ; attempt++) {
      const opened = await this.send(method, path, opts);
      const code = opened.res.statusCode ?? 0;
      const after = retryAfterOf(code, opened.res.headers['retry-after']);
      if (after === undefined || attempt >= retries) return opened;
      await drain(opened.res);
      try {
        await abortableSleep(after * 1000, opts.signal);
      } catch (e) {
        throw new ApiError(code, method, path, `retry after ${after} s not sent: ${(e as Error).message}`, after);
      }
    }
  }

  /** One attempt. */
  private async send(method: string, path: string, opts: RequestOptions): Promise<Opened> {
    const url = new URL(path, this.server);
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const data = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const headers: Record<string, string | number> = { Accept: CONTENT.json, 'User-Agent': this.userAgent };
    const token = await this.access.token?.();
    if (token) headers['Authorization'] = `Bearer ${token}`;
    if (data !== undefined) {
      headers['Content-Type'] = opts.contentType ?? CONTENT.json;
      headers['Content-Length'] = Buffer.byteLength(data);
    }
    const wait = this.limiter?.take() ?? 0;
    try {
      if (wait > 0) await abortableSleep(wait, opts.signal);
      opts.signal?.throwIfAborted();
    } catch (e) {
      throw new ApiError(0, method, path, `not sent: ${(e as Error).message}`);
    }
    // After every wait: leadership may have been lost while this request queued.
    if (method !== 'GET' && this.o.writeGate && !this.o.writeGate()) throw new WritesForbiddenError(method, path);
    this.counts.set(method, (this.counts.get(method) ?? 0) + 1);
    const lib = this.server.protocol === 'http:' ? http : https;
    const started = performance.now();
    const record = (code: string) =>
      this.o.onRequest?.({ method, host: this.server.host, code, seconds: (performance.now() - started) / 1000 });
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      let answered = false;
      const agent = opts.stream ? this.streamAgent : this.agent;
      const req = lib.request(url, { method, headers, agent }, (res) => {
        answered = true;
        clearTimeout(timer);
        // The signal now aborts the body. Its listener holds the request, the response and every chunk read, and
        // a signal keeps its listeners until it fires: removed when the response closes, or a page lives on.
        const onBodyAbort = () => req.destroy(reasonOf(opts.signal!));
        opts.signal?.removeEventListener('abort', onAbort);
        opts.signal?.addEventListener('abort', onBodyAbort, { once: true });
        res.once('close', () => opts.signal?.removeEventListener('abort', onBodyAbort));
        record(String(res.statusCode ?? 0));
        if (res.headers.warning !== undefined && this.o.onWarning)
          for (const w of parseWarningHeaders(res.headers.warning)) if (w.code === 299) this.o.onWarning(w.text);
        resolve({ res, req, abort: (why) => req.destroy(why ?? new Error('aborted by the client')) });
      });
      const onAbort = () => req.destroy(reasonOf(opts.signal!));
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.timeoutMs !== undefined)
        timer = setTimeout(() => req.destroy(new Error(`no answer within ${opts.timeoutMs} ms`)), opts.timeoutMs);
      req.on('error', (e) => {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        if (!answered) record('<error>');
        reject(new ApiError(0, method, path, e.message));
      });
      if (data !== undefined) req.write(data);
      req.end();
    });
  }

  /** One request, its whole answer read within `timeoutMs` (default 30 s); non-2xx throws ApiError. */
  async request<T = Json>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? this.o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // A clearable timer, not AbortSignal.timeout: that signal (and all its listeners reach) lives until it fires.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, deadline.signal]) : deadline.signal;
    try {
      const { res } = await this.open(method, path, { ...opts, timeoutMs: undefined, signal }).catch((e: Error) => {
        throw deadline.signal.aborted && e instanceof ApiError
          ? new ApiError(0, method, path, `no answer within ${timeoutMs} ms`)
          : e;
      });
      const text = await readAll(res).catch((e: Error) => {
        throw new ApiError(0, method, path, deadline.signal.aborted ? `no answer within ${timeoutMs} ms` : e.message);
      });
      const code = res.statusCode ?? 0;
      if (code < 200 || code >= 300)
        throw new ApiError(code, method, path, statusMessage(text), retryAfterOf(code, res.headers['retry-after']));
      return (text === '' ? {} : JSON.parse(text)) as T;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A GET whose body is handed over chunk by chunk as it arrives, never held whole (a LIST page through
   * json-items.ts); the whole exchange within `timeoutMs` (default 30 s). Non-2xx throws ApiError. A throw of
   * `onChunk` ends the request with that error.
   */
  async getStream(
    path: string,
    query: RequestOptions['query'],
    opts: Pick<RequestOptions, 'timeoutMs' | 'signal' | 'retries'>,
    onChunk: (chunk: Buffer) => void,
  ): Promise<void> {
    const timeoutMs = opts.timeoutMs ?? this.o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, deadline.signal]) : deadline.signal;
    const late = (e: Error) =>
      new ApiError(0, 'GET', path, deadline.signal.aborted ? `no answer within ${timeoutMs} ms` : e.message);
    try {
      const { res } = await this.open('GET', path, {
        query,
        signal,
        ...(opts.retries !== undefined ? { retries: opts.retries } : {}),
      }).catch((e: Error) => {
        throw deadline.signal.aborted && e instanceof ApiError ? late(e) : e;
      });
      const code = res.statusCode ?? 0;
      if (code < 200 || code >= 300)
        throw new ApiError(code, 'GET', path, await readError(res), retryAfterOf(code, res.headers['retry-after']));
      await new Promise<void>((resolve, reject) => {
        let done = false;
        const finish = (e?: Error) => {
          if (done) return;
          done = true;
          if (e) {
            res.destroy();
            reject(e);
          } else resolve();
        };
        res.on('data', (c: Buffer) => {
          if (done) return;
          try {
            onChunk(c);
          } catch (e) {
            finish(e as Error);
          }
        });
        res.once('end', () => finish());
        res.once('error', (e) => finish(late(e)));
        res.once('close', () => finish(late(new Error('the response ended before its body'))));
      });
    } finally {
      clearTimeout(timer);
    }
  }

  get<T = Json>(
    path: string,
    query?: RequestOptions['query'],
    opts: Omit<RequestOptions, 'query' | 'body'> = {},
  ): Promise<T> {
    return this.request<T>('GET', path, { ...opts, query });
  }

  mergePatch<T = Json>(path: string, body: unknown, opts: RequestOptions = {}): Promise<T> {
    return this.request<T>('PATCH', path, { ...opts, body, contentType: CONTENT.merge });
  }

  jsonPatch<T = Json>(path: string, ops: unknown[], opts: RequestOptions = {}): Promise<T> {
    return this.request<T>('PATCH', path, { ...opts, body: ops, contentType: CONTENT.jsonPatch });
  }

  post<T = Json>(path: string, body: unknown, opts: RequestOptions = {}): Promise<T> {
    return this.request<T>('POST', path, { ...opts, body });
  }

  put<T = Json>(path: string, body: unknown, opts: RequestOptions = {}): Promise<T> {
    return this.request<T>('PUT', path, { ...opts, body });
  }

  /** DELETE with uid and resourceVersion preconditions: a mismatch is 409, a missing object 404. */
  deleteWithPreconditions(path: string, uid: string, resourceVersion: string): Promise<Json> {
    return this.request('DELETE', path, {
      body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid, resourceVersion } },
    });
  }

  close(): void {
    this.agent.destroy();
    this.streamAgent.destroy();
  }
}

export interface Opened {
  res: IncomingMessage;
  req: ClientRequest;
  abort: (why?: Error) => void;
}
