// The `joinguard` command's flags as one table (flags.ts parses and prints them): each flag's field, kind,
// default, help and check, with CAPI's spelling, type and default; the feature gates and the TLS curves they name.
import { LOG_FORMATS, type LogFormat } from '../runtime/logger.js';
import {
  INSECURE_CIPHER_SUITE_NAMES,
  PREFERRED_CIPHER_SUITE_NAMES,
  servingTls,
  TLS_VERSION_NAMES,
} from '../runtime/serving/serving-tls.js';

export type { Flags, Kind, Spec } from './flag-types.js';
import type { Spec } from './flag-types.js';
import { DEFAULT_CONCURRENCY } from '../controllers/options.js';
import { DEFAULT_BURST, DEFAULT_QPS } from '../runtime/client/rest.js';

const positive = (v: number): string | undefined => (v > 0 ? undefined : 'must be greater than 0');
// component-base: the alpha logging options need the LoggingAlphaOptions gate, which CAPI's managers do not
// register, so only their defaults are accepted there; the same here.
const alphaOff = (isDefault: (v: any) => boolean) => (v: any) =>
  isDefault(v) ? undefined : 'Feature LoggingAlphaOptions is disabled';

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
const SUPPORTED_CURVES = Object.entries(CURVES)
  .map(([id, n]) => `${id} (${n})`)
  .join(', ');

const gatesHelp = Object.entries(FEATURE_GATES)
  .map(([n, g]) => `${n}=true|false (${g.stage} - default=${g.default})`)
  .join('\n');

