// The `joinguard` command's flags: every flag of CAPI v1.14's managers that means the same thing in JoinGuard,
// with CAPI's spelling, type and default (core/main.go, util/flags, component-base's logging flags; the list
// and what is not taken, with why, are in capi-flags.ts), plus JoinGuard's own. pflag's syntax: `--name=value`,
// `--name value`, a bare `--name` for true, `-v N`/`-v=N`/`--v=N`, `-h`. An unknown flag or a bad value stops
// the command with a message naming the flag.
import { LOG_FORMATS, parseVmodule, type LogFormat, type VmoduleRule } from '../controllers/runtime/logger.js';
import { CIPHER_SUITE_NAMES, servingTls, TLS_VERSION_NAMES } from '../controllers/runtime/serving-tls.js';
import { NOT_TAKEN } from './capi-flags.js';

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
  leaderElectResourceName: string;
  concurrency: number;
  webhookPort: number;
  webhookCertDir: string;
  webhookCertName: string;
  webhookKeyName: string;
  tlsMinVersion: string;
  tlsCipherSuites: string[];
  tlsCurvePreferences: number[];
  diagnosticsAddress: string;
  insecureDiagnostics: boolean;
  healthAddr: string;
  profilerAddress: string;
  featureGates: Record<string, boolean>;
  loggingFormat: LogFormat;
  verbosity: number;
  vmodule: VmoduleRule[];
  logFlushFrequencyMs: number;
  logJsonSplitStream: boolean;
  logTextSplitStream: boolean;
  logJsonInfoBufferSize: string;
  logTextInfoBufferSize: string;
  workloadNodeCheck: boolean;
  allowMachineDelete: boolean;
  connectionGraceMs: number;
  help: boolean;
}

type Kind = 'string' | 'bool' | 'port' | 'count' | 'float' | 'duration' | 'list' | 'int32list' | 'gates' | 'vmodule' | 'quantity' | 'level';

interface Spec {
  key: keyof Flags;
  kind: Kind;
  /** As `--help` prints it (pflag's style); '' prints no default. */
  def: string;
  help: string;
  /** Extra validation of the parsed value; returns a problem. */
  check?: (v: any) => string | undefined;
}

const positive = (v: number): string | undefined => (v > 0 ? undefined : 'must be greater than 0');
// component-base: the alpha logging options need the LoggingAlphaOptions gate, which CAPI's managers do not
// register, so only their defaults are accepted there; the same here.
const alphaOff = (isDefault: (v: any) => boolean) => (v: any) => (isDefault(v) ? undefined : 'Feature LoggingAlphaOptions is disabled');

/** Feature gates: JoinGuard has none of its own yet; component-base's two umbrella gates are always known. */
export const FEATURE_GATES: Record<string, { stage: 'ALPHA' | 'BETA'; default: boolean }> = {
  AllAlpha: { stage: 'ALPHA', default: false },
  AllBeta: { stage: 'BETA', default: false },
};

/** Go's crypto/tls CurveIDs (component-base's --tls-curve-preferences) and OpenSSL's names for them. */
export const CURVES: Record<number, string> = {
  23: 'P-256',
  24: 'P-384',
  25: 'P-521',
  29: 'X25519',
  4587: 'SecP256r1MLKEM768',
  4588: 'X25519MLKEM768',
  4589: 'SecP384r1MLKEM1024',
};

const gatesHelp = Object.entries(FEATURE_GATES).map(([n, g]) => `${n}=true|false (${g.stage} - default=${g.default})`).join('\n');

