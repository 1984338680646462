// cert-manager's controller, webhook and cainjector (built by hack/testenv/cert-manager/build.sh) as local
// processes against a test control plane, for the specs that install the add-on as a user would. Started on
// demand (startCertManager), never by startTestEnv: the specs that do not install the add-on do not pay for it.
//
// What a real install has, and what stands in for the pod network here:
//   - cert-manager's CRDs (the module's deploy/crds), its Namespace `cert-manager`, and its chart's webhook
//     configurations (rendered from the chart at build time) with the chart's `inject-ca-from-secret` annotation;
//   - its webhook serves a certificate from its own CA (the chart's --dynamic-serving-* flags), and cainjector
//     injects that CA into the webhook configurations, as in a cluster;
//   - the chart's `cert-manager-webhook` Service becomes an ExternalName Service for 127.0.0.1, and the webhook
//     configurations name the webhook's port: the apiserver resolves the Service to 127.0.0.1 and verifies the
//     certificate for `cert-manager-webhook.cert-manager.svc`, as it would through kube-proxy.
// Every process binds 127.0.0.1, runs as the admin user (cert-manager's RBAC is not under test), without
// leader election (one replica each), and is stopped by stop() (or by the exit hook and a watchdog of its own).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { startWatchdog, track, untrack, writePgids } from './cleanup.js';
import { installCrds, readCrds } from './crds.js';
import { httpGet, isConflict, type KubeClient } from './kube-client.js';
import { freePorts } from './ports.js';
import { launchWithRetry, ManagedProcess } from './process.js';
import { waitFor } from './wait.js';
import { webhookConfigurationPath } from './webhooks-wiring.js';

type Json = Record<string, any>;

export const CERT_MANAGER_NAMESPACE = 'cert-manager';
/** The chart's names (release `cert-manager`). */
const WEBHOOK_SERVICE = 'cert-manager-webhook';
const WEBHOOK_CA_SECRET = 'cert-manager-webhook-ca';
/** The webhook's name in the chart's configurations: a denial by it proves the apiserver called it. */
export const CERT_MANAGER_WEBHOOK = 'webhook.cert-manager.io';

export type CertManagerComponent = 'cert-manager-controller' | 'cert-manager-webhook' | 'cert-manager-cainjector';

const here = path.dirname(fileURLToPath(import.meta.url));
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/** Runs hack/testenv/cert-manager/build.sh (a no-op when built) and returns the bin folder it prints last. */
export function ensureCertManagerBuilt(log: (line: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      '/bin/bash',
      [path.join(here, 'cert-manager', 'build.sh')],
      { maxBuffer: 16 << 20 },
      (err, stdout) => {
        if (err) return reject(new Error(`hack/testenv/cert-manager/build.sh failed: ${err.message}`));
        const bin = stdout.trim().split('\n').at(-1) ?? '';
        if (!fs.existsSync(path.join(bin, 'cert-manager.json')))
          return reject(new Error(`cert-manager/build.sh printed no bin folder (got "${bin}")`));
        resolve(bin);
      },
    );
    let partial = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line && !line.endsWith(': cached')) log(line);
    });
  });
}

export interface CertManagerOptions {
  kubeconfigPath: string;
  /** Logs go to <runDir>/cert-manager-*.log. */
  runDir: string;
  /** Admin client of the control plane. */
  rest: KubeClient;
  /** Folder of the binaries, crds/ and webhook.yaml; default JOINGUARD_CERT_MANAGER_BIN, else build.sh's output. */
  binDir?: string;
  log?: (line: string) => void;
  /** Per component, to be ready (default 60 s: three Go processes start at once on two shared cores). */
  timeoutMs?: number;
}

export interface CertManager {
  version: string;
  binDir: string;
  webhookPort: number;
  /** Component -> pid. */
  pids: Record<CertManagerComponent, number>;
  /** Component -> its log file. */
  logs: Record<CertManagerComponent, string>;
  /** Resident memory now and at its peak (KiB), per component. */
  memory(): Record<CertManagerComponent, { rssKiB: number; hwmKiB: number }>;
  /** Stops the three processes and removes cert-manager's webhook configurations. Idempotent. */
  stop(): Promise<void>;
}

