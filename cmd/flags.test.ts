// The command line as a CAPI operator types it: CAPI's flag names and defaults, pflag's syntax, a strict
// parser, and `joinguard --help` listing every flag with its default. Unit tests (one runs the command).
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parseDuration } from '../api/v1alpha1/duration.js';
import { objectsOf, renderProviderFiles } from '../manifests/render.js';
import { FLAGS, parseFlags, usage } from './flags.js';

const parse = (...argv: string[]) => parseFlags(argv, parseDuration);

// Issue 12's list (CAPI's main.go, util/flags, component-base's logging flags) and JoinGuard's own.
const REQUIRED: Record<string, string> = {
  'watch-filter': '""',
  namespace: '""',
  'sync-period': '10m0s',
  'kube-api-qps': '100',
  'kube-api-burst': '200',
  'leader-elect': 'false',
  'leader-elect-lease-duration': '15s',
  'leader-elect-renew-deadline': '10s',
  'leader-elect-retry-period': '2s',
  'machinejoincheck-concurrency': '2',
  'webhook-port': '9443',
  'webhook-cert-dir': '"/tmp/k8s-webhook-server/serving-certs/"',
  'webhook-cert-name': '"tls.crt"',
  'webhook-key-name': '"tls.key"',
  'tls-min-version': '"VersionTLS12"',
  'tls-cipher-suites': '[]',
  'diagnostics-address': '":8443"',
  'insecure-diagnostics': 'false',
  'logging-format': '"text"',
  v: '0',
  'workload-node-check': 'false',
  'connection-grace': '2m0s',
  'health-probe-bind-address': '":8081"',
  kubeconfig: '""',
};

describe('joinguard flags', () => {
  it('--help lists every flag with its default', () => {
    const text = usage();
    for (const [name, def] of Object.entries(REQUIRED)) {
      const block = text.split('\n').findIndex((l) => l.includes(`--${name} `) || l.endsWith(`--${name}`));
      expect(block, `--${name} in --help`).to.be.greaterThan(-1);
      expect(text.split('\n')[block + 1], `--${name}'s default`).to.include(`(default ${def})`);
    }
    expect(text).to.match(/^ {2}-v, --v int$/m);
    expect(Object.keys(FLAGS).sort()).to.deep.equal([...Object.keys(REQUIRED), 'help'].sort());
  });

  it('`npm start -- --help` prints it and exits 0', async function () {
    this.timeout(30_000);
    const root = resolve(import.meta.dirname, '..');
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', resolve(root, 'cmd/joinguard.ts'), '--help'], { cwd: root });
    expect(stdout).to.equal(usage());
  });

  it("defaults are CAPI's", () => {
    const f = parse();
    expect(f).to.deep.include({
      syncPeriodMs: 600_000, kubeApiQps: 100, kubeApiBurst: 200, leaderElect: false,
      leaderElectLeaseDurationMs: 15_000, leaderElectRenewDeadlineMs: 10_000, leaderElectRetryPeriodMs: 2_000,
      webhookPort: 9443, webhookCertName: 'tls.crt', webhookKeyName: 'tls.key', tlsMinVersion: 'VersionTLS12', tlsCipherSuites: [],
      diagnosticsAddress: ':8443', insecureDiagnostics: false, healthProbeBindAddress: ':8081', loggingFormat: 'text', verbosity: 0,
      concurrency: 2, connectionGraceMs: 120_000, workloadNodeCheck: false,
    });
    expect(f.watchFilter).to.equal(undefined);
    expect(f.namespace).to.equal(undefined);
  });

  it("reads pflag's forms: --a=b, --a b, bare booleans, -v N, -v=N, -vN, --v=N", () => {
    expect(parse('--watch-filter=x', '--namespace', 'ns1', '--leader-elect', '--insecure-diagnostics=true')).to.deep.include({
      watchFilter: 'x', namespace: 'ns1', leaderElect: true, insecureDiagnostics: true,
    });
    for (const argv of [['-v', '4'], ['-v=4'], ['-v4'], ['--v=4'], ['--v', '4']]) expect(parse(...argv).verbosity, argv.join(' ')).to.equal(4);
    expect(parse('--sync-period=1h30m').syncPeriodMs).to.equal(5_400_000);
    expect(parse('--kube-api-qps=20.5').kubeApiQps).to.equal(20.5);
    expect(parse('--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256').tlsCipherSuites).to.have.length(2);
    expect(parse('--watch-filter=').watchFilter).to.equal('');
    expect(parse('-h').help).to.equal(true);
  });

  it('refuses, naming the flag: unknown flags, bad values, inconsistent lease timings', () => {
    const cases: [string[], RegExp][] = [
      [['--metrics-addr=:8080'], /unknown flag: --metrics-addr/],
      [['--log-level=trace'], /"trace" for "--log-level" flag/],
      [['-leader-elect'], /unknown flag: -leader-elect/],
      [['extra'], /unexpected argument "extra"/],
      [['--leader-elect=yes'], /"yes" for "--leader-elect" flag: not true or false/],
      [['--webhook-port=70000'], /"70000" for "--webhook-port" flag: not a port number/],
      [['--machinejoincheck-concurrency=-1'], /"-1" for "--machinejoincheck-concurrency" flag/],
      [['--machinejoincheck-concurrency=0'], /--machinejoincheck-concurrency: must be at least 1/],
      [['--kube-api-qps=0'], /"0" for "--kube-api-qps" flag: must be greater than 0/],
      [['--sync-period=10'], /"10" for "--sync-period" flag: .*not a duration/],
      [['-v=high'], /"high" for "--v" flag/],
      [['--logging-format=yaml'], /"yaml" for "--logging-format" flag: must be one of text, json/],
      [['--tls-min-version=VersionTLS14'], /"VersionTLS14" for "--tls-min-version" flag: unknown tls version/],
      [['--tls-cipher-suites=TLS_FOO'], /"TLS_FOO" for "--tls-cipher-suites" flag: cipher suite TLS_FOO not supported or doesn't exist/],
      [['--leader-elect-lease-duration=5s'], /--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline/],
      [['--leader-elect-retry-period=9s'], /--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period/],
      [['--namespace'], /flag needs an argument: --namespace/],
    ];
    for (const [argv, want] of cases) expect(() => parse(...argv), argv.join(' ')).to.throw(want);
  });

  it("accepts v0.1's --metrics-bind-address and --log-level with a warning, meaning what they meant", () => {
    const warnings: string[] = [];
    const f = parseFlags(['--metrics-bind-address=:8080', '--log-level=debug'], parseDuration, warnings);
    expect(f).to.deep.include({ diagnosticsAddress: ':8080', insecureDiagnostics: true, verbosity: 4 });
    expect(warnings).to.deep.equal([
      'Flag --metrics-bind-address has been deprecated, use --diagnostics-address (HTTPS with authentication) or --diagnostics-address with --insecure-diagnostics',
      'Flag --log-level has been deprecated, use -v (4 for debug)',
    ]);
    expect(usage()).not.to.include('--metrics-bind-address').and.not.to.include('--log-level');
  });

  it("parses the shipped Deployment's args, with every clusterctl variable at its default", async () => {
    const { components } = await renderProviderFiles('0.1.0');
    const d = objectsOf(components).find((o) => o.kind === 'Deployment') as unknown as { spec: { template: { spec: { containers: { name: string; args: string[] }[] } } } };
    const args = d.spec.template.spec.containers.find((c) => c.name === 'manager')!.args;
    expect(() => parse(...args)).not.to.throw();
  });
});
