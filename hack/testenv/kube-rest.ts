// A small HTTPS client for the bootstrap of the test control plane (readiness, CRDs, webhook
// configurations). It talks to the apiserver with the admin client certificate and nothing else, so
// start-up does not depend on @kubernetes/client-node's behaviour; tests use client-node.
import http from 'node:http';
import https from 'node:https';

export interface RestResponse {
  status: number;
  body: string;
}

export interface RestCredentials {
  server: string;
  caPem: string;
  certPem: string;
  keyPem: string;
}

export class KubeRest {
  private readonly agent: https.Agent;
  private readonly base: URL;

  constructor(creds: RestCredentials) {
    this.base = new URL(creds.server);
    this.agent = new https.Agent({ ca: creds.caPem, cert: creds.certPem, key: creds.keyPem, keepAlive: true, maxSockets: 8 });
  }

  request(method: string, path: string, body?: unknown, contentType = 'application/json', timeoutMs = 15_000): Promise<RestResponse> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request({
        host: this.base.hostname,
        port: this.base.port,
        path,
        method,
        agent: this.agent,
        headers: {
          Accept: 'application/json',
          ...(payload === undefined ? {} : { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) }),
        },
        timeout: timeoutMs,
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out after ${timeoutMs}ms`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  async get(path: string): Promise<RestResponse> {
    return this.request('GET', path);
  }

  /** GET that parses JSON and fails on a non-2xx status. */
  async getJson<T>(path: string): Promise<T> {
    const res = await this.get(path);
    if (res.status < 200 || res.status > 299) throw new Error(`GET ${path}: ${res.status} ${res.body.slice(0, 500)}`);
    return JSON.parse(res.body) as T;
  }

  async post(path: string, obj: unknown): Promise<RestResponse> {
    return this.request('POST', path, obj);
  }

  close(): void {
    this.agent.destroy();
  }
}

/** A plain-HTTP GET (etcd and manager health endpoints); never throws, status 0 on a connection error. */
export function httpGet(url: string, timeoutMs = 2000): Promise<RestResponse> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (err) => resolve({ status: 0, body: String(err) }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ status: 0, body: String(err) }));
  });
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Polls check until it returns a value other than undefined, or fails with the last reason after
 * timeoutMs. abort is consulted between polls (e.g. "the process died"): a string it returns fails fast.
 */
export async function poll<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>, abort?: () => string | undefined, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const reason = abort?.();
    if (reason) throw new Error(`${what}: ${reason}`);
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not ready after ${timeoutMs / 1000}s${last ? ` (last error: ${last})` : ''}`);
    await sleep(intervalMs);
  }
}
