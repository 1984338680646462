// out/gitops/ as Argo CD or Flux would use it, on the local control plane: kustomize (v5.8.1, built from its module by
// hack/testenv/kustomize/build.sh) builds an overlay of the base and some components, every object is server-side
// applied, and what the previous build had and this one does not is pruned — a sync. Turning a feature on is one line
// of the overlay that adds objects and edits none but the manager's args; turning it off prunes them. The grant
// follows, under the add-on ServiceAccount's own token. clusterctl's rendering, by contrast, needs a binding's roleRef
// changed, which the apiserver refuses. Real cert-manager runs (e2e/support/cert-manager.ts): the base's Issuer and
// Certificate are admitted by its webhook and issued, and cainjector fills the webhook configuration's caBundle, so
// the names the base carries for joinguard-system are checked as a cluster checks them. Only the Prometheus
// Operator's kinds are left out of the sync: no Prometheus Operator runs here (promtool.test.ts checks the rules).
import { execFile, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseDuration } from '../../api/v1alpha1/duration.js';
import { parseFlags } from '../../cmd/flags.js';
import { GITOPS_NAMESPACE } from '../../manifests/gitops.js';
import { MANIFESTS_DIR, renderProviderFiles, type K8sObject } from '../../manifests/render.js';
import { waitFor } from '../../hack/testenv/wait.js';
import { CERT_MANAGER_START_TIMEOUT_MS, getCertManager } from '../support/cert-manager.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import {
  apply,
  pathOf,
  raw,
  serviceAccountKubeConfig,
  servingCertSecret,
  substitutedComponents,
  waitEstablished,
} from '../install/install-env.js';

const run = promisify(execFile);
const BUILD = resolve(MANIFESTS_DIR, '..', 'hack', 'testenv', 'kustomize', 'build.sh');
const CN = 'cluster.x-k8s.io/cluster-name';
/** The Prometheus Operator's kinds (the observability component): no Prometheus Operator runs here. */
const PROMETHEUS_OPERATOR_KINDS = new Set(['ServiceMonitor', 'PrometheusRule']);
const key = (o: K8sObject) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

function buildKustomize(): Promise<string> {
  return new Promise((ok, fail) => {
    const child = spawn('bash', [BUILD], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => process.stderr.write(c));
    child.on('error', fail);
    child.on('close', (code) =>
      code === 0 ? ok(out.trim().split('\n').at(-1)!) : fail(new Error(`${BUILD} exited ${code}`)),
    );
  });
}

