// A Runtime Extension that holds topology upgrades (test-only): what an operator's upgrade orchestration does with
// CAPI's BeforeClusterUpgrade lifecycle hook (a maintenance window, a pre-upgrade backup). It serves the Runtime
// SDK's discovery and the hook over HTTPS with a certificate of the test CA, and is registered with an
// ExtensionConfig (runtime.cluster.x-k8s.io/v1alpha1, served by v1.10 and v1.14) for one namespace. While it holds,
// the topology controller does not propagate a new `spec.topology.version` to the control plane; release() lets it.
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { issueServingCert } from '../../hack/testenv/certs.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import type { TestEnv } from './testenv.js';

const HOOKS = 'hooks.runtime.cluster.x-k8s.io/v1alpha1';
const EXTENSION_CONFIGS = '/apis/runtime.cluster.x-k8s.io/v1alpha1/extensionconfigs';
const HANDLER = 'hold-upgrade';

export interface UpgradeHold {
  /** BeforeClusterUpgrade calls answered so far (the Cluster's name and the versions asked). */
  readonly calls: { cluster: string; from?: string; to?: string; held: boolean }[];
  release(): void;
  stop(): Promise<void>;
}

export async function startUpgradeHold(
  env: TestEnv,
  kube: KubeClient,
  namespace: string,
  retryAfterSeconds = 5,
): Promise<UpgradeHold> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-upgrade-hold-'));
  const pair = await issueServingCert(env.caCertFile, env.caKeyFile, dir);
  let holding = true;
  const calls: UpgradeHold['calls'] = [];
  const answer = (res: import('node:http').ServerResponse, body: Json) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const server = https.createServer(
    { cert: fs.readFileSync(pair.certFile), key: fs.readFileSync(pair.keyFile) },
    (req, res) => {
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => {
        const url = (req.url ?? '').split('?')[0]!;
        if (url.endsWith('/discovery')) {
          return answer(res, {
            apiVersion: HOOKS,
            kind: 'DiscoveryResponse',
            status: 'Success',
            handlers: [
              {
                name: HANDLER,
                requestHook: { apiVersion: HOOKS, hook: 'BeforeClusterUpgrade' },
                timeoutSeconds: 10,
                failurePolicy: 'Fail',
              },
            ],
          });
        }
        if (url.includes('/beforeclusterupgrade/')) {
          const body = (text ? JSON.parse(text) : {}) as Json;
          calls.push({
            cluster: body.cluster?.metadata?.name,
            from: body.fromKubernetesVersion,
            to: body.toKubernetesVersion,
            held: holding,
          });
          return answer(res, {
            apiVersion: HOOKS,
            kind: 'BeforeClusterUpgradeResponse',
            status: 'Success',
            message: holding ? 'held by the test: waiting for the maintenance window' : '',
            retryAfterSeconds: holding ? retryAfterSeconds : 0,
          });
        }
        res.writeHead(404);
        res.end();
      });
    },
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const name = `jg-upgrade-hold-${namespace}`.slice(0, 63);
  await kube.create(EXTENSION_CONFIGS, {
    apiVersion: 'runtime.cluster.x-k8s.io/v1alpha1',
    kind: 'ExtensionConfig',
    metadata: { name },
    spec: {
      clientConfig: { url: `https://127.0.0.1:${port}`, caBundle: Buffer.from(env.caCertPem).toString('base64') },
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
    },
  });
  return {
    calls,
    release: () => {
      holding = false;
    },
    async stop() {
      await kube.delete(`${EXTENSION_CONFIGS}/${name}`).catch(() => false);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until CAPI discovered the extension's handler (ExtensionConfig status.handlers). */
export async function extensionDiscovered(kube: KubeClient, namespace: string): Promise<boolean> {
  const ec = await kube.get(`${EXTENSION_CONFIGS}/${`jg-upgrade-hold-${namespace}`.slice(0, 63)}`);
  return ((ec?.status?.handlers ?? []) as Json[]).some((h) => String(h.name).startsWith(HANDLER));
}
