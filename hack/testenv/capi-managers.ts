// CAPI's three managers (core, kubeadm bootstrap, kubeadm control plane) as local processes against
// the test apiserver, each with its own webhook port, wired into the apiserver before it starts.
import path from 'node:path';
import { CAPI_RELEASES, type BuiltRelease } from './capi-releases.js';
import { installCrds, readCrds } from './crds.js';
import { httpGet, type KubeClient } from './kube-client.js';
import { waitFor } from './wait.js';
import { freePorts } from './ports.js';
import { launchWithRetry, ManagedProcess } from './process.js';
import {
  TESTENV_LABEL,
  webhookConfigurationPath,
  webhookConfigurations,
  wireCrd,
  type WebhookTarget,
} from './webhooks-wiring.js';

type Json = Record<string, any>;

export interface CapiProvider {
  /** Component name: the binary's name and the log file's base name. */
  component: 'capi-core' | 'capi-kubeadm-bootstrap' | 'capi-kubeadm-control-plane';
  namePrefix: string;
  crdGroups: string[];
  crdLabels: Record<string, string>;
  /**
   * A v1beta1 object to create with dryRun=All: the apiserver converts it to the stored v1beta2 (the
   * conversion webhook), runs the v1beta2 admission webhooks, and converts the answer back to v1beta1.
   */
  probe: {
    collection: string;
    object: Json;
    /**
     * A validating webhook of the provider whose denial also counts as an answer (the object is valid only
     * with a feature gate on). A denial still proves conversion (v1beta1 to v1beta2 happens first) and
     * admission answered.
     */
    deniedBy?: string;
  };
}

const PROBE_NAME = 'testenv-webhook-probe';

/** The three providers of a release; the kubeadm ones carry the release's contract labels. */
export function capiProviders(built: BuiltRelease): CapiProvider[] {
  const contract = CAPI_RELEASES[built.release].kubeadmContractLabels;
  return PROVIDERS.map((p) => (p.component === 'capi-core' ? p : { ...p, crdLabels: { ...p.crdLabels, ...contract } }));
}

// Probes go through v1beta1, which every release serves (v1.10 stores it; v1.11+ converts it).
const PROVIDERS: CapiProvider[] = [
  {
    component: 'capi-core',
    namePrefix: 'capi-',
    crdGroups: ['cluster.x-k8s.io', 'addons.cluster.x-k8s.io', 'ipam.cluster.x-k8s.io', 'runtime.cluster.x-k8s.io'],
    crdLabels: { 'cluster.x-k8s.io/provider': 'cluster-api' },
    probe: {
      collection: '/apis/cluster.x-k8s.io/v1beta1/namespaces/default/clusters',
      // A Cluster needs a ref; converting it back to v1beta1 also reads the KCP CRD's contract label.
      object: {
        apiVersion: 'cluster.x-k8s.io/v1beta1',
        kind: 'Cluster',
        metadata: { name: PROBE_NAME },
        spec: {
          controlPlaneRef: {
            apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
            kind: 'KubeadmControlPlane',
            name: PROBE_NAME,
          },
        },
      },
    },
  },
  {
    component: 'capi-kubeadm-bootstrap',
    namePrefix: 'capi-kubeadm-bootstrap-',
    crdGroups: ['bootstrap.cluster.x-k8s.io'],
    crdLabels: { 'cluster.x-k8s.io/provider': 'bootstrap-kubeadm' },
    probe: {
      collection: '/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/default/kubeadmconfigs',
      object: {
        apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta1',
        kind: 'KubeadmConfig',
        metadata: { name: PROBE_NAME },
        spec: {},
      },
    },
  },
  {
    component: 'capi-kubeadm-control-plane',
    namePrefix: 'capi-kubeadm-control-plane-',
    crdGroups: ['controlplane.cluster.x-k8s.io'],
    crdLabels: { 'cluster.x-k8s.io/provider': 'control-plane-kubeadm' },
    probe: {
      collection: '/apis/controlplane.cluster.x-k8s.io/v1beta1/namespaces/default/kubeadmcontrolplanetemplates',
      object: {
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
        kind: 'KubeadmControlPlaneTemplate',
        metadata: { name: PROBE_NAME },
        spec: { template: { spec: { kubeadmConfigSpec: {} } } },
      },
      // Templates need the ClusterTopology feature gate (on here, MANAGER_FEATURE_GATES; denied when a caller
      // turns it off); a KCP would need an infrastructure CRD.
      deniedBy: 'validation.kubeadmcontrolplanetemplate.controlplane.cluster.x-k8s.io',
    },
  },
];

