// Where the apiserver is and how to authenticate to it, from a kubeconfig or the pod's ServiceAccount,
// without @kubernetes/client-node (importing it costs ~60 MiB RSS and ~0.9 s at start). Covers what CAPI's
// kubeconfigs and in-cluster controllers use: CA, client certificates, bearer tokens (inline or a file that
// is re-read as it rotates), insecure-skip-tls-verify, tls-server-name, http:// servers. Exec plugins and
// auth providers load client-node lazily, on the first request only
// (docs/decisions/runtime-client-informers-leader-election.md).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';

export interface ClusterAccess {
  server: URL;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTLSVerify?: boolean;
  /** SNI and certificate name to check instead of the server's host (kubeconfig `tls-server-name`). */
  tlsServerName?: string;
  /** Bearer token, re-read when it can change (in-cluster ServiceAccount token file). */
  token?(): Promise<string | undefined>;
  /** Where this came from, for logs ("in-cluster", "kubeconfig /path (context x)"). Never a secret. */
  source?: string;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-go re-reads a token file every minute with 10 s leeway (transport.NewCachedFileTokenSource). */
const TOKEN_FILE_PERIOD_MS = 50_000;

type Named<T> = { name?: string } & Record<string, T | undefined>;
type Entry = Record<string, unknown>;

/**
 * controller-runtime's precedence (pkg/client/config GetConfig): an explicit path, then $KUBECONFIG, then
 * the in-cluster ServiceAccount, then ~/.kube/config.
 */
export function loadClusterAccess(
  o: { kubeconfigPath?: string; context?: string } = {},
  env: NodeJS.ProcessEnv = process.env,
): ClusterAccess {
  if (o.kubeconfigPath) return fromFiles([o.kubeconfigPath], o.context);
  const listed = (env['KUBECONFIG'] ?? '').split(path.delimiter).filter((f) => f !== '');
  if (listed.length > 0) return fromFiles(listed, o.context);
  if (env['KUBERNETES_SERVICE_HOST'] && env['KUBERNETES_SERVICE_PORT']) return inClusterAccess(env);
  const home = path.join(env['HOME'] ?? os.homedir(), '.kube', 'config');
  if (fs.existsSync(home)) return fromFiles([home], o.context);
  throw new Error(
    'no kubeconfig: pass --kubeconfig, set $KUBECONFIG, run in a pod with a ServiceAccount, or create ~/.kube/config',
  );
}

/** The pod's ServiceAccount, as client-go's rest.InClusterConfig. */
export function inClusterAccess(env: NodeJS.ProcessEnv = process.env, dir = SERVICE_ACCOUNT_DIR): ClusterAccess {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (!host || !port)
    throw new Error('not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set');
  const tokenFile = path.join(dir, 'token');
  if (!fs.existsSync(tokenFile)) throw new Error(`not in a cluster: no ServiceAccount token at ${tokenFile}`);
  const caFile = path.join(dir, 'ca.crt');
  return {
    server: new URL(`https://${host.includes(':') ? `[${host}]` : host}:${port}`),
    ...(fs.existsSync(caFile) ? { ca: fs.readFileSync(caFile) } : {}),
    token: tokenFromFile(tokenFile),
    source: 'in-cluster',
  };
}

/** A kubeconfig's text (one file; e.g. the `value` of CAPI's `<cluster>-kubeconfig` Secret). */
export function clusterAccessFromKubeconfig(yamlText: string, context?: string, baseDir?: string): ClusterAccess {
  return resolve(parseConfig(yamlText, 'the kubeconfig'), context, baseDir, 'kubeconfig');
}

interface Config {
  clusters: Named<Entry>[];
  users: Named<Entry>[];
  contexts: Named<Entry>[];
  currentContext?: string;
  /** The directory each named entry's relative paths are resolved against (its file's). */
  dirs: Map<object, string>;
}

function parseConfig(text: string, what: string, dir?: string): Config {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw new Error(`${what} is not YAML: ${(e as Error).message}`);
  }
  const d = (doc ?? {}) as Record<string, unknown>;
  if (typeof d !== 'object' || Array.isArray(d)) throw new Error(`${what} is not a kubeconfig (not a mapping)`);
  const list = (k: string) => (Array.isArray(d[k]) ? (d[k] as Named<Entry>[]) : []);
  const cfg: Config = { clusters: list('clusters'), users: list('users'), contexts: list('contexts'), dirs: new Map() };
  if (typeof d['current-context'] === 'string' && d['current-context'] !== '')
    cfg.currentContext = d['current-context'];
  if (dir !== undefined) for (const e of [...cfg.clusters, ...cfg.users, ...cfg.contexts]) cfg.dirs.set(e, dir);
  return cfg;
}

