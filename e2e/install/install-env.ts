// What the install tests share: the add-on's objects after clusterctl's substitution, applied server-side
// to the test control plane as clusterctl would, with real cert-manager (e2e/support/cert-manager.ts) issuing the
// webhook's serving certificate and cainjector injecting its CA; the webhook server run from the test, reading the
// certificate from the Secret the Deployment mounts (secret-volume.ts plays the kubelet) and reached by the
// apiserver through the add-on's own Service; the add-on's ServiceAccount as a client (a TokenRequest token, the
// pod's own kind of identity); and a raw request that returns the apiserver's admission warnings, which
// client-node does not expose (through the harness's one client, hack/testenv/kube-client.ts).
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { renderProviderFiles, objectsOf, type K8sObject } from '../../manifests/render.js';
import { clusterctlSubstitute, findClusterctl } from '../../manifests/clusterctl.js';
import { substitute } from '../../manifests/substitute.js';
import { KubeClient, type RawResponse } from '../../hack/testenv/kube-client.js';
import { waitFor } from '../../hack/testenv/wait.js';
import { startWebhookServer, type WebhookServer } from '../../webhooks/server.js';
import { clusterAccessFromKubeconfig } from '../../runtime/client/kubeconfig.js';
import type { TestEnv } from '../support/testenv.js';
import { getCertManager, type CertManager } from '../support/cert-manager.js';
import { mountSecret, type SecretVolume } from './secret-volume.js';

type Json = Record<string, any>;

export const FIELD_MANAGER = 'clusterctl';
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

/** Where the manager container reads its serving certificate: the Secret volume mounted at --webhook-cert-dir. */
export function servingCertSecret(objects: K8sObject[]): string {
  const d = objects.find((o) => o.kind === 'Deployment') as Json | undefined;
  const pod = d?.spec?.template?.spec as Json | undefined;
  const manager = (pod?.containers as Json[] | undefined)?.find((c) => c.name === 'manager');
  const certDir = (manager?.args as string[] | undefined)
    ?.find((a) => a.startsWith('--webhook-cert-dir='))
    ?.slice('--webhook-cert-dir='.length);
  const mount = (manager?.volumeMounts as Json[] | undefined)?.find((m) => m.mountPath === certDir);
  const secret = (pod?.volumes as Json[] | undefined)?.find((v) => v.name === mount?.name)?.secret?.secretName;
  if (!secret) throw new Error(`the Deployment mounts no Secret at its --webhook-cert-dir (${certDir})`);
  return secret as string;
}

/**
 * The pod network's part: the add-on's webhook Service, as applied, becomes an ExternalName Service for 127.0.0.1
 * (same name, labels and ports), so that the apiserver, calling the webhook configuration's `service:`, reaches
 * the webhook server run here and checks its certificate for `<service>.<namespace>.svc`.
 */
export async function routeToLocal(admin: KubeConfig, service: K8sObject): Promise<void> {
  const path = await pathOf(admin, service);
  const del = await raw(admin, 'DELETE', path);
  if (del.status !== 200 && del.status !== 404) throw new Error(`delete Service: ${del.status} ${del.body}`);
  const s = service as Json;
  const res = await raw(admin, 'POST', path.slice(0, path.lastIndexOf('/')), {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: s.metadata.name, namespace: s.metadata.namespace, labels: s.metadata.labels },
    spec: { type: 'ExternalName', externalName: '127.0.0.1', ports: s.spec.ports },
  });
  if (res.status !== 201) throw new Error(`ExternalName Service: ${res.status} ${res.body.slice(0, 300)}`);
}

/** The webhook configuration as rendered, calling its Service on the port the local server listens on. */
export function servedAt(obj: K8sObject, port: number): K8sObject {
  const out = structuredClone(obj) as K8sObject & { webhooks: { clientConfig: { service: Json } }[] };
  for (const w of out.webhooks) w.clientConfig.service = { ...w.clientConfig.service, port };
  return out;
}

export interface Installed extends Applied {
  webhook: WebhookServer;
  /** The add-on ServiceAccount's client. */
  sa: KubeConfig;
  /** The Secret the Deployment mounts (cert-manager writes it), as the webhook server reads it. */
  servingCert: SecretVolume & { secret: string };
  uninstall(): Promise<void>;
}

/** The add-on applied by applyComponents: every object but the webhook configurations, which wait for a server. */
export interface Applied {
  namespace: string;
  components: Components;
  certManager: CertManager;
  /** The webhook configurations as rendered; serveWebhooks applies them once a server listens. */
  webhookConfigs: K8sObject[];
  /** The Secret the Deployment mounts at --webhook-cert-dir (cert-manager issues into it). */
  servingCertSecret: string;
}

/**
 * Every object of the components in `namespace` as clusterctl applies them (substituted, server-side, as rendered),
 * with cert-manager running, so that the Issuer and Certificate are served, admitted by cert-manager's webhook and
 * issued — all but the webhook configurations (failurePolicy Fail: they would refuse every check until a server
 * answers; serveWebhooks applies them).
 */
export async function applyComponents(
  env: TestEnv,
  namespace: string,
  vars: Record<string, string> = {},
  /** Changes the test makes to the rendered objects before they are applied (e2e/install/pods.test.ts's token). */
  edit?: (objects: K8sObject[]) => void,
): Promise<Applied> {
  const admin = env.kubeConfig();
  const certManager = await getCertManager();
  const components = await substitutedComponents({ JOINGUARD_NAMESPACE: namespace, ...vars });
  edit?.(components.objects);
  const webhookConfigs = components.objects.filter((o) => o.kind.endsWith('WebhookConfiguration'));
  for (const o of components.objects) {
    if (webhookConfigs.includes(o)) continue;
    await apply(admin, o);
    if (o.kind === 'CustomResourceDefinition') await waitEstablished(admin, o.metadata.name);
  }
  return {
    namespace,
    components,
    certManager,
    webhookConfigs,
    servingCertSecret: servingCertSecret(components.objects),
  };
}

