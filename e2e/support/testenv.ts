// The test control plane shared by every e2e spec of one mocha run.
//
// getTestEnv() starts it on first use (progress on stderr) and hands the same env to later callers;
// the root hook (root-hooks.ts) stops it after the run. Unit-only runs never call it, so they start
// nothing. With JOINGUARD_TESTENV_KUBECONFIG set (the kubeconfig printed by `npm run testenv -- up`),
// the running env is used instead and left running. JOINGUARD_CAPI_RELEASE=v1.10 runs the specs against
// CAPI v1.10's managers (v1beta1) instead of v1.14's.
import type { TestEnv } from '../../hack/testenv/testenv.js';

export type { TestEnv } from '../../hack/testenv/testenv.js';

let pending: Promise<TestEnv> | undefined;
let forRealNode = false;

/**
 * Every write at level Metadata (blocking mode, the default): the judge of the fault-injection specs
 * (e2e/faults), e.g. "no write from a deposed leader". Reads are not logged, to keep the file small.
 */
const WRITES_AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: Metadata
`;

function logToStderr(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * The shared env; starts it on first call. A failed start is not cached: the next call tries again.
 * `realNode`: the apiserver as a spec that runs a real node (hack/testenv/node.ts) needs it: ServiceAccount
 * admission on (the kubelet projects the pods' tokens). The first call must ask for it.
 */
export function getTestEnv(opts: { realNode?: boolean } = {}): Promise<TestEnv> {
  if (pending && opts.realNode && !forRealNode)
    return Promise.reject(new Error('the shared env was started without realNode: ask on first use'));
  if (!pending) {
    forRealNode = opts.realNode ?? false;
    pending = (async () => {
      // Imported lazily so that loading this file (the root hook does) costs nothing.
      const { startTestEnv, attachTestEnv } = await import('../../hack/testenv/testenv.js');
      const { capiReleaseFromEnv } = await import('../../hack/testenv/capi-releases.js');
      const capiRelease = capiReleaseFromEnv();
      const external = process.env.JOINGUARD_TESTENV_KUBECONFIG;
      if (external) {
        logToStderr(`[testenv] using the running env of JOINGUARD_TESTENV_KUBECONFIG=${external}`);
        const env = attachTestEnv(external);
        if (env.capiRelease !== capiRelease)
          throw new Error(`the running env runs CAPI ${env.capiRelease}, not ${capiRelease} (JOINGUARD_CAPI_RELEASE)`);
        return env;
      }
      return startTestEnv({
        log: logToStderr,
        capiRelease,
        audit: { policy: WRITES_AUDIT_POLICY },
        serviceAccountAdmission: forRealNode,
      });
    })();
    pending.catch(() => (pending = undefined));
  }
  return pending;
}

/** Whether getTestEnv has been called (and not stopped since). */
export function testEnvRequested(): boolean {
  return pending !== undefined;
}

/**
 * Stops the shared env if this run started it (an attached env is left alone). A later getTestEnv()
 * starts a fresh one.
 */
export async function stopTestEnv(): Promise<void> {
  const current = pending;
  pending = undefined;
  if (!current) return;
  const env = await current.catch(() => undefined);
  if (env?.owned) await env.stop();
}
