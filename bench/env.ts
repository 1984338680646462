// One run's control plane: the shared test environment (hack/testenv) started fresh, with
// - the apiserver's audit log in blocking mode (an event is written before the request completes, so none
//   is dropped; bench/audit.ts still checks the apiserver's own audit error counter and fails loudly);
// - CAPI's three managers with leader election on, as clusterctl deploys them (`--leader-elect`, default
//   lease timings), and the core manager's metrics served on 127.0.0.1 (per-controller reconcile figures);
// - one client identity per party, so the audit log tells them apart:
//     bench-driver    the fleet, the watchers, the scrapes (audit level None: the bench does not measure itself)
//     joinguard-bench JoinGuard
//     bench-workload  the `<cluster>-kubeconfig` Secrets: whoever uses them makes workload-cluster requests
//   The CAPI managers keep the admin identity and are told apart by User-Agent.
// Audit is needed because kube-apiserver v1.36's apiserver_request_total has no client label (checked at
// run time, kept in the results).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { issueCert } from '../hack/testenv/certs.js';
import { freePort } from '../hack/testenv/ports.js';
import { startTestEnv, type TestEnv } from '../hack/testenv/testenv.js';
import { KubeClient } from '../hack/testenv/kube-client.js';

export const USER_DRIVER = 'bench-driver';
export const USER_JOINGUARD = 'joinguard-bench';
export const USER_WORKLOAD = 'bench-workload';
/** CAPI's managers find their Lease's namespace in the in-cluster namespace file (see leaderElectionBinDir). */
export const CAPI_LEASE_NAMESPACE = 'kube-system';
const MANAGERS = ['capi-core', 'capi-kubeadm-bootstrap', 'capi-kubeadm-control-plane'];

export interface BenchEnv {
  env: TestEnv;
  dir: string;
  auditLog: string;
  /** Kubeconfig files per identity (and per extra user asked for, e.g. one per shard). */
  kubeconfigs: Record<typeof USER_DRIVER | typeof USER_JOINGUARD | typeof USER_WORKLOAD, string> &
    Record<string, string>;
  /** Kubeconfig YAML of bench-workload (the value of every `<cluster>-kubeconfig` Secret). */
  workloadKubeconfigYaml: string;
  driver: KubeClient;
  /** http://127.0.0.1:PORT/metrics of the CAPI core manager. */
  coreMetricsUrl: string;
  stop(): Promise<void>;
}

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
# RequestReceived is dropped: a request is counted once, when it completes (a watch when it starts, its
# ResponseStarted stage).
omitStages: ["RequestReceived"]
rules:
  - level: None
    users: ["${USER_DRIVER}"]
  - level: Metadata
`;

function kubeconfigYaml(server: string, caPem: string, certPem: string, keyPem: string, user: string): string {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: bench`,
    `  cluster:`,
    `    server: ${server}`,
    `    certificate-authority-data: ${b64(caPem)}`,
    'users:',
    `- name: ${user}`,
    `  user:`,
    `    client-certificate-data: ${b64(certPem)}`,
    `    client-key-data: ${b64(keyPem)}`,
    'contexts:',
    `- name: ${user}@bench`,
    `  context:`,
    `    cluster: bench`,
    `    user: ${user}`,
    `current-context: ${user}@bench`,
    '',
  ].join('\n');
}

/**
 * A bin folder like build.sh's, whose CAPI managers are wrapped: controller-runtime takes the leader
 * election namespace from /var/run/secrets/kubernetes.io/serviceaccount/namespace and refuses to elect
 * without it outside a cluster. The wrapper gives the manager (only) a private mount namespace with a
 * tmpfs on /run holding that file, then execs it: same pid, so /proc figures stay the manager's own.
 */
