// The JoinGuard controller in a process of its own for the micro-benchmark, started through
// controllers/manager.ts startController (the one way to start it), compiled with the product by
// bench/controller-process.ts and forked with an IPC channel and --expose-gc. argv: kubeconfig path.
// Answers: {type:'cpu'} -> process.cpuUsage() (µs); {type:'heap'} -> V8 heap after full GCs; {type:'stop'}.
// Reports {type:'ready'} (caches synced) and {type:'fullReconcile'} (every check reconciled once).
// Leader election, metrics and probes are off: the event path is measured, not the Lease.
import v8 from 'node:v8';
import { startController } from '../../controllers/manager.js';
import { loadClusterAccess } from '../../runtime/client/kubeconfig.js';

const [kubeconfig] = process.argv.slice(2);
if (!kubeconfig || !process.send) {
  console.error('usage: run-controller.js <kubeconfig> (forked, with an IPC channel)');
  process.exit(2);
}
const send = (m: Record<string, unknown>) => process.send?.(m);
const gc = (globalThis as { gc?: () => void }).gc;

const controller = await startController({
  access: loadClusterAccess({ kubeconfigPath: kubeconfig }),
  capiApiVersion: 'v1beta2',
  metricsBindAddress: '0',
  healthProbeBindAddress: '0',
  logLevel: 'warn',
  collectDefaultMetrics: false,
});

process.on('message', (m: { type?: string }) => {
  if (m?.type === 'cpu') send({ type: 'cpu', cpu: process.cpuUsage(), at: Date.now() });
  if (m?.type === 'heap') {
    // Several full collections: what is left is live data (weak caches and finalizers settle).
    for (let i = 0; i < 4; i++) gc?.();
    send({ type: 'heap', heap: v8.getHeapStatistics(), memory: process.memoryUsage() });
  }
  if (m?.type === 'stop') void controller.stop().then(() => process.exit(0));
});
process.on('disconnect', () => void controller.stop().then(() => process.exit(1)));

void controller.ready().then(() => send({ type: 'ready', at: Date.now() }));
const poll = setInterval(() => {
  const at = controller.firstFullReconcileAt();
  if (at !== undefined) {
    send({ type: 'fullReconcile', at, checks: controller.reconciledChecks().size });
    clearInterval(poll);
  }
}, 10);
