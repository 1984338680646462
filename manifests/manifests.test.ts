// The clusterctl provider files: what `npm run manifests` writes keeps the add-on contract and the
// Deployment, RBAC and webhook wiring agree with each other and with the webhook server's paths.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { checkComponents, MANIFESTS_DIR, objectsOf, renderProviderFiles, type K8sObject } from './render.js';
import { listVariables } from './substitute.js';
import { CONTROLLER_NEEDS, grantStrings, ruleStrings } from './rbac-needs.js';
import { VALIDATE_PATH } from '../webhooks/server.js';
import { parseFlags } from '../cmd/flags.js';
import { parseDuration } from '../api/v1alpha1/duration.js';

const root = resolve(MANIFESTS_DIR, '..');
const version = '0.1.0';
type Json = Record<string, any>;

function one(objs: K8sObject[], kind: string, name?: string): Json {
  const found = objs.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  expect(found, `${kind} ${name ?? ''}`).to.have.length(1);
  return found[0] as Json;
}

describe('manifests: clusterctl provider files', function () {
  this.timeout(30_000);
  let components: string;
  let metadata: string;
  let objs: K8sObject[];

  before(async () => {
    const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { version: string };
    expect(pkg.version).to.equal(version);
    ({ components, metadata } = await renderProviderFiles(version));
    objs = objectsOf(components);
  });

  it('npm run manifests writes addon-components.yaml and metadata.yaml', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'joinguard-manifests-'));
    try {
      await promisify(execFile)(process.execPath, ['--import', 'tsx', join(root, 'manifests', 'build.ts'), dir], {
        cwd: root,
      });
      expect(await readFile(join(dir, 'addon-components.yaml'), 'utf8')).to.equal(components);
      expect(await readFile(join(dir, 'metadata.yaml'), 'utf8')).to.equal(metadata);
      const files = await renderProviderFiles(version);
      expect(await readFile(join(dir, 'observability-components.yaml'), 'utf8')).to.equal(files.observability);
      expect(await readFile(join(dir, 'grafana-dashboard.json'), 'utf8')).to.equal(files.dashboard);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('has exactly one Namespace, ${JOINGUARD_NAMESPACE:=joinguard-system}', () => {
    expect(objs.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).to.deep.equal(['joinguard-system']);
  });

  it('every variable has a default, the same at every use', () => {
    expect(checkComponents(components, version)).to.deep.equal([]);
    expect(listVariables(components)).to.have.deep.members([
      { name: 'JOINGUARD_NAMESPACE', default: 'joinguard-system' },
      { name: 'JOINGUARD_WATCH_FILTER_FLAG', default: '--watch-filter=' },
      { name: 'JOINGUARD_LOG_VERBOSITY', default: '2' },
      { name: 'JOINGUARD_LOGGING_FORMAT', default: 'text' },
      { name: 'JOINGUARD_CONCURRENCY', default: '10' },
      { name: 'JOINGUARD_INSECURE_DIAGNOSTICS', default: 'false' },
      { name: 'JOINGUARD_WORKLOAD_NODE_CHECK', default: 'false' },
      { name: 'JOINGUARD_ALLOW_MACHINE_DELETE', default: 'false' },
    ]);
  });

  it('metadata.yaml maps release series 0.1 to contract v1beta2', () => {
    const m = objectsOf(metadata)[0] as Json;
    expect(m.apiVersion).to.equal('clusterctl.cluster.x-k8s.io/v1alpha3');
    expect(m.kind).to.equal('Metadata');
    expect(m.releaseSeries).to.deep.include({ major: 0, minor: 1, contract: 'v1beta2' });
  });

  it('labels every object as clusterctl does (provider addon-joinguard), so a kubectl install moves and upgrades the same', () => {
    for (const o of objs) {
      expect(o.metadata.labels, `${o.kind} ${o.metadata.name}`).to.include({
        'cluster.x-k8s.io/provider': 'addon-joinguard',
        'clusterctl.cluster.x-k8s.io': '',
      });
    }
  });

  it('labels the CRD for clusterctl move: every MachineJoinCheck moves with its namespace', () => {
    const crd = one(objs, 'CustomResourceDefinition', 'machinejoinchecks.joinguard.io');
    expect(crd.metadata.labels).to.have.property('clusterctl.cluster.x-k8s.io/move', '');
    // move-hierarchy would also move what a check owns; it owns nothing.
    expect(crd.metadata.labels).not.to.have.property('clusterctl.cluster.x-k8s.io/move-hierarchy');
  });

  it("tags the manager image with the release's version", async () => {
    const next = await renderProviderFiles('0.2.0', {
      metadata: `${metadata}  - major: 0\n    minor: 2\n    contract: v1beta2\n`,
    });
    expect(one(objectsOf(next.components), 'Deployment').spec.template.spec.containers[0].image).to.equal(
      'ghcr.io/joinguard/joinguard:v0.2.0',
    );
    let err: Error | undefined;
    await renderProviderFiles('0.2.0').catch((e: Error) => (err = e));
    expect(err?.message).to.match(/no releaseSeries for 0\.2/);
  });

  it('carries the CRD from manifests/crd/', () => {
    const crd = one(objs, 'CustomResourceDefinition', 'machinejoinchecks.joinguard.io');
    expect(crd.spec.group).to.equal('joinguard.io');
    expect(crd.spec.names.shortNames).to.include('mjc');
  });

  it('runs a hardened container named manager, two replicas, always with leader election', () => {
    const d = one(objs, 'Deployment', 'joinguard-controller-manager');
    expect(d.spec.replicas).to.equal(2);
    // clusterctl parses the Deployment unsubstituted (generate provider --describe): no variable in an int field.
    const raw = parseAllDocuments(components)
      .map((x) => x.toJS() as Json)
      .find((o) => o?.kind === 'Deployment')!;
    expect(raw.spec.replicas).to.be.a('number');
    // Two replicas without leader election would both write: no variable turns it off.
    expect(components).not.to.match(/--leader-elect=\$\{/);
    const pod = d.spec.template.spec;
    const c = pod.containers.find((x: Json) => x.name === 'manager');
    expect(c, 'container manager').to.exist;
    expect(c.image).to.equal(`ghcr.io/joinguard/joinguard:v${version}`);
    expect(c.args).to.include.members([
      '--leader-elect=true',
      '--watch-filter=',
      '--v=2',
      '--logging-format=text',
      '--workload-node-check=false',
      '--allow-machine-delete=false',
      '--health-addr=:9440',
      '--webhook-port=9443',
      '--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs',
      '--diagnostics-address=:8443',
    ]);
    expect(pod.securityContext.runAsNonRoot).to.equal(true);
    expect(pod.securityContext.seccompProfile.type).to.equal('RuntimeDefault');
    expect(c.securityContext).to.deep.include({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    expect(c.securityContext.capabilities.drop).to.deep.equal(['ALL']);
    expect(c.resources.requests).to.have.keys('cpu', 'memory');
    expect(c.livenessProbe.httpGet).to.deep.equal({ path: '/healthz', port: 'healthz' });
    expect(c.readinessProbe.httpGet).to.deep.equal({ path: '/readyz', port: 'healthz' });
    // CAPI's names and numbers: metrics on 8443 named `metrics`, health on 9440 named `healthz`.
    expect(c.ports).to.deep.include.members([
      { name: 'metrics', containerPort: 8443, protocol: 'TCP' },
      { name: 'healthz', containerPort: 9440, protocol: 'TCP' },
    ]);
    expect(d.spec.template.metadata.labels).to.include({ 'cluster.x-k8s.io/provider': 'addon-joinguard' });
    expect(d.spec.selector.matchLabels).not.to.have.property('cluster.x-k8s.io/provider');
    expect(pod.serviceAccountName).to.equal(one(objs, 'ServiceAccount', 'joinguard-controller-manager').metadata.name);
  });

  it('substitutes the variables into the args', () => {
    const d = one(
      objectsOf(components, {
        JOINGUARD_LOG_VERBOSITY: '4',
        JOINGUARD_WATCH_FILTER_FLAG: '--watch-filter=shard-a',
        JOINGUARD_WORKLOAD_NODE_CHECK: 'true',
        JOINGUARD_ALLOW_MACHINE_DELETE: 'true',
      }),
      'Deployment',
    );
    const f = parseFlags(d.spec.template.spec.containers[0].args, parseDuration);
    expect(f).to.deep.include({ watchFilter: 'shard-a', leaderElectResourceName: 'joinguard-leader-shard-a' });
    expect(d.spec.template.spec.containers[0].args).to.include.members([
      '--v=4',
      '--workload-node-check=true',
      '--allow-machine-delete=true',
    ]);
  });

  it("the args are the manager's current flags: they parse, with no deprecation warning, defaults or set", () => {
    const settings: Record<string, string>[] = [
      {},
      { JOINGUARD_LOG_VERBOSITY: '4', JOINGUARD_LOGGING_FORMAT: 'json', JOINGUARD_INSECURE_DIAGNOSTICS: 'true' },
    ];
    for (const vars of settings) {
      const args = one(objectsOf(components, vars), 'Deployment').spec.template.spec.containers[0].args as string[];
      const warnings: string[] = [];
      const f = parseFlags(args, parseDuration, warnings);
      expect(warnings, JSON.stringify(vars)).to.deep.equal([]);
      expect(f.diagnosticsAddress).to.equal(':8443');
    }
  });

  it('has no * in any RBAC rule and grants exactly what the controller needs (rbac-needs.ts)', () => {
    const role = one(objs, 'ClusterRole', 'joinguard-manager-role');
    expect(ruleStrings(role.rules)).to.deep.equal(
      grantStrings(CONTROLLER_NEEDS.filter((g) => !g.namespaced && !g.workloadNodeCheck && !g.machineDelete)),
    );
    expect(ruleStrings(role.rules)).not.to.include('delete cluster.x-k8s.io/machines');
    const lease = one(objs, 'Role', 'joinguard-leader-election-role');
    expect(lease.metadata.namespace).to.equal('joinguard-system');
    expect(ruleStrings(lease.rules)).to.deep.equal(grantStrings(CONTROLLER_NEEDS.filter((g) => g.namespaced)));
    const secrets = one(objs, 'ClusterRole', 'joinguard-workload-secrets-true');
    expect(ruleStrings(secrets.rules)).to.deep.equal(grantStrings(CONTROLLER_NEEDS.filter((g) => g.workloadNodeCheck)));
    const del = one(objs, 'ClusterRole', 'joinguard-machine-delete-true');
    expect(ruleStrings(del.rules)).to.deep.equal(grantStrings(CONTROLLER_NEEDS.filter((g) => g.machineDelete)));
    for (const o of objs.filter((x) => x.kind === 'Role' || x.kind === 'ClusterRole') as Json[]) {
      expect(JSON.stringify(o.rules ?? []), o.metadata.name).not.to.include('*');
      expect(o, o.metadata.name).not.to.have.property('aggregationRule');
    }
    // Every role is bound to the add-on's ServiceAccount, and only to it; the metrics reader's only role is /metrics.
    const sa = one(objs, 'ServiceAccount', 'joinguard-controller-manager');
    for (const b of objs.filter((x) => x.kind === 'RoleBinding' || x.kind === 'ClusterRoleBinding') as Json[]) {
      const reader = b.metadata.name === 'joinguard-metrics-reader';
      expect(b.subjects, b.metadata.name).to.deep.equal([
        {
          kind: 'ServiceAccount',
          name: reader ? 'joinguard-metrics-reader' : sa.metadata.name,
          namespace: 'joinguard-system',
        },
      ]);
      if (reader) expect(b.roleRef.name).to.equal('joinguard-metrics-reader');
    }
    expect(one(objs, 'ClusterRole', 'joinguard-metrics-reader').rules).to.deep.equal([
      { nonResourceURLs: ['/metrics'], verbs: ['get'] },
    ]);
  });

  it('out/addon-components.yaml as built: no variable without a default, no * verb or resource (grep)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'joinguard-manifests-'));
    try {
      await promisify(execFile)(process.execPath, ['--import', 'tsx', join(root, 'manifests', 'build.ts'), dir], {
        cwd: root,
      });
      const text = await readFile(join(dir, 'addon-components.yaml'), 'utf8');
      // The same greps docs/install.md shows: every ${...} carries `:=`, and no rule line names `*`.
      expect(text.match(/\$\{(?![A-Z0-9_]+:=)[^}]*\}/g) ?? []).to.deep.equal([]);
      expect(
        text
          .split('\n')
          .filter((l) => /^\s*(verbs|resources|apiGroups):.*\*/.test(l) || /^\s*-\s*["']?\*["']?\s*$/.test(l)),
      ).to.deep.equal([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('grants Secrets only with JOINGUARD_WORKLOAD_NODE_CHECK=true', () => {
    const bindingRole = (vars: Record<string, string>) =>
      one(objectsOf(components, vars), 'ClusterRoleBinding', 'joinguard-workload-secrets').roleRef.name;
    expect(bindingRole({})).to.equal('joinguard-workload-secrets-false');
    expect(one(objs, 'ClusterRole', 'joinguard-workload-secrets-false').rules).to.deep.equal([]);
    expect(bindingRole({ JOINGUARD_WORKLOAD_NODE_CHECK: 'true' })).to.equal('joinguard-workload-secrets-true');
    expect(one(objs, 'ClusterRole', 'joinguard-workload-secrets-true').rules).to.deep.equal([
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
    ]);
  });

  it('grants Machine delete only with JOINGUARD_ALLOW_MACHINE_DELETE=true, the flag with it', () => {
    const at = (vars: Record<string, string>) => {
      const o = objectsOf(components, vars);
      return {
        role: one(o, 'ClusterRoleBinding', 'joinguard-machine-delete').roleRef.name,
        args: one(o, 'Deployment').spec.template.spec.containers[0].args as string[],
      };
    };
    expect(at({})).to.deep.include({ role: 'joinguard-machine-delete-false' });
    expect(at({}).args).to.include('--allow-machine-delete=false');
    expect(one(objs, 'ClusterRole', 'joinguard-machine-delete-false').rules).to.deep.equal([]);
    expect(at({ JOINGUARD_ALLOW_MACHINE_DELETE: 'true' }).role).to.equal('joinguard-machine-delete-true');
    expect(at({ JOINGUARD_ALLOW_MACHINE_DELETE: 'true' }).args).to.include('--allow-machine-delete=true');
    expect(one(objs, 'ClusterRole', 'joinguard-machine-delete-true').rules).to.deep.equal([
      { apiGroups: ['cluster.x-k8s.io'], resources: ['machines'], verbs: ['delete'] },
    ]);
  });

  it('wires webhooks, Service, Certificate and the mounted Secret together', () => {
    const svc = one(objs, 'Service', 'joinguard-webhook-service');
    const cert = one(objs, 'Certificate');
    const issuer = one(objs, 'Issuer');
    expect(issuer.spec).to.deep.equal({ selfSigned: {} });
    expect(cert.spec.issuerRef.name).to.equal(issuer.metadata.name);
    expect(cert.spec.dnsNames).to.include('joinguard-webhook-service.joinguard-system.svc');
    const d = one(objs, 'Deployment');
    const vol = d.spec.template.spec.volumes.find((v: Json) => v.secret);
    expect(vol.secret.secretName).to.equal(cert.spec.secretName);
    // No mutating webhook: the CRD schema defaults every field (docs/decisions/admission-without-a-mutating-webhook.md).
    expect(objs.filter((o: Json) => o.kind === 'MutatingWebhookConfiguration')).to.deep.equal([]);
    for (const [kind, path] of [['ValidatingWebhookConfiguration', VALIDATE_PATH]] as const) {
      const w = one(objs, kind);
      expect(w.metadata.annotations['cert-manager.io/inject-ca-from']).to.equal(
        `joinguard-system/${cert.metadata.name}`,
      );
      expect(w.webhooks).to.have.length(1);
      expect(w.webhooks[0].clientConfig.service).to.deep.equal({
        name: svc.metadata.name,
        namespace: 'joinguard-system',
        path,
      });
      expect(w.webhooks[0].rules[0]).to.deep.include({ apiGroups: ['joinguard.io'], resources: ['machinejoinchecks'] });
    }
  });

  it('moves everything namespaced into JOINGUARD_NAMESPACE', () => {
    const moved = objectsOf(components, { JOINGUARD_NAMESPACE: 'jg' }) as Json[];
    expect(moved.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).to.deep.equal(['jg']);
    expect(JSON.stringify(moved)).not.to.include('joinguard-system');
  });

  describe('the contract checks catch breakage', () => {
    const base =
      'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: ns\nspec:\n  template:\n    spec:\n      containers:\n        - name: manager\n          image: x:v0.1.0\n';
    it('accepts a minimal good file', () => expect(checkComponents(base, version)).to.deep.equal([]));
    it('a second Namespace', () =>
      expect(
        checkComponents(`${base}---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n`, version).join(),
      ).to.match(/2 Namespace/));
    it('a variable without default', () =>
      expect(checkComponents(base.replace('name: d', 'name: ${NAME}'), version).join()).to.match(
        /NAME has no default/,
      ));
    it('a * verb', () =>
      expect(
        checkComponents(
          `${base}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\nrules:\n  - apiGroups: [""]\n    resources: ["pods"]\n    verbs: ["*"]\n`,
          version,
        ).join(),
      ).to.match(/'\*' in verbs/));
    it('no manager container', () =>
      expect(checkComponents(base.replace('- name: manager', '- name: other'), version).join()).to.match(
        /no container named manager/,
      ));
  });
});
