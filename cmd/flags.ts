// The `joinguard` command's flags, spelled and defaulted as CAPI v1.14's managers spell them (core/main.go,
// util/flags, component-base's logging flags), plus JoinGuard's own. pflag's syntax: `--name=value`,
// `--name value`, a bare `--name` for true, `-v N`/`-v=N`/`--v=N`, `-h`. An unknown flag or a bad value
// stops the command with a message naming the flag.
import { LOG_FORMATS, type LogFormat } from '../controllers/runtime/logger.js';
import { CIPHER_SUITE_NAMES, servingTls, TLS_VERSION_NAMES } from '../controllers/runtime/serving-tls.js';

export interface Flags {
  kubeconfig?: string;
  namespace?: string;
  watchFilter?: string;
  syncPeriodMs: number;
  kubeApiQps: number;
  kubeApiBurst: number;
  leaderElect: boolean;
  leaderElectLeaseDurationMs: number;
  leaderElectRenewDeadlineMs: number;
  leaderElectRetryPeriodMs: number;
  concurrency: number;
  webhookPort: number;
  webhookCertDir: string;
  webhookCertName: string;
  webhookKeyName: string;
  tlsMinVersion: string;
  tlsCipherSuites: string[];
  diagnosticsAddress: string;
  insecureDiagnostics: boolean;
  healthProbeBindAddress: string;
  loggingFormat: LogFormat;
  verbosity: number;
  workloadNodeCheck: boolean;
  connectionGraceMs: number;
  help: boolean;
}

type Kind = 'string' | 'bool' | 'port' | 'count' | 'float' | 'duration' | 'list';

interface Spec {
  key: keyof Flags;
  kind: Kind;
  /** As `--help` prints it (Go's flag package style). */
  def: string;
  help: string;
  /** Extra validation of the parsed value; returns a problem. */
  check?: (v: any) => string | undefined;
}

const positive = (v: number): string | undefined => (v > 0 ? undefined : 'must be greater than 0');

