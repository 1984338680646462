// The optional observability file, built beside addon-components.yaml: the metrics Service in front of
// --diagnostics-address (:8443, HTTPS, TokenReview + SubjectAccessReview), a ServiceMonitor, a PrometheusRule
// and the Grafana dashboard (dashboard.ts) as a ConfigMap for Grafana's dashboard sidecar.
//
// Applied with `kubectl apply -n <the add-on's namespace>`, not through clusterctl: its namespaced objects
// carry no namespace, and Prometheus and Grafana templates use `$`, which clusterctl would take for variables.
import { stringify } from 'yaml';
import { dashboardJson } from './dashboard.js';
import type { K8sObject } from './substitute.js';

export const PROVIDER_LABEL = 'cluster.x-k8s.io/provider';
export const PROVIDER = 'addon-joinguard';
export const METRICS_SERVICE = 'joinguard-controller-manager-metrics-service';
/** The container port's name, as CAPI's managers name theirs (CAPI's observability keeps pods by it). */
export const METRICS_PORT_NAME = 'metrics';
export const DIAGNOSTICS_PORT = 8443;
export const CONTROLLER = 'machinejoincheck';
const WEBHOOK = 'validation.machinejoincheck.joinguard.io';
const WEBHOOK_PATH = '/validate-joinguard-io-v1alpha1-machinejoincheck';
/**
 * The ServiceAccount token Secret the ServiceMonitor scrapes with (addon-components.yaml: rbac/metrics_reader.yaml).
 */
export const METRICS_TOKEN_SECRET = 'joinguard-metrics-reader-token';
/**
 * Every JoinGuard series, whoever scrapes it: the ServiceMonitor below and CAPI's own scrape config
 * (hack/observability) both turn the pod label cluster.x-k8s.io/provider into `provider`. The alerts select by it,
 * not by job (the ServiceMonitor's job is the Service's name, CAPI's is `capi-providers`).
 */
export const SELECTOR = `provider="${PROVIDER}"`;
/**
 * What the alerts group by: the management cluster (the `cluster` external label of a multi-cluster Prometheus;
 * absent elsewhere, which is fine), the add-on's namespace, and per check the Cluster's namespace and name as CAPI
 * labels its own workload-cluster series (cluster_namespace, cluster_name).
 */
const BY_CHECK = 'cluster, cluster_namespace, cluster_name, check';
const BY_INSTALL = 'cluster, namespace';

/** Where a release's runbook lives: the same URL the controller's condition messages use. */
export function runbookBase(version: string): string {
  return `https://github.com/joinguard/joinguard/blob/v${version}/docs/runbook.md`;
}

