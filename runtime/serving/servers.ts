// The diagnostics endpoint and the health probes, each on its own address, as CAPI's managers have them:
// `--diagnostics-address` serves /metrics over HTTPS behind TokenReview and SubjectAccessReview (and, like
// CAPI's, PUT /debug/flags/v to change the log verbosity), or over plain HTTP with `--insecure-diagnostics`;
// `--health-probe-bind-address` serves /healthz and /readyz. `0` turns a server off; port 0 picks one.
import { existsSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Registry } from 'prom-client';
import type { Logger } from 'winston';
import { CertWatcher } from './tls.js';
import type { DelegatingAuth } from './diagnostics-auth.js';
import { selfSignedCertificate, type ServingTls } from './serving-tls.js';

export interface ProbeState {
  /** Liveness: the process loop is alive and not stopping. */
  healthy(): { ok: boolean; why?: string };
  /** Readiness: caches synced and every informer's watch live. */
  ready(): { ok: boolean; why?: string };
}

export interface BoundServer {
  port: number;
  close(): Promise<void>;
}

export interface BindAddress {
  /** undefined: every address (IPv6 and IPv4), as Go's `:port`. */
  host?: string;
  port: number;
}

export function parseBindAddress(flag: string, value: string): BindAddress | undefined {
  if (value === '0') return undefined;
  const m = /^(.*):(\d+)$/.exec(value);
  if (!m) throw new Error(`${flag}: ${JSON.stringify(value)} is not host:port, :port or 0`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`${flag}: port ${port} is out of range`);
  return m[1] === '' ? { port } : { host: m[1]!.replace(/^\[(.*)\]$/, '$1'), port };
}

function listen(server: http.Server, addr: BindAddress, onClose: () => void = () => {}): Promise<BoundServer> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => {
      server.off('error', reject);
      const a = server.address();
      resolve({
        port: typeof a === 'object' && a ? a.port : addr.port,
        close: () =>
          new Promise<void>((r) => {
            onClose();
            server.close(() => r());
            server.closeAllConnections();
          }),
      });
    });
  });
}

/** Like Go's http.Error. */
function fail(res: ServerResponse, code: number, message: string): void {
  res
    .writeHead(code, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' })
    .end(`${message}\n`);
}

export interface DiagnosticsOptions {
  addr: BindAddress;
  registry: Registry;
  log: Logger;
  /** HTTPS with authentication and authorization (CAPI's default); false is --insecure-diagnostics. */
  secure: boolean;
  /** Required when secure. */
  auth?: DelegatingAuth;
  tls?: ServingTls;
  /** A certificate and key to serve (reloaded when they change); without both, a self-signed one. */
  certFile?: string;
  keyFile?: string;
  /** PUT /debug/flags/v (secure serving only, as in CAPI). */
  setVerbosity?: (v: number) => void;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => Promise<void> | void;

type Routes = Map<string, { method: string; handle: Handler }>;

export async function startDiagnosticsServer(o: DiagnosticsOptions): Promise<BoundServer & { secure: boolean }> {
  if (o.secure && !o.auth) throw new Error('secure diagnostics need the TokenReview/SubjectAccessReview filter');
  const handler = routed(o, diagnosticsRoutes(o));
  if (!o.secure) {
    const bound = await listen(http.createServer(handler), o.addr);
    o.log.info('Serving metrics server', { bindAddress: bindText(o.addr, bound.port), secure: false });
    return { ...bound, secure: false };
  }
  return { ...(await listenSecure(o, handler)), secure: true };
}

/** /metrics, and PUT /debug/flags/v when secure and asked for. */
function diagnosticsRoutes(o: DiagnosticsOptions): Routes {
  const routes: Routes = new Map();
  routes.set('/metrics', {
    method: 'GET',
    handle: async (_req, res) => {
      const text = await o.registry.metrics();
      res.writeHead(200, { 'Content-Type': o.registry.contentType }).end(text);
    },
  });
  if (o.secure && o.setVerbosity) {
    const set = o.setVerbosity;
    routes.set('/debug/flags/v', {
      method: 'PUT',
      handle: (_req, res, body) => {
        const v = body.trim();
        if (!/^\d+$/.test(v)) return fail(res, 400, `invalid verbosity ${JSON.stringify(v)}`);
        set(Number(v));
        o.log.info('Log verbosity changed', { v: Number(v) });
        res
          .writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' })
          .end(`successfully set klog.logging.verbosity to ${v}`);
      },
    });
  }
  return routes;
}

/** A request to its route, behind the TokenReview/SubjectAccessReview filter when secure; bodies kept to 4 KiB. */
function routed(o: DiagnosticsOptions, routes: Routes): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const path = (req.url ?? '').split('?')[0]!;
    const route = routes.get(path);
    if (!route) return fail(res, 404, '404 page not found');
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 4096) chunks.push(c);
    });
    req.on('end', () => {
      void (async () => {
        if (o.secure) {
          const d = await o.auth!.check(req.method ?? 'GET', path, req.headers.authorization);
          if (d.code !== 200) {
            if (d.code === 500) o.log.error(d.message, { path });
            else o.log.debug(d.message, { path });
            return fail(res, d.code, d.message);
          }
        }
        if (req.method !== route.method) return fail(res, 405, `${req.method} is not allowed on ${path}`);
        await route.handle(req, res, Buffer.concat(chunks).toString('utf8'));
      })().catch((e: Error) => {
        if (!res.headersSent) fail(res, 500, e.message);
      });
    });
  };
}

