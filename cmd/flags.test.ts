// The command line as a CAPI operator types it: CAPI's flag names and defaults, pflag's syntax, a strict
// parser, and `joinguard --help` listing every flag with its default. Unit tests (one runs the command).
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parseDuration } from '../api/v1alpha1/duration.js';
import { objectsOf, renderProviderFiles } from '../manifests/render.js';
import { CAPI_FLAGS, CAPI_VERSION, NOT_TAKEN, OTHER_DEFAULT } from './capi-flags.js';
import { versionLine } from '../controllers/version.js';
import { ecdhCurve, FLAGS, parseFlags, usage } from './flags.js';
import { createSecureContext } from 'node:tls';
import { servingTls } from '../runtime/serving/serving-tls.js';

const parse = (...argv: string[]) => parseFlags(argv, parseDuration);

/** Flags of `joinguard --help` that CAPI's managers do not have, and why each is JoinGuard's own. */
const OWN: Record<string, string> = {
  help: "pflag's own -h (CAPI's binaries answer it too; pflag just does not list it)",
  version: "the version line and exit, as Kubernetes' components answer --version (CAPI's managers only log it)",
  'machinejoincheck-concurrency': "CAPI's <kind>-concurrency pattern, for JoinGuard's one controller",
  'connection-grace':
    "JoinGuard's wait after a workload connection is back; not CAPI's --remote-connection-grace-period",
  'workload-node-check': 'an opt-in read of workload clusters, with its own RBAC',
  'allow-machine-delete': 'the opt-in of remediation.strategy Delete, with its own RBAC',
  'leader-elect-resource-name':
    "the Lease's name, spelled as Kubernetes' components spell it (CAPI hard-codes its own)",
};

interface HelpFlag {
  type: string;
  def: string;
}

/** `--help` as pflag prints it: a head line per flag, its description on the following lines. */
function helpFlags(text: string): Map<string, HelpFlag> {
  const out = new Map<string, HelpFlag>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^ {2,6}(?:-[a-z], )?--([a-z0-9-]+)(?: (\S+))?$/.exec(lines[i]!);
    if (!m) continue;
    let body = '';
    for (let j = i + 1; j < lines.length && !/^ {2,6}(?:-[a-z], )?--/.test(lines[j]!); j++)
      body += ` ${lines[j]!.trim()}`;
    const def = /\(default (.*)\)$/.exec(body.trim());
    out.set(m[1]!, { type: m[2] ?? '', def: def ? def[1]! : '' });
  }
  return out;
}

