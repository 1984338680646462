// A test control plane made into a management cluster clusterctl itself can work on, without the network:
//   - clusterctl's inventory CRD, and a Provider record for CAPI's core provider (the managers testenv runs),
//     backed by a local repository that holds CAPI's own metadata.yaml, so contract checks read real data;
//   - CAPI's CRDs and the stand-in provider CRDs labelled as clusterctl labels what it installs (move
//     discovers only CRDs with the `clusterctl.cluster.x-k8s.io` label);
//   - a local repository `addon-joinguard/<version>/` with the add-on's components built by
//     manifests/render.ts, as a release lays them out.
// cert-manager is real (fleet.ts starts it on each management cluster before clusterctl runs): clusterctl's own
// check creates its test Issuer and Certificate and finds it working, and the add-on's Certificate is issued.
// addon-webhook.ts serves the webhook clusterctl installed with that certificate.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import type { KubeConfig } from '@kubernetes/client-node';
import { renderProviderFiles } from '../../manifests/render.js';
import { findClusterctl } from '../../manifests/clusterctl.js';
import { apply, raw, waitEstablished } from '../install/install-env.js';
import { CP_GROUP, ensureStandInCrds, INFRA_GROUP } from '../install/stand-in-providers.js';
import type { K8sObject } from '../../manifests/render.js';

type Json = Record<string, any>;
const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
export const CLUSTERCTL_LABEL = 'clusterctl.cluster.x-k8s.io';
export const PROVIDER_LABEL = 'cluster.x-k8s.io/provider';
export const ADDON_NAMESPACE = 'joinguard-system';
const INVENTORY = '/apis/clusterctl.cluster.x-k8s.io/v1alpha3';

async function ok(res: Promise<{ status: number; body: string }>, what: string, also: number[] = []): Promise<Json> {
  const r = await res;
  if (r.status >= 300 && !also.includes(r.status)) throw new Error(`${what}: ${r.status} ${r.body.slice(0, 400)}`);
  return r.body ? (JSON.parse(r.body) as Json) : {};
}

/** The module of the CAPI release the lifecycle specs run on (testenv's default, v1.14; build.sh downloads it). */
function capiModuleDir(): string {
  const gomod = readFileSync(fileURLToPath(new URL('../../hack/testenv/capi-v1.14/go.mod', import.meta.url)), 'utf8');
  const version = /^\s*(?:require\s+)?sigs\.k8s\.io\/cluster-api\s+(v\S+)/m.exec(gomod)?.[1];
  if (!version) throw new Error('cannot read the sigs.k8s.io/cluster-api version from hack/testenv/capi-v1.14/go.mod');
  const modCache =
    process.env['GOMODCACHE'] || join(process.env['GOPATH']?.split(':')[0] || join(homedir(), 'go'), 'pkg', 'mod');
  return join(modCache, 'sigs.k8s.io', `cluster-api@${version}`);
}

/** The CAPI version testenv runs (its Provider record says the same). */
export function capiVersion(): string {
  return /@(v[^/]+)$/.exec(capiModuleDir())![1]!;
}

/** Labels a CRD as clusterctl labels the components it installs. */
async function labelCrd(admin: KubeConfig, name: string, provider: string): Promise<void> {
  await ok(
    raw(
      admin,
      'PATCH',
      `${CRDS}/${name}`,
      { metadata: { labels: { [CLUSTERCTL_LABEL]: '', [PROVIDER_LABEL]: provider } } },
      'application/merge-patch+json',
    ),
    `label CRD ${name}`,
  );
}

