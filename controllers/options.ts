// What the JoinGuard controller is started with, and what a started controller offers. The `joinguard`
// command (cmd/joinguard.ts), the e2e scenarios, the install tests, the demo and the benchmark all start
// it through controllers/manager.ts `startController(opts)` with these options.
import type { ClusterAccess } from './runtime/kubeconfig.js';
import type { Logger } from 'winston';

export interface ControllerOptions {
  /** The apiserver and credentials: controllers/runtime/kubeconfig.ts loadClusterAccess or clusterAccessFromKubeconfig. */
  access: ClusterAccess;
  /** Client-side rate limit of the controller's client (CAPI's --kube-api-qps / --kube-api-burst). Default 100 / 200. */
  kubeApiQps?: number;
  kubeApiBurst?: number;
  /** Watch only this namespace (checks, Machines, Clusters, MHCs). Default: all namespaces. */
  namespace?: string;
  /** Take part in leader election on a coordination.k8s.io Lease before reconciling. Default false. */
  leaderElect?: boolean;
  /** Namespace of the Lease. Default: `namespace`, else the pod's namespace, else `joinguard-system`. */
  leaderElectionNamespace?: string;
  /** Name of the Lease. Default `joinguard-leader`. */
  leaderElectionId?: string;
  /** Holder identity; default `<hostname>_<random>`. */
  identity?: string;
  /** `host:port` for /metrics; port 0 picks a free port; `0` (the string) turns it off. Default `:8080`. */
  metricsBindAddress?: string;
  /** `host:port` for /healthz and /readyz; same rules. Default `:8081`. */
  healthProbeBindAddress?: string;
  /** Read `<cluster>-kubeconfig` Secrets and count a Node with the Machine's providerID as joined. */
  workloadNodeCheck?: boolean;
  /** Grace after the workload connection is back before verdicts resume. Default 2m. */
  connectionGraceMs?: number;
  /** winston level when no logger is given. Default `info`. */
  logLevel?: string;
  logger?: Logger;
  /** Epoch-ms clock (tests may shift it); default Date.now. */
  clock?: () => number;
  /** Force a CAPI API version instead of discovery (tests). */
  capiApiVersion?: 'v1beta2' | 'v1beta1';
  /** HTTP User-Agent on every request, so the apiserver's metrics can tell JoinGuard apart. */
  userAgent?: string;
  /** Restart a watch that has been silent this long (ms). Default 3 min (controllers/runtime/informer.ts). */
  watchLivenessMs?: number;
  /** Called at once when the Lease is lost (writes are already refused); the command exits 1 without waiting. */
  onLeadershipLost?: () => void;
  /** Node.js process metrics on /metrics (off when two controllers share a process in tests). Default true. */
  collectDefaultMetrics?: boolean;
}

export interface RunningController {
  /** Resolves once caches are synced (and, with leader election, the lease is held). */
  ready(): Promise<void>;
  /** Stops informers, timers and servers; releases the lease. Idempotent. */
  stop(): Promise<void>;
  /** Ports actually bound (useful with port 0). */
  metricsPort?: number;
  healthPort?: number;
  /** Checks reconciled at least once since start (key `namespace/name`). */
  reconciledChecks(): ReadonlySet<string>;
  /** Epoch ms of the first moment every known check had been reconciled once, if reached. */
  firstFullReconcileAt(): number | undefined;
  /** List+watch restarts per informer since start. */
  watchRestarts(): Record<string, number>;
}

export const DEFAULT_USER_AGENT = 'joinguard';
