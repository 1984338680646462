// The add-on's webhook as clusterctl installed it, served as a pod of its Deployment would serve it: cert-manager
// (started on each management cluster by fleet.ts) has issued the components' Certificate into the Secret the
// Deployment mounts; that Secret is mounted here (secret-volume.ts plays the kubelet) and the webhook server run by
// the test serves it under the add-on's ServiceAccount. The pod network's part: the add-on's Service becomes an
// ExternalName Service for 127.0.0.1 and the webhook configurations call it on the server's port, keeping the
// caBundle cainjector injected, so the apiserver checks cert-manager's certificate for `<service>.<namespace>.svc`
// as in a cluster (install-env.ts does the same for the install specs).
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { waitFor } from '../../hack/testenv/wait.js';
import { startWebhookServer, type WebhookServer } from '../../webhooks/server.js';
import { clusterAccessFromKubeconfig } from '../../runtime/client/kubeconfig.js';
import type { K8sObject } from '../../manifests/render.js';
import {
  raw,
  routeToLocal,
  serviceAccountKubeConfig,
  servingCertSecret,
  webhookServes,
} from '../install/install-env.js';
import { mountSecret, type SecretVolume } from '../install/secret-volume.js';
import type { TestEnv } from '../support/testenv.js';
import { ADDON_NAMESPACE, PROVIDER_LABEL } from './clusterctl-env.js';

type Json = Record<string, any>;
const ADDON = encodeURIComponent(`${PROVIDER_LABEL}=addon-joinguard`);
const WEBHOOK_CONFIGURATIONS = ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'];

async function getJson(admin: KubeConfig, path: string): Promise<Json> {
  const res = await raw(admin, 'GET', path);
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body) as Json;
}

const isReady = (o: Json) =>
  ((o.status?.conditions ?? []) as Json[]).some((c) => c.type === 'Ready' && c.status === 'True');

/** The add-on's Certificates once cert-manager has issued every one (Ready=True). */
export function issuedCertificates(admin: KubeConfig, timeoutMs = 60_000): Promise<Json[]> {
  return waitFor(
    "the add-on's Certificates issued by cert-manager (Ready=True)",
    async () => {
      const list = await getJson(
        admin,
        `/apis/cert-manager.io/v1/namespaces/${ADDON_NAMESPACE}/certificates?labelSelector=${ADDON}`,
      );
      const certs = list.items as Json[];
      return certs.length > 0 && certs.every(isReady) ? certs : undefined;
    },
    { timeoutMs, intervalMs: 250 },
  );
}

/** The add-on's webhook configurations as installed, each with its webhooks' caBundles. */
export async function webhookConfigurations(admin: KubeConfig): Promise<Json[]> {
  const found: Json[] = [];
  for (const plural of WEBHOOK_CONFIGURATIONS) {
    const list = await getJson(admin, `/apis/admissionregistration.k8s.io/v1/${plural}?labelSelector=${ADDON}`);
    for (const o of list.items as Json[]) found.push({ ...o, plural });
  }
  return found;
}

/**
 * The pod network's part, after clusterctl (re)created the add-on's Service and webhook configurations: the Service
 * routed to 127.0.0.1 (same name, labels and ports), each webhook calling it on `port`.
 */
async function routeWebhooks(admin: KubeConfig, port: number): Promise<void> {
  const services = await getJson(admin, `/api/v1/namespaces/${ADDON_NAMESPACE}/services?labelSelector=${ADDON}`);
  for (const s of services.items as Json[])
    await routeToLocal(admin, { apiVersion: 'v1', kind: 'Service', ...s } as K8sObject);
  const configurations = await webhookConfigurations(admin);
  if (configurations.length === 0) throw new Error('clusterctl installed no webhook configuration of addon-joinguard');
  for (const c of configurations) {
    // A JSON patch of the port alone: the caBundle cainjector writes (now or later) is left alone.
    const patch = (c.webhooks as Json[]).map((_, i) => ({
      op: 'add',
      path: `/webhooks/${i}/clientConfig/service/port`,
      value: port,
    }));
    const path = `/apis/admissionregistration.k8s.io/v1/${c.plural}/${c.metadata.name}`;
    const res = await raw(admin, 'PATCH', path, patch, 'application/json-patch+json');
    if (res.status !== 200) throw new Error(`PATCH ${path}: ${res.status} ${res.body.slice(0, 300)}`);
  }
}

export interface AddonWebhook {
  server: WebhookServer;
  /** The Secret the Deployment mounts, which cert-manager issued into. */
  secret: string;
  volume: SecretVolume;
  stop(): Promise<void>;
}

/**
 * Serves the webhook clusterctl installed as the add-on's pod would, once cert-manager has issued its certificate;
 * resolves once the apiserver has called it successfully (through the Service, with cainjector's caBundle). After
 * `clusterctl upgrade apply` it is called again, as the new release's pod: clusterctl re-created the ServiceAccount,
 * the Service and the webhook configurations.
 */
export async function serveAddonWebhook(env: TestEnv, admin: KubeConfig, dir: string): Promise<AddonWebhook> {
  await issuedCertificates(admin);
  const deployment = await getJson(
    admin,
    `/apis/apps/v1/namespaces/${ADDON_NAMESPACE}/deployments/joinguard-controller-manager`,
  );
  const secret = servingCertSecret([deployment as K8sObject]);
  const kube = env.kube();
  let volume: SecretVolume | undefined;
  let server: WebhookServer | undefined;
  try {
    volume = await mountSecret(kube, ADDON_NAMESPACE, secret, await mkdtemp(join(dir, 'serving-certs-')), {
      keys: ['tls.crt', 'tls.key', 'ca.crt'],
    });
    const sa = await serviceAccountKubeConfig(admin, ADDON_NAMESPACE, 'joinguard-controller-manager');
    server = await startWebhookServer({
      port: 0,
      host: '127.0.0.1',
      certFile: join(volume.dir, 'tls.crt'),
      keyFile: join(volume.dir, 'tls.key'),
      access: clusterAccessFromKubeconfig(sa.exportConfig()),
    });
    await routeWebhooks(admin, server.port);
    await waitFor(
      'the add-on webhook called by the apiserver (CA injected by cainjector)',
      () => webhookServes(admin, ADDON_NAMESPACE),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
  } catch (e) {
    await server?.stop();
    await volume?.stop();
    kube.close();
    throw e;
  }
  const [s, v] = [server, volume];
  return {
    server: s,
    secret,
    volume: v,
    async stop() {
      await s.stop();
      await v.stop();
      kube.close();
    },
  };
}