export const FLAGS: Record<string, Spec> = {
  'allow-machine-delete': { key: 'allowMachineDelete', kind: 'bool', def: 'false', help: 'Allow remediation.strategy Delete: JoinGuard then deletes Machines itself (needs the Machine delete grant, JOINGUARD_ALLOW_MACHINE_DELETE=true). Off: a check with strategy Delete deletes nothing and says Ready=False/MachineDeleteNotAllowed.' },
  'connection-grace': { key: 'connectionGraceMs', kind: 'duration', def: '2m0s', help: "Wait after a workload cluster's connection is back (RemoteConnectionProbe True again) before Machine verdicts resume. Not CAPI's --remote-connection-grace-period, which decides when the connection counts as lost." },
  'diagnostics-address': { key: 'diagnosticsAddress', kind: 'string', def: ':8443', help: 'The address the diagnostics endpoint binds to. Per default metrics are served via https and with authentication/authorization (TokenReview and SubjectAccessReview; the caller needs `get` on the non-resource URL /metrics). To serve via http and without authentication/authorization set --insecure-diagnostics. 0 turns it off.' },
  'feature-gates': { key: 'featureGates', kind: 'gates', def: '', help: `A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:\n${gatesHelp}` },
  'health-addr': { key: 'healthAddr', kind: 'string', def: ':9440', help: 'The address the health endpoint binds to (/healthz, /readyz); 0 turns it off.' },
  help: { key: 'help', kind: 'bool', def: 'false', help: 'Print this help and exit.' },
  'insecure-diagnostics': { key: 'insecureDiagnostics', kind: 'bool', def: 'false', help: 'Enable insecure diagnostics serving. For more details see the description of --diagnostics-address.' },
  'kube-api-burst': { key: 'kubeApiBurst', kind: 'count', def: '200', help: 'Maximum number of queries that should be allowed in one burst from the controller client to the Kubernetes API server.' },
  'kube-api-qps': { key: 'kubeApiQps', kind: 'float', def: '100', help: 'Maximum queries per second from the controller client to the Kubernetes API server.', check: positive },
  kubeconfig: { key: 'kubeconfig', kind: 'string', def: '', help: 'Paths to a kubeconfig. Only required if out-of-cluster.' },
  'leader-elect': { key: 'leaderElect', kind: 'bool', def: 'false', help: 'Enable leader election for controller manager. Enabling this will ensure there is only one active controller manager. Without it, run exactly one replica.' },
  'leader-elect-lease-duration': { key: 'leaderElectLeaseDurationMs', kind: 'duration', def: '15s', help: 'Interval at which non-leader candidates will wait to force acquire leadership (duration string)' },
  'leader-elect-renew-deadline': { key: 'leaderElectRenewDeadlineMs', kind: 'duration', def: '10s', help: 'Duration that the leading controller manager will retry refreshing leadership before giving up (duration string)' },
  'leader-elect-resource-name': { key: 'leaderElectResourceName', kind: 'string', def: 'joinguard-leader', help: "The name of the Lease used for leader election, always in the pod's namespace (as Kubernetes components spell this flag). With --watch-filter=X and this flag unset: joinguard-leader-X, so each shard elects its own leader." },
  'leader-elect-retry-period': { key: 'leaderElectRetryPeriodMs', kind: 'duration', def: '2s', help: 'Duration the LeaderElector clients should wait between tries of actions (duration string)' },
  'log-flush-frequency': { key: 'logFlushFrequencyMs', kind: 'duration', def: '5s', help: 'Maximum number of seconds between log flushes (JoinGuard writes every line at once: nothing waits for a flush).', check: positive },
  'log-json-info-buffer-size': { key: 'logJsonInfoBufferSize', kind: 'quantity', def: '', help: '[Alpha] In JSON format with split output streams, the info messages can be buffered for a while to increase performance. Only 0 (no buffering): the LoggingAlphaOptions feature gate is not available, as in CAPI.', check: alphaOff((v: string) => /^0+$/.test(v)) },
  'log-json-split-stream': { key: 'logJsonSplitStream', kind: 'bool', def: 'false', help: '[Alpha] In JSON format, write error messages to stderr and info messages to stdout. Only false: the LoggingAlphaOptions feature gate is not available, as in CAPI.', check: alphaOff((v: boolean) => !v) },
  'log-text-info-buffer-size': { key: 'logTextInfoBufferSize', kind: 'quantity', def: '', help: '[Alpha] In text format with split output streams, the info messages can be buffered for a while to increase performance. Only 0 (no buffering): the LoggingAlphaOptions feature gate is not available, as in CAPI.', check: alphaOff((v: string) => /^0+$/.test(v)) },
  'log-text-split-stream': { key: 'logTextSplitStream', kind: 'bool', def: 'false', help: '[Alpha] In text format, write error messages to stderr and info messages to stdout. Only false: the LoggingAlphaOptions feature gate is not available, as in CAPI.', check: alphaOff((v: boolean) => !v) },
  'logging-format': { key: 'loggingFormat', kind: 'string', def: 'text', help: `Sets the log format. Permitted formats: ${LOG_FORMATS.map((f) => `"${f}"`).join(', ')}.`, check: ((v: string) => (LOG_FORMATS.includes(v as LogFormat) ? undefined : `must be one of ${LOG_FORMATS.join(', ')}`)) },
  'machinejoincheck-concurrency': { key: 'concurrency', kind: 'count', def: '2', help: 'Number of MachineJoinChecks to process simultaneously' },
  namespace: { key: 'namespace', kind: 'string', def: '', help: 'Namespace that the controller watches to reconcile cluster-api objects. If unspecified, the controller watches for cluster-api objects across all namespaces.' },
  'profiler-address': { key: 'profilerAddress', kind: 'string', def: '', help: "Bind address to expose the profiler (e.g. localhost:6060): Node's CPU profile at /debug/pprof/profile?seconds=N and a heap snapshot at /debug/pprof/heap, for Chrome DevTools. Plain HTTP without authentication, as CAPI's; bind it to localhost." },
  'sync-period': { key: 'syncPeriodMs', kind: 'duration', def: '10m0s', help: 'The minimum interval at which watched resources are reconciled (e.g. 15m)' },
  'tls-cipher-suites': { key: 'tlsCipherSuites', kind: 'list', def: '', help: `Comma-separated list of cipher suites for the webhook server and metrics server (the latter only if --insecure-diagnostics is not set to true). If omitted, the default Node.js cipher suites will be used. Possible values: ${CIPHER_SUITE_NAMES.join(', ')}.`, check: ((v: string[]) => tlsProblem('VersionTLS12', v)) },
  'tls-curve-preferences': { key: 'tlsCurvePreferences', kind: 'int32list', def: '[]', help: `Comma-separated list of numeric Go crypto/tls CurveID values, as the allowed key exchange mechanisms for the webhook server and metrics server (the latter only if --insecure-diagnostics is not set to true). Supported: ${Object.entries(CURVES).map(([id, n]) => `${id} (${n})`).join(', ')}. If omitted, the default Node.js curves will be used.`, check: curvesProblem },
  'tls-min-version': { key: 'tlsMinVersion', kind: 'string', def: 'VersionTLS12', help: `The minimum TLS version in use by the webhook server and metrics server (the latter only if --insecure-diagnostics is not set to true). Possible values are ${TLS_VERSION_NAMES.join(', ')}.`, check: ((v: string) => tlsProblem(v, [])) },
  v: { key: 'verbosity', kind: 'level', def: '2', help: 'number for the log level verbosity' },
  vmodule: { key: 'vmodule', kind: 'vmodule', def: '', help: 'comma-separated list of pattern=N settings for file-filtered logging (only works for text log format)' },
  'watch-filter': { key: 'watchFilter', kind: 'string', def: '', help: 'Label value that the controller watches to reconcile cluster-api objects. Label key is always cluster.x-k8s.io/watch-filter. If unspecified, the controller watches for all cluster-api objects.' },
  'webhook-cert-dir': { key: 'webhookCertDir', kind: 'string', def: '/tmp/k8s-webhook-server/serving-certs/', help: 'Webhook cert dir. Its certificate also serves the diagnostics endpoint when present (else a self-signed one).' },
  'webhook-cert-name': { key: 'webhookCertName', kind: 'string', def: 'tls.crt', help: "Name of the file for webhook's server certificate; the file must be placed under webhook-cert-dir." },
  'webhook-key-name': { key: 'webhookKeyName', kind: 'string', def: 'tls.key', help: "Name of the file for webhook's server key; the file must be placed under webhook-cert-dir." },
  'webhook-port': { key: 'webhookPort', kind: 'port', def: '9443', help: 'Webhook Server port; 0 turns the admission webhooks off.' },
  'workload-node-check': { key: 'workloadNodeCheck', kind: 'bool', def: 'false', help: "Read <cluster>-kubeconfig Secrets and count a Node with the Machine's providerID as joined (needs the Secrets grant)." },
};

