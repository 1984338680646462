// What a test control plane offers its tests, whether this process started it (testenv.ts) or attached to one
// already running (attach.ts): one home for the interface, below both.
import type { KubeConfig } from '@kubernetes/client-node';
import type { CapiRelease } from './capi-releases.js';
import type { KubeClient } from './kube-client.js';

export interface TestEnv {
  /** https://127.0.0.1:PORT */
  server: string;
  kubeconfigPath: string;
  runDir: string;
  caCertPem: string;
  /** The CA that signs the apiserver serving cert and the admin client cert. */
  caKeyPem: string;
  /** A fresh @kubernetes/client-node KubeConfig for the admin user. */
  kubeConfig(): KubeConfig;
  /** A fresh harness client (hack/testenv/kube-client.ts) for the admin user; close() it when done. */
  kube(): KubeClient;
  /** The last lines of <runDir>/<component>.log. */
  logTail(component: string, lines?: number): string;
  components: string[];
  stop(): Promise<void>;
  /**
   * Stops kube-apiserver (SIGTERM, its graceful shutdown), keeps it down for downMs (default 0), and starts
   * it again on the same port with the same certificates and the same etcd (no data lost). Resolves once
   * /readyz answers again. Clients see refused connections and broken watches meanwhile.
   */
  restartApiserver(opts?: { downMs?: number }): Promise<void>;
  /**
   * SIGSTOP to a component's process group: it keeps its sockets open and answers nothing (a hung
   * process). Resolves once the process is seen stopped.
   */
  pause(component: TestEnvComponent): Promise<void>;
  /** SIGCONT: a paused component carries on where it stopped. stop() ends paused components too. */
  resume(component: TestEnvComponent): Promise<void>;
  /**
   * An in-place CAPI upgrade (clusterctl upgrade apply): the managers stop, the release's CRDs and webhook
   * configurations replace theirs, its managers start; capiRelease, capiVersion, capiApiVersion, binDir, ports and
   * pids follow. binDir defaults to build.sh's folder of the release (built if missing). Started envs only.
   */
  upgradeCapi(release: CapiRelease, opts?: { binDir?: string }): Promise<void>;

  // Additions beyond the agreed interface.
  /** Files of the CA (for openssl, or certs.ts issueServingCert). */
  caCertFile: string;
  caKeyFile: string;
  /** Ports in use: etcd-client, etcd-peer, kube-apiserver, sim-kubelet, <manager>-webhook, <manager>-health. */
  ports: Record<string, number>;
  /** Component -> pid (each component leads its own process group). */
  pids: Record<string, number>;
  /** Manager -> http://127.0.0.1:PORT serving /healthz and /readyz. */
  healthUrls: Record<string, string>;
  /** Folder of the binaries and crds/ (hack/testenv/build.sh's output). */
  binDir: string;
  /** Sum of VmRSS and VmHWM (KiB) of the running components, and each one's. */
  memory(): { rssKiB: number; hwmKiB: number; byComponent: Record<string, { rssKiB: number; hwmKiB: number }> };
  /** False for an env attached through JOINGUARD_TESTENV_KUBECONFIG: stop() leaves it running. */
  owned: boolean;
  /** The CAPI release running (its managers and CRDs), its exact version, and the API version it stores and reads. */
  capiRelease: CapiRelease;
  capiVersion: string;
  capiApiVersion: 'v1beta2' | 'v1beta1';
  /** The apiserver's audit log (JSON lines) when started with `audit`. */
  auditLog?: string;
}

export type TestEnvComponent =
  'etcd' | 'kube-apiserver' | 'capi-core' | 'capi-kubeadm-bootstrap' | 'capi-kubeadm-control-plane' | 'sim-kubelet';
