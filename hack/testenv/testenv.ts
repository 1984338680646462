// The local test control plane: etcd, kube-apiserver and (by default) CAPI's three managers with their
// CRDs and webhooks, as plain processes on 127.0.0.1. startTestEnv starts it; TestEnv.stop ends it.
//
// The workload clusters of the tests are this same apiserver: a `<cluster>-kubeconfig` secret pointing
// at `server`, or a `<cluster>-ca` secret holding caCertPem/caKeyPem (KCP then generates the kubeconfig).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApiserver, writeKubeconfig, type Apiserver } from './apiserver.js';
import { startCapi, type CapiManager, type CapiStartOptions } from './capi-managers.js';
import { CAPI_RELEASES, DEFAULT_CAPI_RELEASE, readBuiltRelease, type CapiRelease } from './capi-releases.js';
import { makeCertSet } from './certs.js';
import { startWatchdog, track, untrack, writePgids } from './cleanup.js';
import { startEtcd, type Etcd } from './etcd.js';
import { KUBELET_ADDRESS_FLAGS, startSimKubelet, type SimKubelet } from './sim-kubelet.js';
import { KubeClient } from './kube-client.js';
import { ManagedProcess, tailFile } from './process.js';
import { attachedTestEnv, DESCRIPTOR_FILE, type TestEnvDescriptor } from './attach.js';

export type { TestEnv, TestEnvComponent } from './env-interface.js';
import type { TestEnv, TestEnvComponent } from './env-interface.js';

/**
 * Feature gates of CAPI's managers: the release's defaults, except ClusterTopology, which is on for core and KCP
 * as `clusterctl init` sets it with CLUSTER_TOPOLOGY=true (ClusterClass clusters need it; KCP reads it before it
 * refuses a remediation while a topology version upgrade is pending), and RuntimeSDK on core (EXP_RUNTIME_SDK=true:
 * lifecycle hooks such as BeforeClusterUpgrade; nothing changes until an ExtensionConfig exists). The releases'
 * manager.yaml ship both off.
 */
export const MANAGER_FEATURE_GATES: Partial<Record<string, string[]>> = {
  'capi-core': ['--feature-gates=ClusterTopology=true,RuntimeSDK=true'],
  'capi-kubeadm-control-plane': ['--feature-gates=ClusterTopology=true'],
};

export interface AuditOptions {
  /** The audit Policy (audit.k8s.io/v1) as YAML text. */
  policy: string;
  /** Where the log goes; default <runDir>/audit.log (removed with the run dir by stop()). */
  file?: string;
  /**
   * blocking (default): every request waits for its event to be written, so no event is ever dropped.
   * batch: buffered; the apiserver drops events silently when the buffer is full.
   */
  mode?: 'blocking' | 'batch';
}

export interface StartTestEnvOptions {
  /** Start CAPI's CRDs, webhooks and managers (default true). */
  capi?: boolean;
  /** Which CAPI release (default v1.14; v1.11-v1.13 store v1beta2 too, v1.10 v1beta1; hack/testenv/build.sh --capi). */
  capiRelease?: CapiRelease;
  /** Where logs, certs, kubeconfig and etcd data go; default a new temp dir, removed by stop(). */
  runDir?: string;
  log?: (line: string) => void;
  extraApiserverFlags?: string[];
  /** The apiserver's ServiceAccount admission plugin on (for a real node, hack/testenv/node.ts; default off). */
  serviceAccountAdmission?: boolean;
  /** Extra flags per manager, e.g. { 'capi-core': ['--machineset-preflight-checks=...'] }; after MANAGER_FEATURE_GATES (a later --feature-gates adds to them). */
  extraManagerFlags?: Partial<Record<string, string[]>>;
  /** Start sim-kubelet (the simulation's kubelet endpoint and etcd members; default true with capi). */
  simKubelet?: boolean;
  /** Folder with the binaries and crds/; default: the output of hack/testenv/build.sh (built if missing). */
  binDir?: string;
  /** An apiserver audit log with the caller's policy (off by default). */
  audit?: AuditOptions;
  /** etcd's data folder, owned by the caller (stop() leaves it); default <runDir>/etcd-data, removed by stop(). */
  etcdDataDir?: string;
  /** etcdDataDir holds a cleanly stopped member's data: started on it (etcd.ts `restored`). */
  etcdRestored?: boolean;
  /** Runs once the apiserver answers, before CAPI's managers start (e.g. to re-point restored objects). */
  beforeCapi?: (o: {
    rest: KubeClient;
    server: string;
    caCertPem: string;
    caCertFile: string;
    caKeyFile: string;
  }) => Promise<void>;
}

