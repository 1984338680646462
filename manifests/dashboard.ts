// The Grafana dashboard shipped in the observability file (and as out/grafana-dashboard.json for import):
// per check, Machines stuck and joined, the Progressing reason, remediations by outcome, suspicions, join
// durations and time past the deadline; below, the controller-runtime panels CAPI's own dashboards show.
// Built here rather than kept as a 1,000-line JSON so that every query is one readable line.

const ds = { type: 'prometheus', uid: '${datasource}' };
/** The filter every JoinGuard query carries. */
const sel = 'namespace=~"$namespace", cluster=~"$cluster", check=~"$check"';

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

/** Every PromQL expression of the dashboard, so that tests can check the metric names it reads. */
export function dashboardPanels(): Panel[] {
  return [
    { title: 'Checks', type: 'row', w: 24, h: 1 },
    {
      title: 'Checks not progressing',
      type: 'stat',
      description: 'Checks whose Progressing condition is False, dry runs left out. Each reason has a runbook section.',
      w: 6, h: 5,
      targets: [{ expr: `count(joinguard_check_condition{type="Progressing", status="False", reason!="DryRun", ${sel}} == 1) or vector(0)`, instant: true }],
    },
    {
      title: 'Checks suspecting the join credential',
      type: 'stat',
      w: 6, h: 5,
      targets: [{ expr: `count(joinguard_check_condition{type="Progressing", status="False", reason="BootstrapCredentialSuspect", ${sel}} == 1) or vector(0)`, instant: true }],
    },
    {
      title: 'Stuck Machines',
      type: 'stat',
      w: 6, h: 5,
      targets: [{ expr: `sum(joinguard_machines{state="Stuck", ${sel}}) or vector(0)`, instant: true }],
    },
    {
      title: 'Longest time past a deadline',
      type: 'stat',
      unit: 's',
      w: 6, h: 5,
      targets: [{ expr: `max(joinguard_seconds_past_deadline{${sel}}) or vector(0)`, instant: true }],
    },
    {
      title: 'Progressing reason per check',
      type: 'table',
      w: 24, h: 7,
      targets: [{ expr: `joinguard_check_condition{type="Progressing", ${sel}} == 1`, instant: true, format: 'table' }],
    },
    {
      title: 'Stuck Machines per check',
      type: 'timeseries',
      description: 'Machines past their join or provision deadline with no Node.',
      w: 12, h: 8,
      targets: [{ expr: `sum by (namespace, check, cluster) (joinguard_machines{state="Stuck", ${sel}})`, legend: '{{namespace}}/{{check}} ({{cluster}})' }],
    },
    {
      title: 'Joined Machines per check',
      type: 'timeseries',
      w: 12, h: 8,
      targets: [{ expr: `sum by (namespace, check, cluster) (joinguard_machines{state="Joined", ${sel}})`, legend: '{{namespace}}/{{check}} ({{cluster}})' }],
    },
    {
      title: 'Machines by state',
      type: 'timeseries',
      w: 12, h: 8,
      stack: true,
      targets: [{ expr: `sum by (state) (joinguard_machines{${sel}})`, legend: '{{state}}' }],
    },
    {
      title: 'Time past deadline per check',
      type: 'timeseries',
      description: 'The longest any stuck Machine of the check is past its deadline (0 when none).',
      unit: 's',
      w: 12, h: 8,
      targets: [{ expr: `max by (namespace, check, cluster) (joinguard_seconds_past_deadline{${sel}})`, legend: '{{namespace}}/{{check}}' }],
    },
    { title: 'Remediations and suspicions', type: 'row', w: 24, h: 1 },
    {
      title: 'Remediations by outcome',
      type: 'timeseries',
      w: 12, h: 8,
      bars: true,
      stack: true,
      targets: [{ expr: `sum by (outcome) (increase(joinguard_remediations_total{${sel}}[$__rate_interval]))`, legend: '{{outcome}}' }],
    },
    {
      title: 'Remediations by path',
      type: 'timeseries',
      w: 12, h: 8,
      bars: true,
      stack: true,
      targets: [{ expr: `sum by (path) (increase(joinguard_remediations_total{${sel}}[$__rate_interval]))`, legend: '{{path}}' }],
    },
    {
      title: 'Suspicions raised',
      type: 'timeseries',
      w: 12, h: 8,
      bars: true,
      targets: [{ expr: `sum by (namespace, check, cluster) (increase(joinguard_suspicions_raised_total{${sel}}[$__rate_interval]))`, legend: '{{namespace}}/{{check}}' }],
    },
    {
      title: 'Join duration (p50, p95)',
      type: 'timeseries',
      description: 'From the join clock start to the Node, for Machines that joined. Compare with joinTimeout.',
      unit: 's',
      w: 12, h: 8,
      targets: [
        { expr: `histogram_quantile(0.5, sum by (le) (rate(joinguard_join_duration_seconds_bucket{${sel}}[$__rate_interval])))`, legend: 'p50' },
        { expr: `histogram_quantile(0.95, sum by (le) (rate(joinguard_join_duration_seconds_bucket{${sel}}[$__rate_interval])))`, legend: 'p95' },
      ],
    },
    {
      title: 'Join duration histogram',
      type: 'heatmap',
      w: 24, h: 8,
      targets: [{ expr: `sum by (le) (increase(joinguard_join_duration_seconds_bucket{${sel}}[$__rate_interval]))`, legend: '{{le}}', format: 'heatmap' }],
    },
    { title: 'Controller', type: 'row', w: 24, h: 1 },
    {
      title: 'Leader',
      type: 'stat',
      description: '1 while a replica holds the Lease.',
      w: 6, h: 6,
      targets: [{ expr: 'sum(leader_election_master_status{job=~"$job"}) or vector(0)', instant: true }],
    },
    {
      title: 'Reconciles by result',
      type: 'timeseries',
      w: 9, h: 6,
      targets: [{ expr: 'sum by (result) (rate(controller_runtime_reconcile_total{job=~"$job", controller="machinejoincheck"}[$__rate_interval]))', legend: '{{result}}' }],
    },
    {
      title: 'Reconcile errors',
      type: 'timeseries',
      w: 9, h: 6,
      targets: [{ expr: 'sum(rate(controller_runtime_reconcile_errors_total{job=~"$job", controller="machinejoincheck"}[$__rate_interval]))', legend: 'errors' }],
    },
    {
      title: 'Reconcile time (p99)',
      type: 'timeseries',
      unit: 's',
      w: 8, h: 6,
      targets: [{ expr: 'histogram_quantile(0.99, sum by (le) (rate(controller_runtime_reconcile_time_seconds_bucket{job=~"$job", controller="machinejoincheck"}[$__rate_interval])))', legend: 'p99' }],
    },
    {
      title: 'Work queue depth',
      type: 'timeseries',
      w: 8, h: 6,
      targets: [{ expr: 'sum by (name) (workqueue_depth{job=~"$job"})', legend: '{{name}}' }],
    },
    {
      title: 'API requests by code',
      type: 'timeseries',
      w: 8, h: 6,
      targets: [{ expr: 'sum by (code, method) (rate(rest_client_requests_total{job=~"$job"}[$__rate_interval]))', legend: '{{method}} {{code}}' }],
    },
  ];
}

