// What the lifecycle specs share: a private test control plane made clusterctl-ready, with real cert-manager
// running on it and JoinGuard installed by `clusterctl init`, a workload Cluster of stand-in providers whose Machines never get a Node,
// a MachineJoinCheck on them, and JoinGuard run in this process against that control plane.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import winston from 'winston';
import type { KubeConfig } from '@kubernetes/client-node';
import { startTestEnv } from '../../hack/testenv/testenv.js';
import { startCertManager, type CertManager } from '../../hack/testenv/cert-manager.js';
import { waitFor } from '../../hack/testenv/wait.js';
import { startController } from '../../controllers/manager.js';
import { clusterAccessFromKubeconfig } from '../../runtime/client/kubeconfig.js';
import { raw } from '../install/install-env.js';
import {
  createMachineSet,
  createReadyCluster,
  machinesOf,
  provisionInfrastructure,
} from '../install/stand-in-providers.js';
import { clusterctl, prepareManagementCluster, type Repository } from './clusterctl-env.js';
import { serveAddonWebhook, type AddonWebhook } from './addon-webhook.js';
import type { TestEnv } from '../support/testenv.js';
import type { RunningController } from '../../controllers/options.js';

export type Json = Record<string, any>;
export const CAPI = '/apis/cluster.x-k8s.io/v1beta2';
export const MJC = '/apis/joinguard.io/v1alpha1';

/** Polls every half second until `probe` gives a value (a probe that throws is tried again). */
export const until = <T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> =>
  waitFor(what, probe, { timeoutMs, intervalMs: 500 });