/** The apiserver flags of an audit log: JSON lines, never rotated (tests count one file). */
export function auditFlags(runDir: string, audit: AuditOptions): { flags: string[]; file: string } {
  const policyFile = path.join(runDir, 'audit-policy.yaml');
  fs.writeFileSync(policyFile, audit.policy);
  const file = audit.file ?? path.join(runDir, 'audit.log');
  return {
    file,
    flags: [
      `--audit-policy-file=${policyFile}`,
      `--audit-log-path=${file}`,
      `--audit-log-mode=${audit.mode ?? 'blocking'}`,
      // 0 would mean lumberjack's default of 100 MB, after which it rotates.
      '--audit-log-format=json',
      '--audit-log-maxsize=1000000',
    ],
  };
}

const here = path.dirname(fileURLToPath(import.meta.url));
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/** Runs hack/testenv/build.sh for a release (a no-op when built) and returns the bin folder it prints last. */
export function ensureBuilt(log: (line: string) => void, release: CapiRelease = DEFAULT_CAPI_RELEASE): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      '/bin/bash',
      [path.join(here, 'build.sh'), '--capi', release],
      { maxBuffer: 16 << 20 },
      (err, stdout) => {
        if (err) return reject(new Error(`hack/testenv/build.sh failed: ${err.message}`));
        const bin = stdout.trim().split('\n').at(-1) ?? '';
        if (!fs.existsSync(path.join(bin, 'kube-apiserver')))
          return reject(new Error(`build.sh printed no bin folder (got "${bin}")`));
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

export async function startTestEnv(opts: StartTestEnvOptions = {}): Promise<TestEnv> {
  const log = opts.log ?? (() => undefined);
  const withCapi = opts.capi ?? true;
  const release = opts.capiRelease ?? DEFAULT_CAPI_RELEASE;
  const t0 = Date.now();
  const ownRunDir = !opts.runDir;
  const runDir = opts.runDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-testenv-'));
  fs.mkdirSync(runDir, { recursive: true });
  const keep = process.env.JOINGUARD_TESTENV_KEEP === '1';
  const etcdDataDir = opts.etcdDataDir ?? path.join(runDir, 'etcd-data');
  const pgidFile = path.join(runDir, 'pgids');
  const ownData = (dirs: string[]) => (opts.etcdDataDir ? dirs.filter((d) => d !== etcdDataDir) : dirs);
  const removeOnStop = keep ? [] : ownRunDir ? [runDir] : ownData([etcdDataDir, path.join(runDir, 'pki')]);

  const procs: ManagedProcess[] = [];
  // Every started process, so that stop() and the watchdog know its process group even mid-start.
  const remember = (p: ManagedProcess) => {
    procs.push(p);
    writePgids(
      pgidFile,
      procs.filter((x) => x.running).map((x) => x.pid),
    );
  };
  writePgids(pgidFile, []);
  const watchdog = startWatchdog(pgidFile, removeOnStop, path.join(runDir, 'watchdog.log'));
  let etcd: Etcd | undefined;
  let api: Apiserver | undefined;
  const managers: CapiManager[] = [];
  let stopping: Promise<void> | undefined;
  // After a failed start the logs stay (the error names them); only data and keys go.
  let keepLogs = false;

  const stopAll = async () => {
    // Child processes are unref'd: without a timer of our own Node could exit in the middle of a stop,
    // and the exit hook (still tracking this env until the end) would have to SIGKILL the rest.
    const keepAlive = setInterval(() => undefined, 1000);
    try {
      await stopProcesses();
    } finally {
      clearInterval(keepAlive);
      untrack(handle);
    }
  };
  const stopProcesses = async () => {
    // The watchdog holds nothing; SIGKILL it so it cannot clean up behind our back.
    watchdog.killNow();
    await watchdog.exited;
    // Managers first (they would log errors about a vanished apiserver), then the apiserver, then etcd.
    const order = (p: ManagedProcess) => (p.name === 'etcd' ? 2 : p.name === 'kube-apiserver' ? 1 : 0);
    const s = Date.now();
    for (const rank of [0, 1, 2]) {
      const group = procs.filter((p) => order(p) === rank && p.running);
      const r = Date.now();
      await Promise.all(group.map((p) => p.stop(5000)));
      if (group.length) log(`[testenv] stopped ${group.map((p) => p.name).join(', ')} in ${seconds(Date.now() - r)}`);
    }
    log(`[testenv] stopped in ${seconds(Date.now() - s)}`);
    api?.rest.close();
    const dirs = keepLogs && ownRunDir ? ownData([etcdDataDir, path.join(runDir, 'pki')]) : removeOnStop;
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  };
  const handle = {
    stop: () => (stopping ??= stopAll()),
    killNow: () => {
      watchdog.killNow();
      for (const p of procs) p.killNow();
      for (const dir of removeOnStop) fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  track(handle);

  // Runs one start-up step; on failure the error carries the tail of that component's log.
  const step = async <T>(component: string, what: string, fn: () => Promise<T>): Promise<T> => {
    const s = Date.now();
    log(`[testenv] ${what} ...`);
    try {
      const out = await fn();
      log(`[testenv] ${what}: done in ${seconds(Date.now() - s)}`);
      return out;
    } catch (err) {
      const tail = component ? tailFile(path.join(runDir, `${component}.log`), 30) : '';
      const msg = `[testenv] ${what} FAILED after ${seconds(Date.now() - s)}: ${(err as Error).message}`;
      log(msg);
      if (tail) log(`[testenv] last lines of ${component}.log:\n${tail}`);
      throw new Error(tail ? `${msg}\n--- ${runDir}/${component}.log (tail) ---\n${tail}` : msg, { cause: err });
    }
  };

  try {
    const binDir =
      opts.binDir ??
      process.env.JOINGUARD_TESTENV_BIN ??
      (await step('', `binaries (hack/testenv/build.sh --capi ${release})`, () => ensureBuilt(log, release)));
    const built = readBuiltRelease(binDir);
    if (built.release !== release)
      throw new Error(`${binDir} holds CAPI ${built.release}, not the ${release} asked for`);
    const certs = await step('', 'certificates (openssl)', () => makeCertSet(path.join(runDir, 'pki')));
    etcd = await step('etcd', 'etcd', () =>
      startEtcd({ binDir, runDir, dataDir: etcdDataDir, log, onStart: remember, restored: opts.etcdRestored }),
    );
    const etcdUrl = etcd.clientUrl;
    const audit = opts.audit ? auditFlags(runDir, opts.audit) : undefined;
    const extraFlags = [...KUBELET_ADDRESS_FLAGS, ...(audit?.flags ?? []), ...(opts.extraApiserverFlags ?? [])];
    api = await step('kube-apiserver', 'kube-apiserver', () =>
      startApiserver({
        binDir,
        runDir,
        etcdUrl,
        certs,
        extraFlags,
        serviceAccountAdmission: opts.serviceAccountAdmission,
        log,
        onStart: remember,
      }),
    );
    const kubeconfigPath = path.join(runDir, 'kubeconfig');
    writeKubeconfig(kubeconfigPath, api.server, certs);
    const rest = api.rest;
    let simKubelet: SimKubelet | undefined;
    if (opts.simKubelet ?? withCapi) {
      simKubelet = await step('sim-kubelet', "sim-kubelet (the simulation's kubelets and etcd members)", () =>
        startSimKubelet({ binDir, runDir, kubeconfigPath, onStart: remember }),
      );
    }

    const capiOptions = (b: typeof built, dir: string, client = rest): CapiStartOptions => ({
      built: b,
      binDir: dir,
      runDir,
      kubeconfigPath,
      webhookCertDir: certs.webhookCertDir,
      caCertPem: certs.caCertPem,
      rest: client,
      log,
      flags: (c) => [...(MANAGER_FEATURE_GATES[c] ?? []), ...(opts.extraManagerFlags?.[c] ?? [])],
      onStart: remember,
      step,
    });
    if (opts.beforeCapi) {
      const o = { rest, server: api.server, caCertPem: certs.caCertPem, caCertFile: certs.ca.certFile };
      await step('', 'before CAPI (caller)', () => opts.beforeCapi!({ ...o, caKeyFile: certs.ca.keyFile }));
    }
    if (withCapi) await startCapi(capiOptions(built, binDir), managers);

    const ports: Record<string, number> = {
      'etcd-client': etcd.clientPort,
      'etcd-peer': etcd.peerPort,
      'kube-apiserver': api.port,
    };
    if (simKubelet) ports['sim-kubelet'] = simKubelet.port;
    const healthUrls: Record<string, string> = {};
    const managerPorts = () => {
      for (const m of managers) {
        ports[`${m.provider.component}-webhook`] = m.webhookPort;
        ports[`${m.provider.component}-health`] = m.healthPort;
        healthUrls[m.provider.component] = m.healthUrl;
      }
    };
    managerPorts();
    const apiserver = api;
    const running = () => [
      etcd!.proc,
      apiserver.proc,
      ...(simKubelet ? [simKubelet.proc] : []),
      ...managers.map((m) => m.proc),
    ];
    const descriptor: TestEnvDescriptor = {
      server: api.server,
      kubeconfigPath,
      runDir,
      caCertFile: certs.ca.certFile,
      caKeyFile: certs.ca.keyFile,
      components: running().map((p) => p.name),
      ports,
      healthUrls,
      binDir,
      capiRelease: release,
      capiVersion: built.version,
      capiApiVersion: CAPI_RELEASES[release].apiVersion,
      pids: Object.fromEntries(running().map((p) => [p.name, p.pid])),
      ownerPid: process.pid,
    };
    const writeDescriptor = () =>
      fs.writeFileSync(path.join(runDir, DESCRIPTOR_FILE), JSON.stringify(descriptor, null, 2));
    writeDescriptor();
    log(
      `[testenv] ready in ${seconds(Date.now() - t0)}: ${api.server}, CAPI ${built.version} (kubeconfig ${kubeconfigPath})`,
    );
    const env: TestEnv = {
      ...attachedTestEnv(descriptor, certs.caCertPem, certs.caKeyPem),
      owned: true,
      auditLog: audit?.file,
      stop: handle.stop,
      memory: () => memoryOf(running()),
      async restartApiserver(o = {}) {
        const s = Date.now();
        log(`[testenv] restarting kube-apiserver (down ${seconds(o.downMs ?? 0)}) ...`);
        await apiserver.restart(o.downMs ?? 0);
        env.pids['kube-apiserver'] = descriptor.pids['kube-apiserver'] = apiserver.proc.pid;
        writeDescriptor();
        log(`[testenv] kube-apiserver back in ${seconds(Date.now() - s)}`);
      },
      pause: async (component) => componentProc(running(), component).signal('SIGSTOP'),
      resume: async (component) => componentProc(running(), component).signal('SIGCONT'),
      // clusterctl upgrade apply, as far as a control plane of processes has it: the old managers go, the new
      // release's CRDs and webhooks replace theirs, the new managers start (their conversion webhooks serve the
      // objects stored by the old release; v1.11+ core's CRD migrator rewrites them to the new storage version).
      async upgradeCapi(to, o = {}) {
        if (!withCapi) throw new Error('upgradeCapi: this env runs no CAPI');
        const s = Date.now();
        const dir = o.binDir ?? (await step('', `binaries of CAPI ${to}`, () => ensureBuilt(log, to)));
        const next = readBuiltRelease(dir);
        if (next.release !== to) throw new Error(`${dir} holds CAPI ${next.release}, not the ${to} asked for`);
        log(`[testenv] upgrading CAPI ${env.capiVersion} -> ${next.version} ...`);
        const old = managers.splice(0);
        await Promise.all(old.map((m) => m.proc.stop(5000)));
        // A fresh client: the start-up one may hold keep-alive sockets the apiserver closed while idle (a reused
        // one then fails with "socket hang up").
        const client = KubeClient.fromKubeconfigFile(kubeconfigPath);
        try {
          await startCapi(capiOptions(next, dir, client), managers);
        } finally {
          client.close();
        }
        managerPorts();
        Object.assign(descriptor, {
          binDir: dir,
          capiRelease: to,
          capiVersion: next.version,
          capiApiVersion: CAPI_RELEASES[to].apiVersion,
          pids: Object.fromEntries(running().map((p) => [p.name, p.pid])),
        });
        Object.assign(env, {
          binDir: dir,
          capiRelease: to,
          capiVersion: next.version,
          capiApiVersion: CAPI_RELEASES[to].apiVersion,
          pids: { ...descriptor.pids },
          ports: { ...ports },
          healthUrls: { ...healthUrls },
        });
        writeDescriptor();
        log(`[testenv] CAPI ${next.version} running in ${seconds(Date.now() - s)}`);
      },
    };
    return env;
  } catch (err) {
    keepLogs = true;
    await handle.stop();
    log(`[testenv] stopped everything; logs kept in ${runDir}`);
    throw err;
  }
}

function componentProc(procs: ManagedProcess[], component: TestEnvComponent): ManagedProcess {
  const p = procs.find((x) => x.name === component);
  if (!p) throw new Error(`no component ${component} in this test env (${procs.map((x) => x.name).join(', ')})`);
  return p;
}

export function memoryOf(
  procs: { name: string; memory(): { rssKiB: number; hwmKiB: number } }[],
): ReturnType<TestEnv['memory']> {
  const byComponent: Record<string, { rssKiB: number; hwmKiB: number }> = {};
  let rssKiB = 0;
  let hwmKiB = 0;
  for (const p of procs) {
    const m = p.memory();
    byComponent[p.name] = m;
    rssKiB += m.rssKiB;
    hwmKiB += m.hwmKiB;
  }
  return { rssKiB, hwmKiB, byComponent };
}

export { attachTestEnv } from './attach.js';