const SHORT: Record<string, string> = { v: 'v', h: 'help' };
const DEFAULT_LEASE = 'joinguard-leader';
/** A Lease's name: a lower-case DNS subdomain. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * Older JoinGuard flags, still accepted with a warning (as CAPI kept --metrics-bind-addr for a release when it
 * moved to --diagnostics-address); not in --help.
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
  'health-probe-bind-address': {
    use: "--health-addr (CAPI's name; its default is :9440)",
    apply: (f, v) => {
      f.healthAddr = v;
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

/** component-base's TLSCurvePreferences rules, on the curves Node's OpenSSL offers. */
function curvesProblem(ids: number[]): string | undefined {
  const seen = new Set<number>();
  for (const id of ids) {
    if (id <= 0 || id > 65535) return `curve preference ${id} is out of range (must be 1-65535)`;
    if (seen.has(id)) return `duplicate curve preference ${id}`;
    seen.add(id);
    if (!CURVES[id]) return `curve preference ${id} is not supported (supported: ${Object.keys(CURVES).join(', ')})`;
  }
  return undefined;
}

/** --tls-curve-preferences as Node's `ecdhCurve` option (undefined keeps Node's defaults). */
export function ecdhCurve(ids: number[]): string | undefined {
  return ids.length === 0 ? undefined : ids.map((id) => CURVES[id]!).join(':');
}