/** Several files ($KUBECONFIG=a:b) merge as client-go does: the first file to name an entry wins. */
function fromFiles(files: string[], context?: string): ClusterAccess {
  const merged: Config = { clusters: [], users: [], contexts: [], dirs: new Map() };
  for (const f of files) {
    let text: string;
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch (e) {
      if (files.length > 1 && (e as NodeJS.ErrnoException).code === 'ENOENT') continue; // client-go skips missing ones
      throw new Error(`cannot read kubeconfig ${f}: ${(e as Error).message}`);
    }
    const c = parseConfig(text, `kubeconfig ${f}`, path.dirname(path.resolve(f)));
    merged.currentContext ??= c.currentContext;
    for (const k of ['clusters', 'users', 'contexts'] as const) {
      for (const e of c[k]) if (!merged[k].some((m) => m.name === e.name)) merged[k].push(e);
    }
    for (const [e, dir] of c.dirs) merged.dirs.set(e, dir);
  }
  return resolve(merged, context, undefined, `kubeconfig ${files.join(path.delimiter)}`);
}

/** The context in use and the cluster and user it names. */
interface InUse {
  name: string;
  ctxEntry: Named<Entry>;
  clusterEntry: Named<Entry>;
  cluster: Entry;
  userEntry: Named<Entry> | undefined;
  user: Entry;
}

function resolve(cfg: Config, context: string | undefined, baseDir: string | undefined, source: string): ClusterAccess {
  const e = inUse(cfg, context, source);
  const where = `${source} (context ${e.name})`;
  const files = fileReads(cfg, baseDir, where);
  const { cluster, user } = e;

  const access: ClusterAccess = { server: serverOf(e, where), source: where };
  const ca = files.bytes(cluster, e.clusterEntry, 'certificate-authority-data', 'certificate-authority');
  if (ca) access.ca = ca;
  if (cluster['insecure-skip-tls-verify'] === true) access.insecureSkipTLSVerify = true;
  const sni = str(cluster, 'tls-server-name');
  if (sni) access.tlsServerName = sni;
  const cert = files.bytes(user, e.userEntry, 'client-certificate-data', 'client-certificate');
  const key = files.bytes(user, e.userEntry, 'client-key-data', 'client-key');
  if ((cert === undefined) !== (key === undefined))
    throw new Error(`${where}: a client certificate needs both the certificate and its key`);
  if (cert && key) Object.assign(access, { cert, key });
  const token = tokenOf(e, where, files.file);
  if (token) access.token = token;
  return access;
}

function inUse(cfg: Config, context: string | undefined, source: string): InUse {
  const name = context ?? cfg.currentContext;
  if (!name) throw new Error(`${source} has no current-context and none was given`);
  const ctxEntry = cfg.contexts.find((c) => c.name === name);
  if (!ctxEntry) throw new Error(`${source} has no context named ${JSON.stringify(name)}`);
  const ctx = ctxEntry['context'] ?? {};
  const clusterEntry = cfg.clusters.find((c) => c.name === ctx['cluster']);
  if (!clusterEntry)
    throw new Error(
      `${source}: context ${JSON.stringify(name)} names no known cluster (${JSON.stringify(ctx['cluster'])})`,
    );
  const cluster = clusterEntry['cluster'] ?? {};
  const userEntry =
    ctx['user'] === undefined || ctx['user'] === '' ? undefined : cfg.users.find((u) => u.name === ctx['user']);
  if (ctx['user'] && !userEntry)
    throw new Error(`${source}: context ${JSON.stringify(name)} names no known user (${JSON.stringify(ctx['user'])})`);
  const user = userEntry?.['user'] ?? {};
  return { name, ctxEntry, clusterEntry, cluster, userEntry, user };
}

