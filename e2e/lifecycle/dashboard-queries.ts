// The dashboard's queries for promtool (promtool.test.ts): every panel query as a recording rule, so that
// `promtool check rules` parses each one, and promql_expr_test cases for the panels whose arithmetic matters — the
// Progressing reason as a state-timeline code, joined of expected per Cluster, leaders per shard (not summed across
// shards), join-time quantiles that still answer hours after the last join, and the resource panels' pods (JoinGuard's
// alone, a crash-looping one too).
import { stringify } from 'yaml';
import { dashboardPanels, REASON_CODES } from '../../manifests/dashboard.js';
import { PROVIDER } from '../../manifests/alerts.js';

/** Grafana's variables as "All" (and the interval Grafana would pick for a 1-minute scrape). */
export function instantiate(expr: string): string {
  return expr.replaceAll('$__rate_interval', '4m').replace(/\$(cluster_namespace|cluster_name|check|cluster)\b/g, '.*');
}

const panelQueries = () =>
  dashboardPanels().flatMap((p) => (p.targets ?? []).map((t, i) => ({ title: p.title, i, expr: instantiate(t.expr) })));
const ruleName = (title: string, i: number) => `dashboard:${title.toLowerCase().replace(/[^a-z0-9]+/g, '_')}:${i}`;

/** Every panel query as a recording rule (`promtool check rules` parses them; the tests below evaluate some). */
export function dashboardRuleFile(): string {
  const rules = panelQueries().map((q) => ({ record: ruleName(q.title, q.i), expr: q.expr }));
  return stringify({ groups: [{ name: 'dashboard', rules }] }, { lineWidth: 0 });
}
export const dashboardQueryCount = () => panelQueries().length;

const P = `provider="${PROVIDER}",namespace="joinguard-system"`;
const check = (c: string, cluster = 'c1') => `cluster_namespace="fleet",check="${c}",cluster_name="${cluster}"`;
const codeOf = (reason: string) => REASON_CODES.find((r) => r.reason === reason)!.code;
const query = (title: string, i = 0) => ruleName(title, i);
/** The samples a panel's recording rule gives (named after the rule). */
const samples = (title: string, rows: { labels: string; value: number }[]) =>
  rows.map((r) => ({
    ...r,
    labels: `{__name__="${query(title)}"${r.labels === '{}' ? '' : `,${r.labels.slice(1, -1)}`}}`,
  }));

