// Mocha root-hook plugin (loaded by .mocharc.json): stops the shared test env after the run, if a spec
// started it. Nothing here starts anything.
import { stopCertManager } from './cert-manager.js';
import { stopSim } from './shared-sim.js';
import { stopTestEnv, testEnvRequested } from './testenv.js';

export const mochaHooks = {
  async afterAll(this: Mocha.Context): Promise<void> {
    if (!testEnvRequested()) return;
    this.timeout(60_000);
    await stopSim();
    await stopCertManager();
    await stopTestEnv();
  },
};
