// out/shard-components.yaml: N shards are N Deployments, each watching its own --watch-filter value under its own
// Lease, none claiming another's pods, every pod under exactly one disruption budget, all serving the webhook.
// Unit tests on the rendered files, substituted by clusterctl's rules (manifests/substitute.ts).
import { expect } from 'chai';
import { parseDuration } from '../api/v1alpha1/duration.js';
import { parseFlags } from '../cmd/flags.js';
import { objectsOf, renderProviderFiles, type K8sObject } from './render.js';
import { SHARD_LABEL } from './shard.js';
import { listVariables, MissingVariablesError, substitute } from './substitute.js';

type Json = Record<string, any>;

/** Label selector semantics for matchLabels and the In/NotIn/Exists/DoesNotExist expressions. */
function selects(sel: Json, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of (sel.matchExpressions ?? []) as Json[]) {
    const has = e.key in labels;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
    if (e.operator === 'In' && !(e.values as string[]).includes(labels[e.key]!)) return false;
    if (e.operator === 'NotIn' && has && (e.values as string[]).includes(labels[e.key]!)) return false;
  }
  return true;
}

describe('manifests: shards (shard-components.yaml)', () => {
  let addon: Json[];
  let shard: string;
  let components: string;
  const shardObjects = (value: string): Json[] => objectsOf(shard, { JOINGUARD_SHARD: value });
  const podLabels = (d: Json): Record<string, string> => d.spec.template.metadata.labels;

  before(async () => {
    const files = await renderProviderFiles('0.1.0');
    components = files.components;
    addon = objectsOf(files.components);
    shard = files.shard;
  });

  it("needs JOINGUARD_SHARD (no default), and takes the add-on's other variables with their defaults", () => {
    expect(listVariables(shard)).to.deep.include({ name: 'JOINGUARD_SHARD' });
    expect(listVariables(shard).find((v) => v.name === 'JOINGUARD_SHARD')!.default).to.equal(undefined);
    expect(() => substitute(shard, {})).to.throw(MissingVariablesError, /JOINGUARD_SHARD/);
    expect(shardObjects('a').map((o) => `${o.kind}/${o.metadata.name}`)).to.deep.equal([
      'Deployment/joinguard-controller-manager-a',
      'PodDisruptionBudget/joinguard-controller-manager-a',
    ]);
  });

  it("runs the shard's own filter and Lease, with leader election, as flags the manager parses without warning", () => {
    const d = shardObjects('gpu-pools').find((o) => o.kind === 'Deployment')!;
    expect(d.spec.replicas).to.equal(2);
    const c = (d.spec.template.spec.containers as Json[]).find((x) => x.name === 'manager')!;
    const warnings: string[] = [];
    const f = parseFlags(c.args, parseDuration, warnings);
    expect(warnings).to.deep.equal([]);
    expect(f).to.deep.include({
      watchFilter: 'gpu-pools',
      leaderElect: true,
      leaderElectResourceName: 'joinguard-leader-gpu-pools',
    });
    // The same container as the add-on's otherwise: image, probes, security, volumes.
    const main = (addon.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers as Json[]).find(
      (x) => x.name === 'manager',
    )!;
    expect({ ...c, args: [] }).to.deep.equal({ ...main, args: [] });
  });

  it('the add-on as shard a, shards b and c: three Leases, disjoint pods, each pod under one budget; all serve the webhook', () => {
    const main = objectsOf(components, { JOINGUARD_WATCH_FILTER_FLAG: '--watch-filter=a' }) as Json[];
    const a = shardObjects('b');
    const b = shardObjects('c');
    const deployments = [main.find((o) => o.kind === 'Deployment')!, a[0]!, b[0]!];
    const budgets = [main.find((o) => o.kind === 'PodDisruptionBudget')!, a[1]!, b[1]!];
    const leases = deployments.map((d) =>
      parseFlags((d.spec.template.spec.containers as Json[])[0]!.args, parseDuration),
    );
    expect(leases.map((f) => `${f.watchFilter} ${f.leaderElectResourceName}`)).to.deep.equal([
      'a joinguard-leader-a',
      'b joinguard-leader-b',
      'c joinguard-leader-c',
    ]);
    const webhook = addon.find((o) => o.kind === 'Service' && o.metadata.name === 'joinguard-webhook-service')!;
    for (const [i, d] of deployments.entries()) {
      const pod = podLabels(d);
      // A shard's selector picks its own pods only. The add-on's selector (immutable since v0.1) also matches shard
      // pods; ReplicaSets adopt only orphans, so it never takes them (docs/decisions/lifecycle-install-observability-release.md), and it runs none when sharded.
      deployments.forEach((other, j) =>
        expect(selects(other.spec.selector, pod), `${other.metadata.name} selects pods of ${d.metadata.name}`).to.equal(
          i === j || j === 0,
        ),
      );
      expect(
        budgets.filter((p) => selects(p.spec.selector, pod)).map((p) => p.metadata.name),
        d.metadata.name,
      ).to.deep.equal([budgets[i]!.metadata.name]);
      expect(
        selects({ matchLabels: webhook.spec.selector }, pod),
        `${d.metadata.name} behind the webhook Service`,
      ).to.equal(true);
      expect(pod).to.include({ 'cluster.x-k8s.io/provider': 'addon-joinguard' });
    }
  });

  it('carries no clusterctl label (clusterctl upgrade would delete a shard and not create it again)', () => {
    for (const o of shardObjects('a') as K8sObject[]) {
      expect(o.metadata.labels, o.metadata.name).not.to.have.any.keys(
        'cluster.x-k8s.io/provider',
        'clusterctl.cluster.x-k8s.io',
      );
      expect(o.metadata.labels).to.include({ [SHARD_LABEL]: 'a' });
    }
  });
});