export async function getJson(kc: KubeConfig, path: string): Promise<Json | undefined> {
  const res = await raw(kc, 'GET', path);
  if (res.status === 404) return undefined;
  if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.body.slice(0, 300)}`);
  return JSON.parse(res.body) as Json;
}

export const condition = (o: Json | undefined, type: string): Json | undefined =>
  (o?.status?.conditions ?? []).find((c: Json) => c.type === type);

/** One management cluster of a lifecycle spec. */
export interface ManagementCluster {
  name: string;
  env: TestEnv;
  admin: KubeConfig;
  dir: string;
  certManager: CertManager;
  /** The add-on's webhook, served with cert-manager's certificate (initAddon; serveWebhook again after an upgrade). */
  webhook?: AddonWebhook;
  joinguard?: RunningController;
  /** Serves the webhook clusterctl installed (stopping the one served before), as a new pod of the add-on would. */
  serveWebhook(): Promise<AddonWebhook>;
  /** Starts JoinGuard against this control plane (stopped by stop() or stopJoinGuard()). */
  startJoinGuard(): Promise<RunningController>;
  stopJoinGuard(): Promise<void>;
  stop(): Promise<void>;
}

export async function startManagementCluster(name: string, log: (line: string) => void): Promise<ManagementCluster> {
  const env = await startTestEnv({ log: (l) => log(`[${name}] ${l}`) });
  const kube = env.kube();
  let certManager: CertManager;
  try {
    // Before clusterctl: `clusterctl init` checks cert-manager by creating its test Issuer and Certificate, and
    // would try to download and install it if that failed.
    certManager = await startCertManager({
      kubeconfigPath: env.kubeconfigPath,
      runDir: env.runDir,
      rest: kube,
      log: (l) => log(`[${name}] ${l}`),
    });
    await prepareManagementCluster(env.kubeConfig());
  } catch (e) {
    kube.close();
    await env.stop();
    throw e;
  }
  const dir = await mkdtemp(join(tmpdir(), `joinguard-${name}-`));
  const admin = env.kubeConfig();
  const mc: ManagementCluster = {
    name,
    env,
    admin,
    dir,
    certManager,
    async serveWebhook() {
      await mc.webhook?.stop();
      mc.webhook = undefined;
      mc.webhook = await serveAddonWebhook(env, admin, dir);
      return mc.webhook;
    },
    async startJoinGuard() {
      await mc.stopJoinGuard();
      mc.joinguard = await startController({
        access: clusterAccessFromKubeconfig(admin.exportConfig()),
        leaderElect: false,
        // The Cluster connected moments ago; verdicts wait this long after a (re)connection (default 2m).
        connectionGraceMs: 2_000,
        metricsBindAddress: '127.0.0.1:0',
        healthProbeBindAddress: '127.0.0.1:0',
        collectDefaultMetrics: false,
        logger: winston.createLogger({
          level: 'warn',
          transports: [new winston.transports.Console({ format: winston.format.simple() })],
        }),
      });
      await mc.joinguard.ready();
      return mc.joinguard;
    },
    async stopJoinGuard() {
      await mc.joinguard?.stop();
      mc.joinguard = undefined;
    },
    async stop() {
      await mc.stopJoinGuard();
      await mc.webhook?.stop();
      await certManager.stop();
      kube.close();
      await env.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
  return mc;
}

/** `clusterctl init --addon joinguard:v<version>`, then its webhook served with cert-manager's certificate. */
export async function initAddon(mc: ManagementCluster, repo: Repository, version: string): Promise<string> {
  const out = await clusterctl(repo, [
    'init',
    '--kubeconfig',
    mc.env.kubeconfigPath,
    '--addon',
    `joinguard:v${version}`,
  ]);
  await mc.serveWebhook();
  return `${out.stdout}${out.stderr}`;
}

export interface Fleet {
  namespace: string;
  cluster: string;
  pool: string;
  check: string;
}

/** A ready Cluster (its workload cluster is the same apiserver), a MachineSet of `replicas` and a check. */
export async function createFleet(mc: ManagementCluster, f: Fleet, replicas: number, checkSpec: Json): Promise<void> {
  const admin = mc.admin;
  const ns = await raw(admin, 'POST', '/api/v1/namespaces', { metadata: { name: f.namespace } });
  if (ns.status !== 201) throw new Error(`namespace ${f.namespace}: ${ns.status}`);
  await createReadyCluster(admin, f.namespace, f.cluster, mc.env.server, mc.env.kubeconfigPath);
  await createMachineSet(admin, f.namespace, f.cluster, f.pool, replicas);
  await until('the Cluster to be observable (RemoteConnectionProbe=True)', 90_000, async () =>
    condition(await getJson(admin, `${CAPI}/namespaces/${f.namespace}/clusters/${f.cluster}`), 'RemoteConnectionProbe')
      ?.status === 'True'
      ? true
      : undefined,
  );
  const res = await raw(admin, 'POST', `${MJC}/namespaces/${f.namespace}/machinejoinchecks`, {
    apiVersion: 'joinguard.io/v1alpha1',
    kind: 'MachineJoinCheck',
    metadata: { name: f.check },
    spec: { clusterName: f.cluster, selector: { matchLabels: { pool: f.pool } }, ...checkSpec },
  });
  if (res.status !== 201) throw new Error(`MachineJoinCheck: ${res.status} ${res.body.slice(0, 400)}`);
}

/**
 * Plays the infrastructure provider for every Machine of the pool that has none yet: each comes up and never
 * gets a Node. Returns the Machines' uids provisioned so far.
 */
export function provisionEveryMachine(mc: ManagementCluster, f: Fleet): { stop(): void; provisioned: Set<string> } {
  const provisioned = new Set<string>();
  let stopped = false;
  const loop = async () => {
    while (!stopped) {
      try {
        for (const m of await machinesOf(mc.admin, f.namespace, f.pool)) {
          if (provisioned.has(m.metadata.uid) || m.metadata.deletionTimestamp || !m.spec?.infrastructureRef?.name)
            continue;
          const infra = await raw(
            mc.admin,
            'GET',
            `/apis/infrastructure.install.joinguard.io/v1alpha1/namespaces/${f.namespace}/installmachines/${m.spec.infrastructureRef.name}`,
          );
          if (infra.status !== 200) continue; // not created yet by the MachineSet
          await provisionInfrastructure(mc.admin, f.namespace, m);
          provisioned.add(m.metadata.uid);
        }
      } catch {
        // the control plane is being stopped, or a Machine went away between list and patch
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  void loop();
  return { stop: () => void (stopped = true), provisioned };
}

export async function checkOf(mc: ManagementCluster, f: Fleet): Promise<Json | undefined> {
  return getJson(mc.admin, `${MJC}/namespaces/${f.namespace}/machinejoinchecks/${f.check}`);
}

/**
 * What the infrastructure and control-plane providers of a real target would do after a move: report their
 * objects' state again (clusterctl creates them without status).
 */
export async function reportProviderState(mc: ManagementCluster, f: Fleet): Promise<void> {
  const at = (group: string, plural: string) =>
    `/apis/${group}/v1alpha1/namespaces/${f.namespace}/${plural}/${f.cluster}/status`;
  for (const [path, status] of [
    [at('infrastructure.install.joinguard.io', 'installclusters'), { initialization: { provisioned: true } }],
    [
      at('controlplane.install.joinguard.io', 'installcontrolplanes'),
      { initialization: { controlPlaneInitialized: true } },
    ],
  ] as const) {
    const res = await raw(mc.admin, 'PATCH', path, { status }, 'application/merge-patch+json');
    if (res.status !== 200) throw new Error(`PATCH ${path}: ${res.status} ${res.body.slice(0, 300)}`);
  }
}

export async function scaleMachineSet(mc: ManagementCluster, f: Fleet, replicas: number): Promise<void> {
  const res = await raw(
    mc.admin,
    'PATCH',
    `${CAPI}/namespaces/${f.namespace}/machinesets/${f.pool}`,
    { spec: { replicas } },
    'application/merge-patch+json',
  );
  if (res.status !== 200) throw new Error(`scale MachineSet: ${res.status} ${res.body.slice(0, 300)}`);
}
