// The optional observability file: its Service reaches the Deployment's diagnostics port, the
// ServiceMonitor selects that Service, the rules and the dashboard read only the metric families the
// controller registers (runtime/metrics.ts, controllers/joincheck/report/metrics.ts), by labels it sets,
// and it applies with `kubectl apply -n`.
// `promtool check rules` / `test rules` on the same rules run in e2e/lifecycle/promtool.test.ts.
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { objectsOf, renderProviderFiles } from './render.js';
import {
  alertRules,
  DIAGNOSTICS_PORT,
  METRICS_SERVICE,
  METRICS_TOKEN_SECRET,
  runbookBase,
  SELECTOR,
} from './observability.js';
import { dashboard, dashboardPanels } from './dashboard.js';
import { RuntimeMetrics } from '../runtime/metrics.js';
import { JoinGuardMetrics } from '../controllers/joincheck/report/metrics.js';
import { VALIDATE_PATH } from '../webhooks/server.js';

type Json = Record<string, any>;
const VERSION = '0.1.0';

/** What Prometheus itself, the kube-apiserver and kube-state-metrics serve, read by the rules and the dashboard. */
const NOT_OURS = new Set([
  'up',
  'apiserver_admission_webhook_rejection_count',
  'kube_deployment_spec_replicas',
  'kube_pod_container_status_restarts_total',
  'kube_pod_container_resource_limits',
  'kube_pod_container_resource_requests',
]);
/** Labels the scrape adds (ServiceMonitor or CAPI's relabelling) or a multi-cluster Prometheus adds (cluster). */
const TARGET_LABELS = new Set(['provider', 'namespace', 'pod', 'job', 'instance', 'cluster']);

/** The families the controller really registers (histograms are queried by their _bucket series), with their labels. */
async function served(): Promise<Map<string, Set<string>>> {
  const runtime = new RuntimeMetrics();
  new JoinGuardMetrics(runtime.registry);
  runtime.webhook(VALIDATE_PATH); // as the webhook server registers them once it listens
  const out = new Map<string, Set<string>>();
  for (const m of await runtime.registry.getMetricsAsJSON()) {
    // prom-client keeps a family's label names on the metric object (not in its JSON).
    const labels = new Set(
      (runtime.registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] }).labelNames ?? [],
    );
    out.set(String(m.type) === 'histogram' ? `${m.name}_bucket` : m.name, labels);
  }
  return out;
}
const metricsIn = (expr: string) => [...expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\{/g)].map((m) => m[1]!);

