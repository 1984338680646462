// What JoinGuard learns from a workload cluster itself, both opt-in or rare: its Nodes (--workload-node-check),
// read through the Cluster's `<cluster>-kubeconfig` Secret, so that a Node with the Machine's providerID counts
// as joined before CAPI sets nodeRef and a Node without a providerID holds the verdict; and whether the
// control-plane endpoint completes a TLS handshake (before acting on the first control-plane Machine). Nodes are
// read only while some Machine of the Cluster has no nodeRef, at most once per TTL per Cluster; nothing from
// the Secret is ever logged.
import { connect } from 'node:tls';
import type { Logger } from 'winston';
import type { WorkloadNodeFacts } from '../../../api/capi/model.js';
import { clusterAccessFromKubeconfig } from '../../../runtime/client/kubeconfig.js';
import { RestClient, type Json } from '../../../runtime/client/rest.js';

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

  async nodesFor(ns: string, cluster: string): Promise<WorkloadNodeFacts[] | undefined> {
    const key = `${ns}/${cluster}`;
    const e = this.entries.get(key) ?? { at: 0 };
    if (this.now() - e.at < this.ttlMs) return e.nodes;
    e.at = this.now();
    this.entries.set(key, e);
    try {
      const secret = await this.rest.get(
        `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets/${encodeURIComponent(`${cluster}-kubeconfig`)}`,
      );
      if (secret.metadata?.resourceVersion !== e.secretVersion || !e.client) {
        e.client?.close();
        const value = secret.data?.value;
        if (typeof value !== 'string') throw new Error(`Secret ${cluster}-kubeconfig has no data.value`);
        const access = clusterAccessFromKubeconfig(Buffer.from(value, 'base64').toString('utf8'));
        e.client = new RestClient(access, { userAgent: this.rest.userAgent, qps: 20, burst: 30 });
        e.secretVersion = secret.metadata?.resourceVersion;
      }
      const nodes: WorkloadNodeFacts[] = [];
      let cont: string | undefined;
      do {
        const page: Json = await e.client.get('/api/v1/nodes', { limit: 500, continue: cont });
        for (const n of (page.items ?? []) as Json[])
          nodes.push({ name: n.metadata?.name, ...(n.spec?.providerID ? { providerID: n.spec.providerID } : {}) });
        cont = page.metadata?.continue || undefined;
      } while (cont);
      e.nodes = nodes;
    } catch (err) {
      // Not readable is not "no Node": the planner then judges on nodeRef alone.
      e.nodes = undefined;
      this.log.debug('workload cluster Nodes not read', {
        Cluster: { namespace: ns, name: cluster },
        error: (err as Error).message,
      });
    }
    return e.nodes;
  }

  close(): void {
    for (const e of this.entries.values()) e.client?.close();
    this.entries.clear();
  }
}

/** Whether something completes a TLS handshake at host:port (any certificate: this asks "is it up"). */
export function tlsAnswers(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({
      host,
      port,
      servername: /^[\d.]+$|:/.test(host) ? undefined : host,
      rejectUnauthorized: false,
      timeout: timeoutMs,
    });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('secureConnect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}