function parseGates(value: string): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const part of value.split(',').map((s) => s.trim()).filter((s) => s !== '')) {
    const [k, v, ...rest] = part.split('=').map((s) => s.trim());
    if (!k || v === undefined || rest.length > 0) throw new Error(`missing bool value for ${part}`);
    if (v !== 'true' && v !== 'false') throw new Error(`invalid value of ${k}=${v}, err: strconv.ParseBool: parsing ${JSON.stringify(v)}: invalid syntax`);
    if (!FEATURE_GATES[k]) throw new Error(`unrecognized feature gate: ${k}`);
    out[k] = v === 'true';
  }
  return out;
}

/** The flags with every default applied. */
export function defaults(parseDuration: (s: string) => number): Flags {
  const f: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(FLAGS)) f[s.key] = convert(name, s, s.def === '[]' ? '' : s.def, parseDuration);
  for (const k of ['kubeconfig', 'namespace', 'watchFilter']) if (f[k] === '') delete f[k];
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
    case 'count':
    case 'level': {
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
    case 'int32list': {
      const parts = value === '' ? [] : value.split(',').map((x) => x.trim());
      if (parts.some((p) => !/^-?\d+$/.test(p))) throw bad('not a list of whole numbers');
      return parts.map(Number);
    }
    case 'gates':
      try {
        return parseGates(value);
      } catch (e) {
        throw bad((e as Error).message);
      }
    case 'vmodule':
      try {
        return parseVmodule(value);
      } catch (e) {
        throw bad((e as Error).message);
      }
    case 'quantity':
      if (value === '') return '0';
      if (!/^\d+(\.\d+)?([KMGTPE]i?|[kmun])?$/.test(value)) throw bad('not a quantity (512, 1K, 2Ki, 3M ...)');
      return value;
    default:
      return value;
  }
}