export const FLAGS: Record<string, Spec> = {
  'diagnostics-address': { key: 'diagnosticsAddress', kind: 'string', def: ':8443', help: 'The address the diagnostics endpoint binds to. Per default metrics are served via https and with authentication/authorization (TokenReview and SubjectAccessReview; the caller needs `get` on the non-resource URL /metrics). To serve via http and without authentication/authorization set --insecure-diagnostics. 0 turns it off.' },
  'health-probe-bind-address': { key: 'healthProbeBindAddress', kind: 'string', def: ':8081', help: 'The address /healthz and /readyz bind to; 0 turns them off.' },
  help: { key: 'help', kind: 'bool', def: 'false', help: 'Print this help and exit.' },
  'insecure-diagnostics': { key: 'insecureDiagnostics', kind: 'bool', def: 'false', help: 'Enable insecure diagnostics serving. For more details see the description of --diagnostics-address.' },
  'kube-api-burst': { key: 'kubeApiBurst', kind: 'count', def: '200', help: 'Maximum number of queries that should be allowed in one burst from the controller client to the Kubernetes API server.' },
  'kube-api-qps': { key: 'kubeApiQps', kind: 'float', def: '100', help: 'Maximum queries per second from the controller client to the Kubernetes API server.', check: positive },
  kubeconfig: { key: 'kubeconfig', kind: 'string', def: '', help: 'Path to a kubeconfig. Default: in-cluster, then $KUBECONFIG, then ~/.kube/config.' },
  'leader-elect': { key: 'leaderElect', kind: 'bool', def: 'false', help: 'Enable leader election for controller manager. Enabling this will ensure there is only one active controller manager.' },
  'leader-elect-lease-duration': { key: 'leaderElectLeaseDurationMs', kind: 'duration', def: '15s', help: 'Interval at which non-leader candidates will wait to force acquire leadership (duration string)' },
  'leader-elect-renew-deadline': { key: 'leaderElectRenewDeadlineMs', kind: 'duration', def: '10s', help: 'Duration that the leading controller manager will retry refreshing leadership before giving up (duration string)' },
  'leader-elect-retry-period': { key: 'leaderElectRetryPeriodMs', kind: 'duration', def: '2s', help: 'Duration the LeaderElector clients should wait between tries of actions (duration string)' },
  'logging-format': { key: 'loggingFormat', kind: 'string', def: 'text', help: `Sets the log format. Permitted formats: ${LOG_FORMATS.map((f) => `"${f}"`).join(', ')}.`, check: ((v: string) => (LOG_FORMATS.includes(v as LogFormat) ? undefined : `must be one of ${LOG_FORMATS.join(', ')}`)) },
  'machinejoincheck-concurrency': { key: 'concurrency', kind: 'count', def: '2', help: 'Number of MachineJoinChecks to process simultaneously' },
  namespace: { key: 'namespace', kind: 'string', def: '', help: 'Namespace that the controller watches to reconcile cluster-api objects. If unspecified, the controller watches for cluster-api objects across all namespaces.' },
  'sync-period': { key: 'syncPeriodMs', kind: 'duration', def: '10m0s', help: 'The minimum interval at which watched resources are reconciled (e.g. 15m)' },
  'tls-cipher-suites': { key: 'tlsCipherSuites', kind: 'list', def: '[]', help: `Comma-separated list of cipher suites for the webhook server and metrics server (the latter only if --insecure-diagnostics is not set to true). If omitted, the default Node.js cipher suites will be used. Possible values: ${CIPHER_SUITE_NAMES.join(', ')}.`, check: ((v: string[]) => tlsProblem('VersionTLS12', v)) },
  'tls-min-version': { key: 'tlsMinVersion', kind: 'string', def: 'VersionTLS12', help: `The minimum TLS version in use by the webhook server and metrics server (the latter only if --insecure-diagnostics is not set to true). Possible values are ${TLS_VERSION_NAMES.join(', ')}.`, check: ((v: string) => tlsProblem(v, [])) },
  v: { key: 'verbosity', kind: 'count', def: '0', help: 'number for the log level verbosity (also -v)' },
  'watch-filter': { key: 'watchFilter', kind: 'string', def: '', help: 'Label value that the controller watches to reconcile cluster-api objects. Label key is always cluster.x-k8s.io/watch-filter. If unspecified, the controller watches for all cluster-api objects.' },
  'webhook-cert-dir': { key: 'webhookCertDir', kind: 'string', def: '/tmp/k8s-webhook-server/serving-certs/', help: 'Webhook cert dir. Its certificate also serves the diagnostics endpoint when present (else a self-signed one).' },
  'webhook-cert-name': { key: 'webhookCertName', kind: 'string', def: 'tls.crt', help: "Name of the file for webhook's server certificate; the file must be placed under webhook-cert-dir." },
  'webhook-key-name': { key: 'webhookKeyName', kind: 'string', def: 'tls.key', help: "Name of the file for webhook's server key; the file must be placed under webhook-cert-dir." },
  'webhook-port': { key: 'webhookPort', kind: 'port', def: '9443', help: 'Webhook Server port; 0 turns the admission webhooks off.' },
  'connection-grace': { key: 'connectionGraceMs', kind: 'duration', def: '2m0s', help: "Wait after a workload cluster's connection is back before Machine verdicts resume." },
  'workload-node-check': { key: 'workloadNodeCheck', kind: 'bool', def: 'false', help: "Read <cluster>-kubeconfig Secrets and count a Node with the Machine's providerID as joined (needs the Secrets grant)." },
};

const SHORT: Record<string, string> = { v: 'v', h: 'help' };

/**
 * The flags of JoinGuard v0.1, still accepted with a warning (as CAPI kept --metrics-bind-addr for a release
 * when it moved to --diagnostics-address); not in --help.
 */
const DEPRECATED: Record<string, { use: string; apply: (f: Flags, value: string) => void }> = {
  'metrics-bind-address': {
    use: '--diagnostics-address (HTTPS with authentication) or --diagnostics-address with --insecure-diagnostics',
    apply: (f, v) => {
      f.diagnosticsAddress = v;
      f.insecureDiagnostics = true;
    },
  },
  'log-level': {
    use: '-v (4 for debug)',
    apply: (f, v) => {
      if (!['error', 'warn', 'info', 'debug'].includes(v)) throw new Error(`invalid argument ${JSON.stringify(v)} for "--log-level" flag: not one of error, warn, info, debug`);
      f.verbosity = v === 'debug' ? 4 : 0;
    },
  },
};

