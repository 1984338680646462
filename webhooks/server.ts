// The HTTPS admission server: the validating endpoint for MachineJoinChecks (defaults are the CRD schema's; see
// docs/decisions/admission-without-a-mutating-webhook.md for why there is no mutating webhook), TLS from files that are reloaded on rotation.
// cmd/joinguard.ts starts it with --webhook-port and --webhook-cert-dir.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SecureContextOptions } from 'node:tls';
import { discoverCapi } from '../runtime/client/discovery.js';
import type { ClusterAccess } from '../runtime/client/kubeconfig.js';
import type { RuntimeMetrics } from '../runtime/metrics.js';
import { RestClient } from '../runtime/client/rest.js';
import {
  allow,
  denyInternal,
  denyInvalid,
  parseReview,
  reviewOf,
  type AdmissionResponse,
  type AdmissionReview,
} from './admission.js';
import { CapiVersionWatch, type CapiVersionFacts } from './capi-version.js';
import { decide, type DecideContext, type SpecRules } from './validate.js';
import { restLookups, type Lookups } from './lookups.js';
import { CertWatcher } from '../runtime/serving/tls.js';

export const VALIDATE_PATH = '/validate-joinguard-io-v1alpha1-machinejoincheck';
/** The apiserver sends at most ~3 MiB per object; two objects plus envelope fit in this. */
const MAX_BODY = 8 * 1024 * 1024;

export interface WebhookLogger {
  info(message: string, meta?: Record<string, unknown>): unknown;
  warn(message: string, meta?: Record<string, unknown>): unknown;
  error(message: string, meta?: Record<string, unknown>): unknown;
  debug(message: string, meta?: Record<string, unknown>): unknown;
}

export interface WebhookServerOptions {
  port: number;
  /** Default 0.0.0.0 (in-cluster the Service reaches the pod IP); tests pass 127.0.0.1. */
  host?: string;
  certFile: string;
  keyFile: string;
  /**
   * The product's REST client for the lookups of other checks, MachineHealthChecks and Machines and for CAPI
   * discovery; without it (and without access) those checks are skipped.
   */
  rest?: RestClient;
  /** Builds `rest` from this (runtime/client/kubeconfig.ts) when none is given. */
  access?: ClusterAccess;
  /** Replaces the lookups made through `rest` (tests). */
  lookups?: Lookups;
  /** Replaces discoverCapi(rest) (tests). */
  discoverCapi?: () => Promise<CapiVersionFacts>;
  /** How often the CAPI release is discovered again (default 10 min). */
  capiRefreshMs?: number;
  /** Replaces the API's rules (tests); default: api/v1alpha1's validation and api/capi's readers. */
  rules?: SpecRules;
  logger?: WebhookLogger;
  /** Cert poll interval in ms (default 10 s). */
  certPollMs?: number;
  /** --tls-min-version, --tls-cipher-suites and --tls-curve-preferences as Node options (default TLS 1.2, Node's). */
  tls?: { minVersion?: SecureContextOptions['minVersion']; ciphers?: string; ecdhCurve?: string };
  /**
   * The process's registry: controller-runtime's controller_runtime_webhook_* families, present while this server
   * listens (the JoinGuardWebhookUnavailable alert reads their absence).
   */
  metrics?: RuntimeMetrics;
}

export interface WebhookServer {
  port: number;
  stop(): Promise<void>;
}

/** The webhook's own User-Agent, so the apiserver's audit log tells its reads from the controller's. */
export const WEBHOOK_USER_AGENT = 'joinguard-webhook';

const silent: WebhookLogger = { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} };

export async function startWebhookServer(opts: WebhookServerOptions): Promise<WebhookServer> {
  const log = opts.logger ?? silent;
  const { ownRest, ctx } = apiAccess(opts, log);
  const rules = opts.rules ?? (await import('./rules.js')).API_RULES;
  if (!ctx.lookups) log.warn('Webhook has no API access: overlap and MachineHealthCheck checks are off');

  let hooks: ReturnType<RuntimeMetrics['webhook']> | undefined;
  const { server: s, watcher } = await tlsServer(opts, log, (req, res) => {
    const path = (req.url ?? '').split('?')[0];
    // controller-runtime instruments the admission path only (not its health endpoints).
    const end = path === VALIDATE_PATH ? hooks?.start() : undefined;
    if (end) res.once('close', () => end(res.statusCode));
    handle(req, res, rules, ctx, log).catch((e: unknown) => {
      log.error('Webhook request failed', { err: (e as Error).message });
      if (!res.headersSent) send(res, 500, { error: 'internal error' });
    });
  });
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(opts.port, opts.host ?? '0.0.0.0', () => {
      s.off('error', reject);
      resolve();
    });
  });
  const address = s.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  log.info('Serving the webhook', { host: opts.host ?? '0.0.0.0', port, path: VALIDATE_PATH });
  hooks = opts.metrics?.webhook(VALIDATE_PATH);

  return {
    port,
    async stop() {
      hooks?.remove();
      hooks = undefined;
      await watcher.stop();
      ownRest?.close();
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      });
    },
  };
}

