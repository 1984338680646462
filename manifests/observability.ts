// The optional observability file, built beside addon-components.yaml: the metrics Service in front of
// --diagnostics-address (:8443, HTTPS, TokenReview + SubjectAccessReview), a ServiceMonitor, a PrometheusRule
// and the Grafana dashboard (dashboard.ts) as a ConfigMap for Grafana's dashboard sidecar.
//
// Applied with `kubectl apply -n <the add-on's namespace>`, not through clusterctl: its namespaced objects
// carry no namespace, and Prometheus and Grafana templates use `$`, which clusterctl would take for variables.
import { stringify } from 'yaml';
import { dashboardJson } from './dashboard.js';
import type { K8sObject } from './render.js';

export const PROVIDER_LABEL = 'cluster.x-k8s.io/provider';
export const PROVIDER = 'addon-joinguard';
export const METRICS_SERVICE = 'joinguard-controller-manager-metrics-service';
/** Prometheus Operator names the job after the Service. */
export const JOB = METRICS_SERVICE;
export const DIAGNOSTICS_PORT = 8443;
export const CONTROLLER = 'machinejoincheck';
const WEBHOOK = 'validation.machinejoincheck.joinguard.io';

/** Where a release's runbook lives: the same URL the controller's condition messages use. */
export function runbookBase(version: string): string {
  return `https://github.com/joinguard/joinguard/blob/v${version}/docs/runbook.md`;
}

const labels = (component: string) => ({ 'app.kubernetes.io/name': 'joinguard', 'app.kubernetes.io/component': component, [PROVIDER_LABEL]: PROVIDER });

export interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  labels: { severity: 'warning' | 'critical' };
  annotations: { summary: string; description: string; runbook_url: string };
}

/** The alerts; each links the runbook section that says what to do. */
export function alertRules(version: string): AlertRule[] {
  const rb = runbookBase(version);
  const progressingFalse = 'joinguard_check_condition{type="Progressing", status="False"';
  return [
    {
      alert: 'JoinGuardCheckStalled',
      // DryRun is chosen by the user; a suspicion has its own alert, at once.
      expr: `max by (namespace, check, cluster, reason) (${progressingFalse}, reason!~"DryRun|BootstrapCredentialSuspect"}) == 1`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'MachineJoinCheck {{ $labels.namespace }}/{{ $labels.check }} has stopped remediating: {{ $labels.reason }}',
        description: 'Progressing has been False with reason {{ $labels.reason }} for 15 minutes on the check of Cluster {{ $labels.cluster }}. `kubectl describe mjc -n {{ $labels.namespace }} {{ $labels.check }}` names the evidence.',
        runbook_url: `${rb}#{{ $labels.reason | toLower }}`,
      },
    },
    {
      alert: 'JoinGuardSuspicionRaised',
      expr: `max by (namespace, check, cluster) (${progressingFalse}, reason="BootstrapCredentialSuspect"}) == 1`,
      for: '1m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'Rebuilding stalled for MachineJoinCheck {{ $labels.namespace }}/{{ $labels.check }}: the join credential or network path is suspected',
        description: 'Several Machines of Cluster {{ $labels.cluster }} in a row never joined. JoinGuard stopped rebuilding them and rebuilds one canary at growing intervals. The condition message names the Machines, their bootstrap data and the endpoint.',
        runbook_url: `${rb}#bootstrapcredentialsuspect`,
      },
    },
    {
      alert: 'JoinGuardNoLeader',
      // A replica that does not lead exports no leader_election_master_status; none at all means no leader.
      expr: `(sum by (namespace) (leader_election_master_status{job="${JOB}"}) or on() vector(0)) < 1`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary: 'No JoinGuard replica holds the leader Lease',
        description: 'For 5 minutes no replica has led: no check is reconciled and no stuck Machine is replaced.',
        runbook_url: `${rb}#no-leader`,
      },
    },
    {
      alert: 'JoinGuardWebhookUnavailable',
      // The webhook runs in the same process as the metrics: no replica scraped means none serves admission.
      expr: `(sum(up{job="${JOB}"}) or on() vector(0)) < 1`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary: 'No JoinGuard replica is up: MachineJoinChecks cannot be created or their spec changed (failurePolicy Fail)',
        description: 'Creating a MachineJoinCheck or changing its spec fails until a replica serves the webhook again (annotations such as joinguard.io/resume still work); no stuck Machine is replaced either.',
        runbook_url: `${rb}#webhook-unavailable`,
      },
    },
    {
      alert: 'JoinGuardWebhookCallsFailing',
      // Seen from the kube-apiserver (its own metrics): a replica may be up and still unreachable (Service, certificate).
      expr: `sum(rate(apiserver_admission_webhook_rejection_count{name="${WEBHOOK}", error_type=~"calling_webhook_error|apiserver_internal_error"}[5m])) > 0`,
      for: '5m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The kube-apiserver cannot call the JoinGuard admission webhook',
        description: 'MachineJoinCheck writes are refused because the webhook call itself fails (connection, TLS or timeout), not because a check is invalid.',
        runbook_url: `${rb}#webhook-unavailable`,
      },
    },
    {
      alert: 'JoinGuardReconcileErrors',
      expr: `sum by (namespace) (rate(controller_runtime_reconcile_errors_total{job="${JOB}", controller="${CONTROLLER}"}[5m])) > 0`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'JoinGuard reconciles of MachineJoinChecks keep failing',
        description: 'Reconcile errors for 15 minutes: read the leader\'s log lines with level error (fields controller, reconcileID, MachineJoinCheck).',
        runbook_url: `${rb}#reconcile-errors`,
      },
    },
  ];
}