/** HTTPS with the given certificate (reloaded when it changes), else a self-signed one. */
async function listenSecure(
  o: DiagnosticsOptions,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<BoundServer> {
  let watcher: CertWatcher | undefined;
  let server: https.Server;
  const tlsOpts = {
    minVersion: o.tls?.minVersion ?? 'TLSv1.2',
    ...(o.tls?.ciphers ? { ciphers: o.tls.ciphers } : {}),
    ...(o.tls?.ecdhCurve ? { ecdhCurve: o.tls.ecdhCurve } : {}),
  };
  if (o.certFile && o.keyFile && existsSync(o.certFile) && existsSync(o.keyFile)) {
    const started = await CertWatcher.start({
      certFile: o.certFile,
      keyFile: o.keyFile,
      onChange: (p) => {
        server.setSecureContext({ ...tlsOpts, cert: p.cert, key: p.key });
        o.log.info('Diagnostics serving certificate reloaded', { certFile: o.certFile });
      },
      onError: (e) =>
        o.log.warn('Diagnostics serving certificate not reloaded, keeping the current one', { err: e.message }),
    });
    watcher = started.watcher;
    server = https.createServer({ ...tlsOpts, cert: started.pair.cert, key: started.pair.key }, handler);
  } else {
    // controller-runtime's fallback: a self-signed certificate for localhost and 127.0.0.1.
    server = https.createServer(
      { ...tlsOpts, ...selfSignedCertificate({ host: 'localhost', ips: ['127.0.0.1'] }) },
      handler,
    );
  }
  const bound = await listen(server, o.addr, () => void watcher?.stop());
  o.log.info('Serving metrics server', {
    bindAddress: bindText(o.addr, bound.port),
    secure: true,
    certificate: watcher ? o.certFile : 'self-signed',
  });
  return bound;
}

const bindText = (a: BindAddress, port: number) => `${a.host?.includes(':') ? `[${a.host}]` : (a.host ?? '')}:${port}`;

export function startProbeServer(addr: BindAddress, state: ProbeState): Promise<BoundServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    let probe: ReturnType<typeof state.ready> | undefined;
    if (path === '/healthz') probe = state.healthy();
    else if (path === '/readyz') probe = state.ready();
    if (!probe || req.method !== 'GET') {
      res.writeHead(404).end();
      return;
    }
    res
      .writeHead(probe.ok ? 200 : 503, { 'Content-Type': 'text/plain' })
      .end(probe.ok ? 'ok\n' : `${probe.why ?? 'not ready'}\n`);
  });
  return listen(server, addr);
}
