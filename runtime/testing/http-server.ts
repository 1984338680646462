// Test support for the runtime's unit tests: a plain node:http server on 127.0.0.1 standing in for the
// apiserver (a FAKE: it answers only what each test scripts), and a logger that keeps its lines.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Writable } from 'node:stream';
import winston from 'winston';
import type { ClusterAccess } from '../client/kubeconfig.js';
import type { Json } from '../client/rest.js';

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse, url: URL, body: string) => void;

export interface TestServer {
  access: ClusterAccess;
  /** Method and path+query of every request, in order. */
  readonly requests: { method: string; url: URL; body: string }[];
  close(): Promise<void>;
}

export async function serve(handler: Handler): Promise<TestServer> {
  const sockets = new Set<Socket>();
  const requests: TestServer['requests'] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      requests.push({ method: req.method ?? '', url, body });
      handler(req, res, url, body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    access: { server: new URL(`http://127.0.0.1:${port}`) },
    requests,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** Call inside a describe: what is passed to the returned function is closed after each test, last first. */
export function closedAfterEach(): <T extends { close(): unknown }>(x: T) => T {
  const open: { close(): unknown }[] = [];
  afterEach(async () => {
    for (const x of open.splice(0).reverse()) await x.close();
  });
  return (x) => {
    open.push(x);
    return x;
  };
}

export function sendJson(res: http.ServerResponse, code: number, body: Json): void {
  const data = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) });
  res.end(data);
}

/** Starts a watch response (chunked) and writes the given events as JSON lines. */
export function watchEvents(res: http.ServerResponse, events: Json[]): void {
  if (!res.headersSent) res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
  for (const e of events) res.write(`${JSON.stringify(e)}\n`);
}

export const obj = (name: string, rv: string, extra: Json = {}): Json => ({
  apiVersion: 'v1',
  kind: 'Thing',
  metadata: { name, namespace: 'ns', resourceVersion: rv, managedFields: [{ manager: 'x' }] },
  ...extra,
});

export const list = (rv: string, items: Json[], cont?: string): Json => ({
  kind: 'List',
  metadata: { resourceVersion: rv, ...(cont ? { continue: cont } : {}) },
  items,
});

/** A published schema (OpenAPI v3 components) of cluster.x-k8s.io holding exactly the given `Kind:path` fields. */
export function schemaWith(apiVersion: string, fields: string[]): Json {
  const schemas: Record<string, Json> = {};
  for (const f of fields) {
    const [kind, path] = f.split(':') as [string, string];
    let s = (schemas[`io.x-k8s.cluster.${apiVersion}.${kind}`] ??= { type: 'object', properties: {} });
    for (const part of path.replace(/\[\]/g, '.[]').split('.')) {
      if (part === '[]') s = s.items ??= { type: 'object', properties: {} };
      else s = (s.properties ??= {})[part] ??= { type: 'object', properties: {} };
    }
  }
  return { openapi: '3.0.0', components: { schemas } };
}

/** A winston logger whose lines (JSON objects) stay in `lines`. */
export function capturingLogger(): { logger: winston.Logger; lines: Json[] } {
  const lines: Json[] = [];
  const stream = new Writable({
    objectMode: true,
    write(info: Json, _enc, done) {
      lines.push(info);
      done();
    },
  });
  return {
    logger: winston.createLogger({ level: 'debug', transports: [new winston.transports.Stream({ stream })] }),
    lines,
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `f` until it is truthy (or fails the test after `ms`). */
export async function until<T>(what: string, f: () => T | undefined | false, ms = 5_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}
