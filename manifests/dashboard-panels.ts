// The fleet dashboard's panels, each one query per line (dashboard.ts lays them out and writes Grafana's JSON;
// docs/install.md lists what each answers). From the top: which checks are unhealthy now and since when, each
// check's Progressing reason over time, joined of expected per Cluster, the Machines being timed and overdue, refused
// writes; remediations and join times (kept readable when joins are rare); then the controller: leader per shard,
// watch restarts, API writes by verb, and the controller-runtime panels CAPI's own dashboards show; last each
// replica's memory, CPU and restarts.
import { ProgressingReason } from '../api/v1alpha1/types.js';

/** JoinGuard's series, whoever scrapes them (alerts.ts SELECTOR), in the chosen management cluster. */
export const mgmt = 'provider="addon-joinguard", cluster=~"$cluster"';
/** The filter every per-check query carries. */
const sel = `${mgmt}, cluster_namespace=~"$cluster_namespace", cluster_name=~"$cluster_name", check=~"$check"`;
const CHECK = 'cluster, cluster_namespace, cluster_name, check';
const byCheck = '{{cluster_namespace}}/{{check}} ({{cluster_name}})';

export interface Target {
  expr: string;
  legend?: string;
  instant?: boolean;
  format?: 'time_series' | 'table' | 'heatmap';
}
export type PanelType = 'timeseries' | 'stat' | 'table' | 'heatmap' | 'row' | 'state-timeline' | 'bargauge';
export interface Panel {
  title: string;
  type: PanelType;
  /** What the panel answers (shown as its description, and listed in docs/install.md). */
  description?: string;
  unit?: string;
  w: number;
  h: number;
  targets?: Target[];
  stack?: boolean;
  bars?: boolean;
  /** More of fieldConfig.defaults (min, max, value mappings, thresholds). */
  fieldDefaults?: Record<string, unknown>;
  /** More panel options than the type's defaults (dashboard.ts). */
  options?: Record<string, unknown>;
}

const series = (
  title: string,
  w: number,
  h: number,
  expr: string,
  legend: string,
  more: Partial<Panel> = {},
): Panel => ({
  title,
  type: 'timeseries',
  w,
  h,
  targets: [{ expr, legend }],
  ...more,
});
const stat = (title: string, w: number, h: number, expr: string, more: Partial<Panel> = {}): Panel => ({
  title,
  type: 'stat',
  w,
  h,
  targets: [{ expr, instant: true }],
  ...more,
});
const row = (title: string): Panel => ({ title, type: 'row', w: 24, h: 1 });
const cr = (metric: string) => `${metric}{${mgmt}, controller="machinejoincheck"}`;
const green = (steps: { color: string; value: number | null }[]) => ({ thresholds: { mode: 'absolute', steps } });
/** Red from one up: a count that should be 0. */
const zeroIsGood = green([
  { color: 'green', value: null },
  { color: 'red', value: 1 },
]);

/**
 * Progressing's reasons as numbers, for the state timeline (PromQL carries a reason as a label, and a state timeline
 * colours values): the reasons in api/v1alpha1's order, True ones green, waiting ones blue, stops red.
 */
export const REASON_CODES = Object.values(ProgressingReason).map((reason, i) => ({
  reason,
  code: i,
  color:
    (
      {
        AsExpected: 'green',
        Remediating: 'blue',
        DryRun: 'purple',
        RemediationBudgetExhausted: 'yellow',
        ControlPlaneEndpointUnreachable: 'orange',
      } as Record<string, string>
    )[reason] ?? 'red',
}));
const reasonTimeline =
  `max by (${CHECK}) (` +
  REASON_CODES.map(
    (r) => `${r.code} * joinguard_check_condition{type="Progressing", reason="${r.reason}", ${sel}}`,
  ).join(' or ') +
  ')';