function variable(name: string, label: string, query: string): Record<string, unknown> {
  return {
    name, label, type: 'query', datasource: ds, query: { query, refId: name }, definition: query,
    refresh: 2, includeAll: true, multi: true, allValue: '.*', current: { text: 'All', value: '$__all' }, sort: 1,
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
      fieldConfig: { defaults: { ...(p.unit ? { unit: p.unit } : {}), ...(Object.keys(custom).length ? { custom } : {}) }, overrides: [] },
      options: p.type === 'heatmap' ? { calculate: false, yAxis: { unit: 's' } } : p.type === 'table' ? { showHeader: true } : {},
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
    description: `JoinGuard ${version}: MachineJoinChecks, remediations, suspicions, join durations, and the controller.`,
    tags: ['cluster-api', 'joinguard'],
    editable: true,
    schemaVersion: 39,
    time: { from: 'now-6h', to: 'now' },
    refresh: '1m',
    templating: {
      list: [
        { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0 },
        { ...variable('job', 'Job', 'label_values(controller_runtime_reconcile_total{controller="machinejoincheck"}, job)'), includeAll: false, multi: false, current: {} },
        variable('namespace', 'Namespace', 'label_values(joinguard_machines, namespace)'),
        variable('cluster', 'Cluster', 'label_values(joinguard_machines{namespace=~"$namespace"}, cluster)'),
        variable('check', 'Check', 'label_values(joinguard_machines{namespace=~"$namespace", cluster=~"$cluster"}, check)'),
      ],
    },
    annotations: { list: [] },
    panels,
  };
}

export function dashboardJson(version: string): string {
  return `${JSON.stringify(dashboard(version), null, 2)}\n`;
}
