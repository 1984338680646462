// The Grafana dashboard shipped in the observability file (and as out/grafana-dashboard.json for import): the fleet
// at a glance, then Machines, remediations and join times, then the controller (dashboard-panels.ts holds the panels,
// one query per line). Built here rather than kept as a 1,000-line JSON; e2e/lifecycle/grafana-schema.test.ts checks
// the JSON against Grafana's dashboard schema.
// Variables: the data source, the management cluster (the `cluster` label a multi-cluster Prometheus adds; "All"
// where there is none), then the Cluster's namespace and name and the check, as the series label them.
import { dashboardPanels, mgmt, type Panel } from './dashboard-panels.js';

export { dashboardPanels, REASON_CODES, type Panel } from './dashboard-panels.js';

const ds = { type: 'prometheus', uid: '${datasource}' };
const legend = { showLegend: true, displayMode: 'list', placement: 'bottom', calcs: [] };
const tooltip = { mode: 'multi', sort: 'desc' };
const reduce = { values: false, calcs: ['lastNotNull'], fields: '' };
/** Grafana's options of each panel type, as its editor writes them (the schema requires most of them). */
const PANEL_OPTIONS: Record<Exclude<Panel['type'], 'row'>, Record<string, unknown>> = {
  timeseries: { legend, tooltip },
  stat: {
    reduceOptions: reduce,
    orientation: 'auto',
    textMode: 'auto',
    wideLayout: true,
    colorMode: 'value',
    graphMode: 'none',
    justifyMode: 'auto',
    showPercentChange: false,
    percentChangeColorMode: 'standard',
  },
  table: { showHeader: true, cellHeight: 'sm', frameIndex: 0 },
  heatmap: {
    calculate: false,
    showValue: 'auto',
    yAxis: { unit: 's', axisPlacement: 'left' },
    color: {
      mode: 'scheme',
      scheme: 'Oranges',
      fill: 'dark-orange',
      scale: 'exponential',
      exponent: 0.5,
      steps: 64,
      reverse: false,
    },
    cellGap: 1,
    legend: { show: true },
    tooltip: { mode: 'single', yHistogram: false, showColorScale: false },
    rowsFrame: { layout: 'auto' },
    exemplars: { color: 'rgba(255,0,255,0.7)' },
    filterValues: { le: 1e-9 },
  },
  'state-timeline': {
    mergeValues: true,
    showValue: 'never',
    alignValue: 'left',
    rowHeight: 0.9,
    legend,
    tooltip,
  },
  bargauge: {
    reduceOptions: reduce,
    orientation: 'horizontal',
    displayMode: 'gradient',
    valueMode: 'color',
    namePlacement: 'auto',
    showUnfilled: true,
    sizing: 'auto',
    minVizWidth: 8,
    minVizHeight: 16,
    maxVizHeight: 300,
    legend,
  },
};

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
        defaults: {
          ...(p.unit ? { unit: p.unit } : {}),
          ...p.fieldDefaults,
          ...(Object.keys(custom).length ? { custom } : {}),
        },
        overrides: [],
      },
      options: { ...PANEL_OPTIONS[p.type], ...p.options },
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
      `JoinGuard ${version}: the fleet of MachineJoinChecks (which are unhealthy and since when), Machines timed ` +
      `and overdue, remediations, refused writes, join times, and the controller.`,
    tags: ['cluster-api', 'joinguard'],
    editable: true,
    schemaVersion: 39,
    time: { from: 'now-6h', to: 'now' },
    refresh: '1m',
    templating: {
      list: [
        {
          name: 'datasource',
          label: 'Data source',
          type: 'datasource',
          query: 'prometheus',
          // Grafana's default Prometheus data source until one is chosen.
          current: { text: 'default', value: 'default' },
          hide: 0,
        },
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
