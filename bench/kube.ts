// The bench's own client of the apiserver (the fleet, the watchers, the /metrics scrapes): testenv's small
// HTTPS client for requests, plus a streaming GET for watches. Not the product's RestClient, so that what
// the bench does never depends on the code it measures.
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { KubeRest, type RestCredentials } from '../hack/testenv/kube-rest.js';

export type Json = Record<string, any>;

export class KubeError extends Error {
  constructor(readonly code: number, method: string, path: string, body: string) {
    super(`${method} ${path}: ${code} ${body.slice(0, 300)}`);
  }
}

export const isConflict = (e: unknown) => e instanceof KubeError && e.code === 409;

export class Kube {
  private readonly rest: KubeRest;
  private readonly agent: https.Agent;

  constructor(private readonly creds: RestCredentials) {
    this.rest = new KubeRest(creds);
    this.agent = new https.Agent({ ca: creds.caPem, cert: creds.certPem, key: creds.keyPem, keepAlive: true });
  }

  async request(method: string, path: string, body?: unknown, contentType?: string, timeoutMs = 60_000): Promise<Json> {
    const res = await this.rest.request(method, path, body, contentType, timeoutMs);
    if (res.status < 200 || res.status > 299) throw new KubeError(res.status, method, path, res.body);
    return res.body ? (JSON.parse(res.body) as Json) : {};
  }

  get(path: string): Promise<Json> {
    return this.request('GET', path);
  }

  post(path: string, obj: unknown): Promise<Json> {
    return this.request('POST', path, obj);
  }

  mergePatch(path: string, body: unknown): Promise<Json> {
    return this.request('PATCH', path, body, 'application/merge-patch+json');
  }

  /** The raw text of a GET (for /metrics). */
  async text(path: string): Promise<string> {
    const res = await this.rest.request('GET', path, undefined, undefined, 30_000);
    if (res.status !== 200) throw new KubeError(res.status, 'GET', path, res.body);
    return res.body;
  }

  /** A streaming GET (a watch); the caller reads the response and calls abort() to end it. */
  stream(path: string, query: Record<string, string | number | boolean>): Promise<{ res: IncomingMessage; abort: () => void }> {
    const url = new URL(path, this.creds.server);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, String(v));
    return new Promise((resolve, reject) => {
      const req = https.request(url, { method: 'GET', agent: this.agent, headers: { Accept: 'application/json' } }, (res) => resolve({ res, abort: () => req.destroy() }));
      req.on('error', reject);
      req.end();
    });
  }

  close(): void {
    this.rest.close();
    this.agent.destroy();
  }
}
