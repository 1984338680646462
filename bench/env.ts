// The benchmark's control plane: the shared test environment (hack/testenv) started with apiserver audit
// logging, plus one client identity per party so the audit log tells them apart:
//   bench-driver    the fleet and the latency watchers (audit level None: the bench does not measure itself)
//   joinguard-bench JoinGuard (also its User-Agent)
//   bench-workload  the `<cluster>-kubeconfig` Secrets, i.e. CAPI's ClusterCache reading workload clusters
// The CAPI managers keep the admin identity and are told apart by User-Agent.
// Audit is needed because kube-apiserver v1.36's apiserver_request_total has no client/user-agent label
// (checked at run time by scrapeRequestMetricLabels, reported in the results).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { issueCert } from '../hack/testenv/certs.js';
import { startTestEnv, type TestEnv } from '../hack/testenv/testenv.js';
import { loadClusterAccess } from '../controllers/runtime/kubeconfig.js';
import { RestClient } from '../controllers/runtime/rest.js';

export const USER_DRIVER = 'bench-driver';
export const USER_JOINGUARD = 'joinguard-bench';
export const USER_WORKLOAD = 'bench-workload';
export const JOINGUARD_USER_AGENT = 'joinguard-bench';
export const DRIVER_USER_AGENT = 'joinguard-bench-driver';

export interface BenchEnv {
  env: TestEnv;
  dir: string;
  auditLog: string;
  /** Kubeconfig files per identity. */
  kubeconfigs: Record<typeof USER_DRIVER | typeof USER_JOINGUARD | typeof USER_WORKLOAD, string>;
  /** Kubeconfig YAML of bench-workload (the value of every `<cluster>-kubeconfig` Secret). */
  workloadKubeconfigYaml: string;
  driver: RestClient;
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
    'apiVersion: v1', 'kind: Config',
    'clusters:', `- name: bench`, `  cluster:`, `    server: ${server}`, `    certificate-authority-data: ${b64(caPem)}`,
    'users:', `- name: ${user}`, `  user:`, `    client-certificate-data: ${b64(certPem)}`, `    client-key-data: ${b64(keyPem)}`,
    'contexts:', `- name: ${user}@bench`, `  context:`, `    cluster: bench`, `    user: ${user}`,
    `current-context: ${user}@bench`, '',
  ].join('\n');
}

export function loadKubeConfig(file: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return kc;
}

export async function startBenchEnv(log: (line: string) => void): Promise<BenchEnv> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-bench-'));
  const policy = path.join(dir, 'audit-policy.yaml');
  const auditLog = path.join(dir, 'audit.log');
  fs.writeFileSync(policy, AUDIT_POLICY);
  let env: TestEnv | undefined;
  try {
    env = await startTestEnv({
      log,
      // batch mode: audit writes never block a request, so they do not add to the latencies measured.
      // No rotation (0 means lumberjack's 100 MB): a 10,000-Machine run writes several hundred MB, and the
      // bench counts one file.
      extraApiserverFlags: [`--audit-policy-file=${policy}`, `--audit-log-path=${auditLog}`, '--audit-log-mode=batch', '--audit-log-format=json', '--audit-log-maxsize=1000000'],
    });
    const ca = { certFile: env.caCertFile, keyFile: env.caKeyFile };
    const kubeconfigs = {} as BenchEnv['kubeconfigs'];
    const yamls: Record<string, string> = {};
    for (const user of [USER_DRIVER, USER_JOINGUARD, USER_WORKLOAD] as const) {
      const cert = path.join(dir, `${user}.crt`);
      const key = path.join(dir, `${user}.key`);
      await issueCert(ca, { commonName: user, organization: 'system:masters', usage: 'client' }, cert, key);
      yamls[user] = kubeconfigYaml(env.server, env.caCertPem, fs.readFileSync(cert, 'utf8'), fs.readFileSync(key, 'utf8'), user);
      kubeconfigs[user] = path.join(dir, `${user}.kubeconfig`);
      fs.writeFileSync(kubeconfigs[user], yamls[user]!, { mode: 0o600 });
    }
    // qps 0: the driver is not rate-limited client-side (it builds the fleet as fast as the apiserver takes it).
    const driver = new RestClient(loadClusterAccess({ kubeconfigPath: kubeconfigs[USER_DRIVER] }), { userAgent: DRIVER_USER_AGENT, qps: 0 });
    const started = env;
    return {
      env: started, dir, auditLog, kubeconfigs, workloadKubeconfigYaml: yamls[USER_WORKLOAD]!, driver,
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

/** The label names of apiserver_request_total, from the apiserver's own /metrics (admin client). */
export async function scrapeRequestMetricLabels(env: TestEnv): Promise<string[]> {
  const rest = new RestClient(loadClusterAccess({ kubeconfigPath: env.kubeconfigPath }), { userAgent: DRIVER_USER_AGENT, qps: 0 });
  try {
    const { res } = await rest.open('GET', '/metrics', { timeoutMs: 30_000 });
    let text = '';
    for await (const chunk of res) text += String(chunk);
    const line = text.split('\n').find((l) => l.startsWith('apiserver_request_total{'));
    if (!line) return [];
    return [...line.slice(line.indexOf('{') + 1, line.lastIndexOf('}')).matchAll(/(\w+)="/g)].map((m) => m[1]!);
  } finally {
    rest.close();
  }
}