describe('manifests: the observability file', () => {
  let objs: Json[];
  let components: Json[];

  before(async () => {
    const files = await renderProviderFiles(VERSION);
    objs = parseAllDocuments(files.observability).map((d) => d.toJS() as Json);
    components = objectsOf(files.components);
  });

  it("holds the metrics reader's token Secret, a metrics Service, a ServiceMonitor, a PrometheusRule and the dashboard ConfigMap", () => {
    expect(objs.map((o) => o.kind)).to.deep.equal([
      'Secret',
      'Service',
      'ServiceMonitor',
      'PrometheusRule',
      'ConfigMap',
    ]);
  });

  it('the core components hold no ServiceAccount token Secret (only the observability file does)', () => {
    expect(components.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name)).to.deep.equal([]);
  });

  it('applies with kubectl -n: no namespaced object names a namespace, no clusterctl variable', async () => {
    for (const o of objs) expect(o.metadata, `${o.kind} ${o.metadata.name}`).not.to.have.property('namespace');
    expect((await renderProviderFiles(VERSION)).observability).not.to.match(/\$\{[A-Z_]+/);
  });

  it("the Service reaches the Deployment's diagnostics port (:8443) on the manager's pods", async () => {
    const svc = objs.find((o) => o.kind === 'Service')!;
    expect(svc.metadata.name).to.equal(METRICS_SERVICE);
    const d = components.find((o) => o.kind === 'Deployment')!;
    const c = d.spec.template.spec.containers.find((x: Json) => x.name === 'manager');
    const port = c.ports.find((p: Json) => p.name === svc.spec.ports[0].targetPort);
    expect(port, 'a container port named like the targetPort').to.deep.include({ containerPort: DIAGNOSTICS_PORT });
    expect(c.args).to.include(`--diagnostics-address=:${DIAGNOSTICS_PORT}`);
    // No variable can move the bind address away from the container port (issue 30: JOINGUARD_DIAGNOSTICS_ADDRESS did).
    const raw = (await renderProviderFiles(VERSION)).components;
    expect(raw).to.include(`- --diagnostics-address=:${DIAGNOSTICS_PORT}\n`);
    for (const [k, v] of Object.entries(svc.spec.selector)) expect(d.spec.template.metadata.labels[k], k).to.equal(v);
  });

  it('the ServiceMonitor selects that Service and scrapes it over HTTPS with the metrics reader token, honouring no labels', () => {
    const svc = objs.find((o) => o.kind === 'Service')!;
    const sm = objs.find((o) => o.kind === 'ServiceMonitor')!;
    for (const [k, v] of Object.entries(sm.spec.selector.matchLabels)) expect(svc.metadata.labels[k], k).to.equal(v);
    const ep = sm.spec.endpoints[0];
    expect(ep).to.deep.include({ port: svc.spec.ports[0].name, scheme: 'https', path: '/metrics' });
    // Neither honorLabels (a target's namespace or a federation's cluster would be overwritten) nor the
    // deprecated bearerTokenFile.
    expect(ep).not.to.have.any.keys('honorLabels', 'bearerTokenFile', 'bearerTokenSecret');
    expect(ep.authorization).to.deep.equal({
      type: 'Bearer',
      credentials: { name: METRICS_TOKEN_SECRET, key: 'token' },
    });
    // The token Secret is the metrics reader's, shipped with this file (issue 38: an install without Prometheus holds
    // no long-lived token); the identity it names is in the add-on's components, and may read /metrics only.
    const secret = objs.find((o) => o.kind === 'Secret' && o.metadata.name === METRICS_TOKEN_SECRET)!;
    expect(secret, 'the token Secret in observability-components.yaml').to.exist;
    expect(secret.type).to.equal('kubernetes.io/service-account-token');
    const sa = secret.metadata.annotations['kubernetes.io/service-account.name'];
    expect(components.filter((o) => o.kind === 'ServiceAccount').map((o) => o.metadata.name)).to.include(sa);
    const binding = components.find((o) => o.kind === 'ClusterRoleBinding' && o.subjects?.[0]?.name === sa)!;
    const role = components.find((o) => o.kind === 'ClusterRole' && o.metadata.name === binding.roleRef.name)!;
    expect(role.rules).to.deep.equal([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
    expect(ep.relabelings).to.deep.include({
      sourceLabels: ['__meta_kubernetes_pod_label_cluster_x_k8s_io_provider'],
      targetLabel: 'provider',
      action: 'replace',
    });
  });

  it("the ServiceMonitor verifies the manager's serving certificate: cert-manager's CA, a name the certificate holds", () => {
    const ep = objs.find((o) => o.kind === 'ServiceMonitor')!.spec.endpoints[0];
    // issue 38: no insecureSkipVerify; the CA is the ca.crt of the Secret cert-manager writes (Prometheus Operator's
    // tlsConfig.ca.secret, read from the ServiceMonitor's namespace: the add-on's).
    expect(ep.tlsConfig).not.to.have.property('insecureSkipVerify');
    const cert = components.find((o) => o.kind === 'Certificate')!;
    expect(ep.tlsConfig.ca).to.deep.equal({ secret: { name: cert.spec.secretName, key: 'ca.crt' } });
    // The Secret the manager serves /metrics with (the webhook's certificate, mounted as --webhook-cert-dir).
    const d = components.find((o) => o.kind === 'Deployment')!;
    expect(d.spec.template.spec.volumes.map((v: Json) => v.secret?.secretName)).to.include(cert.spec.secretName);
    // Prometheus dials the pod's IP: the name it checks is set, one the certificate is issued for, and carries no
    // namespace (this file is applied with -n into any namespace).
    expect(ep.tlsConfig.serverName).to.be.a('string');
    expect(ep.tlsConfig.serverName).not.to.include('.');
    expect(cert.spec.dnsNames).to.include(ep.tlsConfig.serverName);
  });

  it("the stall alert's reasons come from STOP_MEANINGS: quiet for DryRun and the two suspicions (alerts of their own), pacing for the budget", () => {
    const stalled = alertRules(VERSION).find((r) => r.alert === 'JoinGuardCheckStalled')!;
    const quiet = /reason!~"([^"]*)"/.exec(stalled.expr)![1]!.split('|');
    expect(quiet).to.include.members(['DryRun', 'BootstrapCredentialSuspect', 'RolloutSuspect']);
    for (const stall of ['NeverJoined', 'RemediationRefusedByOwner', 'RemediationBudgetExhausted'])
      expect(quiet).to.not.include(stall);
    expect(stalled.expr.match(/reason="RemediationBudgetExhausted"/g)).to.have.length(2);
  });

  it('the rules cover stalls, suspicions, Ready, refused writes, two leaders, no leader, the webhook and reconcile errors', () => {
    const rule = objs.find((o) => o.kind === 'PrometheusRule')!;
    expect(rule.spec.groups[0].rules.map((r: Json) => r.alert)).to.deep.equal(alertRules(VERSION).map((r) => r.alert));
    const byName = Object.fromEntries(alertRules(VERSION).map((r) => [r.alert, r]));
    expect(byName['JoinGuardCheckStalled']!.for).to.equal('15m');
    expect(byName['JoinGuardCheckStalled']!.expr).to.include('type="Progressing", status="False"');
    expect(Object.keys(byName)).to.have.members([
      'JoinGuardCheckStalled',
      'JoinGuardSuspicionRaised',
      'JoinGuardRolloutSuspect',
      'JoinGuardCheckNotReady',
      'JoinGuardWithdrawalRefused',
      'JoinGuardWritesRefused',
      'JoinGuardCheckReconciledTwice',
      'JoinGuardNoLeader',
      'JoinGuardReplicasWithoutLeaderElection',
      'JoinGuardWebhookUnavailable',
      'JoinGuardWebhookCallsFailing',
      'JoinGuardReconcileErrors',
    ]);
    // A refused withdrawal is the one that matters most: critical, within minutes.
    expect(byName['JoinGuardWithdrawalRefused']!.labels.severity).to.equal('critical');
    // Fixed: "no leader" is never made up from absent series (`or on() vector(0)`), and the webhook is judged by
    // its own series, not by the metrics port being up.
    expect(byName['JoinGuardNoLeader']!.expr).not.to.include('vector(0)');
    expect(byName['JoinGuardWebhookUnavailable']!.expr).to.include('controller_runtime_webhook_requests_in_flight');
    // Every JoinGuard selector picks the add-on by `provider`, which both shipped scrape setups set.
    for (const r of alertRules(VERSION)) {
      for (const m of r.expr.matchAll(
        /(joinguard_[a-z_]+|controller_runtime_[a-z_]+|leader_election_master_status|up)\{([^}]*)\}/g,
      ))
        expect(m[2], `${r.alert}: ${m[0]}`).to.include(SELECTOR);
    }
  });

  it('the rules and the dashboard read only families the controller serves, by labels it sets', async () => {
    const families = await served();
    // No family carries a label the scrape sets: without honorLabels it would be renamed exported_<label>.
    for (const [name, labels] of families)
      for (const l of labels) expect(TARGET_LABELS.has(l), `${name} carries ${l}`).to.equal(false);
    const exprs = [
      ...alertRules(VERSION).map((r) => r.expr),
      ...dashboardPanels().flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
    ];
    const used = new Set(exprs.flatMap(metricsIn));
    expect([...used].filter((m) => !families.has(m) && !NOT_OURS.has(m))).to.deep.equal([]);
    // Every label a JoinGuard selector names is one of that family's labels (job and le come from Prometheus).
    for (const e of exprs) {
      for (const m of e.matchAll(
        /(joinguard_[a-z_]+|controller_runtime_[a-z_]+|leader_election_master_status|workqueue_[a-z_]+|rest_client_[a-z_]+)\{([^}]*)\}/g,
      )) {
        // provider and cluster come from the scrape (target label, external label), not from the controller.
        const names = [...m[2]!.matchAll(/([a-z_]+)\s*(?:=~|!~|!=|=)/g)]
          .map((x) => x[1]!)
          .filter((l) => !TARGET_LABELS.has(l));
        for (const l of names) expect(families.get(m[1]!)?.has(l), `${m[1]} has label ${l}`).to.equal(true);
      }
    }
    // The dashboard shows what the issues ask for (a fleet: issue 30).
    const shown = new Set(dashboardPanels().flatMap((p) => (p.targets ?? []).flatMap((t) => metricsIn(t.expr))));
    for (const m of [
      'joinguard_machines',
      'joinguard_remediations_total',
      'joinguard_suspicions_raised_total',
      'joinguard_join_duration_seconds_bucket',
      'joinguard_past_deadline_seconds',
      'joinguard_check_condition',
      'joinguard_check_condition_last_transition_timestamp_seconds',
      'joinguard_write_refused_machines',
      'joinguard_watch_restarts_total',
      'joinguard_api_writes_total',
      'joinguard_recent_join_duration_seconds',
      'rest_client_requests_total',
      'leader_election_master_status',
      'process_resident_memory_bytes',
      'process_cpu_seconds_total',
      'kube_pod_container_status_restarts_total',
    ]) {
      expect(shown.has(m), m).to.equal(true);
    }
    // The alerts read what tells pacing from a stall, and withdrawals apart.
    const alerted = new Set(alertRules(VERSION).flatMap((r) => metricsIn(r.expr)));
    expect(alerted).to.include.all.keys(
      'joinguard_last_remediation_finished_timestamp_seconds',
      'joinguard_write_refused_machines',
    );
  });

  it("the dashboard shows each replica's memory against its limit, CPU against its request, and restarts (issue 38)", () => {
    const panel = (title: string) => {
      const p = dashboardPanels().find((x) => x.title === title);
      expect(p, title).to.exist;
      return p!.targets!.map((t) => t.expr);
    };
    const [rss, memLimit] = panel('Memory per replica (RSS) and limit');
    expect(metricsIn(rss!)).to.deep.equal(['process_resident_memory_bytes']);
    expect(memLimit).to.include('kube_pod_container_resource_limits{').and.to.include('resource="memory"');
    const [cpu, cpuRequest] = panel('CPU per replica and request');
    expect(cpu).to.match(/rate\(process_cpu_seconds_total\{[^}]*\}\[\$__rate_interval\]\)/);
    expect(cpuRequest).to.include('kube_pod_container_resource_requests{').and.to.include('resource="cpu"');
    const [restarts] = panel('Restarts per replica');
    expect(restarts).to.include('kube_pod_container_status_restarts_total{').and.to.include('container="manager"');
    // kube-state-metrics' series carry no provider label: JoinGuard's pods are those its scrape sees (up, by pod, of
    // any value: a pod that crash-loops is down and still shown).
    for (const e of [memLimit!, cpuRequest!, restarts!])
      expect(e).to.include(`and on (cluster, namespace, pod) up{${SELECTOR}`);
  });

  it('the dashboard ConfigMap carries the same JSON as grafana-dashboard.json, every variable it uses defined', async () => {
    const files = await renderProviderFiles(VERSION);
    const cm = objs.find((o) => o.kind === 'ConfigMap')!;
    expect(cm.metadata.labels['grafana_dashboard']).to.equal('1');
    expect(cm.data['joinguard.json']).to.equal(files.dashboard);
    const d = dashboard(VERSION) as Json;
    const defined = new Set((d.templating.list as Json[]).map((v) => v.name));
    // A data source to choose, and the management cluster (a multi-cluster Prometheus's `cluster` label).
    expect((d.templating.list as Json[]).find((v) => v.name === 'datasource')).to.include({
      type: 'datasource',
      query: 'prometheus',
    });
    expect((d.templating.list as Json[]).find((v) => v.name === 'cluster')).to.include({
      label: 'Management cluster',
      includeAll: true,
      allValue: '.*',
    });
    for (const p of dashboardPanels())
      for (const t of p.targets ?? []) expect(t.expr, p.title).to.include('cluster=~"$cluster"');
    const used = new Set(
      [...files.dashboard.matchAll(/\$\{?(\w+)/g)].map((m) => m[1]!).filter((v) => !v.startsWith('__')),
    );
    expect([...used].filter((v) => !defined.has(v))).to.deep.equal([]);
    const ids = (d.panels as Json[]).map((p) => p.id);
    expect(new Set(ids).size).to.equal(ids.length);
  });
});

describe('the dashboard in docs', () => {
  it('docs/install.md lists every panel with what it answers', async () => {
    const { readFileSync } = await import('node:fs');
    const doc = readFileSync(new URL('../docs/install.md', import.meta.url), 'utf8');
    const rows = doc.split('\n').filter((l) => l.startsWith('| ') && l.split('|').length === 4);
    const missing = dashboardPanels()
      .filter((p) => p.type !== 'row')
      .filter(
        (p) =>
          !rows.some((r) =>
            r
              .split('|')[1]!
              .split(' · ')
              .some((t) => t.trim() === p.title),
          ),
      );
    expect(missing.map((p) => p.title)).to.deep.equal([]);
  });
});

describe('one runbook address', () => {
  it("the controller's condition messages and the alerts link the same release-pinned runbook, of package.json's version", async () => {
    const { RUNBOOK_URL, RELEASE } = await import('../api/v1alpha1/types.js');
    const { readFileSync } = await import('node:fs');
    const version = (
      JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
    ).version;
    expect(RELEASE).to.equal(`v${version}`);
    expect(RUNBOOK_URL).to.equal(runbookBase(version));
  });
});
