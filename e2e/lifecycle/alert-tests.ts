// promtool's unit tests of the shipped alerts (run by promtool.test.ts): input series as either shipped scrape setup
// labels them (provider, namespace, pod, instance), then which alerts fire at which time. Every alert has at least one
// case where it fires and one where it must stay quiet; promtool.test.ts fails when one lacks either.
import { PACING_WINDOW_SECONDS, PROVIDER } from '../../manifests/alerts.js';
import { alertRules } from '../../manifests/observability.js';

export const VERSION = '0.1.0';
const RULES = alertRules(VERSION);

export type Series = { series: string; values: string };
type Labels = Record<string, string>;
export interface AlertTest {
  eval_time: string;
  alertname: string;
  exp_alerts: { exp_labels: Labels; exp_annotations: Labels }[];
}
export interface TestGroup {
  name: string;
  interval: string;
  input_series: Series[];
  alert_rule_test: AlertTest[];
}

/** The annotations Prometheus renders: the two template forms the rules use, `$labels.x` and `| toLower`. */
export function annotationsFor(name: string, labels: Labels): Labels {
  const rule = RULES.find((r) => r.alert === name)!;
  const render = (t: string) =>
    t.replace(/\{\{ \$labels\.(\w+)( \| toLower)? \}\}/g, (_m, k: string, lower?: string) =>
      lower ? (labels[k] ?? '').toLowerCase() : (labels[k] ?? ''),
    );
  return Object.fromEntries(Object.entries(rule.annotations).map(([k, v]) => [k, render(v)]));
}

const alert = (name: string, at: string, labels: Labels[]): AlertTest => ({
  eval_time: at,
  alertname: name,
  exp_alerts: labels.map((l) => ({ exp_labels: l, exp_annotations: annotationsFor(name, l) })),
});

const P = `provider="${PROVIDER}"`;
const NS = 'namespace="joinguard-system"';
const LEASE = 'name="joinguard-leader"';
const WEBHOOK = 'webhook="/validate-joinguard-io-v1alpha1-machinejoincheck"';
/** One replica's own series (provider, namespace, pod, instance as a scrape sets them). */
const target = (pod: string) => `${P},${NS},pod="${pod}",instance="10.0.0.${pod.charCodeAt(0) - 96}:8443"`;
const replica = (pod: string, o: { up: string; leader?: string; elects?: string; webhook?: string }): Series[] => [
  { series: `up{${target(pod)}}`, values: o.up },
  ...(o.leader !== undefined
    ? [{ series: `leader_election_master_status{${target(pod)},${LEASE}}`, values: o.leader }]
    : []),
  ...(o.elects !== undefined
    ? [{ series: `joinguard_leader_election_enabled{${target(pod)},${LEASE}}`, values: o.elects }]
    : []),
  ...(o.webhook !== undefined
    ? [{ series: `controller_runtime_webhook_requests_in_flight{${target(pod)},${WEBHOOK}}`, values: o.webhook }]
    : []),
];
const ofCheck = (check: string) => `cluster_namespace="fleet",check="${check}",cluster_name="c1"`;
/** A check's condition series, exported by the leader `pod`. */
const cond = (check: string, type: string, status: string, reason: string, values = '1x30', pod = 'a'): Series => ({
  series: `joinguard_check_condition{${target(pod)},${ofCheck(check)},type="${type}",status="${status}",reason="${reason}"}`,
  values,
});
const progressing = (check: string, reason: string, status = 'False', values = '1x30') =>
  cond(check, 'Progressing', status, reason, values);
