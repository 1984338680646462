// The `joinguard` command: flags -> startController (+ the admission webhooks unless --webhook-port=0).
// As CAPI's managers: a bad flag is refused on stderr in plain text (pflag's way, exit 2); from then on every
// line, a fatal start-up error included, goes through the logger in the chosen format (exit 1). The first line
// is the version. SIGTERM/SIGINT stop it gracefully: workers finish the reconcile they are in, the Lease is
// handed back.
import { join } from 'node:path';
import type { Logger } from 'winston';
import { parseDuration } from '../api/v1alpha1/duration.js';
import { startController } from '../controllers/manager.js';
import type { ControllerOptions, RunningController } from '../controllers/options.js';
import { loadClusterAccess, type ClusterAccess } from '../runtime/client/kubeconfig.js';
import { makeLogger } from '../runtime/logger.js';
import { servingTls, type ServingTls } from '../runtime/serving/serving-tls.js';
import { BUILD, versionLine } from '../controllers/version.js';
import { ecdhCurve, FLAGS, parseFlags, usage, type Flags } from './flags.js';

async function main(): Promise<number> {
  let flags: Flags;
  const deprecations: string[] = [];
  try {
    flags = parseFlags(process.argv.slice(2), parseDuration, deprecations);
  } catch (e) {
    process.stderr.write(`joinguard: ${(e as Error).message}\n`);
    return 2;
  }
  if (flags.help) {
    process.stdout.write(usage());
    return 0;
  }
  // What an image is asked first (`podman run IMAGE --version`): the same line the log starts with.
  if (flags.version) {
    process.stdout.write(`${versionLine()}\n`);
    return 0;
  }
  const log = makeLogger({ format: flags.loggingFormat, verbosity: flags.verbosity, vmodule: flags.vmodule });
  try {
    return await run(flags, log, deprecations);
  } catch (e) {
    // CAPI: setupLog.Error(err, "Unable to start manager"); os.Exit(1) — in the log's own format.
    log.error('Unable to start manager', { err: (e as Error).message });
    await flushed();
    return 1;
  }
}

/** How the command ends: a signal, a CAPI upgrade or a lost Lease resolves `done`; the last two exit 1. */
interface Ending {
  done: Promise<void>;
  end: (exitCode?: number) => void;
  exitCode: number;
  leadershipLost: boolean;
}

function ending(): Ending {
  let resolveDone!: () => void;
  const e: Ending = {
    done: new Promise<void>((r) => (resolveDone = r)),
    end: (exitCode) => {
      if (exitCode !== undefined) e.exitCode = exitCode;
      resolveDone();
    },
    exitCode: 0,
    leadershipLost: false,
  };
  return e;
}

type Stoppable = { stop(): Promise<void> };

