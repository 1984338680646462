// Starts JoinGuard: discovery of CAPI's API version, the diagnostics and probe servers, the caches, leader
// election on a Lease, then the workers. Informers start before leadership so a standby is warm and can
// take over at once; only the leader reconciles.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'winston';
import { discoverCapi } from './runtime/discovery.js';
import { DelegatingAuth } from './runtime/diagnostics-auth.js';
import { LeaderElector } from './runtime/leader.js';
import { makeLogger, setVerbosity } from './runtime/logger.js';
import { RuntimeMetrics, type RestRequest } from './runtime/metrics.js';
import { RestClient } from './runtime/rest.js';
import { parseBindAddress, startDiagnosticsServer, startProbeServer, type BoundServer } from './runtime/servers.js';
import { JoinCheckController } from './joincheck/controller.js';
import { EventRecorder } from './joincheck/events.js';
import { JoinGuardMetrics } from './joincheck/metrics.js';
import { WorkloadNodeReader } from './joincheck/workload-nodes.js';
import { DEFAULT_USER_AGENT, MACHINEJOINCHECK_CONTROLLER, type ControllerOptions, type RunningController } from './options.js';

export type { ControllerOptions, RunningController } from './options.js';

const DEFAULT_WORKERS = 2;

type Health = { ok: boolean; why?: string };

/**
 * Reports every request a client opens to client-go's request metrics (rest_client_*). A bridge until the
 * RestClient takes `onRequest` itself (runtime's change): it times `open`, which every request and watch uses.
 */
function metered(rest: RestClient, onRequest: (r: RestRequest) => void): RestClient {
  const open = rest.open.bind(rest);
  const host = rest.server.host;
  rest.open = async (method, path, opts) => {
    const t0 = performance.now();
    try {
      const r = await open(method, path, opts);
      onRequest({ method, host, code: r.res.statusCode ?? 0, seconds: (performance.now() - t0) / 1000 });
      return r;
    } catch (e) {
      onRequest({ method, host, code: 0, seconds: (performance.now() - t0) / 1000 });
      throw e;
    }
  };
  return rest;
}

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
  const userAgent = opts.userAgent ?? DEFAULT_USER_AGENT;
  const metrics = new RuntimeMetrics({ processMetrics: opts.collectDefaultMetrics ?? true });
  const rest = metered(new RestClient(opts.kubeConfig, userAgent), metrics.restRequest);
  // Leader election and the diagnostics' reviews must not wait on (or be gated like) the controller's writes.
  const ungated = metered(new RestClient(opts.kubeConfig, userAgent), metrics.restRequest);
  const joinguardMetrics = new JoinGuardMetrics(metrics.registry);
  const servers: BoundServer[] = [];
  let controller: JoinCheckController | undefined;
  let elector: LeaderElector | undefined;
  let workloadNodes: WorkloadNodeReader | undefined;
  let stopping: Promise<void> | undefined;

  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
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
    const probeAddr = parseBindAddress('--health-probe-bind-address', opts.healthProbeBindAddress ?? ':8081');
    const workers = opts.workers ?? DEFAULT_WORKERS;
    // Acting on Clusters an operator filtered out (another instance's) would be worse than not starting.
    if (opts.watchFilter) throw new Error('--watch-filter is not supported by this build of the controller yet');

    const capi = opts.capiApiVersion
      ? { apiVersion: opts.capiApiVersion, kubeadmControlPlane: true, kubeadmBootstrap: true, served: [opts.capiApiVersion] }
      : await discoverCapi(rest);
    log.info('CAPI found', { apiVersion: capi.apiVersion, served: capi.served, kubeadmControlPlane: capi.kubeadmControlPlane, kubeadmBootstrap: capi.kubeadmBootstrap });

    if (opts.workloadNodeCheck) workloadNodes = new WorkloadNodeReader(rest, log, 30_000, clock);
    metrics.registerController(MACHINEJOINCHECK_CONTROLLER.name, workers);
    controller = new JoinCheckController({
      rest,
      apiVersion: capi.apiVersion,
      kubeadm: { controlPlane: capi.kubeadmControlPlane, bootstrap: capi.kubeadmBootstrap },
      ...(opts.namespace ? { namespace: opts.namespace } : {}),
      log,
      metrics: joinguardMetrics,
      runtimeMetrics: metrics,
      events: new EventRecorder(rest, log, identity, clock),
      clock,
      livenessMs: opts.watchLivenessMs ?? 5 * 60_000,
      workers,
      ...(opts.connectionGraceMs !== undefined ? { connectionGraceMs: opts.connectionGraceMs } : {}),
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
      const ns = opts.leaderElectionNamespace ?? opts.namespace ?? process.env['POD_NAMESPACE'] ?? 'joinguard-system';
      const name = opts.leaderElectionId ?? 'joinguard-leader';
      // As client-go's leader metric: no series until this replica first leads, 0 once it stopped leading.
      elector = new LeaderElector({
        rest: ungated,
        namespace: ns,
        name,
        identity,
        log,
        ...(opts.leaseDurationMs !== undefined ? { leaseDurationMs: opts.leaseDurationMs } : {}),
        ...(opts.renewDeadlineMs !== undefined ? { renewDeadlineMs: opts.renewDeadlineMs } : {}),
        ...(opts.retryPeriodMs !== undefined ? { retryPeriodMs: opts.retryPeriodMs } : {}),
        onLost: () => {
          metrics.leaderStatus(name, false);
          void stop().then(() => opts.onLeadershipLost?.());
        },
      });
      elector.start();
      leading = elector.leading$.then(() => metrics.leaderStatus(name, true));
      log.info('Waiting for leadership', { Lease: { name, namespace: ns }, identity });
    }

    const ready = Promise.all([synced, leading]).then(() => {
      if (stopping) return;
      c.startWorkers();
      log.info('Starting workers', { controller: MACHINEJOINCHECK_CONTROLLER.name, 'worker count': workers, namespace: opts.namespace ?? '(all)', workloadNodeCheck: opts.workloadNodeCheck ?? false });
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
