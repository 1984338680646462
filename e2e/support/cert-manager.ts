// cert-manager on the shared test control plane, for the specs that install the add-on as a user would
// (e2e/install). Started on first use (built on first use by hack/testenv/cert-manager/build.sh), stopped by the
// root hook before the control plane; a spec that never asks for it never starts or builds it.
import type { CertManager } from '../../hack/testenv/cert-manager.js';
import type { KubeClient } from '../../hack/testenv/kube-client.js';
import { getTestEnv } from './testenv.js';

export type { CertManager } from '../../hack/testenv/cert-manager.js';

let pending: Promise<CertManager> | undefined;
let client: KubeClient | undefined;

export function getCertManager(): Promise<CertManager> {
  if (!pending) {
    pending = (async () => {
      const env = await getTestEnv();
      const { startCertManager } = await import('../../hack/testenv/cert-manager.js');
      client ??= env.kube();
      return startCertManager({
        kubeconfigPath: env.kubeconfigPath,
        runDir: env.runDir,
        rest: client,
        log: (line) => process.stderr.write(`${line}\n`),
      });
    })();
    pending.catch(() => (pending = undefined));
  }
  return pending;
}

export async function stopCertManager(): Promise<void> {
  const current = pending;
  pending = undefined;
  const cm = await current?.catch(() => undefined);
  await cm?.stop();
  client?.close();
  client = undefined;
}

/** For a hook that installs the add-on: cert-manager's first build takes minutes (cached after); its start, seconds. */
export const CERT_MANAGER_START_TIMEOUT_MS = 30 * 60_000;
