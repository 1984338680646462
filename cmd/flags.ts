// The `joinguard` command's flags, in controller-runtime's spelling (`--name=value`, `--name value`, and
// bare `--name` for true). An unknown flag or a bad value stops the command with a message naming it.
export interface Flags {
  kubeconfig?: string;
  namespace?: string;
  leaderElect: boolean;
  leaderElectionNamespace?: string;
  leaderElectionId: string;
  metricsBindAddress: string;
  healthProbeBindAddress: string;
  workloadNodeCheck: boolean;
  logLevel: string;
  connectionGraceMs?: number;
  webhookPort: number;
  webhookCertDir: string;
  help: boolean;
}

interface Spec {
  key: keyof Flags;
  kind: 'string' | 'bool' | 'int' | 'duration';
  help: string;
}

export const FLAGS: Record<string, Spec> = {
  kubeconfig: { key: 'kubeconfig', kind: 'string', help: 'kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)' },
  namespace: { key: 'namespace', kind: 'string', help: 'watch only this namespace (default: all)' },
  'leader-elect': { key: 'leaderElect', kind: 'bool', help: 'elect a leader on a coordination.k8s.io Lease before reconciling (default false)' },
  'leader-election-namespace': { key: 'leaderElectionNamespace', kind: 'string', help: "the Lease's namespace (default: --namespace, else $POD_NAMESPACE, else joinguard-system)" },
  'leader-election-id': { key: 'leaderElectionId', kind: 'string', help: 'the Lease name (default joinguard-leader)' },
  'metrics-bind-address': { key: 'metricsBindAddress', kind: 'string', help: 'host:port of /metrics, 0 to turn it off (default :8080)' },
  'health-probe-bind-address': { key: 'healthProbeBindAddress', kind: 'string', help: 'host:port of /healthz and /readyz, 0 to turn them off (default :8081)' },
  'workload-node-check': { key: 'workloadNodeCheck', kind: 'bool', help: 'read <cluster>-kubeconfig Secrets and count a Node with the providerID as joined (default false)' },
  'log-level': { key: 'logLevel', kind: 'string', help: 'error, warn, info or debug (default info)' },
  'connection-grace': { key: 'connectionGraceMs', kind: 'duration', help: 'wait after the workload connection is back before verdicts resume (default 2m)' },
  'webhook-port': { key: 'webhookPort', kind: 'int', help: 'port of the admission webhooks, 0 to turn them off (default 0)' },
  'webhook-cert-dir': { key: 'webhookCertDir', kind: 'string', help: 'directory with tls.crt and tls.key (default /tmp/k8s-webhook-server/serving-certs)' },
  help: { key: 'help', kind: 'bool', help: 'print this help' },
};

export function parseFlags(argv: string[], parseDuration: (s: string) => number): Flags {
  const f: Flags = {
    leaderElect: false,
    leaderElectionId: 'joinguard-leader',
    metricsBindAddress: ':8080',
    healthProbeBindAddress: ':8081',
    workloadNodeCheck: false,
    logLevel: 'info',
    webhookPort: 0,
    webhookCertDir: '/tmp/k8s-webhook-server/serving-certs',
    help: false,
  };
  const out = f as unknown as Record<string, unknown>;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--?([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (!m) throw new Error(`unexpected argument ${JSON.stringify(arg)} (flags are --name=value)`);
    const name = m[1]!;
    const spec = FLAGS[name];
    if (!spec) throw new Error(`unknown flag --${name} (see --help)`);
    let value = m[2];
    if (value === undefined && spec.kind !== 'bool') {
      value = argv[++i];
      if (value === undefined) throw new Error(`flag --${name} needs a value`);
    }
    switch (spec.kind) {
      case 'bool':
        if (value === undefined || value === 'true') out[spec.key] = true;
        else if (value === 'false') out[spec.key] = false;
        else throw new Error(`flag --${name}: ${JSON.stringify(value)} is not true or false`);
        break;
      case 'int': {
        const n = Number(value);
        if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`flag --${name}: ${JSON.stringify(value)} is not a port number (0-65535)`);
        out[spec.key] = n;
        break;
      }
      case 'duration':
        try {
          out[spec.key] = parseDuration(value!);
        } catch (e) {
          throw new Error(`flag --${name}: ${(e as Error).message}`);
        }
        break;
      default:
        out[spec.key] = value;
    }
  }
  return f;
}

export function usage(): string {
  const lines = Object.entries(FLAGS).map(([n, s]) => `  --${n}${s.kind === 'bool' ? '' : '=<' + s.kind + '>'}\n      ${s.help}`);
  return `joinguard: rescues Cluster API Machines that never join, and stops rebuilding when the join credential or network is at fault.\n\nUsage: joinguard [flags]\n\n${lines.join('\n')}\n`;
}
