// kube-apiserver for the test control plane, with the flags envtest uses, and its admin kubeconfig.
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import type { CertSet } from './certs.js';
import { KubeClient } from './kube-client.js';
import { waitFor } from './wait.js';
import { freePort } from './ports.js';
import { launchWithRetry, ManagedProcess } from './process.js';

export const SERVICE_CLUSTER_IP_RANGE = '10.0.0.0/24';

export interface Apiserver {
  /** The running process (a new one after restart()). */
  proc: ManagedProcess;
  port: number;
  server: string;
  rest: KubeClient;
  /**
   * Stops the apiserver (SIGTERM, its graceful shutdown), waits downMs, and starts it again with the same
   * flags: same port, certificates and etcd, so every client's kubeconfig stays valid. Resolves when
   * /readyz answers again; the new process is in `proc` (and handed to onStart).
   */
  restart(downMs: number): Promise<void>;
}

export interface ApiserverOptions {
  binDir: string;
  runDir: string;
  etcdUrl: string;
  certs: CertSet;
  extraFlags?: string[];
  /**
   * The ServiceAccount admission plugin on (default off, as envtest: with no controller-manager nothing creates the
   * `default` ServiceAccounts it requires). A real node needs it: it projects the pod's token volume.
   */
  serviceAccountAdmission?: boolean;
  log: (line: string) => void;
  timeoutMs?: number;
  onStart?: (proc: ManagedProcess) => void;
}

function apiserverArgs(opts: ApiserverOptions, port: number): string[] {
  const c = opts.certs;
  const certDir = path.join(opts.runDir, 'apiserver-certs');
  fs.mkdirSync(certDir, { recursive: true });
  return [
    `--etcd-servers=${opts.etcdUrl}`,
    `--secure-port=${port}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    // Unused while the tls files are given, but keeps the default /var/run/kubernetes out of it.
    `--cert-dir=${certDir}`,
    `--tls-cert-file=${c.apiserver.certFile}`,
    `--tls-private-key-file=${c.apiserver.keyFile}`,
    `--client-ca-file=${c.ca.certFile}`,
    `--service-cluster-ip-range=${SERVICE_CLUSTER_IP_RANGE}`,
    '--authorization-mode=RBAC',
    `--service-account-issuer=https://127.0.0.1:${port}/`,
    `--service-account-key-file=${c.serviceAccountPubFile}`,
    `--service-account-signing-key-file=${c.serviceAccountKeyFile}`,
    // As envtest: there is no controller-manager to create the `default` ServiceAccounts.
    ...(opts.serviceAccountAdmission ? [] : ['--disable-admission-plugins=ServiceAccount']),
    '--allow-privileged=true',
    '--profiling=false',
    ...(opts.extraFlags ?? []),
  ];
}

export async function startApiserver(opts: ApiserverOptions): Promise<Apiserver> {
  const creds = {
    caPem: opts.certs.caCertPem,
    certPem: fs.readFileSync(opts.certs.admin.certFile, 'utf8'),
    keyPem: fs.readFileSync(opts.certs.admin.keyFile, 'utf8'),
  };
  const launch = (port: number) => {
    const proc = ManagedProcess.start({
      name: 'kube-apiserver',
      command: path.join(opts.binDir, 'kube-apiserver'),
      args: apiserverArgs(opts, port),
      logFile: path.join(opts.runDir, 'kube-apiserver.log'),
    });
    opts.onStart?.(proc);
    return proc;
  };
  const ready = async (proc: ManagedProcess, rest: KubeClient) => {
    const timeoutMs = opts.timeoutMs ?? 45_000;
    const abort = () => (proc.running ? undefined : `kube-apiserver ${proc.describeExit()}`);
    await waitFor('kube-apiserver /readyz', async () => (await rest.send('GET', '/readyz')).status === 200, {
      timeoutMs,
      abort,
      intervalMs: 200,
    });
    await waitFor(
      'namespace default',
      async () => (await rest.send('GET', '/api/v1/namespaces/default')).status === 200,
      { timeoutMs, abort, intervalMs: 100 },
    );
  };
  return launchWithRetry('kube-apiserver', opts.log, async () => {
    const port = await freePort();
    const server = `https://127.0.0.1:${port}`;
    const proc = launch(port);
    const rest = new KubeClient({ server, ...creds });
    const wait = async (): Promise<Apiserver> => {
      try {
        await ready(proc, rest);
      } catch (err) {
        rest.close();
        throw err;
      }
      const api: Apiserver = {
        proc,
        port,
        server,
        rest,
        async restart(downMs) {
          await api.proc.stop(10_000);
          if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
          // The port was ours a moment ago; another process taking it in between is not retried (the
          // clients would need a new kubeconfig), it fails with the apiserver's log.
          api.proc = launch(port);
          await ready(api.proc, rest);
        },
      };
      return api;
    };
    return { proc, wait };
  });
}

/** The admin kubeconfig (client certificate, everything embedded so the file stands alone). */
export function kubeconfigYaml(server: string, certs: CertSet): string {
  const b64 = (file: string) => fs.readFileSync(file).toString('base64');
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'testenv', cluster: { server, 'certificate-authority-data': b64(certs.ca.certFile) } }],
    users: [
      {
        name: 'admin',
        user: { 'client-certificate-data': b64(certs.admin.certFile), 'client-key-data': b64(certs.admin.keyFile) },
      },
    ],
    contexts: [{ name: 'testenv', context: { cluster: 'testenv', user: 'admin' } }],
    'current-context': 'testenv',
  });
}

export function writeKubeconfig(file: string, server: string, certs: CertSet): void {
  fs.writeFileSync(file, kubeconfigYaml(server, certs), { mode: 0o600 });
}
