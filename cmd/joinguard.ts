// The `joinguard` command: flags -> startController (+ the admission webhooks unless --webhook-port=0).
// SIGTERM/SIGINT stop it gracefully: workers finish the reconcile they are in, the Lease is handed back.
import { join } from 'node:path';
import { parseDuration } from '../api/v1alpha1/duration.js';
import { startController } from '../controllers/manager.js';
import { loadClusterAccess } from '../controllers/runtime/kubeconfig.js';
import { makeLogger } from '../controllers/runtime/logger.js';
import { servingTls } from '../controllers/runtime/serving-tls.js';
import { parseFlags, usage, type Flags } from './flags.js';

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
  const log = makeLogger({ format: flags.loggingFormat, verbosity: flags.verbosity });
  for (const d of deprecations) log.warn(d);
  const access = loadClusterAccess(flags.kubeconfig ? { kubeconfigPath: flags.kubeconfig } : {});
  const tls = servingTls(flags.tlsMinVersion, flags.tlsCipherSuites);
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
    leaseDurationMs: flags.leaderElectLeaseDurationMs,
    renewDeadlineMs: flags.leaderElectRenewDeadlineMs,
    retryPeriodMs: flags.leaderElectRetryPeriodMs,
    metricsBindAddress: flags.diagnosticsAddress,
    insecureDiagnostics: flags.insecureDiagnostics,
    tls,
    diagnosticsCert: { certFile, keyFile },
    healthProbeBindAddress: flags.healthProbeBindAddress,
    workloadNodeCheck: flags.workloadNodeCheck,
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

  let webhook: { stop(): Promise<void> } | undefined;
  if (flags.webhookPort > 0) {
    const { startWebhookServer } = await import('../webhooks/server.js');
    webhook = await startWebhookServer({ port: flags.webhookPort, certFile, keyFile, tls, access, logger: log });
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
  if (leadershipLost) return exitCode;
  await webhook?.stop();
  await controller.stop();
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (e: Error) => {
    process.stderr.write(`joinguard: ${e.message}\n`);
    process.exit(1);
  },
);