const labels = (component: string) => ({
  'app.kubernetes.io/name': 'joinguard',
  'app.kubernetes.io/component': component,
  [PROVIDER_LABEL]: PROVIDER,
});

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
  const progressingFalse = `joinguard_check_condition{${SELECTOR}, type="Progressing", status="False"`;
  const webhookSeries = `controller_runtime_webhook_requests_in_flight{${SELECTOR}, webhook="${WEBHOOK_PATH}"}`;
  return [
    {
      alert: 'JoinGuardCheckStalled',
      // DryRun is chosen by the user; a suspicion (of the credential or of a rollout) has its own alert, at once.
      expr:
        `max by (${BY_CHECK}, reason) (${progressingFalse}, reason!~"DryRun|BootstrapCredentialSuspect|` +
        `RolloutSuspect"}) == 1`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary:
          'MachineJoinCheck {{ $labels.cluster_namespace }}/{{ $labels.check ' +
          '}} has stopped remediating: {{ $labels.reason }}',
        description:
          'Progressing has been False with reason {{ $labels.reason ' +
          '}} for 15 minutes on the check of Cluster {{ $labels.cluster_name ' +
          '}}. `kubectl describe mjc -n {{ $labels.cluster_namespace ' +
          '}} {{ $labels.check }}` names the evidence.',
        runbook_url: `${rb}#{{ $labels.reason | toLower }}`,
      },
    },
    {
      alert: 'JoinGuardSuspicionRaised',
      expr: `max by (${BY_CHECK}) (${progressingFalse}, reason="BootstrapCredentialSuspect"}) == 1`,
      for: '1m',
      labels: { severity: 'warning' },
      annotations: {
        summary:
          'Rebuilding stalled for MachineJoinCheck {{ $labels.cluster_namespace ' +
          '}}/{{ $labels.check }}: the join credential or network path ' +
          'is suspected',
        description:
          'Several Machines of Cluster {{ $labels.cluster_name }} in ' +
          'a row never joined. JoinGuard stopped rebuilding them and ' +
          'rebuilds one canary at growing intervals. The condition ' +
          'message names the Machines, their bootstrap data and the ' +
          'endpoint.',
        runbook_url: `${rb}#bootstrapcredentialsuspect`,
      },
    },
    {
      alert: 'JoinGuardRolloutSuspect',
      expr: `max by (${BY_CHECK}) (${progressingFalse}, reason="RolloutSuspect"}) == 1`,
      for: '1m',
      labels: { severity: 'warning' },
      annotations: {
        summary:
          'A rollout cannot join: MachineJoinCheck {{ $labels.cluster_namespace ' +
          '}}/{{ $labels.check }} stopped rebuilding the Machines of ' +
          'a new template revision',
        description:
          'Machines of one new template revision of Cluster {{ $labels.cluster_name ' +
          '}} failed to join in a row while the previous revision joined. ' +
          'JoinGuard stopped asking for them; fix the template or roll ' +
          'back. The condition message names the revision, the Machines ' +
          'and the templates that differ.',
        runbook_url: `${rb}#rolloutsuspect`,
      },
    },
    {
      alert: 'JoinGuardNoLeader',
      // Every electing replica reports its Lease from the start (0 as a standby, 1 while leading): replicas that
      // elect and none leads. A replica without leader election reports no such series (its own alert below); no
      // replica at all is JoinGuardWebhookUnavailable.
      expr: `max by (${BY_INSTALL}, name) (leader_election_master_status{${SELECTOR}}) == 0`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary: 'No JoinGuard replica holds the leader Lease {{ $labels.namespace }}/{{ $labels.name }}',
        description:
          'For 5 minutes the replicas of Lease {{ $labels.name }} have ' +
          'run and none has led: no check of that shard is reconciled ' +
          'and no stuck Machine is replaced.',
        runbook_url: `${rb}#no-leader`,
      },
    },
    {
      alert: 'JoinGuardReplicasWithoutLeaderElection',
      // Replicas of one Lease (one shard), one of them with --leader-elect=false: two writers on the same objects.
      expr:
        `count by (${BY_INSTALL}, name) (joinguard_leader_election_enabled{${SELECTOR}}) > 1 ` +
        (`and on (${BY_INSTALL}, name) min by (${BY_INSTALL}, name) ` +
          `(joinguard_leader_election_enabled{${SELECTOR}}) == 0`),
      for: '1m',
      labels: { severity: 'critical' },
      annotations: {
        summary:
          'More than one JoinGuard replica of Lease {{ $labels.namespace ' +
          '}}/{{ $labels.name }} runs, and not all of them with leader ' +
          'election',
        description:
          'A replica without --leader-elect writes whatever the others ' +
          'do: two writers on the same Machines and checks. Run one ' +
          'replica without leader election, or turn it on for all.',
        runbook_url: `${rb}#no-leader`,
      },
    },
    {
      alert: 'JoinGuardWebhookUnavailable',
      // The webhook's own series exist only while a replica's webhook server listens (controller_runtime_webhook_*):
      // replicas up of which none serves it, or no replica up at all.
      expr:
        `(count by (${BY_INSTALL}) (up{${SELECTOR}} == 1) unless ` +
        `on (${BY_INSTALL}) count by (${BY_INSTALL}) (${webhookSeries})) ` +
        `or absent(up{${SELECTOR}} == 1)`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary:
          'No JoinGuard replica serves the admission webhook: MachineJoinChecks ' +
          'cannot be created or their spec changed (failurePolicy Fail)',
        description:
          'Creating a MachineJoinCheck or changing its spec fails until ' +
          'a replica serves the webhook again (annotations such as ' +
          'joinguard.io/resume still work). With no replica up at all, ' +
          'no stuck Machine is replaced either.',
        runbook_url: `${rb}#webhook-unavailable`,
      },
    },
    {
      alert: 'JoinGuardWebhookCallsFailing',
      // Seen from the kube-apiserver (its own metrics): a replica may serve and still be unreachable (Service,
      // certificate).
      expr:
        `sum by (cluster) (rate(apiserver_admission_webhook_rejection_count{name="` +
        `${WEBHOOK}", error_type=~"calling_webhook_error|apiserver_internal_error"}[5m])) ` +
        `> 0`,
      for: '5m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The kube-apiserver cannot call the JoinGuard admission webhook',
        description:
          'MachineJoinCheck writes are refused because the webhook ' +
          'call itself fails (connection, TLS or timeout), not because ' +
          'a check is invalid.',
        runbook_url: `${rb}#webhook-unavailable`,
      },
    },
    {
      alert: 'JoinGuardReconcileErrors',
      expr:
        `sum by (${BY_INSTALL}) (rate(controller_runtime_reconcile_errors_total{` +
        `${SELECTOR}, controller="${CONTROLLER}"}[5m])) > 0`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'JoinGuard reconciles of MachineJoinChecks keep failing',
        description:
          "Reconcile errors for 15 minutes: the leader's error log " +
          'lines (JSON: the key err; text: lines starting with E) name ' +
          'the check and the error.',
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
      ports: [{ name: 'https-metrics', port: DIAGNOSTICS_PORT, targetPort: METRICS_PORT_NAME, protocol: 'TCP' }],
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
          // A token of the ServiceAccount joinguard-metrics-reader, which may `get /metrics` and nothing else
          // (addon-components.yaml); the manager checks it with a TokenReview and a SubjectAccessReview, as
          // controller-runtime's filter does. Not bearerTokenFile (deprecated; Prometheus's own token).
          authorization: { type: 'Bearer', credentials: { name: METRICS_TOKEN_SECRET, key: 'token' } },
          // The manager serves the webhook's certificate (issued for the webhook Service's name, its CA known only
          // to cert-manager's injection), which Prometheus cannot verify for this Service; CAPI's own scrape
          // config skips verification the same way.
          tlsConfig: { insecureSkipVerify: true },
          // No honorLabels: JoinGuard's series carry no label a target sets (the check's namespace is
          // cluster_namespace), so nothing is renamed, and the management cluster's `cluster` label stays free.
          // `provider`, as CAPI's scrape config sets it, so the alerts read either setup.
          relabelings: [
            {
              sourceLabels: ['__meta_kubernetes_pod_label_cluster_x_k8s_io_provider'],
              targetLabel: 'provider',
              action: 'replace',
            },
          ],
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
  return (
    `# JoinGuard ${version}: optional observability (generated ` +
    `by \`npm run manifests\`).\n# kubectl apply -n <the add-on's ` +
    `namespace> -f observability-components.yaml   (docs/install.md)\n` +
    `${docs.join('\n---\n')}\n`
  );
}

/** The rule groups as Prometheus reads them from a rule file (for `promtool check rules`). */
export function prometheusRuleFile(version: string): string {
  return stringify({ groups: [{ name: 'joinguard', rules: alertRules(version) }] }, { lineWidth: 0 });
}
