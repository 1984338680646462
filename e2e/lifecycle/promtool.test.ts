// The PrometheusRule JoinGuard ships, read by Prometheus's own promtool (built from its Go module by
// hack/testenv/promtool/build.sh when missing, with progress on stderr): `promtool check rules` accepts it,
// and `promtool test rules` shows each alert fires on the series it is written for and stays quiet on the
// ones it must ignore (a dry run, a leader present, a replica that runs alone without leader election, the webhook
// served), on series labelled as either shipped scrape setup labels them.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parse, stringify } from 'yaml';
import { MANIFESTS_DIR, renderProviderFiles } from '../../manifests/render.js';
import { alertRules, PROVIDER, runbookBase } from '../../manifests/observability.js';

const run = promisify(execFile);
const BUILD = resolve(MANIFESTS_DIR, '..', 'hack', 'testenv', 'promtool', 'build.sh');
const VERSION = '0.1.0';

/** Runs the build script (a no-op when cached), passing its progress lines through; resolves to the binary. */
function buildPromtool(): Promise<string> {
  return new Promise((ok, fail) => {
    const child = spawn('bash', [BUILD], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => process.stderr.write(c));
    child.on('error', fail);
    child.on('close', (code) =>
      code === 0 ? ok(out.trim().split('\n').at(-1)!) : fail(new Error(`${BUILD} exited ${code}`)),
    );
  });
}

type Series = { series: string; values: string };
const RULES = alertRules(VERSION);

/** The annotations Prometheus renders: the two template forms the rules use, `$labels.x` and `| toLower`. */
function annotationsFor(name: string, labels: Record<string, string>): Record<string, string> {
  const rule = RULES.find((r) => r.alert === name)!;
  const render = (t: string) =>
    t.replace(/\{\{ \$labels\.(\w+)( \| toLower)? \}\}/g, (_m, k: string, lower?: string) =>
      lower ? (labels[k] ?? '').toLowerCase() : (labels[k] ?? ''),
    );
  return Object.fromEntries(Object.entries(rule.annotations).map(([k, v]) => [k, render(v)]));
}

const alert = (name: string, at: string, labels: Record<string, string>[]) => ({
  eval_time: at,
  alertname: name,
  exp_alerts: labels.map((l) => ({ exp_labels: l, exp_annotations: annotationsFor(name, l) })),
});

const P = `provider="${PROVIDER}"`;
const NS = 'namespace="joinguard-system"';
const LEASE = 'name="joinguard-leader"';
const WEBHOOK = 'webhook="/validate-joinguard-io-v1alpha1-machinejoincheck"';
/** One replica's own series, as a scrape with either shipped setup labels them (provider, namespace, pod). */
const replica = (pod: string, o: { up: string; leader?: string; elects?: string; webhook?: string }): Series[] => [
  { series: `up{${P},${NS},pod="${pod}"}`, values: o.up },
  ...(o.leader !== undefined
    ? [{ series: `leader_election_master_status{${P},${NS},pod="${pod}",${LEASE}}`, values: o.leader }]
    : []),
  ...(o.elects !== undefined
    ? [{ series: `joinguard_leader_election_enabled{${P},${NS},pod="${pod}",${LEASE}}`, values: o.elects }]
    : []),
  ...(o.webhook !== undefined
    ? [
        {
          series: `controller_runtime_webhook_requests_in_flight{${P},${NS},pod="${pod}",${WEBHOOK}}`,
          values: o.webhook,
        },
      ]
    : []),
];

