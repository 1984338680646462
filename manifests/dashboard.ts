// The Grafana dashboard shipped in the observability file (and as out/grafana-dashboard.json for import):
// per check, Machines stuck and joined, the Progressing reason, remediations by outcome, suspicions, join
// durations and time past the deadline; below, the controller-runtime panels CAPI's own dashboards show.
// Built here rather than kept as a 1,000-line JSON so that every query is one readable line.
// Variables: the data source, the management cluster (the `cluster` label a multi-cluster Prometheus adds; "All"
// where there is none), then the Cluster's namespace and name and the check, as the series label them.

const ds = { type: 'prometheus', uid: '${datasource}' };
/** JoinGuard's series, whoever scrapes them (observability.ts SELECTOR), in the chosen management cluster. */
const mgmt = 'provider="addon-joinguard", cluster=~"$cluster"';
/** The filter every per-check query carries. */
const sel = `${mgmt}, cluster_namespace=~"$cluster_namespace", cluster_name=~"$cluster_name", check=~"$check"`;

interface Target {
  expr: string;
  legend?: string;
  instant?: boolean;
  format?: 'time_series' | 'table' | 'heatmap';
}
interface Panel {
  title: string;
  type: 'timeseries' | 'stat' | 'table' | 'heatmap' | 'row';
  description?: string;
  unit?: string;
  w: number;
  h: number;
  targets?: Target[];
  stack?: boolean;
  bars?: boolean;
}
/** Grafana's panel options, by panel type (the others take none). */
const PANEL_OPTIONS: Partial<Record<Panel['type'], object>> = {
  heatmap: { calculate: false, yAxis: { unit: 's' } },
  table: { showHeader: true },
};

/** A time series panel of one query. */
function series(title: string, w: number, h: number, expr: string, legend: string, more: Partial<Panel> = {}): Panel {
  return { title, type: 'timeseries', w, h, targets: [{ expr, legend }], ...more };
}

/** A stat panel of one instant query. */
function stat(title: string, w: number, h: number, expr: string, more: Partial<Panel> = {}): Panel {
  return { title, type: 'stat', w, h, targets: [{ expr, instant: true }], ...more };
}

const cr = (metric: string) => `${metric}{${mgmt}, controller="machinejoincheck"}`;

/** Every panel of the dashboard; tests check the metric names their queries read. */
export function dashboardPanels(): Panel[] {
  const byCheck = '{{cluster_namespace}}/{{check}} ({{cluster_name}})';
  const reconcileBuckets = cr('controller_runtime_reconcile_time_seconds_bucket');
  return [
    { title: 'Checks', type: 'row', w: 24, h: 1 },
    stat(
      'Checks not progressing',
      6,
      5,
      `count(joinguard_check_condition{type="Progressing", status="False", ` +
        `reason!="DryRun", ${sel}} == 1) or vector(0)`,
      {
        description:
          'Checks whose Progressing condition is False, dry runs left out. Each reason has a runbook section.',
      },
    ),
    stat(
      'Checks suspecting the join credential',
      6,
      5,
      `count(joinguard_check_condition{type="Progressing", status="False", ` +
        `reason="BootstrapCredentialSuspect", ${sel}} == 1) or vector(0)`,
    ),
    stat('Stuck Machines', 6, 5, `sum(joinguard_machines{state="Stuck", ${sel}}) or vector(0)`),
    stat('Longest time past a deadline', 6, 5, `max(joinguard_seconds_past_deadline{${sel}}) or vector(0)`, {
      unit: 's',
    }),
    {
      title: 'Progressing reason per check',
      type: 'table',
      w: 24,
      h: 7,
      targets: [{ expr: `joinguard_check_condition{type="Progressing", ${sel}} == 1`, instant: true, format: 'table' }],
    },
    series(
      'Stuck Machines per check',
      12,
      8,
      `sum by (cluster_namespace, check, cluster_name) (joinguard_machines{state="Stuck", ${sel}})`,
      byCheck,
      {
        description: 'Machines past their join or provision deadline with no Node.',
      },
    ),
    series(
      'Joined Machines per check',
      12,
      8,
      `sum by (cluster_namespace, check, cluster_name) (joinguard_machines{state="Joined", ${sel}})`,
      byCheck,
    ),
    series('Machines by state', 12, 8, `sum by (state) (joinguard_machines{${sel}})`, '{{state}}', { stack: true }),
    series(
      'Time past deadline per check',
      12,
      8,
      `max by (cluster_namespace, check, cluster_name) (joinguard_seconds_past_deadline{${sel}})`,
      byCheck,
      {
        description: 'The longest any stuck Machine of the check is past its deadline (0 when none).',
        unit: 's',
      },
    ),
    { title: 'Remediations and suspicions', type: 'row', w: 24, h: 1 },
    series(
      'Remediations by outcome',
      12,
      8,
      `sum by (outcome) (increase(joinguard_remediations_total{${sel}}[$__rate_interval]))`,
      '{{outcome}}',
      { bars: true, stack: true },
    ),
    series(
      'Remediations by path',
      12,
      8,
      `sum by (path) (increase(joinguard_remediations_total{${sel}}[$__rate_interval]))`,
      '{{path}}',
      { bars: true, stack: true },
    ),
    series(
      'Suspicions raised',
      12,
      8,
      `sum by (cluster_namespace, check, cluster_name) (increase(joinguard_suspicions_raised_total{` +
        `${sel}}[$__rate_interval]))`,
      byCheck,
      { bars: true },
    ),
    {
      title: 'Join duration (p50, p95)',
      type: 'timeseries',
      description: 'From the join clock start to the Node, for Machines that joined. Compare with joinTimeout.',
      unit: 's',
      w: 12,
      h: 8,
      targets: [0.5, 0.95].map((q) => ({
        expr:
          `histogram_quantile(${q}, sum by (le) (rate(joinguard_join_duration_seconds_bucket{` +
          `${sel}}[$__rate_interval])))`,
        legend: `p${q * 100}`,
      })),
    },
    {
      title: 'Join duration histogram',
      type: 'heatmap',
      w: 24,
      h: 8,
      targets: [
        {
          expr: `sum by (le) (increase(joinguard_join_duration_seconds_bucket{${sel}}[$__rate_interval]))`,
          legend: '{{le}}',
          format: 'heatmap',
        },
      ],
    },
    { title: 'Controller', type: 'row', w: 24, h: 1 },
    stat('Leader', 6, 6, `sum(leader_election_master_status{${mgmt}}) or vector(0)`, {
      description: '1 while a replica holds the Lease (one per shard).',
    }),
    series(
      'Reconciles by result',
      9,
      6,
      `sum by (result) (rate(${cr('controller_runtime_reconcile_total')}[$__rate_interval]))`,
      '{{result}}',
    ),
    series(
      'Reconcile errors',
      9,
      6,
      `sum(rate(${cr('controller_runtime_reconcile_errors_total')}[$__rate_interval]))`,
      'errors',
    ),
    series(
      'Reconcile time (p99)',
      8,
      6,
      `histogram_quantile(0.99, sum by (le) (rate(${reconcileBuckets}[$__rate_interval])))`,
      'p99',
      { unit: 's' },
    ),
    series('Work queue depth', 8, 6, `sum by (name) (workqueue_depth{${mgmt}})`, '{{name}}'),
    series(
      'API requests by code',
      8,
      6,
      `sum by (code, method) (rate(rest_client_requests_total{${mgmt}}[$__rate_interval]))`,
      '{{method}} {{code}}',
    ),
    series(
      'Admission requests by code',
      8,
      6,
      `sum by (code) (rate(controller_runtime_webhook_requests_total{${mgmt}}[$__rate_interval]))`,
      '{{code}}',
    ),
  ];
}

