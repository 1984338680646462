// The `joinguard` command: flags -> startController (+ the admission webhooks unless --webhook-port=0).
// As CAPI's managers: a bad flag is refused on stderr in plain text (pflag's way, exit 2); from then on every
// line, a fatal start-up error included, goes through the logger in the chosen format (exit 1). The first line
// is the version. SIGTERM/SIGINT stop it gracefully: workers finish the reconcile they are in, the Lease is
// handed back.
import { join } from 'node:path';
import type { Logger } from 'winston';
import { parseDuration } from '../api/v1alpha1/duration.js';
import { startController } from '../controllers/manager.js';
import { loadClusterAccess } from '../runtime/client/kubeconfig.js';
import { makeLogger } from '../runtime/logger.js';
import { servingTls } from '../runtime/serving/serving-tls.js';
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

async function run(flags: Flags, log: Logger, deprecations: string[]): Promise<number> {
  log.info(versionLine(), { version: BUILD.version, gitCommit: BUILD.gitCommit });
  for (const d of deprecations) log.warn(d);
  // As CAPI's main at V(1): every flag and its value.
  for (const [name, spec] of Object.entries(FLAGS))
    log.http(`FLAG: --${name}=${JSON.stringify(flagValue(flags[spec.key]))}`);

  const access = loadClusterAccess(flags.kubeconfig ? { kubeconfigPath: flags.kubeconfig } : {});
  const curve = ecdhCurve(flags.tlsCurvePreferences);
  const tls = { ...servingTls(flags.tlsMinVersion, flags.tlsCipherSuites), ...(curve ? { ecdhCurve: curve } : {}) };
  const certFile = join(flags.webhookCertDir, flags.webhookCertName);
  const keyFile = join(flags.webhookCertDir, flags.webhookKeyName);

  let exitCode = 0;
  let leadershipLost = false;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const controller = await startController({
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
    diagnosticsCert: { certFile, keyFile },
    healthProbeBindAddress: flags.healthAddr,
    workloadNodeCheck: flags.workloadNodeCheck,
    allowMachineDelete: flags.allowMachineDelete,
    connectionGraceMs: flags.connectionGraceMs,
    logger: log,
    // The CAPI release changed under us: the controller stopped and handed the Lease back; exit for the
    // Deployment to start JoinGuard again with the new release.
    onCapiChanged: () => {
      exitCode = 1;
      resolveDone();
    },
    onLeadershipLost: () => {
      leadershipLost = true;
      exitCode = 1;
      resolveDone();
    },
  });
  controller.metrics.setBuildInfo(BUILD.version, BUILD.gitCommit);

  let webhook: { stop(): Promise<void> } | undefined;
  let profiler: { stop(): Promise<void> } | undefined;
  try {
    if (flags.webhookPort > 0) {
      const { startWebhookServer } = await import('../webhooks/server.js');
      webhook = await startWebhookServer({
        port: flags.webhookPort,
        certFile,
        keyFile,
        tls,
        access,
        logger: log,
        metrics: controller.metrics,
      });
    }
    if (flags.profilerAddress !== '') {
      const { startProfiler } = await import('./profiler.js');
      const p = await startProfiler(flags.profilerAddress);
      profiler = p;
      log.info('Serving the profiler', { address: flags.profilerAddress, port: p.port });
    }
  } catch (e) {
    await webhook?.stop();
    await controller.stop();
    throw e;
  }

  const onSignal = (sig: string) => {
    log.info('Stopping', { signal: sig });
    resolveDone();
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
  controller.ready().catch((e: Error) => {
    log.error('Could not start reconciling', { err: e.message });
    exitCode = 1;
    resolveDone();
  });

  await done;
  // controller-runtime: no graceful shutdown after an unintended loss of the Lease; exit 1 now.
  if (!leadershipLost) {
    await profiler?.stop();
    await webhook?.stop();
    await controller.stop();
  }
  await flushed();
  return exitCode;
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