function fleetPanels(): Panel[] {
  const progressingFalse = (reason: string) =>
    `joinguard_check_condition{type="Progressing", status="False", ${reason}, ${sel}}`;
  return [
    row('Fleet: which checks are unhealthy, since when'),
    stat('Checks not progressing', 4, 5, `count(${progressingFalse('reason!="DryRun"')} == 1) or vector(0)`, {
      description: 'Checks whose Progressing is False (dry runs left out): each reason has a runbook section.',
      fieldDefaults: zeroIsGood,
    }),
    stat(
      'Checks suspecting the credential or a rollout',
      4,
      5,
      `count(${progressingFalse('reason=~"BootstrapCredentialSuspect|RolloutSuspect"')} == 1) or vector(0)`,
      {
        description: 'Checks that stopped rebuilding: BootstrapCredentialSuspect or RolloutSuspect.',
        fieldDefaults: zeroIsGood,
      },
    ),
    stat(
      'Checks not ready',
      4,
      5,
      `count(joinguard_check_condition{type="Ready", status="False", ${sel}} == 1) or vector(0)`,
      {
        description:
          'Ready=False: stalled (NotReady), or unable to work as written (InvalidSpec, ClusterNotFound, ...).',
        fieldDefaults: zeroIsGood,
      },
    ),
    stat('Stuck Machines', 4, 5, `sum(joinguard_machines{state="Stuck", ${sel}}) or vector(0)`, {
      description: 'Past their deadline with no Node, or asked to be replaced and not gone yet.',
      fieldDefaults: zeroIsGood,
    }),
    stat('Machines with a refused write', 4, 5, `sum(joinguard_write_refused_machines{${sel}}) or vector(0)`, {
      description: 'Writes the apiserver refuses (policy, RBAC, webhook); a refused withdrawal is critical.',
      fieldDefaults: zeroIsGood,
    }),
    stat('Longest time past a deadline', 4, 5, `max(joinguard_past_deadline_seconds{${sel}}) or vector(0)`, {
      unit: 's',
      description: 'How long the stuck Machine furthest past its deadline has been past it.',
    }),
    {
      title: 'Checks not progressing, since',
      type: 'table',
      w: 24,
      h: 6,
      description: 'Each check whose Progressing is False now: its reason and since when (lastTransitionTime).',
      unit: 'dateTimeFromNow',
      targets: [
        {
          expr:
            `max by (${CHECK}, reason) (joinguard_check_condition_last_transition_timestamp_seconds{type="Progressing", ` +
            `status="False", ${sel}}) * 1000`,
          instant: true,
          format: 'table',
        },
      ],
    },
    {
      title: 'Progressing reason per check',
      type: 'state-timeline',
      w: 24,
      h: 8,
      description: "Each check's Progressing reason over time: when a stop began and how long it lasted.",
      targets: [{ expr: reasonTimeline, legend: byCheck }],
      fieldDefaults: {
        mappings: [
          {
            type: 'value',
            options: Object.fromEntries(
              REASON_CODES.map((r) => [String(r.code), { text: r.reason, color: r.color, index: r.code }]),
            ),
          },
        ],
      },
    },
  ];
}

function machinePanels(): Panel[] {
  const machines = (filter: string) =>
    `sum by (cluster, cluster_namespace, cluster_name) (joinguard_machines{${filter}${sel}})`;
  return [
    row('Machines'),
    {
      title: 'Joined of expected, per Cluster',
      type: 'bargauge',
      w: 8,
      h: 8,
      description: 'The share of the expected Machines of each Cluster (in scope, not being deleted) that joined.',
      unit: 'percentunit',
      targets: [
        {
          expr: `${machines('state="Joined", ')} / ${machines('state!="Deleting", ')}`,
          legend: '{{cluster_namespace}}/{{cluster_name}}',
          instant: true,
        },
      ],
      fieldDefaults: {
        min: 0,
        max: 1,
        ...green([
          { color: 'red', value: null },
          { color: 'yellow', value: 0.8 },
          { color: 'green', value: 1 },
        ]),
      },
    },
    {
      title: 'Machines timed and overdue, per check',
      type: 'timeseries',
      w: 16,
      h: 8,
      description:
        'Timed: Joining or Provisioning with a deadline running. Overdue: Stuck, past the deadline (or asked to be ' +
        'replaced and not gone). `kubectl get mjc` and its status list which ones.',
      targets: [
        {
          expr: `sum by (${CHECK}) (joinguard_machines{verdict=~"Joining|Provisioning", ${sel}})`,
          legend: `timed ${byCheck}`,
        },
        { expr: `sum by (${CHECK}) (joinguard_machines{state="Stuck", ${sel}})`, legend: `overdue ${byCheck}` },
      ],
    },
    series('Machines by state', 12, 8, `sum by (state) (joinguard_machines{${sel}})`, '{{state}}', { stack: true }),
    series(
      'Time past deadline per check',
      12,
      8,
      `max by (${CHECK}) (joinguard_past_deadline_seconds{${sel}})`,
      byCheck,
      { description: 'The longest any stuck Machine of the check is past its deadline (0 when none).', unit: 's' },
    ),
  ];
}

