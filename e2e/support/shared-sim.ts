// The infrastructure simulation shared by every e2e spec of one mocha run (one sim acts on all test
// namespaces; two would fight over the same SimMachines). Started on first use, stopped by the root hook
// before the test control plane. Specs keep their rules to their own namespace.
import type { Sim, SimOptions } from '../sim/sim.js';
import { getTestEnv } from './testenv.js';

let pending: Promise<Sim> | undefined;

export function getSim(options?: SimOptions): Promise<Sim> {
  if (!pending) {
    pending = (async () => {
      const env = await getTestEnv();
      const { startSim } = await import('../sim/sim.js');
      return startSim(env.kube(), {
        capiApiVersion: env.capiApiVersion,
        kubeletPort: env.ports['sim-kubelet'],
        ...options,
      });
    })();
    pending.catch(() => (pending = undefined));
  }
  return pending;
}

export async function stopSim(): Promise<void> {
  const current = pending;
  pending = undefined;
  const sim = await current?.catch(() => undefined);
  await sim?.stop();
}
