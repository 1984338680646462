// What the JoinGuard controller is started with, and what a started controller offers. The `joinguard`
// command (cmd/joinguard.ts), the e2e scenarios, the install tests, the demo and the benchmark all start
// it through controllers/manager.ts `startController(opts)` with these options. Defaults are CAPI's.
import type { ClusterAccess } from '../runtime/client/kubeconfig.js';
import type { Logger } from 'winston';
import type { ControllerIdentity } from '../runtime/logger.js';
import type { RuntimeMetrics } from '../runtime/metrics.js';
import type { ServingTls } from '../runtime/serving/serving-tls.js';

/** Checks reconciled at once by default: a pass mostly waits on a few requests in sequence (docs/decisions/operating-metrics-diagnostics-flags-logs.md, "Flags"). */
export const DEFAULT_CONCURRENCY = 10;

/** The controller as controller-runtime would name it in metrics and logs. */
export const MACHINEJOINCHECK_CONTROLLER: ControllerIdentity = {
  name: 'machinejoincheck',
  group: 'joinguard.io',
  kind: 'MachineJoinCheck',
};

export interface ControllerOptions {
  /** The apiserver and credentials: runtime/client/kubeconfig.ts loadClusterAccess or clusterAccessFromKubeconfig. */
  access: ClusterAccess;
  /** Watch only this namespace (checks, Machines, Clusters, MHCs). Default: all namespaces. */
  namespace?: string;
  /** Only Clusters labelled `cluster.x-k8s.io/watch-filter=<value>` and what belongs to them (--watch-filter). */
  watchFilter?: string;
  /** Every check is reconciled at least this often (--sync-period). Default 10m. */
  syncPeriodMs?: number;
  /** Concurrent reconciles (--machinejoincheck-concurrency). Default DEFAULT_CONCURRENCY. */
  workers?: number;
  /** Client-side rate limit towards the apiserver (--kube-api-qps, --kube-api-burst). Default 100 and 400. */
  qps?: number;
  burst?: number;
  /** Take part in leader election on a coordination.k8s.io Lease before reconciling. Default false. */
  leaderElect?: boolean;
  /**
   * Namespace of the Lease. Default: the pod's namespace ($POD_NAMESPACE, else the ServiceAccount's namespace
   * file), as controller-runtime — never `namespace`, which only says what is watched. Outside a pod, tests name it.
   */
  leaderElectionNamespace?: string;
  /** Name of the Lease (--leader-elect-resource-name). Default `joinguard-leader`; each shard needs its own. */
  leaderElectionId?: string;
  /** Lease timings (--leader-elect-lease-duration, -renew-deadline, -retry-period). Default 15s, 10s, 2s. */
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** Holder identity; default `<hostname>_<random>`. */
  identity?: string;
  /**
   * `host:port` of the diagnostics endpoint (/metrics): controller-runtime's Metrics.BindAddress, which CAPI's
   * --diagnostics-address sets. Port 0 picks a free port; `0` (the string) turns it off. Default `:8443`.
   */
  metricsBindAddress?: string;
  /** Plain HTTP without authentication (--insecure-diagnostics). Default false: HTTPS, TokenReview, SAR. */
  insecureDiagnostics?: boolean;
  /** --tls-min-version and --tls-cipher-suites, as Node options. Default TLS 1.2, Node's suites. */
  tls?: ServingTls;
  /** A certificate and key for the diagnostics endpoint (the webhook's); absent files mean a self-signed one. */
  diagnosticsCert?: { certFile: string; keyFile: string };
  /** `host:port` for /healthz and /readyz (--health-addr); same rules. Default `:9440`, CAPI's. */
  healthProbeBindAddress?: string;
  /** Read `<cluster>-kubeconfig` Secrets and count a Node with the Machine's providerID as joined. */
  workloadNodeCheck?: boolean;
  /**
   * remediation.strategy Delete may delete Machines (--allow-machine-delete; the install grants `delete` on
   * Machines only with JOINGUARD_ALLOW_MACHINE_DELETE=true). Default false: such a check deletes nothing
   * (Ready=False/MachineDeleteNotAllowed).
   */
  allowMachineDelete?: boolean;
  /** Grace after the workload connection is back before verdicts resume. Default 2m. */
  connectionGraceMs?: number;
  /**
   * A visible mark nobody acted on for this long is withdrawn as Unanswered. Default 15m; no flag (tests shorten it).
   */
  unansweredAfterMs?: number;
  /** winston level (npm levels) of the JSON logger made when no logger is given. Default `info`. */
  logLevel?: string;
  logger?: Logger;
  /** Epoch-ms clock (tests may shift it); default Date.now. */
  clock?: () => number;
  /** Force a CAPI API version instead of discovery (tests). */
  capiApiVersion?: 'v1beta2' | 'v1beta1';
  /** HTTP User-Agent on every request, so the apiserver's metrics can tell JoinGuard apart. */
  userAgent?: string;
  /** Restart a watch that has been silent this long (ms). Default 3 min (runtime/informers/informer.ts). */
  watchLivenessMs?: number;
  /**
   * Discover the CAPI release again this often; a change stops the controller (onCapiChanged). Default 5m; 0: never.
   */
  capiRediscoveryMs?: number;
  /**
   * Called once the controller has stopped (Lease handed back) because the CAPI release changed; the command exits 1.
   */
  onCapiChanged?: (why: string) => void;
  /** Called at once when the Lease is lost (writes are already refused); the command exits 1 without waiting. */
  onLeadershipLost?: () => void;
  /** process_* and nodejs_* on /metrics (off when two controllers share a process in tests). Default true. */
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
  /** The registry behind /metrics (controller-runtime's families and JoinGuard's). */
  metrics: RuntimeMetrics;
  /** Checks reconciled at least once since start (key `namespace/name`). */
  reconciledChecks(): ReadonlySet<string>;
  /** Epoch ms of the first moment every known check had been reconciled once, if reached. */
  firstFullReconcileAt(): number | undefined;
  /** List+watch restarts per informer since start. */
  watchRestarts(): Record<string, number>;
}
