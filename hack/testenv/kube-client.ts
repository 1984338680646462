// The test harness's one Kubernetes client (test-only): the control plane's start-up (readiness, CRDs,
// webhook configurations), the simulation, and the e2e specs' reads and writes all go through it.
// Plain JSON over node:https with client-certificate or token credentials, so that the harness controls
// every detail it relies on — subresources, merge patches guarded by resourceVersion, 404/409 as values,
// watch streams it can abort and restart — and shares no code with the product's client (why: docs/e2e.md).
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import { parse } from 'yaml';

export type Json = Record<string, any>;

export interface KubeList {
  items: Json[];
  metadata: { resourceVersion?: string; continue?: string };
}

/** What a client needs: the server and, for TLS, the CA and a client certificate or a bearer token. */
export interface KubeCredentials {
  server: string;
  caPem?: string;
  certPem?: string;
  keyPem?: string;
  token?: string;
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

// By name, not instanceof: mocha's root hooks load this file through require() and the specs through
// import, so the same class can exist twice in one process.
const codeOf = (err: unknown) =>
  err instanceof Error && err.name === 'KubeError' ? (err as KubeError).code : undefined;
export const isNotFound = (err: unknown) => codeOf(err) === 404;
export const isConflict = (err: unknown) => codeOf(err) === 409;

/** Runs a read-then-guarded-write again while it is answered 409 (someone wrote the object meanwhile), up to `tries`. */
export async function retryOnConflict<T>(write: () => Promise<T>, tries = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (!isConflict(err) || attempt >= tries) throw err;
    }
  }
}

// The pure path builder is the product's: a wrong path fails both sides alike, it hides nothing.
export { pathOf, type Resource } from '../../runtime/client/rest.js';

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: Json;
}

/** An answer with its status, whatever the status (the start-up code reads denials from the body). */
export interface RawResponse {
  status: number;
  body: string;
  /** The texts of the apiserver's `Warning: 299 - "..."` headers (deprecations, admission warnings). */
  warnings: string[];
}

