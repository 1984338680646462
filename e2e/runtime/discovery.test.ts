// discoverCapi against the real kube-apiserver: with CAPI v1.14.2's CRDs, webhooks and managers (the shared
// test env; installed from the CAPI module, no clusterctl inventory), then with a clusterctl inventory, and
// on a bare apiserver with the CRDs of v1.10.10, v1.9.0 and v1.8.4 straight from their modules.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { discoverCapi } from '../../runtime/client/discovery.js';
import { loadClusterAccess } from '../../runtime/client/kubeconfig.js';
import { RestClient, type Json } from '../../runtime/client/rest.js';
import { installCrds, readCrds } from '../../hack/testenv/crds.js';
import { startTestEnv } from '../../hack/testenv/testenv.js';
import { getTestEnv } from '../support/testenv.js';

const PROVIDERS = '/apis/clusterctl.cluster.x-k8s.io/v1alpha3';

/** Where CAPI's Go module of a release is, downloaded through the module proxy when the cache lacks it. */
function moduleDir(release: string): string {
  const out = execFileSync('go', ['mod', 'download', '-json', `sigs.k8s.io/cluster-api@${release}`], {
    encoding: 'utf8',
    cwd: os.tmpdir(),
  });
  return (JSON.parse(out) as { Dir?: string }).Dir ?? '';
}

/** The core cluster.x-k8s.io CRDs of a release, from its Go module (v1.13+ keep them under core/), downloaded through
 * the module proxy when the cache lacks it (a fresh machine has only the releases the test env builds). */
function coreCrds(release: string): Json[] {
  const mod = `sigs.k8s.io/cluster-api@${release}`;
  const root = moduleDir(release);
  const dir = [path.join(root, 'core/config/crd/bases'), path.join(root, 'config/crd/bases')].find((d) =>
    fs.existsSync(d),
  );
  if (!dir) throw new Error(`no CRDs of ${release} under ${root} (go mod download ${mod})`);
  return readCrds(dir).filter((c) => c.spec.group === 'cluster.x-k8s.io');
}

/** The apiserver republishes a changed CRD's schema shortly after the change: ask until it shows (30 s at most). */
async function settled<T>(ask: () => Promise<T>, done: (v: T) => boolean): Promise<T> {
  const end = Date.now() + 30_000;
  for (;;) {
    const v = await ask();
    if (done(v) || Date.now() > end) return v;
    await new Promise((r) => setTimeout(r, 500));
  }
}

describe('discoverCapi on the real apiserver', function () {
  this.timeout(600_000);

  it("CAPI v1.14.2 installed from its module (no inventory): v1beta2, v1.14 from the schema; v1.14.2 once clusterctl's inventory says so", async () => {
    const env = await getTestEnv();
    const access = loadClusterAccess({ kubeconfigPath: env.kubeconfigPath });
    const rest = new RestClient(access, { userAgent: 'e2e-discovery' });
    const admin = env.kube();
    try {
      const t0 = performance.now();
      const info = await discoverCapi(rest);
      const ms = performance.now() - t0;
      expect(info).to.deep.include({
        apiVersion: 'v1beta2',
        minor: 14,
        kubeadmControlPlane: true,
        kubeadmBootstrap: true,
      });
      expect(info.source).to.equal(
        'the cluster.x-k8s.io/v1beta2 schema (OpenAPI v3): Machine status.deletion.waitForPreDrainHookStartTime (v1.14+)',
      );
      const doc = await rest.open('GET', '/openapi/v3/apis/cluster.x-k8s.io/v1beta2');
      let bytes = 0;
      for await (const c of doc.res) bytes += (c as Buffer).length;
      process.stderr.write(
        `      [discovery] ${Math.round(ms)} ms; the v1beta2 schema document is ${(bytes / 1024).toFixed(0)} KiB\n`,
      );

      // clusterctl's inventory, as `clusterctl init` writes it.
      await installCrds(
        admin,
        readCrds(path.join(moduleDir('v1.14.2'), 'cmd/clusterctl/config/crd/bases')).filter(
          (c) => c.spec.names.kind === 'Provider',
        ),
      );
      await admin.createOrReplace('/api/v1/namespaces', {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: 'capi-system' },
      });
      const provider = {
        apiVersion: 'clusterctl.cluster.x-k8s.io/v1alpha3',
        kind: 'Provider',
        metadata: { name: 'cluster-api', namespace: 'capi-system', labels: { 'clusterctl.cluster.x-k8s.io': '' } },
        providerName: 'cluster-api',
        type: 'CoreProvider',
        version: 'v1.14.2',
      };
      await admin.createOrReplace(`${PROVIDERS}/namespaces/capi-system/providers`, provider);
      const fromInventory = await discoverCapi(rest);
      expect(fromInventory).to.deep.include({
        apiVersion: 'v1beta2',
        minor: 14,
        version: 'v1.14.2',
        source: 'clusterctl inventory (Provider capi-system/cluster-api)',
      });
    } finally {
      // The shared env goes on to other specs: leave no inventory behind.
      await admin.send(
        'DELETE',
        '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/providers.clusterctl.cluster.x-k8s.io',
      );
      rest.close();
      admin.close();
    }
  });

  it('the CRDs of v1.10.10 and v1.9.0 (v1beta1 only) give their minor; v1.8.4 is refused with the reason', async () => {
    const env = await startTestEnv({ capi: false, log: () => undefined });
    const access = loadClusterAccess({ kubeconfigPath: env.kubeconfigPath });
    const rest = new RestClient(access, { userAgent: 'e2e-discovery' });
    const admin = env.kube();
    try {
      for (const [release, minor] of [
        ['v1.10.10', 10],
        ['v1.9.0', 9],
      ] as const) {
        await installCrds(admin, coreCrds(release));
        const info = await settled(
          () => discoverCapi(rest),
          (i) => i.minor === minor,
        );
        expect(info, release).to.deep.include({
          apiVersion: 'v1beta1',
          minor,
          kubeadmControlPlane: false,
          kubeadmBootstrap: false,
        });
        expect(info.source, release).to.match(/^the cluster.x-k8s.io\/v1beta1 schema \(OpenAPI v3\): Machine /);
      }
      await installCrds(admin, coreCrds('v1.8.4'));
      const refused = await settled(
        () =>
          discoverCapi(rest).then(
            () => undefined,
            (e: Error) => e,
          ),
        (e) => e !== undefined,
      );
      expect(refused?.message).to.match(
        /^unsupported CAPI: found v1.8 or older from the cluster.x-k8s.io\/v1beta1 schema .*JoinGuard supports CAPI v1.9 and later/,
      );
    } finally {
      rest.close();
      admin.close();
      await env.stop();
    }
  });
});