function variable(name: string, label: string, query: string): Record<string, unknown> {
  return {
    name,
    label,
    type: 'query',
    datasource: ds,
    query: { query, refId: name },
    definition: query,
    refresh: 2,
    includeAll: true,
    multi: true,
    allValue: '.*',
    current: { text: 'All', value: '$__all' },
    sort: 1,
  };
}

/** The dashboard as Grafana imports it. */
export function dashboard(version: string): Record<string, unknown> {
  let x = 0;
  let y = 0;
  let rowH = 0;
  const panels = dashboardPanels().map((p, i) => {
    if (x + p.w > 24) {
      x = 0;
      y += rowH;
      rowH = 0;
    }
    const gridPos = { x, y, w: p.w, h: p.h };
    x += p.w;
    rowH = Math.max(rowH, p.h);
    if (p.type === 'row') return { id: i + 1, type: 'row', title: p.title, collapsed: false, gridPos, panels: [] };
    const custom: Record<string, unknown> = {};
    if (p.type === 'timeseries') {
      custom['drawStyle'] = p.bars ? 'bars' : 'line';
      custom['fillOpacity'] = p.bars ? 80 : 10;
      if (p.stack) custom['stacking'] = { mode: 'normal', group: 'A' };
    }
    return {
      id: i + 1,
      type: p.type,
      title: p.title,
      ...(p.description ? { description: p.description } : {}),
      datasource: ds,
      gridPos,
      fieldConfig: {
        defaults: { ...(p.unit ? { unit: p.unit } : {}), ...(Object.keys(custom).length ? { custom } : {}) },
        overrides: [],
      },
      options: PANEL_OPTIONS[p.type] ?? {},
      targets: (p.targets ?? []).map((t, j) => ({
        refId: String.fromCharCode(65 + j),
        datasource: ds,
        expr: t.expr,
        ...(t.legend ? { legendFormat: t.legend } : {}),
        ...(t.instant ? { instant: true, range: false } : {}),
        ...(t.format ? { format: t.format } : {}),
      })),
    };
  });
  return {
    uid: 'joinguard',
    title: 'JoinGuard',
    description:
      `JoinGuard ${version}: MachineJoinChecks, remediations, suspicions, ` + `join durations, and the controller.`,
    tags: ['cluster-api', 'joinguard'],
    editable: true,
    schemaVersion: 39,
    time: { from: 'now-6h', to: 'now' },
    refresh: '1m',
    templating: {
      list: [
        { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0 },
        variable(
          'cluster',
          'Management cluster',
          'label_values(joinguard_build_info{provider="addon-joinguard"}, cluster)',
        ),
        variable('cluster_namespace', 'Namespace', `label_values(joinguard_machines{${mgmt}}, cluster_namespace)`),
        variable(
          'cluster_name',
          'Cluster',
          `label_values(joinguard_machines{${mgmt}, cluster_namespace=~"$cluster_namespace"}, cluster_name)`,
        ),
        variable(
          'check',
          'Check',
          `label_values(joinguard_machines{${mgmt}, cluster_namespace=~"$cluster_namespace", ` +
            `cluster_name=~"$cluster_name"}, check)`,
        ),
      ],
    },
    annotations: { list: [] },
    panels,
  };
}

export function dashboardJson(version: string): string {
  return `${JSON.stringify(dashboard(version), null, 2)}\n`;
}
