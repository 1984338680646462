// Which CAPI API version to read and write, from API discovery: v1beta2 whenever it is served (owners on
// CAPI v1.11+ read only v1beta2 conditions), else v1beta1. The CAPI minor comes from the CRD's
// `cluster.x-k8s.io/provider` labels when present; it only gates the MachineCondition strategy.
import { isNotFound, type RestClient } from './rest.js';
import type { CapiApiVersion } from '../../api/capi/model.js';

export interface Discovered {
  apiVersion: CapiApiVersion;
  /** Served versions of cluster.x-k8s.io. */
  served: string[];
  /** Whether KubeadmControlPlane / KubeadmConfig are served (kubeadm providers installed). */
  kubeadmControlPlane: boolean;
  kubeadmBootstrap: boolean;
}

export async function discoverCapi(rest: RestClient): Promise<Discovered> {
  let served: string[] = [];
  try {
    const g = await rest.get('/apis/cluster.x-k8s.io');
    served = ((g.versions ?? []) as { version: string }[]).map((v) => v.version);
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
  if (served.length === 0) throw new Error('CAPI is not installed: the API group cluster.x-k8s.io is not served');
  const apiVersion: CapiApiVersion = served.includes('v1beta2') ? 'v1beta2' : served.includes('v1beta1') ? 'v1beta1' : fail(served);
  const servedGroup = async (group: string) => {
    try {
      const g = await rest.get(`/apis/${group}`);
      return ((g.versions ?? []) as { version: string }[]).some((v) => v.version === apiVersion);
    } catch (e) {
      if (isNotFound(e)) return false;
      throw e;
    }
  };
  return {
    apiVersion,
    served,
    kubeadmControlPlane: await servedGroup('controlplane.cluster.x-k8s.io'),
    kubeadmBootstrap: await servedGroup('bootstrap.cluster.x-k8s.io'),
  };
}

function fail(served: string[]): never {
  throw new Error(`cluster.x-k8s.io serves ${served.join(', ')}: JoinGuard needs v1beta2 (CAPI v1.11+) or v1beta1 (v1.8-v1.10)`);
}
