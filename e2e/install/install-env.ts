// What the install tests share: the add-on's objects after clusterctl's substitution, applied server-side
// to the test control plane as clusterctl would; the webhook server run from the test behind `url:` client
// configs; the add-on's ServiceAccount as a client (a TokenRequest token, the pod's own kind of identity);
// and a raw request that returns the apiserver's admission warnings, which client-node does not expose (through
// the harness's one client, hack/testenv/kube-client.ts).
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { renderProviderFiles, objectsOf, type K8sObject } from '../../manifests/render.js';
import { clusterctlSubstitute, findClusterctl } from '../../manifests/clusterctl.js';
import { substitute } from '../../manifests/substitute.js';
import { issueServingCert } from '../../hack/testenv/certs.js';
import { KubeClient, type RawResponse } from '../../hack/testenv/kube-client.js';
import { startWebhookServer, type WebhookServer } from '../../webhooks/server.js';
import { clusterAccessFromKubeconfig } from '../../runtime/kubeconfig.js';
import type { TestEnv } from '../support/testenv.js';

export const FIELD_MANAGER = 'clusterctl';
export const CERT_MANAGER_KINDS = new Set(['Issuer', 'Certificate']);
const CLUSTER_SCOPED = new Set([
  'Namespace',
  'CustomResourceDefinition',
  'ClusterRole',
  'ClusterRoleBinding',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
]);

export interface Components {
  /** Substituted text. */
  text: string;
  objects: K8sObject[];
  /** Who substituted: clusterctl itself, or manifests/substitute.ts following its rules. */
  via: 'clusterctl' | 'rules';
}

export async function substitutedComponents(vars: Record<string, string>): Promise<Components> {
  const { components } = await renderProviderFiles('0.1.0');
  const clusterctl = await findClusterctl();
  const text = clusterctl ? await clusterctlSubstitute(clusterctl, components, vars) : substitute(components, vars);
  return { text, objects: objectsOf(text), via: clusterctl ? 'clusterctl' : 'rules' };
}

/** Whether the apiserver serves a group/version (cert-manager's CRDs are absent from the test env). */
export async function serves(kc: KubeConfig, groupVersion: string): Promise<boolean> {
  const res = await raw(kc, 'GET', `/apis/${groupVersion}`);
  return res.status === 200;
}

/**
 * Server-side apply, as `kubectl apply --server-side --force-conflicts` would. Sent as is: client-node's
 * typed serializer would re-shape the object (a CRD's `x-kubernetes-*` schema keys do not survive it).
 */
export async function apply(kc: KubeConfig, obj: K8sObject): Promise<Record<string, unknown>> {
  const res = await raw(
    kc,
    'PATCH',
    `${await pathOf(kc, obj)}?fieldManager=${FIELD_MANAGER}&force=true`,
    JSON.stringify(obj),
    'application/apply-patch+yaml',
  );
  if (res.status !== 200 && res.status !== 201)
    throw new Error(`apply ${obj.kind} ${obj.metadata.name}: ${res.status} ${res.body.slice(0, 500)}`);
  return JSON.parse(res.body) as Record<string, unknown>;
}

/** The REST path of an object, from discovery of its group/version. */
export async function pathOf(kc: KubeConfig, o: K8sObject): Promise<string> {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  const base = group ? `/apis/${group}/${version}` : `/api/${version}`;
  const res = await raw(kc, 'GET', base);
  if (res.status !== 200) throw new Error(`discovery of ${o.apiVersion}: ${res.status}`);
  const list = JSON.parse(res.body) as { resources: { name: string; kind: string; namespaced: boolean }[] };
  const r = list.resources.find((x) => x.kind === o.kind && !x.name.includes('/'));
  if (!r) throw new Error(`${o.apiVersion} serves no ${o.kind}`);
  const ns = o.metadata.namespace;
  return r.namespaced
    ? `${base}/namespaces/${ns}/${r.name}/${o.metadata.name}`
    : `${base}/${r.name}/${o.metadata.name}`;
}