/** promtool's unit tests of the rules: input series, then which alerts fire at which time. */
function ruleTests(): unknown {
  const cond = (check: string, reason: string, status = 'False'): Series => ({
    series: `joinguard_check_condition{${P},${NS},pod="a",cluster_namespace="fleet",check="${check}",cluster_name="c1",type="Progressing",status="${status}",reason="${reason}"}`,
    values: '1x30',
  });
  const stalled = (check: string, reason: string) => ({
    severity: 'warning',
    cluster_namespace: 'fleet',
    check,
    cluster_name: 'c1',
    reason,
  });
  const quiet = [
    'JoinGuardNoLeader',
    'JoinGuardReplicasWithoutLeaderElection',
    'JoinGuardWebhookUnavailable',
    'JoinGuardReconcileErrors',
  ];
  return {
    rule_files: ['rules.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        // Two replicas that elect, one leading, both serving the webhook: only the checks' own alerts.
        interval: '1m',
        input_series: [
          cond('budget', 'RemediationBudgetExhausted'),
          cond('dry', 'DryRun'),
          cond('suspect', 'BootstrapCredentialSuspect'),
          cond('rollout', 'RolloutSuspect'),
          cond('fine', 'AsExpected', 'True'),
          ...replica('a', { up: '1x30', leader: '1x30', elects: '1x30', webhook: '0x30' }),
          ...replica('b', { up: '1x30', leader: '0x30', elects: '1x30', webhook: '0x30' }),
          {
            series: `controller_runtime_reconcile_errors_total{${P},${NS},pod="a",controller="machinejoincheck"}`,
            values: '0+0x30',
          },
        ],
        alert_rule_test: [
          // Not yet 15 minutes: nothing; after: the budget stop only (dry run and both suspicions left out).
          alert('JoinGuardCheckStalled', '10m', []),
          alert('JoinGuardCheckStalled', '20m', [stalled('budget', 'RemediationBudgetExhausted')]),
          alert('JoinGuardSuspicionRaised', '5m', [
            { severity: 'warning', cluster_namespace: 'fleet', check: 'suspect', cluster_name: 'c1' },
          ]),
          // A rollout that cannot join has its own alert, and is not also a stalled check.
          alert('JoinGuardRolloutSuspect', '5m', [
            { severity: 'warning', cluster_namespace: 'fleet', check: 'rollout', cluster_name: 'c1' },
          ]),
          ...quiet.map((a) => alert(a, '20m', [])),
        ],
      },
      {
        // The leader steps down at minute 5 and the standby never takes over; the webhook server of both stops
        // at minute 5 while their metrics are still scraped; reconciles fail.
        interval: '1m',
        input_series: [
          ...replica('a', { up: '1x30', leader: '1x4 0x25', elects: '1x30', webhook: '0x4 _x25' }),
          ...replica('b', { up: '1x30', leader: '0x30', elects: '1x30', webhook: '0x4 _x25' }),
          {
            series: `controller_runtime_reconcile_errors_total{${P},${NS},pod="a",controller="machinejoincheck"}`,
            values: '0+3x30',
          },
          {
            series:
              'apiserver_admission_webhook_rejection_count{name="validation.machinejoincheck.joinguard.io",type="validating",operation="CREATE",error_type="calling_webhook_error",rejection_code="0"}',
            values: '0+2x30',
          },
        ],
        alert_rule_test: [
          alert('JoinGuardNoLeader', '7m', []),
          alert('JoinGuardNoLeader', '15m', [
            { severity: 'critical', namespace: 'joinguard-system', name: 'joinguard-leader' },
          ]),
          alert('JoinGuardWebhookUnavailable', '7m', []),
          alert('JoinGuardWebhookUnavailable', '15m', [{ severity: 'critical', namespace: 'joinguard-system' }]),
          alert('JoinGuardWebhookCallsFailing', '15m', [{ severity: 'warning' }]),
          alert('JoinGuardReplicasWithoutLeaderElection', '15m', []),
          alert('JoinGuardReconcileErrors', '10m', []),
          alert('JoinGuardReconcileErrors', '25m', [{ severity: 'warning', namespace: 'joinguard-system' }]),
        ],
      },
      {
        // No replica at all (every scrape gone from minute 5): the webhook is unavailable; "no leader" is not
        // claimed from series that do not exist.
        interval: '1m',
        input_series: [
          ...replica('a', { up: '1x4 0x25', leader: '1x4 _x25', elects: '1x4 _x25', webhook: '0x4 _x25' }),
        ],
        alert_rule_test: [
          alert('JoinGuardWebhookUnavailable', '15m', [{ severity: 'critical' }]),
          alert('JoinGuardNoLeader', '15m', []),
        ],
      },
      {
        // One replica run without leader election (allowed): no leader series, nothing fires — the old
        // `or on() vector(0)` rule fired here forever.
        interval: '1m',
        input_series: [...replica('a', { up: '1x30', elects: '0x30', webhook: '0x30' })],
        alert_rule_test: quiet.map((a) => alert(a, '20m', [])),
      },
      {
        // Two replicas without leader election (or one without beside one with): two writers.
        interval: '1m',
        input_series: [
          ...replica('a', { up: '1x30', elects: '0x30', webhook: '0x30' }),
          ...replica('b', { up: '1x30', elects: '0x30', webhook: '0x30' }),
        ],
        alert_rule_test: [
          alert('JoinGuardReplicasWithoutLeaderElection', '5m', [
            { severity: 'critical', namespace: 'joinguard-system', name: 'joinguard-leader' },
          ]),
          alert('JoinGuardNoLeader', '20m', []),
        ],
      },
    ],
  };
}

describe('lifecycle: the shipped PrometheusRule passes promtool', function () {
  // A cold build of promtool takes about 4-5 minutes on 2 cores; cached, nothing.
  this.timeout(15 * 60_000);
  let promtool: string;
  let dir: string;

  before(async () => {
    promtool = await buildPromtool();
    dir = await mkdtemp(join(tmpdir(), 'joinguard-promtool-'));
    // The rules exactly as shipped: taken from the built observability file's PrometheusRule.
    const { observability } = await renderProviderFiles(VERSION);
    const rule = observability
      .split(/^---$/m)
      .map((d) => parse(d) as { kind?: string; spec?: unknown })
      .find((o) => o?.kind === 'PrometheusRule');
    expect(rule, 'a PrometheusRule in observability-components.yaml').to.exist;
    await writeFile(join(dir, 'rules.yaml'), stringify(rule!.spec));
    await writeFile(join(dir, 'tests.yaml'), stringify(ruleTests()));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('promtool check rules: SUCCESS, eight alerts', async () => {
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'rules.yaml')]);
    expect(stdout).to.match(/SUCCESS: 8 rules found/);
  });

  it('promtool test rules: each alert fires when it should and only then', async () => {
    const res = await run(promtool, ['test', 'rules', join(dir, 'tests.yaml')], { cwd: dir }).catch(
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(`${res.stdout}${res.stderr}`, `${res.stdout}${res.stderr}`).to.match(/SUCCESS/);
  });

  it("the stalled alert links the runbook section of the check's reason", () => {
    const a = annotationsFor('JoinGuardCheckStalled', { reason: 'RemediationBudgetExhausted' });
    expect(a['runbook_url']).to.equal(`${runbookBase(VERSION)}#remediationbudgetexhausted`);
  });

  it('every alert links a runbook section of this release', async () => {
    const { observability } = await renderProviderFiles(VERSION);
    const urls = [...observability.matchAll(/runbook_url: (\S+)/g)].map((m) => m[1]!);
    expect(urls).to.have.length(8);
    for (const u of urls) expect(u.startsWith(`${runbookBase(VERSION)}#`), u).to.equal(true);
  });
});
