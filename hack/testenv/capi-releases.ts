// The CAPI releases the test control plane can run (hack/testenv/build.sh builds each from its own tool
// module, hack/testenv/capi-<release>). What differs for the code that starts and drives them: the API
// version the managers store and read (v1beta2 since v1.11; v1beta1 before), and the contract labels a
// real (kustomize) install puts on the kubeadm providers' CRDs.
import fs from 'node:fs';
import path from 'node:path';

export type CapiRelease = 'v1.14' | 'v1.13' | 'v1.12' | 'v1.11' | 'v1.10';
export const CAPI_RELEASE_NAMES: readonly CapiRelease[] = ['v1.14', 'v1.13', 'v1.12', 'v1.11', 'v1.10'];
export const DEFAULT_CAPI_RELEASE: CapiRelease = 'v1.14';

export interface CapiReleaseTraits {
  /** The cluster.x-k8s.io version the managers store, read and act on (owners read its conditions). */
  apiVersion: 'v1beta2' | 'v1beta1';
  /** The provider contract: the CRD label `cluster.x-k8s.io/<contract>` providers of this release carry. */
  contract: 'v1beta2' | 'v1beta1';
  /** Labels kustomize adds to the kubeadm providers' CRDs (config/crd/kustomization.yaml). */
  kubeadmContractLabels: Record<string, string>;
}

// v1.11 to v1.14 alike: each stores v1beta2 and its kubeadm providers' kustomization labels both contracts.
const V1BETA2: CapiReleaseTraits = {
  apiVersion: 'v1beta2',
  contract: 'v1beta2',
  kubeadmContractLabels: { 'cluster.x-k8s.io/v1beta1': 'v1beta1', 'cluster.x-k8s.io/v1beta2': 'v1beta2' },
};

export const CAPI_RELEASES: Record<CapiRelease, CapiReleaseTraits> = {
  'v1.14': V1BETA2,
  'v1.13': V1BETA2,
  'v1.12': V1BETA2,
  'v1.11': V1BETA2,
  'v1.10': {
    apiVersion: 'v1beta1',
    contract: 'v1beta1',
    kubeadmContractLabels: { 'cluster.x-k8s.io/v1beta1': 'v1beta1' },
  },
};

/** The release named by $JOINGUARD_CAPI_RELEASE (how CI runs the specs against the second release). */
export function capiReleaseFromEnv(): CapiRelease {
  const r = process.env.JOINGUARD_CAPI_RELEASE;
  if (r === undefined || r === '') return DEFAULT_CAPI_RELEASE;
  if (!(CAPI_RELEASE_NAMES as readonly string[]).includes(r))
    throw new Error(`JOINGUARD_CAPI_RELEASE=${r}: known releases are ${CAPI_RELEASE_NAMES.join(', ')}`);
  return r as CapiRelease;
}

/** What build.sh writes to <binDir>/release.json. */
export interface BuiltRelease {
  release: CapiRelease;
  /** sigs.k8s.io/cluster-api version, e.g. v1.10.10. */
  version: string;
  kubernetes: string;
  moduleDir: string;
  /** Manager component -> its provider folder in the module (config/webhook/manifests.yaml is under it). */
  providerDirs: Record<string, string>;
}

export function readBuiltRelease(binDir: string): BuiltRelease {
  const file = path.join(binDir, 'release.json');
  let built: BuiltRelease;
  try {
    built = JSON.parse(fs.readFileSync(file, 'utf8')) as BuiltRelease;
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}; run hack/testenv/build.sh`, { cause: err });
  }
  for (const dir of Object.values(built.providerDirs)) {
    if (!fs.existsSync(path.join(dir, 'config', 'webhook', 'manifests.yaml'))) {
      throw new Error(
        `CAPI module ${built.version} not found at ${dir}: run hack/testenv/build.sh --capi ${built.release} (it downloads it)`,
      );
    }
  }
  return built;
}