/** Waits until the CRD is Established, so that its kind can be used at once. */
export async function waitEstablished(kc: KubeConfig, name: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await raw(kc, 'GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
    const crd =
      res.status === 200
        ? (JSON.parse(res.body) as { status?: { conditions?: { type: string; status: string }[] } })
        : undefined;
    if (crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return;
    if (Date.now() > deadline) throw new Error(`CRD ${name} not Established after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The webhook configurations pointed at a local server (url + caBundle instead of the Service). */
export function pointedAt(obj: K8sObject, baseUrl: string, caPem: string): K8sObject {
  const out = structuredClone(obj) as K8sObject & { webhooks: { clientConfig: Record<string, unknown> }[] };
  for (const w of out.webhooks) {
    const svc = w.clientConfig['service'] as { path: string };
    w.clientConfig = { url: `${baseUrl}${svc.path}`, caBundle: Buffer.from(caPem).toString('base64') };
  }
  return out;
}

/** A client with the identity of ServiceAccount ns/name, from a TokenRequest (1h). */
export async function serviceAccountKubeConfig(
  admin: KubeConfig,
  namespace: string,
  name: string,
): Promise<KubeConfig> {
  const core = admin.makeApiClient(CoreV1Api);
  const tr = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const cluster = admin.getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      { name: 'env', server: cluster.server, caData: cluster.caData, caFile: cluster.caFile, skipTLSVerify: false },
    ],
    users: [{ name: `${namespace}-${name}`, token: tr.status!.token }],
    contexts: [{ name: 'sa', cluster: 'env', user: `${namespace}-${name}` }],
    currentContext: 'sa',
  });
  return kc;
}

export type { RawResponse } from '../../hack/testenv/kube-client.js';

/** The harness client for a client-node KubeConfig's current context (client certificate or token). */
function clientOf(kc: KubeConfig): KubeClient {
  const cluster = kc.getCurrentCluster()!;
  const user = kc.getCurrentUser();
  const pem = (data?: string, file?: string) =>
    data ? Buffer.from(data, 'base64').toString('utf8') : file ? fs.readFileSync(file, 'utf8') : undefined;
  return new KubeClient(
    {
      server: cluster.server,
      caPem: pem(cluster.caData, cluster.caFile),
      certPem: pem(user?.certData, user?.certFile),
      keyPem: pem(user?.keyData, user?.keyFile),
      token: user?.token,
    },
    20_000,
  );
}

/** One request with the KubeConfig's credentials; returns the `Warning` headers' texts too. */
export async function raw(
  kc: KubeConfig,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<RawResponse> {
  const client = clientOf(kc);
  try {
    return await client.send(method, path, body, contentType, 20_000);
  } finally {
    client.close();
  }
}

export interface Installed {
  namespace: string;
  components: Components;
  webhook: WebhookServer;
  /** The add-on ServiceAccount's client. */
  sa: KubeConfig;
  skipped: string[];
  uninstall(): Promise<void>;
}

/**
 * Installs the add-on into `namespace` (JOINGUARD_NAMESPACE) as clusterctl would, with the webhook server run
 * here under the add-on's own ServiceAccount and the webhook configurations pointed at it.
 */
export async function install(env: TestEnv, namespace: string, vars: Record<string, string> = {}): Promise<Installed> {
  const admin = env.kubeConfig();
  const components = await substitutedComponents({ JOINGUARD_NAMESPACE: namespace, ...vars });
  const certManager = await serves(admin, 'cert-manager.io/v1');
  const skipped: string[] = [];
  const webhookConfigs: K8sObject[] = [];
  const dir = await mkdtemp(join(tmpdir(), 'joinguard-install-'));
  let webhook: WebhookServer | undefined;
  let sa: KubeConfig;
  try {
    for (const o of components.objects) {
      if (CERT_MANAGER_KINDS.has(o.kind) && !certManager) {
        skipped.push(`${o.kind}/${o.metadata.name}`);
        continue;
      }
      if (o.kind.endsWith('WebhookConfiguration')) {
        webhookConfigs.push(o);
        continue;
      }
      await apply(admin, o);
      if (o.kind === 'CustomResourceDefinition') await waitEstablished(admin, o.metadata.name);
    }
    // The webhook's lookups run under the add-on's identity too, as in the pod.
    sa = await serviceAccountKubeConfig(admin, namespace, 'joinguard-controller-manager');
    const pair = await issueServingCert(env.caCertFile, env.caKeyFile, dir);
    webhook = await startWebhookServer({
      port: 0,
      host: '127.0.0.1',
      certFile: pair.certFile,
      keyFile: pair.keyFile,
      access: clusterAccessFromKubeconfig(sa.exportConfig()),
    });
    for (const o of webhookConfigs)
      await apply(admin, pointedAt(o, `https://127.0.0.1:${webhook.port}`, env.caCertPem));
  } catch (e) {
    // A webhook configuration left behind (failurePolicy Fail) would refuse every later MachineJoinCheck of the run.
    for (const o of webhookConfigs) await raw(admin, 'DELETE', await pathOf(admin, o)).catch(() => undefined);
    await webhook?.stop();
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  const server = webhook;
  return {
    namespace,
    components,
    webhook: server,
    sa,
    skipped,
    async uninstall() {
      // Webhooks first: with failurePolicy Fail they would block every later MachineJoinCheck write of the run.
      // The CRD stays (other specs' checks live in it); objects in the Namespace go with it.
      // The Namespace stays too: without kube-controller-manager nothing would finalize its deletion.
      for (const o of [
        ...webhookConfigs,
        ...components.objects.filter(
          (x) => CLUSTER_SCOPED.has(x.kind) && !['CustomResourceDefinition', 'Namespace'].includes(x.kind),
        ),
      ]) {
        const res = await raw(admin, 'DELETE', await pathOf(admin, o));
        if (res.status !== 200 && res.status !== 404)
          throw new Error(`delete ${o.kind} ${o.metadata.name}: ${res.status}`);
      }
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