/** Parses argv; `warnings` receives one line per deprecated flag used. */
export function parseFlags(argv: string[], parseDuration: (s: string) => number, warnings: string[] = []): Flags {
  const out = defaults(parseDuration) as unknown as Record<string, unknown>;
  const given = new Set<string>();
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
    if (!spec || name === undefined) {
      const flag = arg.split('=')[0]!;
      const capi = name === undefined ? undefined : NOT_TAKEN[name];
      throw new Error(capi ? `unknown flag: ${flag} (${capi})` : `unknown flag: ${flag} (see --help)`);
    }
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
    given.add(name);
  }
  const f = out as unknown as Flags;
  // A shard elects on its own Lease unless one is named: two shards on one Lease would leave one without a leader.
  if (f.watchFilter && !given.has('leader-elect-resource-name')) {
    const lease = `${DEFAULT_LEASE}-${f.watchFilter}`;
    if (!DNS_SUBDOMAIN.test(lease)) {
      throw new Error(`--watch-filter=${f.watchFilter}: the shard's Lease would be ${JSON.stringify(lease)}, not a valid name; set --leader-elect-resource-name`);
    }
    f.leaderElectResourceName = lease;
  }
  if (f.concurrency < 1) throw new Error('--machinejoincheck-concurrency: must be at least 1');
  if (f.kubeApiBurst < 1) throw new Error('--kube-api-burst: must be at least 1');
  // client-go's NewLeaderElector rules.
  if (f.leaderElectLeaseDurationMs <= f.leaderElectRenewDeadlineMs) throw new Error('--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline');
  if (f.leaderElectRenewDeadlineMs <= 1.2 * f.leaderElectRetryPeriodMs) throw new Error('--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period');
  if (f.leaderElectRetryPeriodMs < 1) throw new Error('--leader-elect-retry-period must be greater than zero');
  if (!DNS_SUBDOMAIN.test(f.leaderElectResourceName)) {
    throw new Error(`--leader-elect-resource-name: ${JSON.stringify(f.leaderElectResourceName)} is not a valid Lease name (lower-case DNS subdomain)`);
  }
  const tls = tlsProblem(f.tlsMinVersion, f.tlsCipherSuites);
  if (tls) throw new Error(`--tls-min-version/--tls-cipher-suites: ${tls}`);
  // component-base's Validate: vmodule is only supported for the text format.
  if (f.vmodule.length > 0 && f.loggingFormat !== 'text') throw new Error('--vmodule: Only supported for text log format');
  return f;
}

const KIND_TYPE: Record<Kind, string> = {
  string: 'string', bool: '', port: 'int', count: 'int', float: 'float32', duration: 'duration', list: 'strings',
  int32list: 'int32Slice', gates: 'mapStringBool', vmodule: 'pattern=N,...', quantity: 'quantity', level: 'Level',
};

/** pflag's type word of a flag as --help prints it ('' for a bool). */
export const typeWord = (name: string): string => KIND_TYPE[FLAGS[name]!.kind];

/** The default as --help prints it ('' when pflag would print none: false, empty, zero quantity). */
export function printedDefault(name: string): string {
  const s = FLAGS[name]!;
  if (name === 'help' || s.def === '' || (s.kind === 'bool' && s.def === 'false')) return '';
  return s.kind === 'string' ? JSON.stringify(s.def) : s.def;
}

/** Every flag with its type, default and description, sorted by name as pflag prints them. */
export function usage(): string {
  const lines = Object.entries(FLAGS)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([n, s]) => {
      const type = typeWord(n);
      const head = `${n === 'v' ? '  -v, --v' : n === 'help' ? '  -h, --help' : `      --${n}`}${type ? ` ${type}` : ''}`;
      const def = printedDefault(n);
      const help = s.help.split('\n').join('\n          ');
      return `${head}\n          ${help}${def ? ` (default ${def})` : ''}`;
    });
  return `joinguard: rescues Cluster API Machines that never join, and stops rebuilding when the join credential or network is at fault.\n\nUsage: joinguard [flags]\n\nFlags:\n${lines.join('\n')}\n`;
}