const finished = (check: string, values: string): Series => ({
  series: `joinguard_last_remediation_finished_timestamp_seconds{${target('a')},${ofCheck(check)}}`,
  values,
});
/** Since when the check's Progressing has been False for `reason` (Unix seconds; promtool's clock starts at 0). */
const since = (check: string, reason: string, values: string): Series => ({
  series: `joinguard_check_condition_last_transition_timestamp_seconds{${target('a')},${ofCheck(check)},type="Progressing",status="False",reason="${reason}"}`,
  values,
});
/** Machines of a check by state and verdict (joinguard_machines). */
const machines = (check: string, state: string, verdict: string, values: string): Series => ({
  series: `joinguard_machines{${target('a')},${ofCheck(check)},state="${state}",verdict="${verdict}"}`,
  values,
});
const refused = (check: string, write: string, values: string): Series => ({
  series: `joinguard_write_refused_machines{${target('a')},${ofCheck(check)},write="${write}"}`,
  values,
});
const onCheck = (check: string, more: Labels = {}): Labels => ({
  cluster_namespace: 'fleet',
  check,
  cluster_name: 'c1',
  ...more,
});
const warning = (check: string, more: Labels = {}) => ({ severity: 'warning', ...onCheck(check, more) });
/** A steady leader and standby, both serving the webhook: the installation is healthy. */
const healthyPair = (minutes: number) => [
  ...replica('a', { up: `1x${minutes}`, leader: `1x${minutes}`, elects: `1x${minutes}`, webhook: `0x${minutes}` }),
  ...replica('b', { up: `1x${minutes}`, leader: `0x${minutes}`, elects: `1x${minutes}`, webhook: `0x${minutes}` }),
];

/**
 * The timestamp series of a check whose remediations finish at the given minutes (promtool's clock starts at 0):
 * at each minute, when the latest of them finished (0 before the first).
 */
function finishesAt(minutes: number[], length: number): string {
  const out: number[] = [];
  for (let m = 0; m <= length; m++) out.push(Math.max(0, ...minutes.filter((f) => f <= m).map((f) => f * 60)));
  return out.join(' ');
}

