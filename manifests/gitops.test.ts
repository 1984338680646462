// out/gitops/: a kustomize base with every default and no clusterctl variable, each optional grant a component of
// objects of its own (no binding switched by a variable). Unit tests on the rendered files; kustomize itself builds
// and syncs them against the local control plane in e2e/lifecycle/gitops.test.ts.
import { expect } from 'chai';
import { parse, parseAllDocuments } from 'yaml';
import { FEATURES, GITOPS_NAMESPACE } from './gitops.js';
import { objectsOf, renderProviderFiles, type K8sObject } from './render.js';

type Json = Record<string, any>;
const docs = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as K8sObject);

describe('manifests: the GitOps rendering (out/gitops)', () => {
  let files: Record<string, string>;
  let addon: K8sObject[];

  before(async () => {
    const rendered = await renderProviderFiles('0.1.0');
    files = rendered.gitops;
    addon = objectsOf(rendered.components);
  });

  it('is a base and one component per option, each a kustomization of its own files', () => {
    expect(Object.keys(files).sort()).to.deep.equal([
      'base/addon.yaml',
      'base/kustomization.yaml',
      'components/machine-delete/kustomization.yaml',
      'components/machine-delete/rbac.yaml',
      'components/observability/kustomization.yaml',
      'components/observability/observability.yaml',
      'components/workload-node-check/kustomization.yaml',
      'components/workload-node-check/rbac.yaml',
    ]);
    expect(parse(files['base/kustomization.yaml']!)).to.deep.include({
      kind: 'Kustomization',
      resources: ['addon.yaml'],
    });
    for (const c of ['machine-delete', 'workload-node-check', 'observability']) {
      const k = parse(files[`components/${c}/kustomization.yaml`]!) as Json;
      expect(k.kind, c).to.equal('Component');
      for (const r of k.resources as string[]) expect(files, `${c}/${r}`).to.have.property(`components/${c}/${r}`);
    }
  });

  it('the base: no variable, the defaults, the objects of the add-on but the switched bindings and their roles', () => {
    const text = files['base/addon.yaml']!;
    expect(text).not.to.match(/\$\{/);
    const base = docs(text);
    const switched = FEATURES.flatMap((f) => [f.binding, `${f.binding}-true`, `${f.binding}-false`]);
    expect(base.map((o) => o.metadata.name).filter((n) => switched.includes(n))).to.deep.equal([]);
    expect(base.length).to.equal(addon.length - 2 * 3);
    for (const o of base) if (o.metadata.namespace) expect(o.metadata.namespace).to.equal(GITOPS_NAMESPACE);
    const args = (base.find((o) => o.kind === 'Deployment') as Json).spec.template.spec.containers[0].args as string[];
    expect(args.filter((a) => /allow-machine-delete|workload-node-check/.test(a))).to.deep.equal([]);
  });

  it('each grant is a ClusterRole and a ClusterRoleBinding of its own, bound to the manager, and appends its flag', () => {
    for (const f of FEATURES) {
      const [role, binding] = docs(files[`components/${f.component}/rbac.yaml`]!) as Json[];
      const on = addon.find((o) => o.metadata.name === `${f.binding}-true`) as Json;
      expect(role).to.deep.include({ kind: 'ClusterRole', rules: on.rules });
      expect(role!.metadata.name).to.equal(f.binding);
      expect(binding!.roleRef).to.deep.equal({
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: f.binding,
      });
      expect(binding!.subjects).to.deep.equal([
        { kind: 'ServiceAccount', name: 'joinguard-controller-manager', namespace: GITOPS_NAMESPACE },
      ]);
      const k = parse(files[`components/${f.component}/kustomization.yaml`]!) as Json;
      expect(parse(k.patches[0].patch)).to.deep.equal([
        { op: 'add', path: '/spec/template/spec/containers/0/args/-', value: `${f.flag}=true` },
      ]);
    }
  });

  it('observability: the same objects as observability-components.yaml, in the base namespace', async () => {
    const obs = docs(files['components/observability/observability.yaml']!);
    const shipped = docs((await renderProviderFiles('0.1.0')).observability);
    expect(obs.map((o) => o.kind)).to.deep.equal(shipped.map((o) => o.kind));
    for (const o of obs) expect(o.metadata.namespace).to.equal(GITOPS_NAMESPACE);
  });
});