const str = (o: Entry, k: string): string | undefined => (typeof o[k] === 'string' && o[k] !== '' ? o[k] : undefined);

/** Paths relative to the file that named the entry (else `baseDir`); inline base64 data before a file. */
function fileReads(cfg: Config, baseDir: string | undefined, where: string) {
  const file = (entry: object | undefined, p: string) => {
    const dir = (entry && cfg.dirs.get(entry)) ?? baseDir;
    return path.isAbsolute(p) || dir === undefined ? p : path.join(dir, p);
  };
  const bytes = (o: Entry, entry: object | undefined, dataKey: string, fileKey: string): Buffer | undefined => {
    const data = str(o, dataKey);
    if (data) return Buffer.from(data, 'base64');
    const f = str(o, fileKey);
    if (!f) return undefined;
    try {
      return fs.readFileSync(file(entry, f));
    } catch (e) {
      throw new Error(`${where}: cannot read ${fileKey} ${f}: ${(e as Error).message}`);
    }
  };
  return { file, bytes };
}

/** The cluster's server URL, refusing the fields this client does not support rather than ignoring them. */
function serverOf({ cluster, user }: InUse, where: string): URL {
  const server = str(cluster, 'server');
  if (!server) throw new Error(`${where}: the cluster has no server`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    throw new Error(`${where}: server ${JSON.stringify(server)} is not a URL`);
  }
  for (const unsupported of ['proxy-url', 'disable-compression']) {
    if (cluster[unsupported] != null) throw new Error(`${where}: cluster field ${unsupported} is not supported`);
  }
  for (const unsupported of ['username', 'password', 'as', 'as-groups', 'as-uid', 'as-user-extra']) {
    if (user[unsupported] != null) throw new Error(`${where}: user field ${unsupported} is not supported`);
  }
  return url;
}

/** The user's token: an exec or auth-provider plugin's, a token file's (re-read), or a literal token. */
function tokenOf(
  e: InUse,
  where: string,
  file: (entry: object | undefined, p: string) => string,
): (() => Promise<string | undefined>) | undefined {
  const { user } = e;
  const tokenFile = str(user, 'tokenFile');
  const token = str(user, 'token');
  if (user['exec'] != null || user['auth-provider'] != null) {
    // Only the entries in use, so a merged $KUBECONFIG hands client-node one consistent file.
    const text = stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [e.clusterEntry],
      users: [e.userEntry],
      contexts: [e.ctxEntry],
      'current-context': e.name,
    });
    return pluginToken(text, e.name, where);
  }
  if (tokenFile) return tokenFromFile(file(e.userEntry, tokenFile));
  if (token) return () => Promise.resolve(token);
  return undefined;
}

/** A token file re-read at most every 50 s (client-go's period); the last good token survives a failed read. */
export function tokenFromFile(
  file: string,
  periodMs = TOKEN_FILE_PERIOD_MS,
  now: () => number = () => performance.now(),
): () => Promise<string | undefined> {
  let cached: { token: string; at: number } | undefined;
  return async () => {
    if (cached && now() - cached.at < periodMs) return cached.token;
    try {
      const token = (await fs.promises.readFile(file, 'utf8')).trim();
      cached = { token, at: now() };
    } catch (e) {
      if (!cached) throw new Error(`cannot read token file ${file}: ${(e as Error).message}`);
    }
    return cached.token;
  };
}

/**
 * exec plugins and auth providers: client-node runs them (and caches their credentials until they expire);
 * it is imported on the first request that needs a token, so no one else pays for it.
 */
function pluginToken(text: string, context: string, where: string): () => Promise<string | undefined> {
  let kc: Promise<{ applyToHTTPSOptions(o: Record<string, unknown>): Promise<void> }> | undefined;
  return async () => {
    kc ??= import('@kubernetes/client-node').then((m) => {
      const c = new m.KubeConfig();
      c.loadFromString(text);
      c.setCurrentContext(context);
      return c;
    });
    const o: { headers?: Record<string, string>; cert?: unknown } = {};
    await (await kc).applyToHTTPSOptions(o);
    if (o.cert !== undefined && !o.headers?.['Authorization'])
      throw new Error(`${where}: an exec plugin that returns a client certificate is not supported`);
    const auth = o.headers?.['Authorization'];
    return auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length) : undefined;
  };
}
