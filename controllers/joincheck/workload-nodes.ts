// The opt-in workload-node check (--workload-node-check): reads a Cluster's `<cluster>-kubeconfig` Secret
// and lists the workload cluster's Nodes, so that a Node with the Machine's providerID counts as joined
// before CAPI sets nodeRef, and a Node without a providerID holds the verdict. Read only while some Machine
// of the Cluster has no nodeRef, at most once per TTL per Cluster; nothing from the Secret is ever logged.
import type { Logger } from 'winston';
import type { WorkloadNodeFacts } from '../../api/capi/model.js';
import { clusterAccessFromKubeconfig } from '../runtime/kubeconfig.js';
import { RestClient, type Json } from '../runtime/rest.js';
import type { RawSnapshot } from './snapshot.js';

interface Entry {
  at: number;
  nodes?: WorkloadNodeFacts[];
  secretVersion?: string;
  client?: RestClient;
}

export class WorkloadNodeReader {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly rest: RestClient,
    private readonly log: Logger,
    private readonly ttlMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  async nodesFor(raw: RawSnapshot): Promise<WorkloadNodeFacts[] | undefined> {
    if (!raw.machines.some((m) => !m.status?.nodeRef?.name)) return undefined;
    const ns: string = raw.check.metadata.namespace;
    const cluster: string = raw.check.spec?.clusterName;
    if (typeof cluster !== 'string' || !raw.cluster) return undefined;
    const key = `${ns}/${cluster}`;
    const e = this.entries.get(key) ?? { at: 0 };
    if (this.now() - e.at < this.ttlMs) return e.nodes;
    e.at = this.now();
    this.entries.set(key, e);
    try {
      const secret = await this.rest.get(`/api/v1/namespaces/${encodeURIComponent(ns)}/secrets/${encodeURIComponent(`${cluster}-kubeconfig`)}`);
      if (secret.metadata?.resourceVersion !== e.secretVersion || !e.client) {
        e.client?.close();
        const value = secret.data?.value;
        if (typeof value !== 'string') throw new Error(`Secret ${cluster}-kubeconfig has no data.value`);
        const access = clusterAccessFromKubeconfig(Buffer.from(value, 'base64').toString('utf8'));
        // CAPI's ClusterCache clients of workload clusters: --clustercache-client-qps=20, -burst=30.
        e.client = new RestClient(access, { userAgent: this.rest.userAgent, qps: 20, burst: 30 });
        e.secretVersion = secret.metadata?.resourceVersion;
      }
      const nodes: WorkloadNodeFacts[] = [];
      let cont: string | undefined;
      do {
        const page: Json = await e.client.get('/api/v1/nodes', { limit: 500, continue: cont });
        for (const n of (page.items ?? []) as Json[]) nodes.push({ name: n.metadata?.name, ...(n.spec?.providerID ? { providerID: n.spec.providerID } : {}) });
        cont = page.metadata?.continue || undefined;
      } while (cont);
      e.nodes = nodes;
    } catch (err) {
      // Not readable is not "no Node": the planner then judges on nodeRef alone.
      e.nodes = undefined;
      this.log.debug('workload cluster Nodes not read', { namespace: ns, cluster, error: (err as Error).message });
    }
    return e.nodes;
  }

  close(): void {
    for (const e of this.entries.values()) e.client?.close();
    this.entries.clear();
  }
}