export function leaderElectionBinDir(realBin: string, dir: string): string {
  try {
    execFileSync('unshare', ['--mount', '--propagation', 'private', 'true'], { stdio: 'ignore' });
  } catch {
    throw new Error(
      "the bench runs CAPI's managers with --leader-elect, which needs `unshare --mount` (root or CAP_SYS_ADMIN) to give them an in-cluster namespace file",
    );
  }
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  for (const f of fs.readdirSync(realBin))
    if (!MANAGERS.includes(f)) fs.symlinkSync(path.join(realBin, f), path.join(bin, f));
  const sa = '/run/secrets/kubernetes.io/serviceaccount';
  for (const m of MANAGERS) {
    fs.writeFileSync(
      path.join(bin, m),
      [
        '#!/bin/sh',
        `exec unshare --mount --propagation private /bin/sh -c 'mount -t tmpfs bench-run /run && mkdir -p ${sa} && printf %s ${CAPI_LEASE_NAMESPACE} > ${sa}/namespace && exec "$0" "$@"' ${path.join(realBin, m)} "$@"`,
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
  }
  return bin;
}

export interface BenchEnvOptions {
  /** etcd's data folder (the caller's: not removed by stop), e.g. a saved fleet's copy (bench/fleet-cache.ts). */
  etcdDataDir?: string;
  /** etcdDataDir holds a saved fleet: etcd starts on it. */
  restored?: boolean;
  /**
   * Before CAPI's managers start (each start has new certificates and ports): re-point what the saved fleet
   * holds of the old ones. `driver` is the bench-driver client, `workloadKubeconfigYaml` this start's.
   */
  beforeCapi?: (driver: KubeClient, workloadKubeconfigYaml: string, server: string) => Promise<void>;
}

/** realBin: hack/testenv/build.sh's folder (ensureBuilt), built once before runs start at once (build.sh is not safe to run twice at a time). */
export async function startBenchEnv(
  log: (line: string) => void,
  realBin: string,
  extraUsers: string[] = [],
  o: BenchEnvOptions = {},
): Promise<BenchEnv> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-bench-'));
  // Outside the env's run dir, which its stop() removes: the log is counted after the apiserver stopped.
  const auditLog = path.join(dir, 'audit.log');
  let env: TestEnv | undefined;
  const kubeconfigs = {} as BenchEnv['kubeconfigs'];
  const yamls: Record<string, string> = {};
  const pems: Record<string, { cert: string; key: string }> = {};
  const clientOf = (server: string, caPem: string) =>
    // A long request timeout: listing 10,000 Machines from a busy apiserver takes more than the harness's 15 s.
    new KubeClient({ server, caPem, certPem: pems[USER_DRIVER]!.cert, keyPem: pems[USER_DRIVER]!.key }, 120_000);
  try {
    const binDir = leaderElectionBinDir(realBin, dir);
    const metricsPort = await freePort();
    const leaderElect = ['--leader-elect=true'];
    env = await startTestEnv({
      log,
      binDir,
      audit: { policy: AUDIT_POLICY, file: auditLog, mode: 'blocking' },
      // Later flags win: these override testenv's --leader-elect=false and --diagnostics-address=0.
      extraManagerFlags: {
        'capi-core': [...leaderElect, `--diagnostics-address=127.0.0.1:${metricsPort}`, '--insecure-diagnostics=true'],
        'capi-kubeadm-bootstrap': leaderElect,
        'capi-kubeadm-control-plane': leaderElect,
      },
      ...(o.etcdDataDir ? { etcdDataDir: o.etcdDataDir, etcdRestored: o.restored ?? false } : {}),
      // The identities are issued before CAPI starts, so that a restored fleet's Secrets can be re-pointed first.
      beforeCapi: async ({ server, caCertPem, caCertFile, caKeyFile }) => {
        for (const user of [USER_DRIVER, USER_JOINGUARD, USER_WORKLOAD, ...extraUsers]) {
          const cert = path.join(dir, `${user}.crt`);
          const key = path.join(dir, `${user}.key`);
          const ca = { certFile: caCertFile, keyFile: caKeyFile };
          await issueCert(ca, { commonName: user, organization: 'system:masters', usage: 'client' }, cert, key);
          pems[user] = { cert: fs.readFileSync(cert, 'utf8'), key: fs.readFileSync(key, 'utf8') };
          yamls[user] = kubeconfigYaml(server, caCertPem, pems[user].cert, pems[user].key, user);
          kubeconfigs[user] = path.join(dir, `${user}.kubeconfig`);
          fs.writeFileSync(kubeconfigs[user], yamls[user], { mode: 0o600 });
        }
        if (!o.beforeCapi) return;
        const driver = clientOf(server, caCertPem);
        try {
          await o.beforeCapi(driver, yamls[USER_WORKLOAD]!, server);
        } finally {
          driver.close();
        }
      },
    });
    const driver = clientOf(env.server, env.caCertPem);
    const started = env;
    return {
      env: started,
      dir,
      auditLog,
      kubeconfigs,
      workloadKubeconfigYaml: yamls[USER_WORKLOAD]!,
      driver,
      coreMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
      stop: async () => {
        driver.close();
        await started.stop();
        if (process.env.JOINGUARD_BENCH_KEEP !== '1') fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await env?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