export function webhookTarget(provider: CapiProvider, port: number, built: BuiltRelease): WebhookTarget {
  const dir = built.providerDirs[provider.component];
  if (!dir) throw new Error(`${built.version}: no provider folder for ${provider.component} in release.json`);
  return {
    component: provider.component,
    port,
    crdGroups: provider.crdGroups,
    manifestsFile: path.join(dir, 'config', 'webhook', 'manifests.yaml'),
    namePrefix: provider.namePrefix,
    crdLabels: provider.crdLabels,
  };
}

/** Installs (or re-points) a provider's CRDs and webhook configurations at the given webhook port. */
export async function wireProvider(
  rest: KubeClient,
  target: WebhookTarget,
  crds: Json[],
  caBundleB64: string,
): Promise<void> {
  const own = crds.filter((c) => target.crdGroups.includes(c.spec?.group));
  await Promise.all(
    own.map((crd) =>
      rest.createOrReplace(
        '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
        wireCrd(crd, [target], caBundleB64),
      ),
    ),
  );
  for (const cfg of webhookConfigurations(target, caBundleB64)) {
    await rest.createOrReplace(webhookConfigurationPath(cfg.kind), cfg);
  }
}

export interface CapiManager {
  provider: CapiProvider;
  proc: ManagedProcess;
  webhookPort: number;
  healthPort: number;
  /** http://127.0.0.1:<healthPort>; /healthz and /readyz answer there. */
  healthUrl: string;
}

export interface ManagerStartOptions {
  binDir: string;
  runDir: string;
  kubeconfigPath: string;
  webhookCertDir: string;
  rest: KubeClient;
  /** The webhook port the provider was wired to before start (see wireProvider). */
  webhookPort: number;
  /** To re-wire at a new port when the first one was taken meanwhile. */
  rewire: (port: number) => Promise<void>;
  extraFlags?: string[];
  log: (line: string) => void;
  timeoutMs?: number;
  onStart?: (proc: ManagedProcess) => void;
}

function managerArgs(o: ManagerStartOptions, webhookPort: number, healthPort: number): string[] {
  return [
    `--kubeconfig=${o.kubeconfigPath}`,
    '--leader-elect=false',
    `--health-addr=127.0.0.1:${healthPort}`,
    // "0" turns the diagnostics (metrics, pprof) server off; nothing in the tests reads it.
    '--diagnostics-address=0',
    `--webhook-port=${webhookPort}`,
    `--webhook-cert-dir=${o.webhookCertDir}`,
    ...(o.extraFlags ?? []),
  ];
}

/** Dry-run create through v1beta1: succeeds only when conversion and admission webhooks answer. */
export async function probeWebhooks(rest: KubeClient, provider: CapiProvider): Promise<void> {
  const res = await rest.send('POST', `${provider.probe.collection}?dryRun=All`, provider.probe.object);
  if (
    provider.probe.deniedBy &&
    res.body.includes(`admission webhook \\"${provider.probe.deniedBy}\\" denied the request`)
  )
    return;
  if (res.status !== 201 && res.status !== 200)
    throw new Error(`dry-run create: ${res.status} ${res.body.slice(0, 400)}`);
  const back = JSON.parse(res.body) as Json;
  if (back.apiVersion !== provider.probe.object.apiVersion)
    throw new Error(`dry-run create answered as ${back.apiVersion}`);
}