/**
 * What the webhook reads of the API, when it has access: CAPI's version (watched for an upgrade) and the lookups
 * (overlapping checks, MachineHealthChecks). `ownRest` is the client it made itself, closed when it stops.
 */
function apiAccess(opts: WebhookServerOptions, log: WebhookLogger): { ownRest?: RestClient; ctx: DecideContext } {
  const ownRest =
    !opts.rest && opts.access ? new RestClient(opts.access, { userAgent: WEBHOOK_USER_AGENT }) : undefined;
  const rest = opts.rest ?? ownRest;
  const discover = opts.discoverCapi ?? (rest ? () => discoverCapi(rest) : undefined);
  const capi = discover
    ? new CapiVersionWatch(discover, {
        ...(opts.capiRefreshMs !== undefined ? { refreshMs: opts.capiRefreshMs } : {}),
        onChange: (f) =>
          log.info('Webhook found CAPI', {
            apiVersion: f.apiVersion,
            minor: f.minor,
            version: f.version,
            source: f.source,
          }),
        onError: (e) => log.warn('Webhook CAPI discovery failed', { err: e }),
      })
    : undefined;
  void capi?.start();
  const lookups = opts.lookups ?? (rest && capi ? restLookups(rest, capi) : undefined);
  const ctx: DecideContext = { ...(lookups ? { lookups } : {}), ...(capi ? { capi: () => capi.get() } : {}) };
  return { ...(ownRest ? { ownRest } : {}), ctx };
}

/** The HTTPS server on the serving certificate, reloaded when it changes. */
async function tlsServer(
  opts: WebhookServerOptions,
  log: WebhookLogger,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ server: Server; watcher: CertWatcher }> {
  // eslint-disable-next-line prefer-const -- declared before the handlers that close over it
  let server: Server | undefined;
  const tls = {
    minVersion: opts.tls?.minVersion ?? 'TLSv1.2',
    ...(opts.tls?.ciphers ? { ciphers: opts.tls.ciphers } : {}),
    ...(opts.tls?.ecdhCurve ? { ecdhCurve: opts.tls.ecdhCurve } : {}),
  } as const;
  const { watcher, pair } = await CertWatcher.start({
    certFile: opts.certFile,
    keyFile: opts.keyFile,
    pollMs: opts.certPollMs,
    onChange: (p) => {
      server?.setSecureContext({ cert: p.cert, key: p.key, ...tls });
      log.info('Webhook serving certificate reloaded', { certFile: opts.certFile });
    },
    onError: (e) => log.warn('Webhook serving certificate not reloaded, keeping the current one', { err: e.message }),
  });
  server = createServer({ cert: pair.cert, key: pair.key, ...tls }, handler);
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  return { server, watcher };
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  rules: SpecRules,
  ctx: DecideContext,
  log: WebhookLogger,
) {
  const path = (req.url ?? '').split('?')[0];
  if (req.method === 'GET' && (path === '/healthz' || path === '/readyz')) return send(res, 200, { ok: true });
  if (path !== VALIDATE_PATH) return send(res, 404, { error: `no webhook at ${path}` });
  if (req.method !== 'POST') return send(res, 405, { error: 'POST an AdmissionReview' });

  const body = await readBody(req);
  if (body === undefined) return send(res, 413, { error: 'request body too large' });
  const parsed = parseReview(body);
  if ('error' in parsed) return send(res, 400, { error: parsed.error });
  const review = parsed.review;
  const request = review.request!;

  let response: AdmissionResponse;
  if (request.operation !== 'CREATE' && request.operation !== 'UPDATE') {
    response = allow(request.uid);
  } else {
    const d = await decide(request, rules, ctx);
    const name = objectName(request.object) ?? request.name;
    if (d.internalError) response = denyInternal(request.uid, d.internalError);
    else if (d.problems.length > 0) response = denyInvalid(request.uid, name, d.problems, d.warnings);
    else response = allow(request.uid, d.warnings);
  }
  log.debug('Admission request answered', {
    path,
    operation: request.operation,
    namespace: request.namespace,
    name: request.name,
    allowed: response.allowed,
    warnings: response.warnings?.length ?? 0,
  });
  const out: AdmissionReview = reviewOf(review.apiVersion, response);
  send(res, 200, out);
}

function objectName(obj: unknown): string | undefined {
  const meta = (obj as { metadata?: { name?: unknown } } | undefined)?.metadata;
  return typeof meta?.name === 'string' ? meta.name : undefined;
}

function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) tooLarge = true;
      else chunks.push(c);
    });
    req.on('end', () => resolve(tooLarge ? undefined : Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function send(res: ServerResponse, code: number, body: unknown): void {
  const data = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) });
  res.end(data);
}