function remediationPanels(): Panel[] {
  const q = (p: number) => ({
    expr: `histogram_quantile(${p}, sum by (le) (increase(joinguard_join_duration_seconds_bucket{${sel}}[1d])))`,
    legend: `p${p * 100} over the last day`,
  });
  return [
    row('Remediations, refused writes and join times'),
    series(
      'Remediations by outcome',
      8,
      8,
      `sum by (outcome) (increase(joinguard_remediations_total{${sel}}[$__rate_interval]))`,
      '{{outcome}}',
      { bars: true, stack: true },
    ),
    series(
      'Remediations by path',
      8,
      8,
      `sum by (path) (increase(joinguard_remediations_total{${sel}}[$__rate_interval]))`,
      '{{path}}',
      { bars: true, stack: true },
    ),
    series(
      'Suspicions raised',
      8,
      8,
      `sum by (${CHECK}) (increase(joinguard_suspicions_raised_total{${sel}}[$__rate_interval]))`,
      byCheck,
      { bars: true },
    ),
    series(
      'Refused writes, by write',
      12,
      8,
      `sum by (${CHECK}, write) (joinguard_write_refused_machines{${sel}}) > 0`,
      `{{write}} ${byCheck}`,
      {
        description:
          'Machines whose mark, withdrawal or deletion the apiserver refuses now (retried with back-off). A ' +
          'withdrawal refused leaves a joined Machine marked: its owner may delete it.',
      },
    ),
    {
      title: 'Join duration (p50, p95), rolling day',
      type: 'timeseries',
      w: 12,
      h: 8,
      description:
        'From the join clock start to the Node, of the Machines that joined in the day before each point: shows ' +
        'data however rare joins are. Compare with joinTimeout.',
      unit: 's',
      targets: [q(0.5), q(0.95)],
    },
    {
      title: 'Recent join durations per check (status)',
      type: 'table',
      w: 12,
      h: 8,
      description:
        "p50, p95 and max of each check's recent joins, as its status.joinDurations keeps them: whenever they " +
        'happened, across restarts; the suggested joinTimeout is 1.5 × p95.',
      unit: 's',
      targets: [
        {
          expr: `max by (${CHECK}, quantile) (joinguard_recent_join_duration_seconds{${sel}})`,
          instant: true,
          format: 'table',
        },
      ],
    },
    {
      title: 'Join duration histogram',
      type: 'heatmap',
      w: 12,
      h: 8,
      targets: [
        {
          expr: `sum by (le) (increase(joinguard_join_duration_seconds_bucket{${sel}}[$__rate_interval]))`,
          legend: '{{le}}',
          format: 'heatmap',
        },
      ],
    },
  ];
}

