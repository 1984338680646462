// The optional observability file, built beside addon-components.yaml: the metrics reader's token Secret, the
// metrics Service in front of --diagnostics-address (:8443, HTTPS, TokenReview + SubjectAccessReview), a
// ServiceMonitor, a PrometheusRule and the Grafana dashboard (dashboard.ts) as a ConfigMap for Grafana's sidecar.
//
// Applied with `kubectl apply -n <the add-on's namespace>`, not through clusterctl: its namespaced objects
// carry no namespace, and Prometheus and Grafana templates use `$`, which clusterctl would take for variables.
import { stringify } from 'yaml';
import { alertRules, PROVIDER, PROVIDER_LABEL } from './alerts.js';
import { dashboardJson } from './dashboard.js';
import type { K8sObject } from './substitute.js';

export { alertRules, CONTROLLER, PROVIDER, PROVIDER_LABEL, runbookBase, SELECTOR, type AlertRule } from './alerts.js';
export const METRICS_SERVICE = 'joinguard-controller-manager-metrics-service';
/** The container port's name, as CAPI's managers name theirs (CAPI's observability keeps pods by it). */
export const METRICS_PORT_NAME = 'metrics';
export const DIAGNOSTICS_PORT = 8443;
/** The Secret cert-manager writes the serving certificate to (certmanager/certificate.yaml), mounted by the manager. */
export const SERVING_CERT_SECRET = 'joinguard-webhook-service-cert';
/**
 * The ServiceAccount token Secret the ServiceMonitor scrapes with: shipped here, beside the ServiceMonitor, so that
 * an install without Prometheus holds no long-lived token; its ServiceAccount and grant are in addon-components.yaml
 * (rbac/metrics_reader.yaml), which the token controller needs in the same namespace.
 */
export const METRICS_TOKEN_SECRET = 'joinguard-metrics-reader-token';

const labels = (component: string) => ({
  'app.kubernetes.io/name': 'joinguard',
  'app.kubernetes.io/component': component,
  [PROVIDER_LABEL]: PROVIDER,
});

export function observabilityObjects(version: string): K8sObject[] {
  // First: Prometheus Operator reads it when the ServiceMonitor below is reconciled.
  const token: K8sObject = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: METRICS_TOKEN_SECRET,
      labels: labels('metrics'),
      annotations: { 'kubernetes.io/service-account.name': 'joinguard-metrics-reader' },
    },
    type: 'kubernetes.io/service-account-token',
  };
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
          // (the Secret above; the identity in addon-components.yaml); the manager checks it with a TokenReview and a SubjectAccessReview, as
          // controller-runtime's filter does. Not bearerTokenFile (deprecated; Prometheus's own token).
          authorization: { type: 'Bearer', credentials: { name: METRICS_TOKEN_SECRET, key: 'token' } },
          // The manager serves the webhook's certificate (cert-manager's, self-signed: its ca.crt is the trust
          // anchor of this install alone). Prometheus dials the pod's IP, so the name to check is given: the
          // metrics Service's bare name, which the Certificate also holds, as this file names no namespace.
          tlsConfig: { ca: { secret: { name: SERVING_CERT_SECRET, key: 'ca.crt' } }, serverName: METRICS_SERVICE },
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
  return [token, service, monitor, rule, dashboard];
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
