// Starts JoinGuard: discovery of CAPI's API version, the diagnostics and probe servers, the caches, leader
// election on a Lease, then the workers. Informers start before leadership so a standby is warm and can
// take over at once; only the leader reconciles.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'winston';
import { discoverCapi, type CapiVersionInfo } from '../runtime/client/discovery.js';
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

/** What has been started so far: stop() releases whatever is there, in order. */
type Parts = {
  log: Logger;
  metrics: RuntimeMetrics;
  rest: RestClient;
  ungated: RestClient;
  servers: BoundServer[];
  elector?: LeaderElector;
  controller?: JoinCheckController;
  workloadNodes?: WorkloadNodeReader;
  rediscovery?: CapiRediscovery;
  stopping?: Promise<void>;
};

type Ports = { metricsPort?: number; healthPort?: number };

export async function startController(opts: ControllerOptions): Promise<RunningController> {
  const log: Logger = opts.logger ?? withLevel(makeLogger({ format: 'json' }), opts.logLevel);
  const clock = opts.clock ?? Date.now;
  const identity = opts.identity ?? `${hostname()}_${randomBytes(4).toString('hex')}`;
  const metrics = new RuntimeMetrics({ processMetrics: opts.collectDefaultMetrics ?? true });
  const p: Parts = { log, metrics, ...clients(opts, log, metrics, () => p.elector), servers: [] };
  const joinguardMetrics = new JoinGuardMetrics(metrics.registry);
  const stop = (): Promise<void> => (p.stopping ??= stopParts(p));

  try {
    const metricsAddr = parseBindAddress('--diagnostics-address', opts.metricsBindAddress ?? ':8443');
    const probeAddr = parseBindAddress('--health-addr', opts.healthProbeBindAddress ?? ':9440');
    const leaseNamespace = leaseNamespaceOf(opts, log);
    const workers = opts.workers ?? DEFAULT_WORKERS;
    const capi = await findCapi(opts, p, stop);
    const c = (p.controller = newController(opts, p, capi, { joinguardMetrics, clock, identity, workers }));
    const ports = await startServers(opts, p, c, metricsAddr, probeAddr);

    c.startInformers();
    const synced = c.synced().then(() => log.info('Caches synced'));
    const leading = opts.leaderElect
      ? startLeaderElection(opts, p, leaseNamespace!, identity, stop)
      : Promise.resolve();
    // Whether this replica elects, per Lease: the alerts tell "no leader" from "runs without leader election".
    metrics.leaderElection(opts.leaderElectionId ?? DEFAULT_LEASE_NAME, opts.leaderElect ?? false);
    const ready = startWorkersOnceReady(opts, p, c, workers, Promise.all([synced, leading]));

    return {
      ready: () => ready,
      stop,
      metrics,
      ...ports,
      reconciledChecks: () => c.reconciled,
      firstFullReconcileAt: () => c.firstFullReconcileAt(),
      watchRestarts: () => c.watchRestarts(),
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The controller's client, its writes gated on leadership, and an ungated one for the Lease and the reviews. */
function clients(
  opts: ControllerOptions,
  log: Logger,
  metrics: RuntimeMetrics,
  elector: () => LeaderElector | undefined,
): { rest: RestClient; ungated: RestClient } {
  const userAgent = opts.userAgent ?? defaultUserAgent();
  // The apiserver's warnings, each logged once (CAPI's managers install a warning handler on their client).
  const onWarning = new WarningLog(log).handle;
  const onRequest = (r: RequestRecord) =>
    metrics.restRequest({
      method: r.method,
      host: r.host,
      code: r.code === '<error>' ? 0 : Number(r.code),
      seconds: r.seconds,
    });
  // The one choke point of "no write after leadership is lost": every non-GET of the controller's client.
  const writeGate = opts.leaderElect ? () => elector()?.canWrite() ?? false : undefined;
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
  return { rest, ungated };
}

async function stopParts(p: Parts): Promise<void> {
  p.rediscovery?.stop();
  await p.controller?.stop();
  await p.elector?.stop();
  p.workloadNodes?.close();
  await Promise.all(p.servers.map((s) => s.close()));
  p.rest.close();
  p.ungated.close();
  p.log.info('Stopped');
}

/** The Lease's namespace with leader election (or throws), and a warning without it. */
function leaseNamespaceOf(opts: ControllerOptions, log: Logger): string | undefined {
  // controller-runtime keeps the Lease in the pod's namespace, whatever the manager watches (--namespace):
  // the add-on's Role grants Leases there and nowhere else. Outside a pod there is no such namespace.
  const leaseNamespace = opts.leaderElect ? (opts.leaderElectionNamespace ?? podNamespace()) : undefined;
  if (opts.leaderElect && !leaseNamespace) {
    throw new Error("leader election: cannot find the pod's namespace for the Lease (not in a pod): set POD_NAMESPACE");
  }
  if (!opts.leaderElect) {
    log.warn(
      'Leader election is off: run exactly one replica. Two replicas ' +
        'without --leader-elect both write to the same Machines and ' +
        'checks',
      { replicasAllowed: 1 },
    );
  }
  return leaseNamespace;
}

/** CAPI's API version (the option in tests, else discovered), watched for an upgrade when discovered. */
async function findCapi(opts: ControllerOptions, p: Parts, stop: () => Promise<void>): Promise<CapiVersionInfo> {
  const { log, rest } = p;
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
    p.rediscovery = new CapiRediscovery({
      discover: () => discoverCapi(rest),
      initial: capi,
      periodMs: rediscoverMs,
      log,
      onChange: (why) => {
        log.info('The CAPI release changed: stopping to restart with it', { change: why });
        void stop().then(() => opts.onCapiChanged?.(why));
      },
    });
    p.rediscovery.start();
  }
  return capi;
}

function newController(
  opts: ControllerOptions,
  p: Parts,
  capi: CapiVersionInfo,
  given: { joinguardMetrics: JoinGuardMetrics; clock: () => number; identity: string; workers: number },
): JoinCheckController {
  const { rest, log, metrics } = p;
  const { clock, workers } = given;
  if (opts.workloadNodeCheck) p.workloadNodes = new WorkloadNodeReader(rest, log, 30_000, clock);
  const workloadNodes = p.workloadNodes;
  metrics.registerController(MACHINEJOINCHECK_CONTROLLER.name, workers);
  return new JoinCheckController({
    rest,
    apiVersion: capi.apiVersion,
    ...(capi.minor !== undefined ? { capiMinor: capi.minor } : {}),
    kubeadm: { controlPlane: capi.kubeadmControlPlane, bootstrap: capi.kubeadmBootstrap },
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
    ...(opts.watchFilter ? { watchFilter: opts.watchFilter } : {}),
    ...(opts.syncPeriodMs !== undefined ? { syncPeriodMs: opts.syncPeriodMs } : {}),
    log,
    metrics: given.joinguardMetrics,
    runtimeMetrics: metrics,
    events: new EventRecorder(rest, log, given.identity, clock),
    clock,
    livenessMs: opts.watchLivenessMs ?? DEFAULT_LIVENESS_MS,
    workers,
    ...(opts.connectionGraceMs !== undefined ? { connectionGraceMs: opts.connectionGraceMs } : {}),
    ...(opts.unansweredAfterMs !== undefined ? { unansweredAfterMs: opts.unansweredAfterMs } : {}),
    allowMachineDelete: opts.allowMachineDelete === true,
    ...(workloadNodes ? { workloadNodes } : {}),
  });
}

/** The diagnostics server (metrics, pprof, verbosity) and the probe server, each where an address is given. */
async function startServers(
  opts: ControllerOptions,
  p: Parts,
  c: JoinCheckController,
  metricsAddr: ReturnType<typeof parseBindAddress>,
  probeAddr: ReturnType<typeof parseBindAddress>,
): Promise<Ports> {
  const ports: Ports = {};
  if (metricsAddr) {
    const secure = !opts.insecureDiagnostics;
    const server = await startDiagnosticsServer({
      addr: metricsAddr,
      registry: p.metrics.registry,
      log: p.log,
      secure,
      ...(secure ? { auth: new DelegatingAuth({ post: (path, body) => p.ungated.post(path, body) }) } : {}),
      ...(opts.tls ? { tls: opts.tls } : {}),
      ...(opts.diagnosticsCert ?? {}),
      setVerbosity: (v) => setVerbosity(p.log, v),
    });
    p.servers.push(server);
    ports.metricsPort = server.port;
  }
  if (probeAddr) {
    const server = await startProbeServer(probeAddr, {
      healthy: () => (p.stopping ? { ok: false, why: 'stopping' } : { ok: true }),
      ready: () => readiness(c),
    });
    p.servers.push(server);
    ports.healthPort = server.port;
  }
  return ports;
}

/** Campaigns for the Lease; resolves once this replica leads. */
function startLeaderElection(
  opts: ControllerOptions,
  p: Parts,
  ns: string,
  identity: string,
  stop: () => Promise<void>,
): Promise<void> {
  const name = opts.leaderElectionId ?? DEFAULT_LEASE_NAME;
  // As client-go's leader metric: 0 from the start (a standby), 1 while leading, 0 once it stopped leading.
  const elector = (p.elector = new LeaderElector({
    rest: p.ungated,
    namespace: ns,
    name,
    identity,
    log: p.log,
    ...(opts.leaseDurationMs !== undefined ? { leaseDurationMs: opts.leaseDurationMs } : {}),
    ...(opts.renewDeadlineMs !== undefined ? { renewDeadlineMs: opts.renewDeadlineMs } : {}),
    ...(opts.retryPeriodMs !== undefined ? { retryPeriodMs: opts.retryPeriodMs } : {}),
    onStatus: (leading) => p.metrics.leaderStatus(name, leading),
    // As controller-runtime's manager: no graceful shutdown after an unintended loss; the command exits 1 at
    // once. The gate already refuses every write; stop() only releases what it can.
    onLost: () => {
      opts.onLeadershipLost?.();
      void stop();
    },
  }));
  elector.start();
  p.log.info('Waiting for leadership', { Lease: { name, namespace: ns }, identity });
  return elector.leading$;
}

/** Starts the workers once the caches synced and (with leader election) this replica leads, unless stopping. */
function startWorkersOnceReady(
  opts: ControllerOptions,
  p: Parts,
  c: JoinCheckController,
  workers: number,
  prerequisites: Promise<unknown>,
): Promise<void> {
  const ready = prerequisites.then(() => {
    if (p.stopping) return;
    c.startWorkers();
    p.log.info('Starting workers', {
      controller: MACHINEJOINCHECK_CONTROLLER.name,
      'worker count': workers,
      namespace: opts.namespace ?? '(all)',
      workloadNodeCheck: opts.workloadNodeCheck ?? false,
    });
  });
  ready.catch(() => undefined);
  return ready;
}

function withLevel(log: Logger, level: string | undefined): Logger {
  if (level !== undefined) log.level = level;
  return log;
}
