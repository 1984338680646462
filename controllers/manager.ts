// Starts JoinGuard: discovery of CAPI's API version, the diagnostics and probe servers, the caches, leader
// election on a Lease, then the workers. Informers start before leadership so a standby is warm and can
// take over at once; only the leader reconciles.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'winston';
import { discoverCapi } from '../runtime/client/discovery.js';
import { DelegatingAuth } from '../runtime/serving/diagnostics-auth.js';
import { CapiRediscovery, DEFAULT_REDISCOVERY_MS } from '../runtime/client/rediscovery.js';
import { DEFAULT_LEASE_NAME, LeaderElector, podNamespace } from '../runtime/leader.js';
import { makeLogger, setVerbosity } from '../runtime/logger.js';
import { RuntimeMetrics } from '../runtime/metrics.js';
import { RestClient, type RequestRecord } from '../runtime/client/rest.js';
import {
  parseBindAddress,
  startDiagnosticsServer,
  startProbeServer,
  type BoundServer,
} from '../runtime/serving/servers.js';
import { defaultUserAgent } from './version.js';
import { WarningLog } from '../runtime/client/warnings.js';
import { JoinCheckController } from './joincheck/controller.js';
import { EventRecorder } from './joincheck/act/events.js';
import { JoinGuardMetrics } from './joincheck/report/metrics.js';
import { WorkloadNodeReader } from './joincheck/world/workload-access.js';
import { MACHINEJOINCHECK_CONTROLLER, type ControllerOptions, type RunningController } from './options.js';
import { DEFAULT_LIVENESS_MS } from '../runtime/informers/informer-options.js';

const DEFAULT_WORKERS = 2;

type Health = { ok: boolean; why?: string };

/** Readiness as controller-runtime's healthz checks see it: every cache synced, every watch live. */
function readiness(c: JoinCheckController): Health {
  if (!c.hasSynced()) return { ok: false, why: 'caches not synced yet' };
  // Informer.health() (runtime) reaches the probe through the controller's health(), where it has one.
  const h = (c as unknown as { health?: () => Health }).health?.();
  return h ?? { ok: true };
}

