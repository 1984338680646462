// Starts JoinGuard: discovery of CAPI's API version, the metrics and probe servers, the caches, leader
// election on a Lease, then the workers. Informers start before leadership so a standby is warm and can
// take over at once; only the leader reconciles.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'winston';
import { discoverCapi } from './runtime/discovery.js';
import { LeaderElector } from './runtime/leader.js';
import { makeLogger } from './runtime/logger.js';
import { RestClient } from './runtime/rest.js';
import { parseBindAddress, startMetricsServer, startProbeServer, type BoundServer } from './runtime/servers.js';
import { JoinCheckController } from './joincheck/controller.js';
import { EventRecorder } from './joincheck/events.js';
import { ControllerMetrics } from './joincheck/metrics.js';
import { WorkloadNodeReader } from './joincheck/workload-access.js';
import { DEFAULT_USER_AGENT, type ControllerOptions, type RunningController } from './options.js';

export type { ControllerOptions, RunningController } from './options.js';

export async function startController(opts: ControllerOptions): Promise<RunningController> {
  const log: Logger = opts.logger ?? makeLogger(opts.logLevel ?? 'info');
  const clock = opts.clock ?? Date.now;
  const identity = opts.identity ?? `${hostname()}_${randomBytes(4).toString('hex')}`;
  const rest = new RestClient(opts.kubeConfig, opts.userAgent ?? DEFAULT_USER_AGENT);
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
      log.info('stopped');
    })());

  try {
    const metrics = new ControllerMetrics(opts.collectDefaultMetrics ?? true);
    const metricsAddr = parseBindAddress('--metrics-bind-address', opts.metricsBindAddress ?? ':8080');
    const probeAddr = parseBindAddress('--health-probe-bind-address', opts.healthProbeBindAddress ?? ':8081');

    const capi = opts.capiApiVersion
      ? { apiVersion: opts.capiApiVersion, kubeadmControlPlane: true, kubeadmBootstrap: true, served: [opts.capiApiVersion] }
      : await discoverCapi(rest);
    log.info('CAPI found', { apiVersion: capi.apiVersion, served: capi.served, kubeadmControlPlane: capi.kubeadmControlPlane, kubeadmBootstrap: capi.kubeadmBootstrap });

    if (opts.workloadNodeCheck) workloadNodes = new WorkloadNodeReader(rest, log, 30_000, clock);
    controller = new JoinCheckController({
      rest,
      apiVersion: capi.apiVersion,
      kubeadm: { controlPlane: capi.kubeadmControlPlane, bootstrap: capi.kubeadmBootstrap },
      ...(opts.namespace ? { namespace: opts.namespace } : {}),
      log,
      metrics,
      events: new EventRecorder(rest, log, identity, clock),
      clock,
      livenessMs: opts.watchLivenessMs ?? 5 * 60_000,
      ...(opts.connectionGraceMs !== undefined ? { connectionGraceMs: opts.connectionGraceMs } : {}),
      ...(workloadNodes ? { workloadNodes } : {}),
    });
    const c = controller;

    if (metricsAddr) servers.push(await startMetricsServer(metricsAddr, metrics.registry));
    if (probeAddr) {
      servers.push(
        await startProbeServer(probeAddr, {
          healthy: () => (stopping ? { ok: false, why: 'stopping' } : { ok: true }),
          ready: () => c.health(),
        }),
      );
    }

    c.startInformers();
    const synced = c.synced().then(() => log.info('caches synced'));

    let leading: Promise<void> = Promise.resolve();
    if (opts.leaderElect) {
      const ns = opts.leaderElectionNamespace ?? opts.namespace ?? process.env['POD_NAMESPACE'] ?? 'joinguard-system';
      elector = new LeaderElector({
        rest,
        namespace: ns,
        name: opts.leaderElectionId ?? 'joinguard-leader',
        identity,
        log,
        onLost: () => {
          void stop().then(() => opts.onLeadershipLost?.());
        },
      });
      elector.start();
      leading = elector.leading$;
      log.info('waiting for leadership', { lease: `${ns}/${opts.leaderElectionId ?? 'joinguard-leader'}`, identity });
    }

    const ready = Promise.all([synced, leading]).then(() => {
      if (stopping) return;
      c.startWorkers();
      log.info('reconciling', { namespace: opts.namespace ?? '(all)', workloadNodeCheck: opts.workloadNodeCheck ?? false });
    });
    ready.catch(() => undefined);

    return {
      ready: () => ready,
      stop,
      ...(metricsAddr ? { metricsPort: servers[0]!.port } : {}),
      ...(probeAddr ? { healthPort: servers[servers.length - 1]!.port } : {}),
      reconciledChecks: () => c.reconciled,
      firstFullReconcileAt: () => c.firstFullReconcileAt(),
      watchRestarts: () => c.watchRestarts(),
    };
  } catch (e) {
    await stop();
    throw e;
  }
}