export function observabilityObjects(version: string): K8sObject[] {
  const service: K8sObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: METRICS_SERVICE, labels: labels('metrics') },
    spec: {
      ports: [{ name: 'https-metrics', port: DIAGNOSTICS_PORT, targetPort: 'diagnostics', protocol: 'TCP' }],
      selector: { 'app.kubernetes.io/name': 'joinguard', 'app.kubernetes.io/component': 'controller-manager' },
    },
  };
  const monitor: K8sObject = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'ServiceMonitor',
    metadata: { name: 'joinguard-controller-manager', labels: labels('metrics') },
    spec: {
      selector: { matchLabels: { 'app.kubernetes.io/name': 'joinguard', 'app.kubernetes.io/component': 'metrics' } },
      endpoints: [
        {
          port: 'https-metrics',
          scheme: 'https',
          path: '/metrics',
          // Prometheus's own ServiceAccount token; the manager checks it with a TokenReview and a
          // SubjectAccessReview (get on the non-resource URL /metrics), as controller-runtime's filter does.
          bearerTokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token',
          // The manager serves the webhook's certificate (issued for the webhook Service's name, its CA known only
          // to cert-manager's injection), which Prometheus cannot verify for this Service.
          tlsConfig: { insecureSkipVerify: true },
          // JoinGuard's families carry the check's `namespace`; without this Prometheus would rename it
          // exported_namespace and put the add-on's namespace in its place.
          honorLabels: true,
        },
      ],
    },
  };
  const rule: K8sObject = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'joinguard', labels: labels('alerts') },
    spec: { groups: [{ name: 'joinguard', rules: alertRules(version) }] },
  };
  const dashboard: K8sObject = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    // The label Grafana's dashboard sidecar looks for by default (kube-prometheus-stack).
    metadata: { name: 'joinguard-dashboard', labels: { ...labels('dashboard'), grafana_dashboard: '1' } },
    data: { 'joinguard.json': dashboardJson(version) },
  };
  return [service, monitor, rule, dashboard];
}

/** The text of out/observability-components.yaml. */
export function renderObservability(version: string): string {
  const docs = observabilityObjects(version).map((o) => stringify(o, { lineWidth: 0 }).trimEnd());
  return `# JoinGuard ${version}: optional observability (generated by \`npm run manifests\`).\n# kubectl apply -n <the add-on's namespace> -f observability-components.yaml   (docs/install.md)\n${docs.join('\n---\n')}\n`;
}

/** The rule groups as Prometheus reads them from a rule file (for `promtool check rules`). */
export function prometheusRuleFile(version: string): string {
  return stringify({ groups: [{ name: 'joinguard', rules: alertRules(version) }] }, { lineWidth: 0 });
}