describe('lifecycle: the GitOps rendering (out/gitops) synced as Argo CD or Flux would', function () {
  this.timeout(10 * 60_000);
  let env: TestEnv;
  let admin: KubeConfig;
  let kustomize: string;
  let dir: string;
  let synced: K8sObject[] = [];
  const workload = `jg-gitops-${process.pid}`;

  /** kustomize build of an overlay of the base and these components. */
  async function build(components: string[]): Promise<K8sObject[]> {
    const overlay = join(dir, 'overlay');
    await mkdir(overlay, { recursive: true });
    await writeFile(
      join(overlay, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        'resources:',
        '  - ../base',
        ...(components.length > 0 ? ['components:', ...components.map((c) => `  - ../components/${c}`)] : []),
        '',
      ].join('\n'),
    );
    const { stdout } = await run(kustomize, ['build', overlay], { maxBuffer: 64 * 1024 * 1024 });
    return parseAllDocuments(stdout).map((d) => d.toJS() as K8sObject);
  }

  /** A sync: apply what the build has, prune what the last sync had and this one does not. Returns the pruned. */
  async function sync(objs: K8sObject[]): Promise<string[]> {
    for (const o of objs) {
      if (PROMETHEUS_OPERATOR_KINDS.has(o.kind)) continue;
      await apply(admin, o);
      if (o.kind === 'CustomResourceDefinition') await waitEstablished(admin, o.metadata.name);
    }
    const now = new Set(objs.map(key));
    const pruned = synced.filter((o) => !now.has(key(o)) && !PROMETHEUS_OPERATOR_KINDS.has(o.kind));
    for (const o of pruned) expect((await raw(admin, 'DELETE', await pathOf(admin, o))).status).to.equal(200);
    synced = objs;
    return pruned.map(key);
  }

  /** The add-on ServiceAccount's answer, retried past the authorizer's cache until it is `want`. */
  async function status(sa: KubeConfig, method: string, path: string, want: number): Promise<number> {
    let res = await raw(sa, method, path);
    for (let i = 0; i < 50 && res.status !== want; i++) {
      await new Promise((r) => setTimeout(r, 100));
      res = await raw(sa, method, path);
    }
    return res.status;
  }

  before(async function () {
    this.timeout(10 * 60_000 + CERT_MANAGER_START_TIMEOUT_MS);
    kustomize = await buildKustomize();
    env = await getTestEnv();
    await getCertManager();
    admin = env.kubeConfig();
    dir = await mkdtemp(join(tmpdir(), 'joinguard-gitops-'));
    for (const [path, text] of Object.entries((await renderProviderFiles('0.1.0')).gitops)) {
      await mkdir(dirname(join(dir, path)), { recursive: true });
      await writeFile(join(dir, path), text);
    }
    expect((await raw(admin, 'POST', '/api/v1/namespaces', { metadata: { name: workload } })).status).to.be.oneOf([
      201, 409,
    ]);
  });
  after(async () => {
    // Cluster-scoped objects the sync created, the webhook configuration first: no webhook server runs here, so with
    // failurePolicy Fail it refuses every check write (the CRD stays: without kube-controller-manager nothing
    // finalizes it).
    for (const o of synced.filter((x) =>
      ['ValidatingWebhookConfiguration', 'ClusterRole', 'ClusterRoleBinding'].includes(x.kind),
    ))
      await raw(admin, 'DELETE', await pathOf(admin, o)).catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the base holds no clusterctl variable and no switch binding; it syncs, and grants neither Machine delete nor Secrets', async () => {
    const base = await build([]);
    expect(JSON.stringify(base)).not.to.match(/\$\{/);
    const names = base.map((o) => o.metadata.name);
    for (const n of ['joinguard-machine-delete', 'joinguard-machine-delete-false', 'joinguard-workload-secrets'])
      expect(names).not.to.include(n);
    expect(base.every((o) => o.metadata.namespace === undefined || o.metadata.namespace === GITOPS_NAMESPACE)).to.equal(
      true,
    );
    await sync(base);
    const m = await raw(admin, 'POST', `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: { name: 'gitops-m1', labels: { [CN]: 'c1' } },
      spec: {
        clusterName: 'c1',
        bootstrap: { dataSecretName: 'x' },
        infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'FakeMachine', name: 'x' },
      },
    });
    expect(m.status, m.body).to.equal(201);
    const secret = await raw(admin, 'POST', `/api/v1/namespaces/${workload}/secrets`, {
      metadata: { name: 'c1-kubeconfig' },
      stringData: { value: 'x' },
    });
    expect(secret.status, secret.body).to.equal(201);
    const sa = await serviceAccountKubeConfig(admin, GITOPS_NAMESPACE, 'joinguard-controller-manager');
    expect(await status(sa, 'GET', `/api/v1/namespaces/${workload}/secrets/c1-kubeconfig`, 403)).to.equal(403);
  });

  it("the base's Issuer and Certificate: issued by cert-manager into the Secret the Deployment mounts, its CA injected", async () => {
    const base = synced;
    const certificate = base.find((o) => o.kind === 'Certificate')!;
    const ready = await waitFor(
      `Certificate ${certificate.metadata.name} Ready`,
      async () => {
        const res = await raw(admin, 'GET', await pathOf(admin, certificate));
        const c = res.status === 200 ? JSON.parse(res.body) : undefined;
        return c?.status?.conditions?.some((x: any) => x.type === 'Ready' && x.status === 'True') && c;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(ready.spec.secretName).to.equal(servingCertSecret(base));
    const secret = await raw(admin, 'GET', `/api/v1/namespaces/${GITOPS_NAMESPACE}/secrets/${ready.spec.secretName}`);
    expect(secret.status, secret.body).to.equal(200);
    const data = (JSON.parse(secret.body) as { data: Record<string, string> }).data;
    const x509 = new X509Certificate(Buffer.from(data['tls.crt']!, 'base64'));
    expect(x509.subjectAltName).to.include(`DNS:joinguard-webhook-service.${GITOPS_NAMESPACE}.svc`);
    const vwc = base.find((o) => o.kind === 'ValidatingWebhookConfiguration')!;
    const bundles = await waitFor(
      'the caBundle injected by cainjector',
      async () => {
        const got = JSON.parse((await raw(admin, 'GET', await pathOf(admin, vwc))).body);
        const b = (got.webhooks as any[]).map((w) => w.clientConfig.caBundle as string | undefined);
        return b.every((x) => x) && b;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(bundles).to.deep.equal((vwc as any).webhooks.map(() => data['ca.crt']));
  });

  it('a component turns a feature on by adding its objects and the flag: nothing else changes, no roleRef moves', async () => {
    const before = new Map(synced.map((o) => [key(o), o]));
    const on = await build(['machine-delete', 'workload-node-check', 'observability']);
    const added = on.filter((o) => !before.has(key(o))).map(key);
    expect(added).to.include.members([
      'ClusterRole//joinguard-machine-delete',
      'ClusterRoleBinding//joinguard-machine-delete',
      'ClusterRole//joinguard-workload-secrets',
      'ClusterRoleBinding//joinguard-workload-secrets',
      `ServiceMonitor/${GITOPS_NAMESPACE}/joinguard-controller-manager`,
      `PrometheusRule/${GITOPS_NAMESPACE}/joinguard`,
    ]);
    const changed = on.filter((o) => before.has(key(o)) && JSON.stringify(o) !== JSON.stringify(before.get(key(o))));
    expect(changed.map(key)).to.deep.equal([`Deployment/${GITOPS_NAMESPACE}/joinguard-controller-manager`]);
    const args = (changed[0] as any).spec.template.spec.containers[0].args as string[];
    const flags = parseFlags(args, parseDuration);
    expect([flags.allowMachineDelete, flags.workloadNodeCheck]).to.deep.equal([true, true]);
    expect(await sync(on)).to.deep.equal([]);
    const sa = await serviceAccountKubeConfig(admin, GITOPS_NAMESPACE, 'joinguard-controller-manager');
    expect(await status(sa, 'GET', `/api/v1/namespaces/${workload}/secrets/c1-kubeconfig`, 200)).to.equal(200);
    // A dry-run delete answers the RBAC question without deleting (no finalizing controller runs here).
    const del = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines/gitops-m1?dryRun=All`;
    expect(await status(sa, 'DELETE', del, 200)).to.equal(200);
  });

  it('removing a component prunes its objects and its flag; the other feature stays on', async () => {
    const off = await build(['workload-node-check', 'observability']);
    expect(await sync(off)).to.have.members([
      'ClusterRole//joinguard-machine-delete',
      'ClusterRoleBinding//joinguard-machine-delete',
    ]);
    const d = off.find((o) => o.kind === 'Deployment') as any;
    expect(parseFlags(d.spec.template.spec.containers[0].args, parseDuration).allowMachineDelete).to.equal(false);
    const sa = await serviceAccountKubeConfig(admin, GITOPS_NAMESPACE, 'joinguard-controller-manager');
    const del = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines/gitops-m1?dryRun=All`;
    expect(await status(sa, 'DELETE', del, 403)).to.equal(403);
    expect(await status(sa, 'GET', `/api/v1/namespaces/${workload}/secrets/c1-kubeconfig`, 200)).to.equal(200);
  });

  it("clusterctl's rendering, by contrast, turns a feature on by changing a binding's roleRef, which is refused", async () => {
    const ns = `jg-gitops-cc-${process.pid}`;
    const binding = async (value: string) =>
      (await substitutedComponents({ JOINGUARD_NAMESPACE: ns, JOINGUARD_ALLOW_MACHINE_DELETE: value })).objects.find(
        (o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'joinguard-machine-delete',
      )!;
    const off = await binding('false');
    try {
      await apply(admin, off);
      const err = await apply(admin, await binding('true')).then(
        () => undefined,
        (e: Error) => e.message,
      );
      expect(err).to.match(/422 .*cannot change roleRef/);
    } finally {
      await raw(admin, 'DELETE', await pathOf(admin, off));
    }
  });
});
