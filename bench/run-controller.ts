// The JoinGuard controller in a process of its own, so that its RSS and CPU are its own. Compiled by
// bench/controller-process.ts the way the image is (tsc, plain `node`, no tsx) and forked with an IPC
// channel: argv = kubeconfig path, namespace, user agent. Imports only what the shipped controller does.
// Reports 'started' (before startController), 'ready' (caches synced) and 'fullReconcile' (every check
// reconciled once) with epoch-ms times; stops on a 'stop' message, SIGTERM/SIGINT, or a lost parent.
import { startController } from '../controllers/manager.js';
import { loadClusterAccess } from '../controllers/runtime/kubeconfig.js';

const [kubeconfig, namespace, userAgent] = process.argv.slice(2);
if (!kubeconfig || !namespace || !userAgent || !process.send) {
  console.error('usage: run-controller.js <kubeconfig> <namespace> <user-agent> (with an IPC channel)');
  process.exit(2);
}
const send = (m: Record<string, unknown>) => process.send?.(m);
const grace = process.env.JOINGUARD_BENCH_CONNECTION_GRACE_MS;

const startedAt = Date.now();
send({ type: 'started', at: startedAt });
const controller = await startController({
  access: loadClusterAccess({ kubeconfigPath: kubeconfig }),
  namespace,
  userAgent,
  metricsBindAddress: '127.0.0.1:0',
  healthProbeBindAddress: '127.0.0.1:0',
  logLevel: process.env.JOINGUARD_BENCH_LOG_LEVEL ?? 'warn',
  ...(grace ? { connectionGraceMs: Number(grace) } : {}),
});

let stopping = false;
const stop = async (code: number) => {
  if (stopping) return;
  stopping = true;
  clearInterval(poll);
  // Where the RSS goes (V8 heap vs the rest), taken while everything is still loaded.
  const memory = process.memoryUsage();
  await controller.stop();
  send({ type: 'stopped', at: Date.now(), watchRestarts: controller.watchRestarts(), memory });
  process.exit(code);
};
process.on('message', (m: { type?: string }) => m?.type === 'stop' && void stop(0));
process.on('disconnect', () => void stop(1));
process.on('SIGTERM', () => void stop(0));
process.on('SIGINT', () => void stop(0));

void controller.ready().then(() => send({ type: 'ready', at: Date.now() }));
// firstFullReconcileAt() is set by the controller itself; polled here at 20 ms, its value is exact.
const poll = setInterval(() => {
  const at = controller.firstFullReconcileAt();
  if (at !== undefined) {
    send({ type: 'fullReconcile', at, checks: controller.reconciledChecks().size });
    clearInterval(poll);
  }
}, 20);