/** Everything clusterctl needs on a management cluster before `clusterctl init --addon joinguard`. */
export async function prepareManagementCluster(admin: KubeConfig): Promise<void> {
  const moduleDir = capiModuleDir();
  const inventoryCrd = parse(
    await readFile(join(moduleDir, 'cmd/clusterctl/config/manifest/clusterctl-api.yaml'), 'utf8'),
  ) as K8sObject;
  await apply(admin, inventoryCrd);
  await waitEstablished(admin, inventoryCrd.metadata.name);

  await ensureStandInCrds(admin);
  const crds = (await ok(raw(admin, 'GET', CRDS), 'list CRDs')).items as Json[];
  for (const c of crds) {
    const group = c.spec.group as string;
    if (
      group === 'cluster.x-k8s.io' ||
      group === 'addons.cluster.x-k8s.io' ||
      group === 'runtime.cluster.x-k8s.io' ||
      group === 'ipam.cluster.x-k8s.io'
    )
      await labelCrd(admin, c.metadata.name, 'cluster-api');
    else if (group === 'bootstrap.cluster.x-k8s.io') await labelCrd(admin, c.metadata.name, 'bootstrap-kubeadm');
    else if (group === 'controlplane.cluster.x-k8s.io') await labelCrd(admin, c.metadata.name, 'control-plane-kubeadm');
    else if (group === INFRA_GROUP) await labelCrd(admin, c.metadata.name, 'infrastructure-install');
    else if (group === CP_GROUP) await labelCrd(admin, c.metadata.name, 'control-plane-install');
  }

  await ok(
    raw(admin, 'POST', '/api/v1/namespaces', { metadata: { name: 'capi-system' } }),
    'Namespace capi-system',
    [409],
  );
  await ok(
    raw(admin, 'POST', `${INVENTORY}/namespaces/capi-system/providers`, {
      apiVersion: 'clusterctl.cluster.x-k8s.io/v1alpha3',
      kind: 'Provider',
      metadata: { name: 'cluster-api', labels: { [CLUSTERCTL_LABEL]: '', [PROVIDER_LABEL]: 'cluster-api' } },
      providerName: 'cluster-api',
      type: 'CoreProvider',
      version: capiVersion(),
    }),
    'Provider cluster-api',
    [409],
  );
}

export interface Repository {
  dir: string;
  config: string;
  versions: string[];
}

/**
 * A local clusterctl repository with JoinGuard releases built from this tree's manifests (a later
 * version gets the release series it needs added to metadata.yaml), and CAPI's core metadata.
 */
export async function localRepository(dir: string, versions: string[]): Promise<Repository> {
  let { metadata } = await renderProviderFiles(versions[0]!);
  for (const [major, minor] of versions.map((v) => v.split('.').map(Number))) {
    if (!new RegExp(`major: ${major}\\s+minor: ${minor}\\s`).test(metadata))
      metadata += `  - major: ${major}\n    minor: ${minor}\n    contract: v1beta2\n`;
  }
  for (const v of versions) {
    const files = await renderProviderFiles(v, { metadata });
    const at = join(dir, 'addon-joinguard', `v${v}`);
    await mkdir(at, { recursive: true });
    await writeFile(join(at, 'addon-components.yaml'), files.components);
    await writeFile(join(at, 'metadata.yaml'), files.metadata);
  }
  const capi = join(dir, 'cluster-api', capiVersion());
  await mkdir(capi, { recursive: true });
  await writeFile(join(capi, 'metadata.yaml'), await readFile(join(capiModuleDir(), 'metadata.yaml'), 'utf8'));
  // Never installed here (testenv runs CAPI); clusterctl reads the metadata beside it for contract checks.
  await writeFile(
    join(capi, 'core-components.yaml'),
    'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capi-system\n',
  );
  const config = join(dir, 'clusterctl.yaml');
  await writeFile(
    config,
    [
      'providers:',
      '  - name: cluster-api',
      `    url: file://${capi}/core-components.yaml`,
      '    type: CoreProvider',
      '  - name: joinguard',
      `    url: file://${join(dir, 'addon-joinguard', `v${versions.at(-1)}`, 'addon-components.yaml')}`,
      '    type: AddonProvider',
      '',
    ].join('\n'),
  );
  return { dir, config, versions };
}

export interface ClusterctlRun {
  stdout: string;
  stderr: string;
}

/** Runs clusterctl isolated from the user's config, never checking for a newer version online. */
export async function clusterctl(repo: Repository, args: string[], timeoutMs = 240_000): Promise<ClusterctlRun> {
  const bin = await findClusterctl();
  if (!bin) throw new Error('no clusterctl: hack/testenv/build.sh builds it');
  const run = promisify(execFile);
  try {
    const { stdout, stderr } = await run(bin, [...args, '--config', repo.config, '-v', '2'], {
      timeout: timeoutMs,
      maxBuffer: 64 << 20,
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: repo.dir,
        XDG_CONFIG_HOME: join(repo.dir, 'xdg'),
        CLUSTERCTL_DISABLE_VERSIONCHECK: 'true',
      },
    });
    return { stdout, stderr };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(
      `clusterctl ${args.join(' ')} failed: ${(err.stderr ?? '').trim().split('\n').slice(-15).join('\n') || err.message}`,
    );
  }
}

/** The Provider records of the inventory, as `name@version`. */
export async function inventory(admin: KubeConfig): Promise<string[]> {
  const list = await ok(raw(admin, 'GET', `${INVENTORY}/providers`), 'list Providers');
  return (list.items as Json[]).map((p) => `${p.metadata.name}@${p.version}`).sort();
}