function warningsOf(header: string | string[] | undefined): string[] {
  const list = header === undefined ? [] : Array.isArray(header) ? header : [header];
  return list
    .flatMap((h) => h.split(/,(?=\s*299 )/))
    .map((h) =>
      h
        .replace(/^\s*299 - "/, '')
        .replace(/"\s*$/, '')
        .replace(/\\"/g, '"'),
    );
}

/** The credentials of a kubeconfig's current (or named) context; data fields only (what the harness writes). */
export function credentialsFromKubeconfig(text: string, context?: string): KubeCredentials {
  const kc = parse(text) as Json;
  const ctxName = context ?? kc['current-context'];
  const ctx = (kc.contexts ?? []).find((c: Json) => c.name === ctxName)?.context;
  if (!ctx) throw new Error(`kubeconfig: no context ${ctxName}`);
  const cluster = (kc.clusters ?? []).find((c: Json) => c.name === ctx.cluster)?.cluster;
  const user = (kc.users ?? []).find((u: Json) => u.name === ctx.user)?.user ?? {};
  if (!cluster?.server) throw new Error(`kubeconfig: context ${ctxName} has no cluster server`);
  const b64 = (v: unknown) => (typeof v === 'string' ? Buffer.from(v, 'base64').toString('utf8') : undefined);
  return {
    server: cluster.server,
    caPem:
      b64(cluster['certificate-authority-data']) ??
      (cluster['certificate-authority'] ? fs.readFileSync(cluster['certificate-authority'], 'utf8') : undefined),
    certPem:
      b64(user['client-certificate-data']) ??
      (user['client-certificate'] ? fs.readFileSync(user['client-certificate'], 'utf8') : undefined),
    keyPem:
      b64(user['client-key-data']) ?? (user['client-key'] ? fs.readFileSync(user['client-key'], 'utf8') : undefined),
    token: user.token,
  };
}

export class KubeClient {
  readonly server: URL;
  private readonly agent: https.Agent;
  private readonly token?: string;

  constructor(
    creds: KubeCredentials,
    private readonly requestTimeoutMs = 15_000,
  ) {
    this.server = new URL(creds.server);
    this.token = creds.token;
    this.agent = new https.Agent({
      ca: creds.caPem,
      cert: creds.certPem || undefined,
      key: creds.keyPem || undefined,
      keepAlive: true,
      maxSockets: 16,
    });
  }

  /** A client from kubeconfig YAML (a `<cluster>-kubeconfig` secret's `value`, or a file's text). */
  static fromKubeconfig(yaml: string, requestTimeoutMs?: number): KubeClient {
    return new KubeClient(credentialsFromKubeconfig(yaml), requestTimeoutMs);
  }

  static fromKubeconfigFile(file: string, requestTimeoutMs?: number): KubeClient {
    return KubeClient.fromKubeconfig(fs.readFileSync(file, 'utf8'), requestTimeoutMs);
  }

  /** One request; resolves with any HTTP status, rejects only when there is no answer. */
  send(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
    timeoutMs = this.requestTimeoutMs,
  ): Promise<RawResponse> {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: this.server.hostname,
          port: this.server.port,
          path,
          method,
          agent: this.agent,
          timeout: timeoutMs,
          headers: {
            Accept: 'application/json',
            ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}),
            ...(payload === undefined
              ? {}
              : { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) }),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              body: Buffer.concat(chunks).toString('utf8'),
              warnings: warningsOf(res.headers['warning']),
            }),
          );
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: timed out after ${timeoutMs}ms`)));
      req.on('error', reject);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  /** A request whose non-2xx answer (or missing answer) is a KubeError; the body parsed as JSON. */
  async request<T = Json>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    let res: RawResponse;
    try {
      res = await this.send(method, path, body, contentType);
    } catch (err) {
      throw new KubeError(0, method, path, (err as Error).message);
    }
    if (res.status < 200 || res.status > 299) throw new KubeError(res.status, method, path, res.body);
    try {
      return (res.body ? JSON.parse(res.body) : {}) as T;
    } catch {
      throw new KubeError(res.status, method, path, `unparsable answer: ${res.body.slice(0, 200)}`);
    }
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

  /** Creates an object, or replaces it (keeping its resourceVersion guard) when it exists. */
  async createOrReplace(collectionPath: string, obj: Json): Promise<Json> {
    try {
      return await this.create(collectionPath, obj);
    } catch (err) {
      if (!isConflict(err)) throw err;
      const itemPath = `${collectionPath}/${encodeURIComponent(obj.metadata.name)}`;
      const current = await this.get(itemPath);
      return this.replace(itemPath, {
        ...obj,
        metadata: { ...obj.metadata, resourceVersion: current?.metadata?.resourceVersion },
      });
    }
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
   * Ends on the response's own end events (a readline over an aborted response never closes on Node 24).
   */
  watch(
    path: string,
    resourceVersion: string,
    onEvent: (e: WatchEvent) => void,
    signal: AbortSignal,
    timeoutSeconds = 60,
  ): Promise<void> {
    const q = `?watch=1&allowWatchBookmarks=true&timeoutSeconds=${timeoutSeconds}&resourceVersion=${encodeURIComponent(resourceVersion)}`;
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return resolve();
      let settled = false;
      const finish = (err?: unknown) => {
        if (settled) return;
        settled = true;
        if (err === undefined || signal.aborted) resolve();
        else
          reject(
            codeOf(err) !== undefined ? err : new KubeError(0, 'WATCH', path, (err as Error)?.message ?? String(err)),
          );
      };
      const req = https.request(
        {
          host: this.server.hostname,
          port: this.server.port,
          path: `${path}${q}`,
          method: 'GET',
          agent: this.agent,
          signal,
          headers: { Accept: 'application/json', ...(this.token ? { Authorization: `Bearer ${this.token}` } : {}) },
        },
        (res) => {
          if (res.statusCode !== 200) {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              finish(new KubeError(res.statusCode ?? 0, 'WATCH', path, Buffer.concat(chunks).toString('utf8'))),
            );
            res.on('error', finish);
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
          res.on('end', () => finish());
          res.on('aborted', () => finish(new Error('watch stream aborted')));
          res.on('error', finish);
          res.on('close', () => finish(res.complete ? undefined : new Error('watch stream closed early')));
        },
      );
      req.on('error', finish);
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

/** A plain-HTTP GET (etcd and manager health endpoints); never throws, status 0 on a connection error. */
export function httpGet(url: string, timeoutMs = 2000): Promise<RawResponse> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), warnings: [] }),
      );
      res.on('error', (err) => resolve({ status: 0, body: String(err), warnings: [] }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ status: 0, body: String(err), warnings: [] }));
  });
}