describe('joinguard flags', () => {
  it(`--help against CAPI ${CAPI_VERSION}'s list: every flag that means the same has CAPI's name, type and default`, () => {
    const help = helpFlags(usage());
    const problems: string[] = [];
    for (const f of CAPI_FLAGS) {
      const ours = help.get(f.name);
      if (NOT_TAKEN[f.name] !== undefined) {
        if (ours) problems.push(`--${f.name} is listed as not taken but --help has it`);
        continue;
      }
      const def = OTHER_DEFAULT[f.name] ?? f.def;
      if (OTHER_DEFAULT[f.name] === f.def) problems.push(`--${f.name} is listed with another default but has CAPI's`);
      if (!ours) problems.push(`--${f.name}: missing`);
      else if (ours.type !== f.type || ours.def !== def)
        problems.push(
          `--${f.name}: ours ${ours.type || '(bool)'} ${ours.def || '(no default)'}, expected ${f.type || '(bool)'} ${def || '(no default)'} (CAPI's default ${f.def || '(none)'})`,
        );
    }
    const capi = new Set(CAPI_FLAGS.map((f) => f.name));
    for (const name of help.keys())
      if (!capi.has(name) && OWN[name] === undefined)
        problems.push(`--${name}: neither CAPI's nor listed as JoinGuard's own`);
    for (const name of Object.keys(OWN))
      if (!help.has(name)) problems.push(`--${name}: listed as our own, missing from --help`);
    for (const name of [...Object.keys(NOT_TAKEN), ...Object.keys(OTHER_DEFAULT)])
      if (!capi.has(name)) problems.push(`--${name} is listed as CAPI's, which CAPI does not have`);
    expect(problems).to.deep.equal([]);
    expect(help.size).to.equal(Object.keys(FLAGS).length);
  });

  it("refuses each of CAPI's flags it does not take, saying why", () => {
    for (const [name, why] of Object.entries(NOT_TAKEN)) {
      expect(() => parse(`--${name}=1`), name).to.throw(`unknown flag: --${name} (${why})`);
    }
    expect(() => parse('--remote-connection-grace-period=50s')).to.throw(
      /its own, different wait .* is --connection-grace/,
    );
  });

  it('--help lists, as CAPI does, preferred and insecure cipher suites: each one a server can start with, no RC4 or 3DES', () => {
    const help = usage();
    const listed = (label: string) =>
      help
        .match(new RegExp(`${label} values: ([A-Z0-9_, ]+)\\.`))![1]!
        .split(', ')
        .filter((x) => x !== '');
    const preferred = listed('Preferred');
    const insecure = listed('Insecure');
    expect(preferred).to.include('TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256');
    expect(insecure).to.include('TLS_RSA_WITH_AES_128_CBC_SHA');
    expect(help).not.to.match(/RC4|3DES/);
    // Each listed suite alone is one a server starts with (OpenSSL would say "no cipher match" otherwise).
    for (const name of [...preferred, ...insecure]) {
      const o = servingTls('VersionTLS12', [name]);
      expect(
        () => createSecureContext({ minVersion: o.minVersion, ...(o.ciphers ? { ciphers: o.ciphers } : {}) }),
        name,
      ).not.to.throw();
    }
  });

  it('`npm start -- --help` prints it and exits 0', async function () {
    this.timeout(30_000);
    const root = resolve(import.meta.dirname, '..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', resolve(root, 'cmd/joinguard.ts'), '--help'],
      { cwd: root },
    );
    expect(stdout).to.equal(usage());
  });

  it('`--version` prints the version line the log starts with and exits 0', async function () {
    this.timeout(30_000);
    const root = resolve(import.meta.dirname, '..');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', resolve(root, 'cmd/joinguard.ts'), '--version'],
      { cwd: root },
    );
    expect(stdout).to.equal(`${versionLine()}\n`);
    expect(stdout).to.match(/^Version: v\d+\.\d+\.\d+ \(git commit: [0-9a-f]*\)\n$/);
  });

  it("defaults are CAPI's, but for the few listed with the reason", () => {
    const f = parse();
    expect(f).to.deep.include({
      syncPeriodMs: 600_000,
      kubeApiQps: 100,
      kubeApiBurst: 400, // OTHER_DEFAULT
      leaderElect: false,
      leaderElectLeaseDurationMs: 15_000,
      leaderElectRenewDeadlineMs: 10_000,
      leaderElectRetryPeriodMs: 2_000,
      webhookPort: 9443,
      webhookCertName: 'tls.crt',
      webhookKeyName: 'tls.key',
      tlsMinVersion: 'VersionTLS12',
      tlsCipherSuites: [],
      diagnosticsAddress: ':8443',
      insecureDiagnostics: false,
      healthAddr: ':9440',
      loggingFormat: 'text',
      verbosity: 2,
      concurrency: 10,
      connectionGraceMs: 120_000,
      workloadNodeCheck: false,
      allowMachineDelete: false,
      profilerAddress: '',
      logFlushFrequencyMs: 5_000,
      leaderElectResourceName: 'joinguard-leader',
    });
    expect(f.featureGates).to.deep.equal({});
    expect(f.vmodule).to.deep.equal([]);
    expect(f.tlsCurvePreferences).to.deep.equal([]);
    expect(f.watchFilter).to.equal(undefined);
    expect(f.namespace).to.equal(undefined);
  });

  it("reads pflag's forms: --a=b, --a b, bare booleans, -v N, -v=N, -vN, --v=N", () => {
    expect(
      parse('--watch-filter=x', '--namespace', 'ns1', '--leader-elect', '--insecure-diagnostics=true'),
    ).to.deep.include({
      watchFilter: 'x',
      namespace: 'ns1',
      leaderElect: true,
      insecureDiagnostics: true,
    });
    for (const argv of [['-v', '4'], ['-v=4'], ['-v4'], ['--v=4'], ['--v', '4']])
      expect(parse(...argv).verbosity, argv.join(' ')).to.equal(4);
    expect(parse('--sync-period=1h30m').syncPeriodMs).to.equal(5_400_000);
    expect(parse('--kube-api-qps=20.5').kubeApiQps).to.equal(20.5);
    expect(
      parse('--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256')
        .tlsCipherSuites,
    ).to.have.length(2);
    expect(parse('--watch-filter=').watchFilter).to.equal('');
    expect(parse('-h').help).to.equal(true);
    expect(parse('--feature-gates=AllAlpha=true,AllBeta=false').featureGates).to.deep.equal({
      AllAlpha: true,
      AllBeta: false,
    });
    expect(parse('--vmodule=leader=4,*/joincheck/*=5').vmodule).to.deep.equal([
      { pattern: 'leader', v: 4 },
      { pattern: '*/joincheck/*', v: 5 },
    ]);
    expect(parse('--log-flush-frequency=1s').logFlushFrequencyMs).to.equal(1_000);
    expect(parse('--leader-elect-resource-name=joinguard-shard-a').leaderElectResourceName).to.equal(
      'joinguard-shard-a',
    );
    // A shard gets its own Lease unless one is named; an empty filter is no filter.
    expect(parse('--watch-filter=gpu').leaderElectResourceName).to.equal('joinguard-leader-gpu');
    expect(parse('--watch-filter=gpu', '--leader-elect-resource-name=mine').leaderElectResourceName).to.equal('mine');
    expect(parse('--watch-filter=').leaderElectResourceName).to.equal('joinguard-leader');
    expect(ecdhCurve(parse('--tls-curve-preferences=29,23').tlsCurvePreferences)).to.equal('X25519:P-256');
    expect(parse('--log-json-split-stream=false', '--log-text-info-buffer-size=0').logJsonSplitStream).to.equal(false);
    expect(parse('--health-addr=:9441').healthAddr).to.equal(':9441');
  });

  it('refuses, naming the flag: unknown flags, bad values, inconsistent lease timings', () => {
    const cases: [string[], RegExp][] = [
      [['--metrics-addr=:8080'], /unknown flag: --metrics-addr/],
      [
        ['--feature-gates=MachinePool=true'],
        /"MachinePool=true" for "--feature-gates" flag: unrecognized feature gate: MachinePool/,
      ],
      [['--feature-gates=AllAlpha=yes'], /for "--feature-gates" flag: invalid value of AllAlpha=yes/],
      [['--vmodule=leader'], /for "--vmodule" flag: "leader" does not have the pattern=N format/],
      [['--vmodule==3'], /for "--vmodule" flag: File pattern must not be empty/],
      [['--vmodule=leader=4', '--logging-format=json'], /--vmodule: Only supported for text log format/],
      [['--log-flush-frequency=0s'], /"0s" for "--log-flush-frequency" flag: must be greater than 0/],
      [
        ['--log-json-split-stream'],
        /"true" for "--log-json-split-stream" flag: Feature LoggingAlphaOptions is disabled/,
      ],
      [
        ['--log-text-info-buffer-size=1Ki'],
        /"1Ki" for "--log-text-info-buffer-size" flag: Feature LoggingAlphaOptions is disabled/,
      ],
      [['--tls-curve-preferences=29,29'], /duplicate curve preference 29/],
      [['--tls-curve-preferences=30'], /curve preference 30 is not supported/],
      [['--tls-curve-preferences=70000'], /curve preference 70000 is out of range/],
      [['--leader-elect-resource-name=Shard_A'], /--leader-elect-resource-name: "Shard_A" is not a valid Lease name/],
      [
        ['--watch-filter=GPU_pools'],
        /--watch-filter=GPU_pools: the shard's Lease would be "joinguard-leader-GPU_pools", not a valid name; set --leader-elect-resource-name/,
      ],
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
      [
        ['--tls-cipher-suites=TLS_FOO'],
        /"TLS_FOO" for "--tls-cipher-suites" flag: cipher suite TLS_FOO not supported or doesn't exist/,
      ],
      // Go knows them; Node's OpenSSL does not: refused with the flags, not by "no cipher match" at start.
      [
        ['--tls-cipher-suites=TLS_RSA_WITH_RC4_128_SHA'],
        /cipher suite TLS_RSA_WITH_RC4_128_SHA is not available: Node's OpenSSL has no RC4 or 3DES/,
      ],
      [['--tls-cipher-suites=TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA'], /is not available/],
      [
        ['--leader-elect-lease-duration=5s'],
        /--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline/,
      ],
      [
        ['--leader-elect-retry-period=9s'],
        /--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period/,
      ],
      [['--namespace'], /flag needs an argument: --namespace/],
    ];
    for (const [argv, want] of cases) expect(() => parse(...argv), argv.join(' ')).to.throw(want);
  });

  it("accepts v0.1's --metrics-bind-address, --log-level and --health-probe-bind-address with a warning, meaning what they meant", () => {
    const warnings: string[] = [];
    const f = parseFlags(
      ['--metrics-bind-address=:8080', '--log-level=debug', '--health-probe-bind-address=:8081'],
      parseDuration,
      warnings,
    );
    expect(f).to.deep.include({
      diagnosticsAddress: ':8080',
      insecureDiagnostics: true,
      verbosity: 4,
      healthAddr: ':8081',
    });
    expect(warnings).to.deep.equal([
      'Flag --metrics-bind-address has been deprecated, use --diagnostics-address (HTTPS with authentication) or --diagnostics-address with --insecure-diagnostics',
      'Flag --log-level has been deprecated, use -v (4 for debug)',
      "Flag --health-probe-bind-address has been deprecated, use --health-addr (CAPI's name; its default is :9440)",
    ]);
    expect(usage())
      .not.to.include('--metrics-bind-address')
      .and.not.to.include('--log-level')
      .and.not.to.include('--health-probe-bind-address');
  });

  it("parses the shipped Deployment's args, with every clusterctl variable at its default", async () => {
    const { components } = await renderProviderFiles('0.1.0');
    const d = objectsOf(components).find((o) => o.kind === 'Deployment') as unknown as {
      spec: { template: { spec: { containers: { name: string; args: string[] }[] } } };
    };
    const args = d.spec.template.spec.containers.find((c) => c.name === 'manager')!.args;
    expect(() => parse(...args)).not.to.throw();
  });
});