/** The chart's webhook Service and configurations (webhook.yaml, rendered by build.sh), wired to 127.0.0.1:port. */
export function wiredWebhookObjects(binDir: string, port: number): { service: Json; configurations: Json[] } {
  const docs = parseAllDocuments(fs.readFileSync(path.join(binDir, 'webhook.yaml'), 'utf8'))
    .map((d) => d.toJS() as Json | null)
    .filter((d): d is Json => !!d);
  const chartService = docs.find((d) => d.kind === 'Service' && d.metadata.name === WEBHOOK_SERVICE);
  const configurations = docs.filter((d) => d.kind.endsWith('WebhookConfiguration'));
  if (!chartService || configurations.length !== 2)
    throw new Error(`${binDir}/webhook.yaml: expected the ${WEBHOOK_SERVICE} Service and two webhook configurations`);
  // The Service keeps the chart's name, labels and ports; only its type and target change (no pod network here).
  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: chartService.metadata,
    spec: { type: 'ExternalName', externalName: '127.0.0.1', ports: chartService.spec.ports },
  };
  for (const c of configurations)
    for (const w of c.webhooks as Json[]) w.clientConfig.service = { ...w.clientConfig.service, port };
  return { service, configurations };
}

/** A dry-run create the validating webhook must refuse (an Issuer of no type): denied once the apiserver calls it. */
async function probeWebhook(rest: KubeClient): Promise<{ denied: boolean; seen: string }> {
  const res = await rest.send(
    'POST',
    `/apis/cert-manager.io/v1/namespaces/${CERT_MANAGER_NAMESPACE}/issuers?dryRun=All`,
    { apiVersion: 'cert-manager.io/v1', kind: 'Issuer', metadata: { name: 'testenv-webhook-probe' }, spec: {} },
  );
  return {
    // cert-manager's webhook refuses with 403 Forbidden.
    denied:
      res.status === 403 && res.body.includes(`admission webhook \\"${CERT_MANAGER_WEBHOOK}\\" denied the request`),
    seen: `dry-run Issuer: ${res.status} ${res.body.slice(0, 400)}`,
  };
}

async function wire(rest: KubeClient, binDir: string, port: number): Promise<void> {
  const { service, configurations } = wiredWebhookObjects(binDir, port);
  const services = `/api/v1/namespaces/${CERT_MANAGER_NAMESPACE}/services`;
  // A Service does not change type in place cleanly (its cluster IP); a left-over one is replaced whole.
  await rest.delete(`${services}/${WEBHOOK_SERVICE}`);
  await rest.create(services, service);
  for (const c of configurations) await rest.createOrReplace(webhookConfigurationPath(c.kind), c);
}

interface Spec {
  component: CertManagerComponent;
  args: (ports: { serve: number; health: number }) => string[];
  /** Path of the readiness endpoint on the health port. */
  ready: string;
}