/** Starts one manager and waits until its /readyz is OK and its webhooks answer through the apiserver. */
export async function startCapiManager(provider: CapiProvider, o: ManagerStartOptions): Promise<CapiManager> {
  let attempt = 0;
  return launchWithRetry(provider.component, o.log, async () => {
    attempt++;
    let webhookPort = o.webhookPort;
    let healthPort: number;
    if (attempt === 1) {
      [healthPort] = (await freePorts(1)) as [number];
    } else {
      [webhookPort, healthPort] = (await freePorts(2)) as [number, number];
      await o.rewire(webhookPort);
    }
    const proc = ManagedProcess.start({
      name: provider.component,
      command: path.join(o.binDir, provider.component),
      args: managerArgs(o, webhookPort, healthPort),
      logFile: path.join(o.runDir, `${provider.component}.log`),
    });
    o.onStart?.(proc);
    const healthUrl = `http://127.0.0.1:${healthPort}`;
    const wait = async (): Promise<CapiManager> => {
      const timeoutMs = o.timeoutMs ?? 40_000;
      const abort = () => (proc.running ? undefined : `${provider.component} ${proc.describeExit()}`);
      await waitFor(
        `${provider.component} /readyz`,
        async () => (await httpGet(`${healthUrl}/readyz`)).status === 200,
        { timeoutMs, abort, intervalMs: 200 },
      );
      await waitFor(`${provider.component} webhooks`, async () => (await probeWebhooks(o.rest, provider), true), {
        timeoutMs: 20_000,
        abort,
        intervalMs: 200,
      });
      return { provider, proc, webhookPort, healthPort, healthUrl };
    };
    return { proc, wait };
  });
}

export interface CapiStartOptions {
  built: BuiltRelease;
  binDir: string;
  runDir: string;
  kubeconfigPath: string;
  webhookCertDir: string;
  caCertPem: string;
  rest: KubeClient;
  log: (line: string) => void;
  /** Flags per manager (feature gates, then the caller's). */
  flags: (component: CapiProvider['component']) => string[];
  onStart: (proc: ManagedProcess) => void;
  /** Runs a named start-up step (its failure carries the tail of the component's log). */
  step: <T>(component: string, what: string, fn: () => Promise<T>) => Promise<T>;
}

/**
 * A release's CRDs (conversion webhooks wired to its managers) and webhook configurations applied, replacing a
 * release's that ran before (configurations it no longer has are deleted), then its three managers started in
 * parallel into `started`; throws when one did not start (those that did are in `started`, and every process was
 * given to onStart, so the caller stops them).
 */
export async function startCapi(o: CapiStartOptions, started: CapiManager[]): Promise<void> {
  const { built, rest } = o;
  const caB64 = Buffer.from(o.caCertPem).toString('base64');
  const providers = capiProviders(built);
  const webhookPorts = await freePorts(providers.length);
  const targets = providers.map((p, i) => webhookTarget(p, webhookPorts[i]!, built));
  const rawCrds = readCrds(path.join(o.binDir, 'crds'));
  await o.step(
    'kube-apiserver',
    `CAPI ${built.version} CRDs (${rawCrds.length}) and webhook configurations`,
    async () => {
      await installCrds(
        rest,
        rawCrds.map((c) => wireCrd(c, targets, caB64)),
      );
      const wanted = new Set<string>();
      for (const t of targets)
        for (const cfg of webhookConfigurations(t, caB64)) {
          wanted.add(`${cfg.kind}/${cfg.metadata.name}`);
          await rest.createOrReplace(webhookConfigurationPath(cfg.kind), cfg);
        }
      for (const kind of ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration']) {
        const left = await rest.list(webhookConfigurationPath(kind), `${TESTENV_LABEL}=true`);
        for (const cfg of left.items)
          if (!wanted.has(`${kind}/${cfg.metadata.name}`))
            await rest.send('DELETE', `${webhookConfigurationPath(kind)}/${cfg.metadata.name}`);
      }
    },
  );
  const results = await Promise.allSettled(
    providers.map((provider, i) =>
      o.step(provider.component, provider.component, () =>
        startCapiManager(provider, {
          binDir: o.binDir,
          runDir: o.runDir,
          kubeconfigPath: o.kubeconfigPath,
          webhookCertDir: o.webhookCertDir,
          rest,
          log: o.log,
          webhookPort: webhookPorts[i]!,
          rewire: (port) => wireProvider(rest, { ...targets[i]!, port }, rawCrds, caB64),
          extraFlags: o.flags(provider.component),
          onStart: o.onStart,
        }),
      ),
    ),
  );
  for (const r of results) if (r.status === 'fulfilled') started.push(r.value);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