function tlsProblem(version: string, suites: string[]): string | undefined {
  try {
    servingTls(version, suites);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** The flags with every default applied. */
export function defaults(parseDuration: (s: string) => number): Flags {
  const f: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(FLAGS)) if (s.def !== '') f[s.key] = convert(name, s, s.def === '[]' ? '' : s.def, parseDuration);
  return f as unknown as Flags;
}

function convert(name: string, spec: Spec, value: string, parseDuration: (s: string) => number): unknown {
  const bad = (why: string) => new Error(`invalid argument ${JSON.stringify(value)} for "--${name}" flag: ${why}`);
  switch (spec.kind) {
    case 'bool':
      if (value === 'true') return true;
      if (value === 'false') return false;
      throw bad('not true or false');
    case 'port':
    case 'count': {
      const n = Number(value);
      const max = spec.kind === 'port' ? 65535 : 2 ** 31 - 1;
      if (!/^\d+$/.test(value) || n > max) throw bad(spec.kind === 'port' ? 'not a port number (0-65535)' : 'not a whole number (0 or more)');
      return n;
    }
    case 'float': {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw bad('not a number');
      return n;
    }
    case 'duration':
      try {
        return parseDuration(value);
      } catch (e) {
        throw bad((e as Error).message);
      }
    case 'list':
      return value === '' ? [] : value.split(',').map((x) => x.trim());
    default:
      return value;
  }
}

/** Parses argv; `warnings` receives one line per deprecated flag used. */
export function parseFlags(argv: string[], parseDuration: (s: string) => number, warnings: string[] = []): Flags {
  const out = defaults(parseDuration) as unknown as Record<string, unknown>;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/s.exec(arg) ?? /^-([a-z])(?:=?(.+))?$/s.exec(arg);
    if (!m) throw new Error(`unexpected argument ${JSON.stringify(arg)} (flags are --name=value)`);
    const name = arg.startsWith('--') ? m[1]! : SHORT[m[1]!];
    const old = name === undefined ? undefined : DEPRECATED[name];
    if (old) {
      const value = m[2] ?? argv[++i];
      if (value === undefined) throw new Error(`flag needs an argument: --${name}`);
      old.apply(out as unknown as Flags, value);
      warnings.push(`Flag --${name} has been deprecated, use ${old.use}`);
      continue;
    }
    const spec = name === undefined ? undefined : FLAGS[name];
    if (!spec || name === undefined) throw new Error(`unknown flag: ${arg.split('=')[0]} (see --help)`);
    let value = m[2];
    if (value === undefined) {
      if (spec.kind === 'bool') value = 'true';
      else {
        value = argv[++i];
        if (value === undefined) throw new Error(`flag needs an argument: --${name}`);
      }
    }
    const v = convert(name, spec, value, parseDuration);
    const problem = spec.check?.(v);
    if (problem) throw new Error(`invalid argument ${JSON.stringify(value)} for "--${name}" flag: ${problem}`);
    out[spec.key] = v;
  }
  const f = out as unknown as Flags;
  if (f.concurrency < 1) throw new Error('--machinejoincheck-concurrency: must be at least 1');
  if (f.kubeApiBurst < 1) throw new Error('--kube-api-burst: must be at least 1');
  // client-go's NewLeaderElector rules.
  if (f.leaderElectLeaseDurationMs <= f.leaderElectRenewDeadlineMs) throw new Error('--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline');
  if (f.leaderElectRenewDeadlineMs <= 1.2 * f.leaderElectRetryPeriodMs) throw new Error('--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period');
  if (f.leaderElectRetryPeriodMs < 1) throw new Error('--leader-elect-retry-period must be greater than zero');
  const tls = tlsProblem(f.tlsMinVersion, f.tlsCipherSuites);
  if (tls) throw new Error(`--tls-min-version/--tls-cipher-suites: ${tls}`);
  return f;
}

const KIND_TYPE: Record<Kind, string> = { string: 'string', bool: '', port: 'int', count: 'int', float: 'float32', duration: 'duration', list: 'strings' };

/** Every flag with its type, default and description, sorted by name as pflag prints them. */
export function usage(): string {
  const lines = Object.entries(FLAGS)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([n, s]) => {
      const head = `${n === 'v' ? '  -v, --v' : `      --${n}`}${KIND_TYPE[s.kind] ? ` ${KIND_TYPE[s.kind]}` : ''}`;
      const def = n === 'help' ? '' : ` (default ${s.kind === 'string' ? JSON.stringify(s.def) : s.def})`;
      return `${head}\n          ${s.help}${def}`;
    });
  return `joinguard: rescues Cluster API Machines that never join, and stops rebuilding when the join credential or network is at fault.\n\nUsage: joinguard [flags]\n\nFlags:\n${lines.join('\n')}\n`;
}