/** The serving certificate's Secret at `dir`, as the kubelet mounts it into the pod and follows its renewals. */
export function mountServingCert(kube: KubeClient, applied: Applied, dir: string): Promise<SecretVolume> {
  return mountSecret(kube, applied.namespace, applied.servingCertSecret, dir, {
    keys: ['tls.crt', 'tls.key', 'ca.crt'],
  });
}

/**
 * The webhook made callable where a server listens on 127.0.0.1:`port` (run by the test, or a container's published
 * port): the add-on's Services routed to 127.0.0.1, and the webhook configurations applied as rendered, calling the
 * Service on that port; cainjector then injects the CA. Does not wait: webhookServes says when the apiserver's call
 * succeeds.
 */
export async function serveWebhooks(admin: KubeConfig, applied: Applied, port: number): Promise<void> {
  for (const o of applied.components.objects) if (o.kind === 'Service') await routeToLocal(admin, o);
  for (const o of applied.webhookConfigs) await apply(admin, servedAt(o, port));
}

/** Deletes the webhook configurations, ignoring errors: for a failed install (failurePolicy Fail would refuse later checks). */
export async function removeWebhooks(admin: KubeConfig, applied: Applied): Promise<void> {
  for (const o of applied.webhookConfigs) await raw(admin, 'DELETE', await pathOf(admin, o)).catch(() => undefined);
}

/**
 * Removes what would outlive the install on the shared control plane: the webhook configurations first (with
 * failurePolicy Fail they would block every later MachineJoinCheck write of the run), then the cluster-scoped RBAC.
 * The CRD stays (other specs' checks live in it); objects in the Namespace go with it. The Namespace stays too:
 * without kube-controller-manager nothing would finalize its deletion.
 */
export async function uninstallComponents(admin: KubeConfig, applied: Applied): Promise<void> {
  for (const o of [
    ...applied.webhookConfigs,
    ...applied.components.objects.filter(
      (x) => CLUSTER_SCOPED.has(x.kind) && !['CustomResourceDefinition', 'Namespace'].includes(x.kind),
    ),
  ]) {
    const res = await raw(admin, 'DELETE', await pathOf(admin, o));
    if (res.status !== 200 && res.status !== 404) throw new Error(`delete ${o.kind} ${o.metadata.name}: ${res.status}`);
  }
}

/**
 * Installs the add-on into `namespace` (JOINGUARD_NAMESPACE) as clusterctl would, every object as rendered, with
 * cert-manager running: the webhook server runs here under the add-on's own ServiceAccount, with the certificate
 * cert-manager issued into the Secret the Deployment mounts; cainjector injects its CA into the webhook
 * configuration, which calls the add-on's Service (routed to 127.0.0.1) on the server's port. Resolves once the
 * apiserver has called the webhook successfully.
 */
export async function install(env: TestEnv, namespace: string, vars: Record<string, string> = {}): Promise<Installed> {
  const admin = env.kubeConfig();
  const applied = await applyComponents(env, namespace, vars);
  const dir = await mkdtemp(join(tmpdir(), 'joinguard-install-'));
  const kube = env.kube();
  let webhook: WebhookServer | undefined;
  let volume: SecretVolume | undefined;
  let sa: KubeConfig;
  try {
    // The webhook's lookups run under the add-on's identity too, as in the pod.
    sa = await serviceAccountKubeConfig(admin, namespace, 'joinguard-controller-manager');
    volume = await mountServingCert(kube, applied, join(dir, 'serving-certs'));
    webhook = await startWebhookServer({
      port: 0,
      host: '127.0.0.1',
      certFile: join(volume.dir, 'tls.crt'),
      keyFile: join(volume.dir, 'tls.key'),
      access: clusterAccessFromKubeconfig(sa.exportConfig()),
    });
    await serveWebhooks(admin, applied, webhook.port);
    await waitFor(
      'the webhook called by the apiserver (CA injected by cainjector)',
      () => webhookServes(admin, namespace),
      {
        timeoutMs: 60_000,
        intervalMs: 250,
      },
    );
  } catch (e) {
    await removeWebhooks(admin, applied);
    await webhook?.stop();
    await volume?.stop();
    kube.close();
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  const server = webhook;
  const mounted = volume;
  return {
    ...applied,
    webhook: server,
    sa,
    servingCert: Object.assign(mounted, { secret: applied.servingCertSecret }),
    async uninstall() {
      await uninstallComponents(admin, applied);
      await server.stop();
      await mounted.stop();
      kube.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A dry-run create of a minimal check: the webhook configuration judges every create, and a call that fails
 * (no CA injected yet, a certificate the apiserver does not trust) is refused (failurePolicy Fail).
 */
export async function webhookServes(admin: KubeConfig, namespace: string): Promise<boolean> {
  const res = await raw(
    admin,
    'POST',
    `/apis/joinguard.io/v1alpha1/namespaces/${namespace}/machinejoinchecks?dryRun=All`,
    {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: { name: 'install-webhook-probe' },
      spec: { clusterName: 'install-probe', selector: { matchLabels: { 'joinguard.io/install-probe': 'true' } } },
    },
  );
  return res.status === 201;
}