export async function startController(opts: ControllerOptions): Promise<RunningController> {
  const log: Logger = opts.logger ?? withLevel(makeLogger({ format: 'json' }), opts.logLevel);
  const clock = opts.clock ?? Date.now;
  const identity = opts.identity ?? `${hostname()}_${randomBytes(4).toString('hex')}`;
  const userAgent = opts.userAgent ?? defaultUserAgent();
  // The apiserver's warnings, each logged once (CAPI's managers install a warning handler on their client).
  const onWarning = new WarningLog(log).handle;
  const metrics = new RuntimeMetrics({ processMetrics: opts.collectDefaultMetrics ?? true });
  const onRequest = (r: RequestRecord) =>
    metrics.restRequest({
      method: r.method,
      host: r.host,
      code: r.code === '<error>' ? 0 : Number(r.code),
      seconds: r.seconds,
    });
  let elector: LeaderElector | undefined;
  // The one choke point of "no write after leadership is lost": every non-GET of the controller's client.
  const writeGate = opts.leaderElect ? () => elector?.canWrite() ?? false : undefined;
  const rest = new RestClient(opts.access, {
    userAgent,
    ...(opts.qps !== undefined ? { qps: opts.qps } : {}),
    ...(opts.burst !== undefined ? { burst: opts.burst } : {}),
    ...(writeGate ? { writeGate } : {}),
    onRequest,
    onWarning,
  });
  // Leader election and the diagnostics' reviews must not wait on (or be gated like) the controller's writes
  // (controller-runtime: a separate client, User-Agent suffix leader-election).
  const ungated = new RestClient(opts.access, { userAgent: `${userAgent}/leader-election`, onRequest, onWarning });
  const joinguardMetrics = new JoinGuardMetrics(metrics.registry);
  const servers: BoundServer[] = [];
  let controller: JoinCheckController | undefined;
  let workloadNodes: WorkloadNodeReader | undefined;
  let rediscovery: CapiRediscovery | undefined;
  let stopping: Promise<void> | undefined;

  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      rediscovery?.stop();
      await controller?.stop();
      await elector?.stop();
      workloadNodes?.close();
      await Promise.all(servers.map((s) => s.close()));
      rest.close();
      ungated.close();
      log.info('Stopped');
    })());

  try {
    const metricsAddr = parseBindAddress('--diagnostics-address', opts.metricsBindAddress ?? ':8443');
    const probeAddr = parseBindAddress('--health-addr', opts.healthProbeBindAddress ?? ':9440');
    // controller-runtime keeps the Lease in the pod's namespace, whatever the manager watches (--namespace):
    // the add-on's Role grants Leases there and nowhere else. Outside a pod there is no such namespace.
    const leaseNamespace = opts.leaderElect ? (opts.leaderElectionNamespace ?? podNamespace()) : undefined;
    if (opts.leaderElect && !leaseNamespace) {
      throw new Error(
        "leader election: cannot find the pod's namespace for the Lease (not in a pod): set POD_NAMESPACE",
      );
    }
    if (!opts.leaderElect) {
      log.warn(
        'Leader election is off: run exactly one replica. Two replicas ' +
          'without --leader-elect both write to the same Machines and ' +
          'checks',
        { replicasAllowed: 1 },
      );
    }
    const workers = opts.workers ?? DEFAULT_WORKERS;

    const capi = opts.capiApiVersion
      ? {
          apiVersion: opts.capiApiVersion,
          kubeadmControlPlane: true,
          kubeadmBootstrap: true,
          served: [opts.capiApiVersion],
          source: 'capiApiVersion option (tests)',
        }
      : await discoverCapi(rest);
    log.info('CAPI found', {
      apiVersion: capi.apiVersion,
      served: capi.served,
      minor: capi.minor,
      version: capi.version,
      source: capi.source,
      kubeadmControlPlane: capi.kubeadmControlPlane,
      kubeadmBootstrap: capi.kubeadmBootstrap,
    });
    // A CAPI upgrade under the running controller: restart cleanly (workers finish, the Lease is handed back, the
    // command exits for its Deployment to start it again with the new release; docs/decisions/capi-upgrade-rediscovered-and-restarted.md).
    const rediscoverMs = opts.capiRediscoveryMs ?? DEFAULT_REDISCOVERY_MS;
    if (!opts.capiApiVersion && rediscoverMs > 0) {
      rediscovery = new CapiRediscovery({
        discover: () => discoverCapi(rest),
        initial: capi,
        periodMs: rediscoverMs,
        log,
        onChange: (why) => {
          log.info('The CAPI release changed: stopping to restart with it', { change: why });
          void stop().then(() => opts.onCapiChanged?.(why));
        },
      });
      rediscovery.start();
    }

    if (opts.workloadNodeCheck) workloadNodes = new WorkloadNodeReader(rest, log, 30_000, clock);
    metrics.registerController(MACHINEJOINCHECK_CONTROLLER.name, workers);
    controller = new JoinCheckController({
      rest,
      apiVersion: capi.apiVersion,
      ...(capi.minor !== undefined ? { capiMinor: capi.minor } : {}),
      kubeadm: { controlPlane: capi.kubeadmControlPlane, bootstrap: capi.kubeadmBootstrap },
      ...(opts.namespace ? { namespace: opts.namespace } : {}),
      ...(opts.watchFilter ? { watchFilter: opts.watchFilter } : {}),
      ...(opts.syncPeriodMs !== undefined ? { syncPeriodMs: opts.syncPeriodMs } : {}),
      log,
      metrics: joinguardMetrics,
      runtimeMetrics: metrics,
      events: new EventRecorder(rest, log, identity, clock),
      clock,
      livenessMs: opts.watchLivenessMs ?? DEFAULT_LIVENESS_MS,
      workers,
      ...(opts.connectionGraceMs !== undefined ? { connectionGraceMs: opts.connectionGraceMs } : {}),
      ...(opts.unansweredAfterMs !== undefined ? { unansweredAfterMs: opts.unansweredAfterMs } : {}),
      allowMachineDelete: opts.allowMachineDelete === true,
      ...(workloadNodes ? { workloadNodes } : {}),
    });
    const c = controller;

    let metricsPort: number | undefined;
    if (metricsAddr) {
      const secure = !opts.insecureDiagnostics;
      const server = await startDiagnosticsServer({
        addr: metricsAddr,
        registry: metrics.registry,
        log,
        secure,
        ...(secure ? { auth: new DelegatingAuth({ post: (path, body) => ungated.post(path, body) }) } : {}),
        ...(opts.tls ? { tls: opts.tls } : {}),
        ...(opts.diagnosticsCert ?? {}),
        setVerbosity: (v) => setVerbosity(log, v),
      });
      servers.push(server);
      metricsPort = server.port;
    }
    let healthPort: number | undefined;
    if (probeAddr) {
      const server = await startProbeServer(probeAddr, {
        healthy: () => (stopping ? { ok: false, why: 'stopping' } : { ok: true }),
        ready: () => readiness(c),
      });
      servers.push(server);
      healthPort = server.port;
    }

    c.startInformers();
    const synced = c.synced().then(() => log.info('Caches synced'));

    let leading: Promise<void> = Promise.resolve();
    if (opts.leaderElect) {
      const ns = leaseNamespace!;
      const name = opts.leaderElectionId ?? DEFAULT_LEASE_NAME;
      // As client-go's leader metric: 0 from the start (a standby), 1 while leading, 0 once it stopped leading.
      elector = new LeaderElector({
        rest: ungated,
        namespace: ns,
        name,
        identity,
        log,
        ...(opts.leaseDurationMs !== undefined ? { leaseDurationMs: opts.leaseDurationMs } : {}),
        ...(opts.renewDeadlineMs !== undefined ? { renewDeadlineMs: opts.renewDeadlineMs } : {}),
        ...(opts.retryPeriodMs !== undefined ? { retryPeriodMs: opts.retryPeriodMs } : {}),
        onStatus: (leading) => metrics.leaderStatus(name, leading),
        // As controller-runtime's manager: no graceful shutdown after an unintended loss; the command exits 1 at
        // once. The gate already refuses every write; stop() only releases what it can.
        onLost: () => {
          opts.onLeadershipLost?.();
          void stop();
        },
      });
      elector.start();
      leading = elector.leading$;
      log.info('Waiting for leadership', { Lease: { name, namespace: ns }, identity });
    }
    // Whether this replica elects, per Lease: the alerts tell "no leader" from "runs without leader election".
    metrics.leaderElection(opts.leaderElectionId ?? DEFAULT_LEASE_NAME, opts.leaderElect ?? false);

    const ready = Promise.all([synced, leading]).then(() => {
      if (stopping) return;
      c.startWorkers();
      log.info('Starting workers', {
        controller: MACHINEJOINCHECK_CONTROLLER.name,
        'worker count': workers,
        namespace: opts.namespace ?? '(all)',
        workloadNodeCheck: opts.workloadNodeCheck ?? false,
      });
    });
    ready.catch(() => undefined);

    return {
      ready: () => ready,
      stop,
      metrics,
      ...(metricsPort !== undefined ? { metricsPort } : {}),
      ...(healthPort !== undefined ? { healthPort } : {}),
      reconciledChecks: () => c.reconciled,
      firstFullReconcileAt: () => c.firstFullReconcileAt(),
      watchRestarts: () => c.watchRestarts(),
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

function withLevel(log: Logger, level: string | undefined): Logger {
  if (level !== undefined) log.level = level;
  return log;
}
