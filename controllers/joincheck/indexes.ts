// Which checks an object concerns, and which objects a check reads, kept as in-memory indexes beside the
// caches so that an informer callback only looks up keys and enqueues them (no list scans per event).
type Json = Record<string, any>;

const CLUSTER_LABEL = 'cluster.x-k8s.io/cluster-name';

export const clusterKey = (namespace: string, cluster: string): string => `${namespace}/${cluster}`;

/** The Cluster an object belongs to: spec.clusterName (Machines, MHCs, checks) or the cluster-name label. */
export function clusterOf(obj: Json): string | undefined {
  const spec = obj?.spec?.clusterName;
  if (typeof spec === 'string' && spec !== '') return spec;
  const label = obj?.metadata?.labels?.[CLUSTER_LABEL];
  return typeof label === 'string' && label !== '' ? label : undefined;
}

/** A multimap from cluster key to object keys, updated from informer events. */
export class ClusterIndex {
  private readonly byCluster = new Map<string, Set<string>>();
  private readonly clusterOfKey = new Map<string, string>();

  constructor(private readonly cluster: (obj: Json) => string | undefined = clusterOf) {}

  set(key: string, obj: Json): string | undefined {
    const ns = obj?.metadata?.namespace ?? '';
    const c = this.cluster(obj);
    const ck = c === undefined ? undefined : clusterKey(ns, c);
    const old = this.clusterOfKey.get(key);
    if (old !== undefined && old !== ck) this.remove(key);
    if (ck === undefined) return undefined;
    let s = this.byCluster.get(ck);
    if (!s) this.byCluster.set(ck, (s = new Set()));
    s.add(key);
    this.clusterOfKey.set(key, ck);
    return ck;
  }

  remove(key: string): string | undefined {
    const ck = this.clusterOfKey.get(key);
    if (ck === undefined) return undefined;
    this.clusterOfKey.delete(key);
    const s = this.byCluster.get(ck);
    s?.delete(key);
    if (s && s.size === 0) this.byCluster.delete(ck);
    return ck;
  }

  /** The cluster key an object was filed under before (for an update that moved it). */
  filedUnder(key: string): string | undefined {
    return this.clusterOfKey.get(key);
  }

  keys(ck: string): ReadonlySet<string> {
    return this.byCluster.get(ck) ?? EMPTY;
  }
}

const EMPTY: ReadonlySet<string> = new Set();