export async function startCertManager(o: CertManagerOptions): Promise<CertManager> {
  const log = o.log ?? (() => undefined);
  const t0 = Date.now();
  const binDir = o.binDir ?? process.env.JOINGUARD_CERT_MANAGER_BIN ?? (await ensureCertManagerBuilt(log));
  const { version } = JSON.parse(fs.readFileSync(path.join(binDir, 'cert-manager.json'), 'utf8')) as Json;
  const procs: ManagedProcess[] = [];
  const pgidFile = path.join(o.runDir, 'cert-manager-pgids');
  writePgids(pgidFile, []);
  const watchdog = startWatchdog(pgidFile, [], path.join(o.runDir, 'cert-manager-watchdog.log'));
  const remember = (p: ManagedProcess) => {
    procs.push(p);
    writePgids(
      pgidFile,
      procs.filter((x) => x.running).map((x) => x.pid),
    );
  };
  let webhookConfigs: Json[] = [];
  let stopping: Promise<void> | undefined;
  const handle = {
    stop: () =>
      (stopping ??= (async () => {
        const keepAlive = setInterval(() => undefined, 1000);
        try {
          watchdog.killNow();
          await watchdog.exited;
          const s = Date.now();
          await Promise.all(procs.map((p) => p.stop(5000)));
          // failurePolicy Fail: left behind, they would refuse every later cert-manager.io write on this apiserver.
          for (const c of webhookConfigs)
            await o.rest.delete(`${webhookConfigurationPath(c.kind)}/${c.metadata.name}`).catch(() => undefined);
          log(`[cert-manager] stopped in ${seconds(Date.now() - s)}`);
        } finally {
          clearInterval(keepAlive);
          untrack(handle);
        }
      })()),
    killNow: () => {
      watchdog.killNow();
      for (const p of procs) p.killNow();
    },
  };
  track(handle);

  try {
    const crds = readCrds(path.join(binDir, 'crds'));
    await installCrds(o.rest, crds);
    await o.rest
      .create('/api/v1/namespaces', { metadata: { name: CERT_MANAGER_NAMESPACE } })
      .catch((e) => (isConflict(e) ? undefined : Promise.reject(e)));
    const kubeconfig = `--kubeconfig=${o.kubeconfigPath}`;
    const specs: Spec[] = [
      {
        // The chart's webhook arguments; its CA Secret and serving names are the chart's.
        component: 'cert-manager-webhook',
        args: ({ serve, health }) => [
          kubeconfig,
          '--v=2',
          '--bind-address=127.0.0.1',
          `--secure-port=${serve}`,
          `--healthz-port=${health}`,
          `--dynamic-serving-ca-secret-namespace=${CERT_MANAGER_NAMESPACE}`,
          `--dynamic-serving-ca-secret-name=${WEBHOOK_CA_SECRET}`,
          `--dynamic-serving-dns-names=${WEBHOOK_SERVICE},${WEBHOOK_SERVICE}.${CERT_MANAGER_NAMESPACE},${WEBHOOK_SERVICE}.${CERT_MANAGER_NAMESPACE}.svc`,
        ],
        ready: '/readyz',
      },
      {
        component: 'cert-manager-cainjector',
        args: ({ health }) => [
          kubeconfig,
          '--v=2',
          '--leader-elect=false',
          `--health-probe-bind-address=127.0.0.1:${health}`,
        ],
        ready: '/readyz',
      },
      {
        component: 'cert-manager-controller',
        args: ({ health }) => [
          kubeconfig,
          '--v=2',
          `--cluster-resource-namespace=${CERT_MANAGER_NAMESPACE}`,
          `--healthz-listen-address=127.0.0.1:${health}`,
        ],
        ready: '/livez',
      },
    ];
    let webhookPort = 0;
    for (const spec of specs) {
      const s = Date.now();
      await launchWithRetry(spec.component, log, async () => {
        const [serve, health] = (await freePorts(2)) as [number, number];
        if (spec.component === 'cert-manager-webhook') {
          webhookPort = serve;
          await wire(o.rest, binDir, serve);
          webhookConfigs = wiredWebhookObjects(binDir, serve).configurations;
        }
        const proc = ManagedProcess.start({
          name: spec.component,
          command: path.join(binDir, spec.component),
          args: spec.args({ serve, health }),
          logFile: path.join(o.runDir, `${spec.component}.log`),
        });
        remember(proc);
        const wait = async () => {
          await waitFor(
            `${spec.component} ${spec.ready}`,
            async () => (await httpGet(`http://127.0.0.1:${health}${spec.ready}`)).status === 200,
            {
              timeoutMs: o.timeoutMs ?? 60_000,
              intervalMs: 200,
              abort: () => (proc.running ? undefined : `${spec.component} ${proc.describeExit()}`),
            },
          );
        };
        return { proc, wait };
      });
      log(`[cert-manager] ${spec.component} ready in ${seconds(Date.now() - s)}`);
    }
    // The end-to-end check: cainjector has put the webhook's CA into the configurations, and the apiserver
    // reaches the webhook through the Service and trusts it.
    let seen = '';
    await waitFor(
      `${CERT_MANAGER_WEBHOOK} called by the apiserver (CA injected by cainjector)`,
      async () => {
        const probe = await probeWebhook(o.rest);
        seen = probe.seen;
        return probe.denied;
      },
      { timeoutMs: o.timeoutMs ?? 60_000, intervalMs: 250, describe: () => seen },
    );
    log(`[cert-manager] ${version} ready in ${seconds(Date.now() - t0)} (webhook on 127.0.0.1:${webhookPort})`);
    const byName = (c: CertManagerComponent) => procs.filter((p) => p.name === c).at(-1)!;
    const components: CertManagerComponent[] = [
      'cert-manager-controller',
      'cert-manager-webhook',
      'cert-manager-cainjector',
    ];
    return {
      version,
      binDir,
      webhookPort,
      pids: Object.fromEntries(components.map((c) => [c, byName(c).pid])) as Record<CertManagerComponent, number>,
      logs: Object.fromEntries(components.map((c) => [c, byName(c).logFile])) as Record<CertManagerComponent, string>,
      memory: () =>
        Object.fromEntries(components.map((c) => [c, byName(c).memory()])) as ReturnType<CertManager['memory']>,
      stop: handle.stop,
    };
  } catch (err) {
    await handle.stop();
    throw err;
  }
}
