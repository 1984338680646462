// A fault proxy for e2e specs (test-only). It listens with plain HTTP on 127.0.0.1, forwards every request
// to the kube-apiserver over HTTPS with credentials of its own (a client certificate or a bearer token, so
// each proxy can be one identity in the apiserver's audit log), and, by rule, fails chosen requests the way
// a real outage does: a Kubernetes Status error (500, 409, ...), a request held unanswered until the client
// gives up, a reset connection, or a watch whose connection stays open while nothing is forwarded any more.
// It records every request (time, method, path, code, User-Agent, what happened) for the specs to judge.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { parse } from 'yaml';

/** Where the proxy forwards to, and as whom. */
export interface Upstream {
  server: string;
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  token?: string;
}

/**
 * What a rule does to a matching request: `pass` forwards it (with `onMatch` as a hook), `{ status }`
 * answers a Kubernetes Status without forwarding, `hold` never answers, `reset` resets the connection,
 * `silence` (watches) keeps the connection open and forwards nothing more, from the headers on for a new
 * watch, from the next chunk for an open one; a silenced stream stays dead until its client gives up.
 */
export type Fault =
  'pass' | 'hold' | 'reset' | 'silence' | { status: number; reason?: string; message?: string; retryAfterS?: number };

export interface FaultRule {
  fault: Fault;
  method?: string | RegExp;
  /** Tested against the path without the query. */
  path?: RegExp;
  /** Tested against the query string (`?watch=true&...`). */
  query?: RegExp;
  /** true: only watches; false: only other requests. */
  watch?: boolean;
  userAgent?: RegExp;
  /** Tested against the request body (JSON text). */
  body?: RegExp;
  /** The rule applies to at most this many requests, then lifts. */
  times?: number;
  /** Epoch-ms window in which the rule applies. */
  from?: number;
  until?: number;
  /** Called with each request the rule applies to, before the fault (or the forwarding) happens. */
  onMatch?: (r: ProxiedRequest) => void;
}

export interface RuleHandle {
  /** Requests the rule applied to. */
  readonly matched: ProxiedRequest[];
  remove(): void;
}

export type RequestEnd =
  'complete' | 'client-closed' | 'upstream-aborted' | 'upstream-unreachable' | 'reset' | 'proxy-stopped';

export interface ProxiedRequest {
  id: number;
  at: number;
  method: string;
  path: string;
  query: string;
  watch: boolean;
  userAgent: string;
  /** Code answered to the client; 0 while none was (held, reset, upstream unreachable). */
  code: number;
  /** The fault applied, if any: `status 500`, `hold`, `reset`, `silence`. */
  fault?: string;
  /** When a watch stopped being forwarded (silence). */
  silencedAt?: number;
  answeredAt?: number;
  endedAt?: number;
  end?: RequestEnd;
  /** Body bytes delivered to the client, and when the last ones were. */
  bytes: number;
  lastByteAt?: number;
  error?: string;
}

interface ActiveRule extends FaultRule {
  matched: ProxiedRequest[];
  removed: boolean;
}

const STATUS_REASONS: Record<number, string> = {
  409: 'Conflict',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};
