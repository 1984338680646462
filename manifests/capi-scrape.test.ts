// CAPI's own observability setup (hack/observability/prometheus/values.yaml in cluster-api, job `capi-providers`)
// scrapes every pod that carries the provider label on a container port named `metrics`. This applies its
// relabel rules, with Prometheus's semantics, to the targets Kubernetes service discovery (role: pod) makes of
// the shipped Deployment's pod, one per container port, and shows JoinGuard's metrics port is kept, labelled as
// CAPI's own providers are, and that no JoinGuard series label collides with a label the scrape sets.
// Unit test: the rules are data, the relabelling is Prometheus's documented algorithm.
import { expect } from 'chai';
import { objectsOf, renderProviderFiles } from './render.js';
import { DIAGNOSTICS_PORT, PROVIDER } from './observability.js';
import { RuntimeMetrics } from '../runtime/metrics.js';
import { JoinGuardMetrics } from '../controllers/joincheck/report/metrics.js';

type Labels = Record<string, string>;
interface RelabelRule {
  source_labels?: string[];
  separator?: string;
  regex?: string;
  target_label?: string;
  replacement?: string;
  action?: 'replace' | 'keep' | 'drop';
}

/** `relabel_configs` of the `capi-providers` job in CAPI's hack/observability/prometheus/values.yaml (v1.14 main). */
const CAPI_PROVIDERS_RELABEL: RelabelRule[] = [
  { source_labels: ['__meta_kubernetes_pod_labelpresent_cluster_x_k8s_io_provider'], action: 'keep', regex: 'true' },
  { source_labels: ['__meta_kubernetes_pod_container_port_name'], action: 'keep', regex: 'metrics' },
  {
    source_labels: ['__meta_kubernetes_pod_label_cluster_x_k8s_io_provider'],
    action: 'replace',
    target_label: 'provider',
  },
  { source_labels: ['__meta_kubernetes_namespace'], action: 'replace', target_label: 'namespace' },
  { source_labels: ['__meta_kubernetes_pod_name'], action: 'replace', target_label: 'pod' },
];

/** Prometheus's relabelling (keep, drop, replace; anchored regex, default `(.*)`, `;` separator, `$1`). */
function relabel(target: Labels, rules: RelabelRule[]): Labels | undefined {
  const out = { ...target };
  for (const r of rules) {
    const value = (r.source_labels ?? []).map((l) => out[l] ?? '').join(r.separator ?? ';');
    const re = new RegExp(`^(?:${r.regex ?? '(.*)'})$`);
    const m = re.exec(value);
    switch (r.action ?? 'replace') {
      case 'keep':
        if (!m) return undefined;
        break;
      case 'drop':
        if (m) return undefined;
        break;
      case 'replace': {
        if (!m) break;
        const v = (r.replacement ?? '$1').replace(/\$(\d)/g, (_x, i: string) => m[Number(i)] ?? '');
        if (v === '') delete out[r.target_label!];
        else out[r.target_label!] = v;
        break;
      }
    }
  }
  // Prometheus drops the __meta_* and other __ labels after relabelling, and sets job and instance.
  const kept = Object.fromEntries(Object.entries(out).filter(([k]) => !k.startsWith('__')));
  return { job: 'capi-providers', instance: out['__address__']!, ...kept };
}

/** Kubernetes SD (role: pod): one target per container port, with the pod's labels as meta labels. */
function podTargets(pod: {
  name: string;
  namespace: string;
  labels: Labels;
  containers: { name: string; ports?: { name?: string; containerPort: number }[] }[];
}): Labels[] {
  const sanitize = (k: string) => k.replace(/[^a-zA-Z0-9_]/g, '_');
  const meta: Labels = { __meta_kubernetes_namespace: pod.namespace, __meta_kubernetes_pod_name: pod.name };
  for (const [k, v] of Object.entries(pod.labels)) {
    meta[`__meta_kubernetes_pod_label_${sanitize(k)}`] = v;
    meta[`__meta_kubernetes_pod_labelpresent_${sanitize(k)}`] = 'true';
  }
  return pod.containers.flatMap((c) =>
    (c.ports ?? []).map((p) => ({
      ...meta,
      __address__: `10.0.0.7:${p.containerPort}`,
      __meta_kubernetes_pod_container_name: c.name,
      __meta_kubernetes_pod_container_port_name: p.name ?? '',
      __meta_kubernetes_pod_container_port_number: String(p.containerPort),
    })),
  );
}

describe("manifests: CAPI's observability scrape (capi-providers relabelling) keeps JoinGuard's pod", () => {
  let pod: Parameters<typeof podTargets>[0];

  before(async () => {
    const d = objectsOf((await renderProviderFiles('0.1.0')).components).find((o) => o.kind === 'Deployment') as any;
    pod = {
      name: 'joinguard-controller-manager-5d9c7b6f4-x2x7q',
      namespace: d.metadata.namespace,
      labels: d.spec.template.metadata.labels,
      containers: d.spec.template.spec.containers,
    };
  });

  it('keeps exactly the metrics port, labelled provider=addon-joinguard, namespace and pod', () => {
    const kept = podTargets(pod)
      .map((t) => relabel(t, CAPI_PROVIDERS_RELABEL))
      .filter((t): t is Labels => t !== undefined);
    expect(kept).to.deep.equal([
      {
        job: 'capi-providers',
        instance: `10.0.0.7:${DIAGNOSTICS_PORT}`,
        provider: PROVIDER,
        namespace: 'joinguard-system',
        pod: pod.name,
      },
    ]);
  });

  it('would drop the pod without the provider label or with the port named otherwise (what v0.1 shipped)', () => {
    const { ['cluster.x-k8s.io/provider']: _gone, ...unlabelled } = pod.labels;
    expect(
      podTargets({ ...pod, labels: unlabelled })
        .map((t) => relabel(t, CAPI_PROVIDERS_RELABEL))
        .filter(Boolean),
    ).to.deep.equal([]);
    const renamed = pod.containers.map((c) => ({
      ...c,
      ports: c.ports?.map((p) => (p.name === 'metrics' ? { ...p, name: 'diagnostics' } : p)),
    }));
    expect(
      podTargets({ ...pod, containers: renamed })
        .map((t) => relabel(t, CAPI_PROVIDERS_RELABEL))
        .filter(Boolean),
    ).to.deep.equal([]);
  });

  it('no JoinGuard series carries a label this scrape sets (CAPI does not honour labels: it would rename them)', async () => {
    const kept = relabel(
      podTargets(pod).find((t) => t['__meta_kubernetes_pod_container_port_name'] === 'metrics')!,
      CAPI_PROVIDERS_RELABEL,
    )!;
    const runtime = new RuntimeMetrics({ processMetrics: false });
    new JoinGuardMetrics(runtime.registry);
    runtime.webhook('/validate-joinguard-io-v1alpha1-machinejoincheck');
    const clashes: string[] = [];
    for (const m of await runtime.registry.getMetricsAsJSON()) {
      const names = (runtime.registry.getSingleMetric(m.name) as unknown as { labelNames?: string[] }).labelNames ?? [];
      for (const l of names) if (l in kept) clashes.push(`${m.name}{${l}}`);
    }
    expect(clashes).to.deep.equal([]);
  });
});