/** The checks' own alerts: stalls, suspicions, Ready's own reasons. */
function checkGroups(): TestGroup[] {
  return [
    {
      name: 'stops by reason; dry run and suspicions are not stalls',
      interval: '1m',
      input_series: [
        progressing('budget', 'RemediationBudgetExhausted'),
        // Stopped 40 minutes before the series start, nothing ever finished, nothing joining: the budget waits for
        // its window, a stall.
        since('budget', 'RemediationBudgetExhausted', '-2400x30'),
        finished('budget', '0x30'),
        progressing('never', 'NeverJoined'),
        progressing('dry', 'DryRun'),
        progressing('suspect', 'BootstrapCredentialSuspect'),
        progressing('rollout', 'RolloutSuspect'),
        progressing('fine', 'AsExpected', 'True'),
        ...healthyPair(30),
      ],
      alert_rule_test: [
        alert('JoinGuardCheckStalled', '10m', []),
        alert('JoinGuardCheckStalled', '20m', [
          warning('budget', { reason: 'RemediationBudgetExhausted' }),
          warning('never', { reason: 'NeverJoined' }),
        ]),
        alert('JoinGuardSuspicionRaised', '5m', [warning('suspect')]),
        // A rollout that cannot join has its own alert, and is not also a stalled check.
        alert('JoinGuardRolloutSuspect', '5m', [warning('rollout')]),
      ],
    },
    {
      // maxInFlight 1: RemediationBudgetExhausted all along while remediations finish every 10 minutes (pacing);
      // the last one finishes at minute 35, then none: the pacing window ends at 65, the alert fires 15 minutes on.
      name: 'budget pacing is not a stall; pacing that stops finishing is',
      interval: '1m',
      input_series: [
        progressing('paced', 'RemediationBudgetExhausted', 'False', '1x100'),
        finished('paced', finishesAt([5, 15, 25, 35], 100)),
        cond('paced', 'Ready', 'True', 'Ready', '1x100'),
      ],
      alert_rule_test: [
        alert('JoinGuardCheckStalled', '30m', []),
        alert('JoinGuardCheckStalled', '60m', []),
        alert('JoinGuardCheckStalled', '75m', []),
        alert('JoinGuardCheckStalled', `${35 + PACING_WINDOW_SECONDS / 60 + 16}m`, [
          warning('paced', { reason: 'RemediationBudgetExhausted' }),
        ]),
        alert('JoinGuardCheckNotReady', '90m', []),
        alert('JoinGuardSuspicionRaised', '90m', []),
        alert('JoinGuardRolloutSuspect', '90m', []),
      ],
    },
    {
      // maxInFlight 1 and the check's first remediation: the old Machine takes 30 minutes to go (a Metal3 host
      // deprovisioning, a vSphere clone) while its replacement provisions within its own deadline; then it is gone
      // and the budget frees. Not a stall at any time (issue 38: it fired 15 minutes in).
      name: 'a 30-minute replacement in progress within its bounds is not a stall',
      interval: '1m',
      input_series: [
        progressing('slow', 'RemediationBudgetExhausted', 'False', '1x30 _x30'),
        since('slow', 'RemediationBudgetExhausted', '60x30 _x30'),
        finished('slow', finishesAt([31], 60)),
        machines('slow', 'Deleting', 'Deleting', '1x30 0x30'),
        machines('slow', 'Joining', 'Provisioning', '0 1x29 0x30'),
        progressing('slow', 'AsExpected', 'True', '_x30 1x30'),
        // The same 30 minutes, the replacement created only once the old Machine is gone (as KCP does): nothing
        // joins meanwhile; the stop's own age says it is young.
        progressing('kcp', 'RemediationBudgetExhausted', 'False', '1x30 _x30'),
        since('kcp', 'RemediationBudgetExhausted', '60x30 _x30'),
        finished('kcp', finishesAt([31], 60)),
        machines('kcp', 'Deleting', 'Deleting', '1x30 0x30'),
        machines('kcp', 'Joining', 'Provisioning', '0x30 1x10 0x20'),
        progressing('kcp', 'AsExpected', 'True', '_x30 1x30'),
        // The old Machine takes 50 minutes to go while its replacement provisions within its own (longer)
        // deadline: the stop is older than the pacing window, but a replacement is coming up.
        progressing('long', 'RemediationBudgetExhausted', 'False', '1x50 _x10'),
        since('long', 'RemediationBudgetExhausted', '0x50 _x10'),
        finished('long', finishesAt([51], 60)),
        machines('long', 'Deleting', 'Deleting', '1x50 0x10'),
        machines('long', 'Joining', 'Provisioning', '1x55 0x5'),
        // A replacement that does not join within its deadline (Stuck at minute 20) and nothing finishing: past its
        // bounds, a stall once the stop is older than the pacing window and 15 minutes more.
        progressing('hung', 'RemediationBudgetExhausted', 'False', '1x60'),
        since('hung', 'RemediationBudgetExhausted', '0x60'),
        finished('hung', '0x60'),
        machines('hung', 'Deleting', 'Deleting', '1x60'),
        machines('hung', 'Joining', 'Joining', '1x19 0x41'),
        machines('hung', 'Stuck', 'Stuck', '0x19 1x41'),
      ],
      alert_rule_test: [
        alert('JoinGuardCheckStalled', '16m', []),
        alert('JoinGuardCheckStalled', '29m', []),
        alert('JoinGuardCheckStalled', '44m', []),
        alert('JoinGuardCheckStalled', `${PACING_WINDOW_SECONDS / 60 + 16}m`, [
          warning('hung', { reason: 'RemediationBudgetExhausted' }),
        ]),
        alert('JoinGuardCheckStalled', '59m', [warning('hung', { reason: 'RemediationBudgetExhausted' })]),
      ],
    },
    {
      name: "Ready's own reasons; NotReady is left to the Progressing alerts",
      interval: '1m',
      input_series: [
        cond('typo', 'Ready', 'False', 'InvalidSpec'),
        cond('orphan', 'Ready', 'False', 'ClusterNotFound'),
        cond('delete', 'Ready', 'False', 'MachineDeleteNotAllowed'),
        cond('stalled', 'Ready', 'False', 'NotReady'),
        cond('fine', 'Ready', 'True', 'Ready'),
        cond('healed', 'Ready', 'False', 'InvalidSpec', '1x5 _x25'), // fixed after 5 minutes: never fires
      ],
      alert_rule_test: [
        alert('JoinGuardCheckNotReady', '5m', []),
        alert('JoinGuardCheckNotReady', '15m', [
          warning('delete', { reason: 'MachineDeleteNotAllowed' }),
          warning('orphan', { reason: 'ClusterNotFound' }),
          warning('typo', { reason: 'InvalidSpec' }),
        ]),
      ],
    },
    {
      // A refused withdrawal is critical within minutes; a refused mark or delete is a warning after 15 minutes; a
      // refusal cleared by the retries within minutes says nothing.
      name: 'refused writes, withdrawals apart',
      interval: '1m',
      input_series: [
        refused('joined', 'withdraw', '0 0 1x28'),
        refused('joined', 'mark', '0x30'),
        refused('stuck', 'mark', '1x30'),
        refused('stuck', 'withdraw', '0x30'),
        refused('blip', 'mark', '0 1x4 0x25'),
        refused('blip', 'withdraw', '0 1 0x28'),
        refused('blip', 'delete', '0x30'),
      ],
      alert_rule_test: [
        alert('JoinGuardWithdrawalRefused', '3m', []),
        alert('JoinGuardWithdrawalRefused', '5m', [{ severity: 'critical', ...onCheck('joined') }]),
        alert('JoinGuardWritesRefused', '10m', []),
        alert('JoinGuardWritesRefused', '20m', [warning('stuck', { write: 'mark' })]),
      ],
    },
    {
      // Pod a leads the add-on's Lease unfiltered (an upgrade dropped its watch filter); pod c leads shard-a's and
      // exports the same check: two leaders on one check. Pod a's own check is exported once.
      name: 'two leaders on one check',
      interval: '1m',
      input_series: [
        cond('shared', 'Ready', 'True', 'Ready', '1x30', 'a'),
        cond('shared', 'Ready', 'True', 'Ready', '_x3 1x27', 'c'),
        cond('own', 'Ready', 'True', 'Ready', '1x30', 'a'),
      ],
      alert_rule_test: [
        alert('JoinGuardCheckReconciledTwice', '6m', []),
        alert('JoinGuardCheckReconciledTwice', '10m', [{ severity: 'critical', ...onCheck('shared') }]),
      ],
    },
  ];
}