const HOP_HEADERS = ['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'host'];

/** The upstream of a kubeconfig's context (the current one by default): server, CA, client certificate or token. */
export function upstreamFromKubeconfig(yamlText: string, context?: string): Upstream {
  const kc = parse(yamlText) as Record<string, any>;
  const ctxName = context ?? kc['current-context'];
  const ctx = (kc.contexts ?? []).find((c: any) => c.name === ctxName)?.context;
  if (!ctx) throw new Error(`kubeconfig: no context ${ctxName}`);
  const cluster = (kc.clusters ?? []).find((c: any) => c.name === ctx.cluster)?.cluster;
  const user = (kc.users ?? []).find((u: any) => u.name === ctx.user)?.user ?? {};
  if (!cluster?.server) throw new Error(`kubeconfig: no server for cluster ${ctx.cluster}`);
  const data = (inline?: string, file?: string) =>
    inline ? Buffer.from(inline, 'base64') : file ? fs.readFileSync(file) : undefined;
  const out: Upstream = { server: cluster.server };
  const ca = data(cluster['certificate-authority-data'], cluster['certificate-authority']);
  const cert = data(user['client-certificate-data'], user['client-certificate']);
  const key = data(user['client-key-data'], user['client-key']);
  if (ca) out.ca = ca;
  if (cert) out.cert = cert;
  if (key) out.key = key;
  if (user.token) out.token = user.token;
  return out;
}

export class FaultProxy {
  readonly requests: ProxiedRequest[] = [];
  private rules: ActiveRule[] = [];
  private nextId = 1;
  private readonly upstream: URL;
  private readonly agent: http.Agent;
  private readonly open = new Set<{ req: ProxiedRequest; silenced: boolean; kill: (end: RequestEnd) => void }>();

  private constructor(
    private readonly server: http.Server,
    readonly port: number,
    private readonly up: Upstream,
  ) {
    this.upstream = new URL(up.server);
    this.agent =
      this.upstream.protocol === 'http:'
        ? new http.Agent({ keepAlive: true })
        : new https.Agent({ keepAlive: true, ca: up.ca, cert: up.cert, key: up.key });
  }

  static async start(upstream: Upstream): Promise<FaultProxy> {
    const server = http.createServer({ noDelay: true, keepAliveTimeout: 60_000 });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const proxy = new FaultProxy(server, (server.address() as AddressInfo).port, upstream);
    server.on('request', (req, res) => proxy.handle(req, res));
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * A kubeconfig whose server is this proxy (no credentials: the proxy holds them). insecure-skip-tls-verify
   * means nothing over plain HTTP, but client-node refuses an http server without it.
   */
  kubeconfigYaml(name = 'fault-proxy'): string {
    return [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: ${name}`,
      '  cluster:',
      `    server: ${this.url}`,
      '    insecure-skip-tls-verify: true',
      'users:',
      `- name: ${name}`,
      '  user: {}',
      'contexts:',
      `- name: ${name}`,
      '  context:',
      `    cluster: ${name}`,
      `    user: ${name}`,
      `current-context: ${name}`,
      '',
    ].join('\n');
  }

  addRule(rule: FaultRule): RuleHandle {
    const r: ActiveRule = { ...rule, matched: [], removed: false };
    this.rules.push(r);
    // Silence also reaches streams already open.
    if (rule.fault === 'silence')
      for (const o of this.open) if (!o.silenced && this.applies(r, o.req, '')) this.silence(o, r);
    return { matched: r.matched, remove: () => void (r.removed = true) };
  }

  /** Ends every stream being forwarded (open watches) as a restarted apiserver does. */
  dropStreams(): void {
    for (const o of [...this.open]) if (!o.silenced) o.kill('upstream-aborted');
  }

  clearRules(): void {
    for (const r of this.rules) r.removed = true;
    this.rules = [];
  }

  /** Requests matching a filter, oldest first. */
  find(
    f: { method?: string | RegExp; path?: RegExp; watch?: boolean; userAgent?: RegExp; since?: number } = {},
  ): ProxiedRequest[] {
    return this.requests.filter((r) => (f.since === undefined || r.at >= f.since) && matchesRequest(f, r));
  }

  /**
   * For every path the client has watched: the last time it had evidence that its view was current — a
   * successful list of that path, a watch of it answered 200 and not silenced from the start (the apiserver
   * replays from the client's resourceVersion, and a quiet resource sends nothing more), or bytes delivered.
   */
  watchEvidence(): Map<string, number> {
    const watched = new Set(this.requests.filter((r) => r.watch).map((r) => r.path));
    const out = new Map<string, number>();
    for (const r of this.requests) {
      if (!watched.has(r.path)) continue;
      const opened =
        r.code === 200 && r.answeredAt !== undefined && !(r.silencedAt !== undefined && r.silencedAt <= r.answeredAt)
          ? r.answeredAt
          : undefined;
      const t = r.watch
        ? Math.max(opened ?? 0, r.lastByteAt ?? 0) || undefined
        : r.method === 'GET' && r.code === 200 && r.end === 'complete'
          ? r.endedAt
          : undefined;
      if (t !== undefined && t > (out.get(r.path) ?? 0)) out.set(r.path, t);
      else if (!out.has(r.path)) out.set(r.path, 0);
    }
    return out;
  }

  async stop(): Promise<void> {
    this.clearRules();
    for (const o of [...this.open]) o.kill('proxy-stopped');
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    this.agent.destroy();
  }

  private applies(rule: ActiveRule, r: ProxiedRequest, body: string, now = Date.now()): boolean {
    if (rule.removed || (rule.times !== undefined && rule.matched.length >= rule.times)) return false;
    if ((rule.from !== undefined && now < rule.from) || (rule.until !== undefined && now >= rule.until)) return false;
    if (rule.body && !rule.body.test(body)) return false;
    return matchesRequest(rule, r);
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://proxy');
    const watch = /^(true|1)$/.test(url.searchParams.get('watch') ?? '');
    const rec: ProxiedRequest = {
      id: this.nextId++,
      at: Date.now(),
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.search,
      watch,
      userAgent: req.headers['user-agent'] ?? '',
      code: 0,
      bytes: 0,
    };
    this.requests.push(rec);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => this.decide(req, res, rec, Buffer.concat(chunks)));
  }

  private decide(req: http.IncomingMessage, res: http.ServerResponse, rec: ProxiedRequest, body: Buffer): void {
    const text = body.toString('utf8');
    const rule = this.rules.find((r) => this.applies(r, rec, text));
    if (rule) {
      rule.matched.push(rec);
      rule.onMatch?.(rec);
    }
    const fault = rule?.fault ?? 'pass';
    const finish = (end: RequestEnd, error?: string) => {
      if (rec.end) return;
      rec.end = end;
      rec.endedAt = Date.now();
      if (error) rec.error = error;
    };
    res.on('close', () => finish(res.writableFinished ? 'complete' : 'client-closed'));
    if (fault === 'reset') {
      rec.fault = 'reset';
      finish('reset');
      req.socket.resetAndDestroy();
      return;
    }
    if (fault === 'hold') {
      rec.fault = 'hold';
      const entry = {
        req: rec,
        silenced: true,
        kill: (end: RequestEnd) => {
          finish(end);
          res.destroy();
        },
      };
      this.open.add(entry);
      res.on('close', () => this.open.delete(entry));
      return;
    }
    if (typeof fault === 'object') {
      rec.fault = `status ${fault.status}`;
      const status = {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        code: fault.status,
        reason: fault.reason ?? STATUS_REASONS[fault.status] ?? 'InternalError',
        message:
          fault.message ??
          (fault.status === 409
            ? `Operation cannot be fulfilled on ${rec.path}: the object has been modified; please apply your changes to the latest version and try again (injected by the fault proxy)`
            : `injected by the fault proxy: ${fault.status} for ${rec.method} ${rec.path}`),
      };
      const payload = JSON.stringify(status);
      rec.code = fault.status;
      rec.answeredAt = Date.now();
      const retryAfter = fault.retryAfterS !== undefined ? { 'Retry-After': String(fault.retryAfterS) } : {};
      res
        .writeHead(fault.status, {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(payload),
          ...retryAfter,
        })
        .end(payload);
      return;
    }
    this.forward(req, res, rec, body, fault === 'silence', finish);
  }

  private forward(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    rec: ProxiedRequest,
    body: Buffer,
    silenceNow: boolean,
    finish: (end: RequestEnd, error?: string) => void,
  ): void {
    const headers: http.OutgoingHttpHeaders = { ...req.headers };
    for (const h of HOP_HEADERS) delete headers[h];
    headers.host = this.upstream.host;
    if (body.length) headers['content-length'] = body.length;
    if (this.up.token) headers.authorization = `Bearer ${this.up.token}`;
    const lib = this.upstream.protocol === 'http:' ? http : https;
    const entry = {
      req: rec,
      silenced: false,
      kill: (end: RequestEnd) => {
        finish(end);
        upReq.destroy();
        res.destroy();
      },
    };
    if (silenceNow) this.silence(entry);
    const upReq = lib.request(
      new URL(`${rec.path}${rec.query}`, this.upstream),
      { method: rec.method, headers, agent: this.agent },
      (upRes) => {
        rec.code = upRes.statusCode ?? 0;
        rec.answeredAt = Date.now();
        const out = { ...upRes.headers };
        for (const h of HOP_HEADERS) delete out[h];
        res.writeHead(rec.code, out);
        res.flushHeaders();
        upRes.on('data', (c: Buffer) => {
          if (entry.silenced) return;
          const silencer = rec.watch
            ? this.rules.find((r) => r.fault === 'silence' && this.applies(r, rec, ''))
            : undefined;
          if (silencer) return this.silence(entry, silencer);
          rec.bytes += c.length;
          rec.lastByteAt = Date.now();
          res.write(c);
        });
        // An upstream that ends mid-stream (killed, reset) ends the client's stream the same way.
        upRes.on('close', () => {
          if (entry.silenced) return;
          if (upRes.complete) {
            finish('complete');
            res.end();
          } else {
            finish('upstream-aborted');
            res.destroy();
          }
        });
      },
    );
    this.open.add(entry);
    res.on('close', () => {
      this.open.delete(entry);
      upReq.destroy();
    });
    upReq.on('error', (e) => {
      if (entry.silenced || rec.end) return;
      if (rec.answeredAt === undefined) {
        // Nothing answered yet: the client sees its connection dropped, as when the apiserver is down.
        finish('upstream-unreachable', e.message);
        req.socket.destroy();
      } else {
        finish('upstream-aborted', e.message);
        res.destroy();
      }
    });
    upReq.end(body.length ? body : undefined);
  }

  private silence(entry: { req: ProxiedRequest; silenced: boolean }, rule?: ActiveRule): void {
    entry.silenced = true;
    entry.req.fault = 'silence';
    entry.req.silencedAt ??= Date.now();
    if (rule && !rule.matched.includes(entry.req)) rule.matched.push(entry.req);
  }
}

function matchesRequest(
  f: { method?: string | RegExp; path?: RegExp; query?: RegExp; watch?: boolean; userAgent?: RegExp },
  r: ProxiedRequest,
): boolean {
  if (f.method !== undefined && !(typeof f.method === 'string' ? f.method === r.method : f.method.test(r.method)))
    return false;
  if (f.path && !f.path.test(r.path)) return false;
  if (f.query && !f.query.test(r.query)) return false;
  if (f.watch !== undefined && f.watch !== r.watch) return false;
  if (f.userAgent && !f.userAgent.test(r.userAgent)) return false;
  return true;
}
