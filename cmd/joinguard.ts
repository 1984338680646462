// The `joinguard` command: flags -> startController (+ the admission webhooks when --webhook-port is set).
// SIGTERM/SIGINT stop it gracefully: workers finish the reconcile they are in, the Lease is handed back.
import { join } from 'node:path';
import { parseDuration } from '../api/v1alpha1/duration.js';
import { startController } from '../controllers/manager.js';
import { loadClusterAccess } from '../controllers/runtime/kubeconfig.js';
import { makeLogger } from '../controllers/runtime/logger.js';
import { parseFlags, usage, type Flags } from './flags.js';


async function main(): Promise<number> {
  let flags: Flags;
  try {
    flags = parseFlags(process.argv.slice(2), parseDuration);
  } catch (e) {
    process.stderr.write(`joinguard: ${(e as Error).message}\n`);
    return 2;
  }
  if (flags.help) {
    process.stdout.write(usage());
    return 0;
  }
  const log = makeLogger(flags.logLevel);
  const access = loadClusterAccess(flags.kubeconfig ? { kubeconfigPath: flags.kubeconfig } : {});

  let exitCode = 0;
  let leadershipLost = false;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const controller = await startController({
    access,
    ...(flags.namespace ? { namespace: flags.namespace } : {}),
    leaderElect: flags.leaderElect,
    ...(flags.leaderElectionNamespace ? { leaderElectionNamespace: flags.leaderElectionNamespace } : {}),
    leaderElectionId: flags.leaderElectionId,
    metricsBindAddress: flags.metricsBindAddress,
    healthProbeBindAddress: flags.healthProbeBindAddress,
    workloadNodeCheck: flags.workloadNodeCheck,
    ...(flags.connectionGraceMs !== undefined ? { connectionGraceMs: flags.connectionGraceMs } : {}),
    logger: log,
    onLeadershipLost: () => {
      leadershipLost = true;
      exitCode = 1;
      resolveDone();
    },
  });

  let webhook: { stop(): Promise<void> } | undefined;
  if (flags.webhookPort > 0) {
    const { startWebhookServer } = await import('../webhooks/server.js');
    webhook = await startWebhookServer({
      port: flags.webhookPort,
      certFile: join(flags.webhookCertDir, 'tls.crt'),
      keyFile: join(flags.webhookCertDir, 'tls.key'),
      access,
      logger: log,
    });
  }

  const onSignal = (sig: string) => {
    log.info(`${sig}: stopping`);
    resolveDone();
  };
  process.once('SIGTERM', () => onSignal('SIGTERM'));
  process.once('SIGINT', () => onSignal('SIGINT'));
  controller.ready().catch((e: Error) => {
    log.error('could not start reconciling', { error: e.message });
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