async function run(flags: Flags, log: Logger, deprecations: string[]): Promise<number> {
  logStartup(flags, log, deprecations);
  const access = loadClusterAccess(flags.kubeconfig ? { kubeconfigPath: flags.kubeconfig } : {});
  const curve = ecdhCurve(flags.tlsCurvePreferences);
  const tls = { ...servingTls(flags.tlsMinVersion, flags.tlsCipherSuites), ...(curve ? { ecdhCurve: curve } : {}) };
  const cert = {
    certFile: join(flags.webhookCertDir, flags.webhookCertName),
    keyFile: join(flags.webhookCertDir, flags.webhookKeyName),
  };

  const end = ending();
  const controller = await startController(controllerOptions(flags, { access, tls, cert, log }, end));
  controller.metrics.setBuildInfo(BUILD.version, BUILD.gitCommit);
  const { webhook, profiler } = await startBeside(flags, { access, tls, cert, log }, controller);

  const onSignal = (sig: string) => {
    log.info('Stopping', { signal: sig });
    end.end();
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
  controller.ready().catch((e: Error) => {
    log.error('Could not start reconciling', { err: e.message });
    end.end(1);
  });

  await end.done;
  // controller-runtime: no graceful shutdown after an unintended loss of the Lease; exit 1 now.
  if (!end.leadershipLost) {
    await profiler?.stop();
    await webhook?.stop();
    await controller.stop();
  }
  await flushed();
  return end.exitCode;
}

/** The version first, the deprecated flags used, then (as CAPI's main at V(1)) every flag and its value. */
function logStartup(flags: Flags, log: Logger, deprecations: string[]): void {
  log.info(versionLine(), { version: BUILD.version, gitCommit: BUILD.gitCommit });
  for (const d of deprecations) log.warn(d);
  for (const [name, spec] of Object.entries(FLAGS))
    log.http(`FLAG: --${name}=${JSON.stringify(flagValue(flags[spec.key]))}`);
}

interface Serving {
  access: ClusterAccess;
  tls: ServingTls;
  cert: { certFile: string; keyFile: string };
  log: Logger;
}

function controllerOptions(flags: Flags, { access, tls, cert, log }: Serving, end: Ending): ControllerOptions {
  return {
    access,
    ...(flags.namespace ? { namespace: flags.namespace } : {}),
    ...(flags.watchFilter ? { watchFilter: flags.watchFilter } : {}),
    syncPeriodMs: flags.syncPeriodMs,
    workers: flags.concurrency,
    qps: flags.kubeApiQps,
    burst: flags.kubeApiBurst,
    leaderElect: flags.leaderElect,
    leaderElectionId: flags.leaderElectResourceName,
    leaseDurationMs: flags.leaderElectLeaseDurationMs,
    renewDeadlineMs: flags.leaderElectRenewDeadlineMs,
    retryPeriodMs: flags.leaderElectRetryPeriodMs,
    metricsBindAddress: flags.diagnosticsAddress,
    insecureDiagnostics: flags.insecureDiagnostics,
    tls,
    diagnosticsCert: cert,
    healthProbeBindAddress: flags.healthAddr,
    workloadNodeCheck: flags.workloadNodeCheck,
    allowMachineDelete: flags.allowMachineDelete,
    connectionGraceMs: flags.connectionGraceMs,
    logger: log,
    // The CAPI release changed under us: the controller stopped and handed the Lease back; exit for the
    // Deployment to start JoinGuard again with the new release.
    onCapiChanged: () => end.end(1),
    onLeadershipLost: () => {
      end.leadershipLost = true;
      end.end(1);
    },
  };
}

/** The admission webhooks (unless --webhook-port=0) and the profiler (with --profiler-address) beside the controller. */
async function startBeside(
  flags: Flags,
  { access, tls, cert, log }: Serving,
  controller: RunningController,
): Promise<{ webhook?: Stoppable; profiler?: Stoppable }> {
  let webhook: Stoppable | undefined;
  try {
    if (flags.webhookPort > 0) {
      const { startWebhookServer } = await import('../webhooks/server.js');
      webhook = await startWebhookServer({
        port: flags.webhookPort,
        ...cert,
        tls,
        access,
        logger: log,
        metrics: controller.metrics,
      });
    }
    if (flags.profilerAddress === '') return { webhook };
    const { startProfiler } = await import('./profiler.js');
    const profiler = await startProfiler(flags.profilerAddress);
    log.info('Serving the profiler', { address: flags.profilerAddress, port: profiler.port });
    return { webhook, profiler };
  } catch (e) {
    await webhook?.stop();
    await controller.stop();
    throw e;
  }
}

function flagValue(v: unknown): string {
  if (Array.isArray(v)) return v.map((x) => (typeof x === 'object' ? `${x.pattern}=${x.v}` : String(x))).join(',');
  if (typeof v === 'object' && v !== null)
    return Object.entries(v)
      .map(([k, b]) => `${k}=${b}`)
      .join(',');
  return String(v ?? '');
}

/** winston hands lines to the stream on later ticks: let the last ones out before the process exits. */
const flushed = () => new Promise<void>((r) => setTimeout(r, 50));

main().then(
  (code) => process.exit(code),
  (e: Error) => {
    // Only a bug reaches here (main logs its own errors): still one line, not a stack on stderr.
    process.stdout.write(`${JSON.stringify({ ts: Date.now(), msg: 'Unable to start manager', err: e.message })}\n`);
    process.exit(1);
  },
);