/** The installation's alerts: leaders, the webhook, reconciles. */
function installGroups(): TestGroup[] {
  const quiet = [
    'JoinGuardNoLeader',
    'JoinGuardReplicasWithoutLeaderElection',
    'JoinGuardWebhookUnavailable',
    'JoinGuardWebhookCallsFailing',
    'JoinGuardReconcileErrors',
    'JoinGuardCheckReconciledTwice',
    'JoinGuardWritesRefused',
    'JoinGuardWithdrawalRefused',
    'JoinGuardCheckStalled',
    'JoinGuardCheckNotReady',
  ];
  const errors = (values: string): Series => ({
    series: `controller_runtime_reconcile_errors_total{${target('a')},controller="machinejoincheck"}`,
    values,
  });
  return [
    {
      name: 'a healthy installation: nothing fires',
      interval: '1m',
      input_series: [
        ...healthyPair(30),
        errors('0+0x30'),
        progressing('fine', 'AsExpected', 'True'),
        cond('fine', 'Ready', 'True', 'Ready'),
        finished('fine', '0x30'),
        refused('fine', 'mark', '0x30'),
        refused('fine', 'withdraw', '0x30'),
      ],
      alert_rule_test: quiet.map((a) => alert(a, '20m', [])),
    },
    {
      // The leader steps down at minute 5 and the standby never takes over; the webhook server of both stops at
      // minute 5 while their metrics are still scraped; reconciles fail.
      name: 'no leader, no webhook, reconcile errors',
      interval: '1m',
      input_series: [
        ...replica('a', { up: '1x30', leader: '1x4 0x25', elects: '1x30', webhook: '0x4 _x25' }),
        ...replica('b', { up: '1x30', leader: '0x30', elects: '1x30', webhook: '0x4 _x25' }),
        errors('0+3x30'),
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
        alert('JoinGuardWebhookCallsFailing', '3m', []),
        alert('JoinGuardWebhookCallsFailing', '15m', [{ severity: 'warning' }]),
        alert('JoinGuardReplicasWithoutLeaderElection', '15m', []),
        alert('JoinGuardReconcileErrors', '10m', []),
        alert('JoinGuardReconcileErrors', '25m', [{ severity: 'warning', namespace: 'joinguard-system' }]),
      ],
    },
    {
      // No replica at all (every scrape fails from minute 5) and no kube-state-metrics: the label-less last resort.
      // "No leader" is not claimed from series that do not exist.
      name: 'no replica up, nothing else to say so',
      interval: '1m',
      input_series: [...replica('a', { up: '1x4 0x25', leader: '1x4 _x25', elects: '1x4 _x25', webhook: '0x4 _x25' })],
      alert_rule_test: [
        alert('JoinGuardWebhookUnavailable', '15m', [{ severity: 'critical' }]),
        alert('JoinGuardNoLeader', '15m', []),
      ],
    },
    {
      // A central ruler over two management clusters: m1's JoinGuard serves; m2's Deployment wants two replicas
      // (kube-state-metrics) and its pods are gone from minute 5. The alert names m2, and only m2 (absent() would
      // have said nothing while m1 is up, and nothing about which cluster when both are down).
      name: 'per management cluster: a Deployment that wants replicas and has none up',
      interval: '1m',
      input_series: [
        ...['a', 'b'].flatMap((pod) =>
          replica(pod, { up: '1x30', leader: pod === 'a' ? '1x30' : '0x30', elects: '1x30', webhook: '0x30' }).map(
            (s) => ({ ...s, series: s.series.replace('{', '{cluster="m1",') }),
          ),
        ),
        ...replica('a', { up: '1x4 _x25', webhook: '0x4 _x25' }).map((s) => ({
          ...s,
          series: s.series.replace('{', '{cluster="m2",'),
        })),
        ...['m1', 'm2'].map((c) => ({
          series: `kube_deployment_spec_replicas{cluster="${c}",namespace="joinguard-system",deployment="joinguard-controller-manager",job="kube-state-metrics"}`,
          values: '2x30',
        })),
      ],
      alert_rule_test: [
        alert('JoinGuardWebhookUnavailable', '7m', []),
        alert('JoinGuardWebhookUnavailable', '15m', [
          { severity: 'critical', cluster: 'm2', namespace: 'joinguard-system' },
        ]),
      ],
    },
    {
      // One replica run without leader election (allowed): no leader series, nothing fires — the old
      // `or on() vector(0)` rule fired here forever.
      name: 'one replica without leader election',
      interval: '1m',
      input_series: [...replica('a', { up: '1x30', elects: '0x30', webhook: '0x30' })],
      alert_rule_test: quiet.slice(0, 5).map((a) => alert(a, '20m', [])),
    },
    {
      name: 'two replicas, one or both without leader election: two writers',
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
  ];
}

/** promtool's test file: every group, evaluated every minute. */
export function ruleTests(): { rule_files: string[]; evaluation_interval: string; tests: TestGroup[] } {
  return { rule_files: ['rules.yaml'], evaluation_interval: '1m', tests: [...checkGroups(), ...installGroups()] };
}
