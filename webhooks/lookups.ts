// The reads the validating webhook makes: other MachineJoinChecks, MachineHealthChecks and Machines of the
// namespace. Made live at admission time (admission is rare; a cache would only add staleness), with the
// CAPI API version found by discovery once — v1beta2 when served, else v1beta1.
import { ApisApi, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { CapiApiVersion } from '../api/capi/model.js';
import { CAPI_GROUP } from '../api/capi/model.js';
import { GROUP, PLURAL, VERSION } from '../api/v1alpha1/types.js';
import { CLUSTER_NAME_LABEL } from './selectors.js';

export interface MachineLabels {
  name: string;
  labels: Record<string, string>;
}

export interface Lookups {
  /** Raw MachineJoinChecks of the namespace. */
  checks(namespace: string): Promise<unknown[]>;
  /** Raw MachineHealthChecks of the namespace and the CAPI version they were read in. */
  machineHealthChecks(namespace: string): Promise<{ objects: unknown[]; version: CapiApiVersion }>;
  /** Names and labels of the Cluster's Machines in the namespace. */
  machines(namespace: string, clusterName: string): Promise<MachineLabels[]>;
}

interface ListOf {
  items?: { metadata?: { name?: string; labels?: Record<string, string> } }[];
}

export function kubeLookups(kc: KubeConfig): Lookups {
  const api = kc.makeApiClient(CustomObjectsApi);
  let version: Promise<CapiApiVersion> | undefined;

  const capiVersion = (): Promise<CapiApiVersion> => {
    version ??= (async () => {
      const groups = await kc.makeApiClient(ApisApi).getAPIVersions();
      const served = new Set(groups.groups.find((g) => g.name === CAPI_GROUP)?.versions.map((v) => v.version) ?? []);
      if (served.has('v1beta2')) return 'v1beta2';
      if (served.has('v1beta1')) return 'v1beta1';
      throw new Error(`the apiserver serves no ${CAPI_GROUP} v1beta2 or v1beta1`);
    })();
    version.catch(() => (version = undefined)); // a failed discovery is retried next time
    return version;
  };

  const list = async (group: string, v: string, namespace: string, plural: string, labelSelector?: string) =>
    ((await api.listNamespacedCustomObject({ group, version: v, namespace, plural, labelSelector })) as ListOf).items ?? [];

  return {
    checks: (namespace) => list(GROUP, VERSION, namespace, PLURAL),
    async machineHealthChecks(namespace) {
      const v = await capiVersion();
      return { objects: await list(CAPI_GROUP, v, namespace, 'machinehealthchecks'), version: v };
    },
    async machines(namespace, clusterName) {
      const v = await capiVersion();
      const items = await list(CAPI_GROUP, v, namespace, 'machines', `${CLUSTER_NAME_LABEL}=${clusterName}`);
      return items.map((m) => ({ name: m.metadata?.name ?? '', labels: m.metadata?.labels ?? {} }));
    },
  };
}