/** promtool's test file: the panels evaluated on series as the controller exports them. */
export function dashboardTests(): unknown {
  const joined = (c: string, state: string, verdict: string, n: number) => ({
    series: `joinguard_machines{${P},pod="a",${check(c, c === 'w2' ? 'c2' : 'c1')},state="${state}",verdict="${verdict}"}`,
    values: `${n}x10`,
  });
  return {
    rule_files: ['dashboard.yaml'],
    evaluation_interval: '1m',
    tests: [
      {
        name: "the fleet's panels",
        interval: '1m',
        input_series: [
          {
            series: `joinguard_check_condition{${P},pod="a",${check('w1')},type="Progressing",status="True",reason="AsExpected"}`,
            values: '1x4 stale',
          },
          {
            series: `joinguard_check_condition{${P},pod="a",${check('w1')},type="Progressing",status="False",reason="NeverJoined"}`,
            values: '_x4 1x6',
          },
          // Cluster c1: 3 joined, 1 joining, 1 stuck, 1 deleting (not expected); c2: 2 joined of 2.
          joined('w1', 'Joined', 'Joined', 3),
          joined('w1', 'Joining', 'Joining', 1),
          joined('w1', 'Stuck', 'Stuck', 1),
          joined('w1', 'Deleting', 'Deleting', 1),
          joined('w2', 'Joined', 'Joined', 2),
          // Two shards, each with a leader and a standby: 1 per Lease, never 2 added up.
          ...['joinguard-leader-a', 'joinguard-leader-b'].flatMap((lease, i) => [
            { series: `leader_election_master_status{${P},pod="p${i}0",name="${lease}"}`, values: '1x10' },
            { series: `leader_election_master_status{${P},pod="p${i}1",name="${lease}"}`, values: '0x10' },
          ]),
        ],
        promql_expr_test: [
          {
            expr: query('Progressing reason per check'),
            eval_time: '2m',
            exp_samples: samples('Progressing reason per check', [
              { labels: `{${check('w1')}}`, value: codeOf('AsExpected') },
            ]),
          },
          {
            expr: query('Progressing reason per check'),
            eval_time: '8m',
            exp_samples: samples('Progressing reason per check', [
              { labels: `{${check('w1')}}`, value: codeOf('NeverJoined') },
            ]),
          },
          {
            expr: query('Joined of expected, per Cluster'),
            eval_time: '5m',
            exp_samples: samples('Joined of expected, per Cluster', [
              { labels: '{cluster_namespace="fleet",cluster_name="c1"}', value: 0.6 },
              { labels: '{cluster_namespace="fleet",cluster_name="c2"}', value: 1 },
            ]),
          },
          {
            expr: query('Leaders per shard'),
            eval_time: '5m',
            exp_samples: samples('Leaders per shard', [
              { labels: '{namespace="joinguard-system",name="joinguard-leader-a"}', value: 1 },
              { labels: '{namespace="joinguard-system",name="joinguard-leader-b"}', value: 1 },
            ]),
          },
        ],
      },
      {
        // Two replicas, b crash-looping (down, restarting each minute), and a CAPI manager beside them in
        // kube-state-metrics' series (no provider label): the resource panels show JoinGuard's two pods only.
        name: 'resources per replica',
        interval: '1m',
        input_series: [
          { series: `up{${P},pod="a"}`, values: '1x10' },
          { series: `up{${P},pod="b"}`, values: '0x10' },
          { series: `process_resident_memory_bytes{${P},pod="a"}`, values: '100000000x10' },
          ...[
            ['joinguard-system', 'a', '0x10'],
            ['joinguard-system', 'b', '0+1x10'],
            ['capi-system', 'capi-controller-manager-x', '0+1x10'],
          ].flatMap(([ns, pod, restarts]) => [
            {
              series: `kube_pod_container_status_restarts_total{namespace="${ns}",pod="${pod}",container="manager"}`,
              values: restarts!,
            },
            {
              series: `kube_pod_container_resource_limits{namespace="${ns}",pod="${pod}",container="manager",resource="memory",unit="byte"}`,
              values: '536870912x10',
            },
          ]),
        ],
        promql_expr_test: [
          {
            expr: query('Restarts per replica'),
            eval_time: '5m',
            exp_samples: samples('Restarts per replica', [
              { labels: '{namespace="joinguard-system",pod="a"}', value: 0 },
              { labels: '{namespace="joinguard-system",pod="b"}', value: 4 },
            ]),
          },
          {
            expr: ruleName('Memory per replica (RSS) and limit', 1),
            eval_time: '5m',
            exp_samples: [
              { labels: '{namespace="joinguard-system",pod="a"}', value: 536870912 },
              { labels: '{namespace="joinguard-system",pod="b"}', value: 536870912 },
            ].map((r) => ({
              ...r,
              labels: `{__name__="${ruleName('Memory per replica (RSS) and limit', 1)}",${r.labels.slice(1, -1)}}`,
            })),
          },
        ],
      },
      {
        // One join in the 40th minute (a 2-minute one: bucket 120), then none for 5 hours: the rolling-day quantile
        // still answers at the end, where the old rate over $__rate_interval has nothing (0/0 in every bucket).
        name: 'join times when joins are rare',
        interval: '1m',
        input_series: [60, 120, 180, 3600, '+Inf'].map((le) => ({
          series: `joinguard_join_duration_seconds_bucket{${P},pod="a",${check('w1')},le="${le}"}`,
          values: le === 60 ? '0x360' : '0x39 1x320',
        })),
        promql_expr_test: [
          {
            expr: query('Join duration (p50, p95), rolling day'),
            eval_time: '6h',
            exp_samples: samples('Join duration (p50, p95), rolling day', [{ labels: '{}', value: 90 }]),
          },
          {
            expr: `histogram_quantile(0.5, sum by (le) (rate(joinguard_join_duration_seconds_bucket[4m]))) >= 0`,
            eval_time: '6h',
            exp_samples: [],
          },
        ],
      },
    ],
  };
}