export const FLAGS: Record<string, Spec> = {
  'allow-machine-delete': {
    key: 'allowMachineDelete',
    kind: 'bool',
    def: 'false',
    help:
      'Allow remediation.strategy Delete: JoinGuard then deletes ' +
      'Machines itself (needs the Machine delete grant, JOINGUARD_ALLOW_MACHINE_DELETE=true). ' +
      'Off: a check with strategy Delete deletes nothing and says ' +
      'Ready=False/MachineDeleteNotAllowed.',
  },
  'connection-grace': {
    key: 'connectionGraceMs',
    kind: 'duration',
    def: '2m0s',
    help:
      "Wait after a workload cluster's connection is back (RemoteConnectionProbe " +
      "True again) before Machine verdicts resume. Not CAPI's --remote-connection-grace-period, " +
      'which decides when the connection counts as lost.',
  },
  'diagnostics-address': {
    key: 'diagnosticsAddress',
    kind: 'string',
    def: ':8443',
    help:
      'The address the diagnostics endpoint binds to. Per default ' +
      'metrics are served via https and with authentication/authorization ' +
      '(TokenReview and SubjectAccessReview; the caller needs `get` ' +
      'on the non-resource URL /metrics). To serve via http and ' +
      'without authentication/authorization set --insecure-diagnostics. ' +
      '0 turns it off.',
  },
  'feature-gates': {
    key: 'featureGates',
    kind: 'gates',
    def: '',
    help:
      `A set of key=value pairs that describe feature gates for ` +
      `alpha/experimental features. Options are:\n${gatesHelp}`,
  },
  'health-addr': {
    key: 'healthAddr',
    kind: 'string',
    def: ':9440',
    help: 'The address the health endpoint binds to (/healthz, /readyz); 0 turns it off.',
  },
  help: { key: 'help', kind: 'bool', def: 'false', help: 'Print this help and exit.' },
  'insecure-diagnostics': {
    key: 'insecureDiagnostics',
    kind: 'bool',
    def: 'false',
    help: 'Enable insecure diagnostics serving. For more details see the description of --diagnostics-address.',
  },
  'kube-api-burst': {
    key: 'kubeApiBurst',
    kind: 'count',
    def: String(DEFAULT_BURST), // not CAPI's 200: cmd/capi-flags.ts OTHER_DEFAULT
    help:
      'Maximum number of queries that should be allowed in one ' +
      'burst from the controller client to the Kubernetes API server.',
  },
  'kube-api-qps': {
    key: 'kubeApiQps',
    kind: 'float',
    def: String(DEFAULT_QPS),
    help: 'Maximum queries per second from the controller client to the Kubernetes API server.',
    check: positive,
  },
  kubeconfig: {
    key: 'kubeconfig',
    kind: 'string',
    def: '',
    help: 'Paths to a kubeconfig. Only required if out-of-cluster.',
  },
  'leader-elect': {
    key: 'leaderElect',
    kind: 'bool',
    def: 'false',
    help:
      'Enable leader election for controller manager. Enabling ' +
      'this will ensure there is only one active controller manager. ' +
      'Without it, run exactly one replica.',
  },
  'leader-elect-lease-duration': {
    key: 'leaderElectLeaseDurationMs',
    kind: 'duration',
    def: '15s',
    help: 'Interval at which non-leader candidates will wait to force acquire leadership (duration string)',
  },
  'leader-elect-renew-deadline': {
    key: 'leaderElectRenewDeadlineMs',
    kind: 'duration',
    def: '10s',
    help:
      'Duration that the leading controller manager will retry ' +
      'refreshing leadership before giving up (duration string)',
  },
  'leader-elect-resource-name': {
    key: 'leaderElectResourceName',
    kind: 'string',
    def: 'joinguard-leader',
    help:
      'The name of the Lease used for leader election, always in ' +
      "the pod's namespace (as Kubernetes components spell this " +
      'flag). With --watch-filter=X and this flag unset: joinguard-leader-X, ' +
      'so each shard elects its own leader.',
  },
  'leader-elect-retry-period': {
    key: 'leaderElectRetryPeriodMs',
    kind: 'duration',
    def: '2s',
    help: 'Duration the LeaderElector clients should wait between tries of actions (duration string)',
  },
  'log-flush-frequency': {
    key: 'logFlushFrequencyMs',
    kind: 'duration',
    def: '5s',
    help:
      'Maximum number of seconds between log flushes (JoinGuard ' +
      'writes every line at once: nothing waits for a flush).',
    check: positive,
  },
  'log-json-info-buffer-size': {
    key: 'logJsonInfoBufferSize',
    kind: 'quantity',
    def: '',
    help:
      '[Alpha] In JSON format with split output streams, the info ' +
      'messages can be buffered for a while to increase performance. ' +
      'Only 0 (no buffering): the LoggingAlphaOptions feature gate ' +
      'is not available, as in CAPI.',
    check: alphaOff((v: string) => /^0+$/.test(v)),
  },
  'log-json-split-stream': {
    key: 'logJsonSplitStream',
    kind: 'bool',
    def: 'false',
    help:
      '[Alpha] In JSON format, write error messages to stderr and ' +
      'info messages to stdout. Only false: the LoggingAlphaOptions ' +
      'feature gate is not available, as in CAPI.',
    check: alphaOff((v: boolean) => !v),
  },
  'log-text-info-buffer-size': {
    key: 'logTextInfoBufferSize',
    kind: 'quantity',
    def: '',
    help:
      '[Alpha] In text format with split output streams, the info ' +
      'messages can be buffered for a while to increase performance. ' +
      'Only 0 (no buffering): the LoggingAlphaOptions feature gate ' +
      'is not available, as in CAPI.',
    check: alphaOff((v: string) => /^0+$/.test(v)),
  },
  'log-text-split-stream': {
    key: 'logTextSplitStream',
    kind: 'bool',
    def: 'false',
    help:
      '[Alpha] In text format, write error messages to stderr and ' +
      'info messages to stdout. Only false: the LoggingAlphaOptions ' +
      'feature gate is not available, as in CAPI.',
    check: alphaOff((v: boolean) => !v),
  },
  'logging-format': {
    key: 'loggingFormat',
    kind: 'string',
    def: 'text',
    help: `Sets the log format. Permitted formats: ${LOG_FORMATS.map((f) => `"${f}"`).join(', ')}.`,
    check: (v: string) =>
      LOG_FORMATS.includes(v as LogFormat) ? undefined : `must be one of ${LOG_FORMATS.join(', ')}`,
  },
  'machinejoincheck-concurrency': {
    key: 'concurrency',
    kind: 'count',
    def: String(DEFAULT_CONCURRENCY),
    help: 'Number of MachineJoinChecks to process simultaneously',
  },
  namespace: {
    key: 'namespace',
    kind: 'string',
    def: '',
    help:
      'Namespace that the controller watches to reconcile cluster-api ' +
      'objects. If unspecified, the controller watches for cluster-api ' +
      'objects across all namespaces.',
  },
  'profiler-address': {
    key: 'profilerAddress',
    kind: 'string',
    def: '',
    help:
      'Bind address to expose the profiler (e.g. localhost:6060): ' +
      "Node's CPU profile at /debug/pprof/profile?seconds=N and " +
      'a heap snapshot at /debug/pprof/heap, for Chrome DevTools. ' +
      "Plain HTTP without authentication, as CAPI's; bind it to " +
      'localhost.',
  },
  'sync-period': {
    key: 'syncPeriodMs',
    kind: 'duration',
    def: '10m0s',
    help: 'The minimum interval at which watched resources are reconciled (e.g. 15m)',
  },
  'tls-cipher-suites': {
    key: 'tlsCipherSuites',
    kind: 'list',
    def: '',
    help:
      `Comma-separated list of cipher suites for the webhook server ` +
      `and metrics server (the latter only if --insecure-diagnostics ` +
      `is not set to true). If omitted, the default Node.js cipher ` +
      `suites will be used. \nPreferred values: ${PREFERRED_CIPHER_SUITE_NAMES.join(', ')}. ` +
      `\nInsecure values: ${INSECURE_CIPHER_SUITE_NAMES.join(', ')}.`,
    check: (v: string[]) => tlsProblem('VersionTLS12', v),
  },
  'tls-curve-preferences': {
    key: 'tlsCurvePreferences',
    kind: 'int32list',
    def: '[]',
    help:
      `Comma-separated list of numeric Go crypto/tls CurveID values, ` +
      `as the allowed key exchange mechanisms for the webhook server ` +
      `and metrics server (the latter only if --insecure-diagnostics ` +
      `is not set to true). Supported: ${SUPPORTED_CURVES}. If ` +
      `omitted, the default Node.js curves will be used.`,
    check: curvesProblem,
  },
  'tls-min-version': {
    key: 'tlsMinVersion',
    kind: 'string',
    def: 'VersionTLS12',
    help:
      `The minimum TLS version in use by the webhook server and ` +
      `metrics server (the latter only if --insecure-diagnostics ` +
      `is not set to true). Possible values are ${TLS_VERSION_NAMES.join(', ')}.`,
    check: (v: string) => tlsProblem(v, []),
  },
  v: { key: 'verbosity', kind: 'level', def: '2', help: 'number for the log level verbosity' },
  version: {
    key: 'version',
    kind: 'bool',
    def: 'false',
    help: 'Print the version line (the first line of the log: version and git commit) and exit.',
  },
  vmodule: {
    key: 'vmodule',
    kind: 'vmodule',
    def: '',
    help: 'comma-separated list of pattern=N settings for file-filtered logging (only works for text log format)',
  },
  'watch-filter': {
    key: 'watchFilter',
    kind: 'string',
    def: '',
    help:
      'Label value that the controller watches to reconcile cluster-api ' +
      'objects. Label key is always cluster.x-k8s.io/watch-filter. ' +
      'If unspecified, the controller watches for all cluster-api ' +
      'objects.',
  },
  'webhook-cert-dir': {
    key: 'webhookCertDir',
    kind: 'string',
    def: '/tmp/k8s-webhook-server/serving-certs/',
    help:
      'Webhook cert dir. Its certificate also serves the diagnostics ' +
      'endpoint when present (else a self-signed one).',
  },
  'webhook-cert-name': {
    key: 'webhookCertName',
    kind: 'string',
    def: 'tls.crt',
    help: "Name of the file for webhook's server certificate; the file must be placed under webhook-cert-dir.",
  },
  'webhook-key-name': {
    key: 'webhookKeyName',
    kind: 'string',
    def: 'tls.key',
    help: "Name of the file for webhook's server key; the file must be placed under webhook-cert-dir.",
  },
  'webhook-port': {
    key: 'webhookPort',
    kind: 'port',
    def: '9443',
    help: 'Webhook Server port; 0 turns the admission webhooks off.',
  },
  'workload-node-check': {
    key: 'workloadNodeCheck',
    kind: 'bool',
    def: 'false',
    help:
      'Read <cluster>-kubeconfig Secrets and count a Node with ' +
      "the Machine's providerID as joined (needs the Secrets grant).",
  },
};

export function tlsProblem(version: string, suites: string[]): string | undefined {
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
