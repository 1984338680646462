// The reads the validating webhook makes: other MachineJoinChecks, MachineHealthChecks and Machines of the
// namespace. Made live at admission time (admission is rare; a cache would only add staleness), through the
// product's REST client, in the CAPI API version the one discovery found (CapiVersionWatch).
import type { CapiApiVersion } from '../api/capi/model.js';
import { CAPI_GROUP } from '../api/capi/model.js';
import { GROUP, PLURAL, VERSION } from '../api/v1alpha1/types.js';
import type { CapiVersionWatch } from './capi-version.js';
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

/** The one call the lookups make of runtime/client/rest.ts RestClient. */
export interface RestReader {
  get<T = Record<string, unknown>>(
    path: string,
    query?: Record<string, string | number | boolean | undefined>,
  ): Promise<T>;
}

interface ListOf {
  items?: { metadata?: { name?: string; labels?: Record<string, string> } }[];
}

export function restLookups(rest: RestReader, capi: CapiVersionWatch): Lookups {
  const version = async (): Promise<CapiApiVersion> => {
    const k = await capi.get();
    if (!k.facts) throw new Error(`the CAPI API version is not known yet${k.error ? ` (${k.error})` : ''}`);
    return k.facts.apiVersion;
  };
  const list = async (group: string, v: string, namespace: string, plural: string, labelSelector?: string) =>
    (
      await rest.get<ListOf>(`/apis/${group}/${v}/namespaces/${encodeURIComponent(namespace)}/${plural}`, {
        labelSelector,
      })
    ).items ?? [];

  return {
    checks: (namespace) => list(GROUP, VERSION, namespace, PLURAL),
    async machineHealthChecks(namespace) {
      const v = await version();
      return { objects: await list(CAPI_GROUP, v, namespace, 'machinehealthchecks'), version: v };
    },
    async machines(namespace, clusterName) {
      const v = await version();
      const items = await list(CAPI_GROUP, v, namespace, 'machines', `${CLUSTER_NAME_LABEL}=${clusterName}`);
      return items.map((m) => ({ name: m.metadata?.name ?? '', labels: m.metadata?.labels ?? {} }));
    },
  };
}