function controllerPanels(): Panel[] {
  const reconcileBuckets = cr('controller_runtime_reconcile_time_seconds_bucket');
  return [
    row('Controller'),
    {
      title: 'Leaders per shard',
      type: 'stat',
      w: 6,
      h: 6,
      description:
        'Per Lease (one per shard, joinguard-leader-<shard>): the replicas leading it. 1 is right; 0 is no leader, ' +
        'more than 1 two writers.',
      options: { textMode: 'value_and_name' },
      targets: [
        {
          expr: `sum by (cluster, namespace, name) (leader_election_master_status{${mgmt}})`,
          legend: '{{name}}',
          instant: true,
        },
      ],
      fieldDefaults: green([
        { color: 'red', value: null },
        { color: 'green', value: 1 },
        { color: 'red', value: 2 },
      ]),
    },
    {
      title: 'Which replica leads',
      type: 'table',
      w: 6,
      h: 6,
      description: 'The pod that holds each Lease now.',
      targets: [
        {
          expr: `max by (cluster, namespace, name, pod) (leader_election_master_status{${mgmt}}) == 1`,
          instant: true,
          format: 'table',
        },
      ],
    },
    series(
      'Watch restarts by informer',
      6,
      6,
      `sum by (informer) (increase(joinguard_watch_restarts_total{${mgmt}}[$__rate_interval]))`,
      '{{informer}}',
      { bars: true, description: 'List+watch restarts after an error or silence: a flapping apiserver or network.' },
    ),
    series(
      'API writes by verb',
      6,
      6,
      `sum by (method) (rate(rest_client_requests_total{${mgmt}, method=~"POST|PUT|PATCH|DELETE"}[$__rate_interval]))`,
      '{{method}}',
      { description: 'Requests that change something, per second: marks, withdrawals, status, events, deletes.' },
    ),
    series(
      'JoinGuard writes by kind and result',
      8,
      6,
      `sum by (write, result) (rate(joinguard_api_writes_total{${mgmt}}[$__rate_interval]))`,
      '{{write}} {{result}}',
    ),
    series(
      'Reconciles by result',
      8,
      6,
      `sum by (result) (rate(${cr('controller_runtime_reconcile_total')}[$__rate_interval]))`,
      '{{result}}',
    ),
    series(
      'Reconcile errors',
      8,
      6,
      `sum(rate(${cr('controller_runtime_reconcile_errors_total')}[$__rate_interval]))`,
      'errors',
    ),
    series(
      'Reconcile time (p99)',
      6,
      6,
      `histogram_quantile(0.99, sum by (le) (rate(${reconcileBuckets}[$__rate_interval])))`,
      'p99',
      { unit: 's' },
    ),
    series('Work queue depth', 6, 6, `sum by (name, priority) (workqueue_depth{${mgmt}})`, '{{name}} {{priority}}'),
    series(
      'API requests by code',
      6,
      6,
      `sum by (code, method) (rate(rest_client_requests_total{${mgmt}}[$__rate_interval]))`,
      '{{method}} {{code}}',
    ),
    series(
      'Admission requests by code',
      6,
      6,
      `sum by (code) (rate(controller_runtime_webhook_requests_total{${mgmt}}[$__rate_interval]))`,
      '{{code}}',
    ),
  ];
}

/**
 * What each replica uses and how often it restarted: the process's own series (prom-client's process_*), and
 * kube-state-metrics' for the limit, the request and restarts. Those carry no provider label, so JoinGuard's pods are
 * the ones its own scrape sees (`up` of any value: a crash-looping pod is down and must still show).
 */
function resourcePanels(): Panel[] {
  const ours = `and on (cluster, namespace, pod) up{${mgmt}}`;
  const manager = (metric: string, more: string) =>
    `max by (cluster, namespace, pod) (${metric}{cluster=~"$cluster", container="manager", ${more}}) ${ours}`;
  return [
    row('Resources per replica'),
    {
      title: 'Memory per replica (RSS) and limit',
      type: 'timeseries',
      w: 8,
      h: 6,
      unit: 'bytes',
      description:
        "Resident memory of each replica's process, and its container's limit: an RSS near the limit is an " +
        'OOM kill to come (see the restarts).',
      targets: [
        { expr: `sum by (cluster, namespace, pod) (process_resident_memory_bytes{${mgmt}})`, legend: '{{pod}}' },
        {
          expr: manager('kube_pod_container_resource_limits', 'resource="memory"'),
          legend: 'limit {{pod}}',
        },
      ],
    },
    {
      title: 'CPU per replica and request',
      type: 'timeseries',
      w: 8,
      h: 6,
      description:
        "CPU seconds per second (cores) of each replica's process, and its container's request: the leader's " +
        'first reconcile of a large fleet runs above the request where the node has CPU to spare.',
      targets: [
        {
          expr: `sum by (cluster, namespace, pod) (rate(process_cpu_seconds_total{${mgmt}}[$__rate_interval]))`,
          legend: '{{pod}}',
        },
        { expr: manager('kube_pod_container_resource_requests', 'resource="cpu"'), legend: 'request {{pod}}' },
      ],
    },
    {
      title: 'Restarts per replica',
      type: 'timeseries',
      w: 8,
      h: 6,
      bars: true,
      description:
        "Restarts of each replica's manager container (kube-state-metrics): an OOM kill, a failed liveness " +
        'probe, or the process exiting (a lost Lease, a CAPI upgrade it restarts for).',
      fieldDefaults: zeroIsGood,
      targets: [
        {
          expr:
            `sum by (cluster, namespace, pod) (increase(kube_pod_container_status_restarts_total{cluster=~"$cluster", ` +
            `container="manager"}[$__rate_interval])) ${ours}`,
          legend: '{{pod}}',
        },
      ],
    },
  ];
}

/** Every panel of the dashboard; tests check the metric names their queries read. */
export function dashboardPanels(): Panel[] {
  return [...fleetPanels(), ...machinePanels(), ...remediationPanels(), ...controllerPanels(), ...resourcePanels()];
}
