// Every change of every Machine of one namespace, in the apiserver's order (a list, then a watch; test-only),
// read through the release's API. The rollout specs judge from it what no sampled poll can prove: that no
// Machine of an old revision carried a mark at any moment, and what each owner answered, change by change.
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { ResourceCache } from '../sim/cache.js';
import type { CapiApi } from '../sim/capi-api.js';

export const REMEDIATE_ANNOTATION = 'cluster.x-k8s.io/remediate-machine';

export interface MachineChange {
  at: number;
  name: string;
  uid: string;
  gone: boolean;
  deleting: boolean;
  controlPlane: boolean;
  /** The owning MachineSet or KubeadmControlPlane, `Kind/name`. */
  owner?: string;
  version?: string;
  node?: string;
  /** Any remediation mark: HealthCheckSucceeded=False (either condition list), remediate-machine, JoinGuardJoined=False. */
  marked: boolean;
  /**
   * A mark only JoinGuard writes: the remediate-machine annotation (no one else sets it in these specs),
   * HealthCheckSucceeded=False with JoinGuard's reasons (JoinTimeout, ProvisionTimeout), JoinGuardJoined=False.
   */
  joinGuardMark: boolean;
  /** HealthCheckSucceeded as `status/reason` (metav1 conditions). */
  healthCheck?: string;
  /** The owner's OwnerRemediated as `status/reason` and its message (metav1 conditions; v1.10: status.v1beta2). */
  ownerRemediated?: string;
  ownerMessage?: string;
  annotations: Record<string, string>;
}

const find = (list: Json[] | undefined, type: string): Json | undefined => (list ?? []).find((c) => c.type === type);

export function changeOf(capi: CapiApi, m: Json, gone: boolean): MachineChange {
  const v2 = capi.v1beta2Conditions(m);
  const v1 = (m.status?.conditions ?? []) as Json[];
  const hc = find(v2, 'HealthCheckSucceeded');
  const hcAny = [hc, find(v1, 'HealthCheckSucceeded')].some((c) => c?.status === 'False');
  const or = find(v2, 'OwnerRemediated');
  const owner = ((m.metadata.ownerReferences ?? []) as Json[]).find((r) => r.controller === true);
  const annotations = (m.metadata.annotations ?? {}) as Record<string, string>;
  return {
    at: Date.now(),
    name: m.metadata.name,
    uid: m.metadata.uid,
    gone,
    deleting: m.metadata.deletionTimestamp !== undefined,
    controlPlane: m.metadata.labels?.['cluster.x-k8s.io/control-plane'] !== undefined,
    ...(owner ? { owner: `${owner.kind}/${owner.name}` } : {}),
    ...(m.spec?.version ? { version: m.spec.version } : {}),
    ...(m.status?.nodeRef?.name ? { node: m.status.nodeRef.name } : {}),
    marked:
      hcAny ||
      annotations[REMEDIATE_ANNOTATION] !== undefined ||
      [...v1, ...v2].some((c) => c.type === 'JoinGuardJoined' && c.status === 'False'),
    joinGuardMark:
      annotations[REMEDIATE_ANNOTATION] !== undefined ||
      [...v1, ...v2].some(
        (c) =>
          (c.type === 'HealthCheckSucceeded' &&
            c.status === 'False' &&
            /^(JoinTimeout|ProvisionTimeout)$/.test(c.reason ?? '')) ||
          (c.type === 'JoinGuardJoined' && c.status === 'False'),
      ),
    ...(hc ? { healthCheck: `${hc.status}/${hc.reason}` } : {}),
    ...(or ? { ownerRemediated: `${or.status}/${or.reason}`, ownerMessage: String(or.message ?? '') } : {}),
    annotations,
  };
}

export class MachineRecord {
  readonly changes: MachineChange[] = [];
  /** Watch errors that made it list again (a change could have been missed then). */
  readonly restarts: string[] = [];
  private readonly cache: ResourceCache;

  private constructor(
    kube: KubeClient,
    capi: CapiApi,
    private readonly namespace: string,
  ) {
    this.cache = new ResourceCache(
      kube,
      capi.resource('Machine'),
      (type, obj) => {
        if (obj.metadata?.namespace === this.namespace) this.changes.push(changeOf(capi, obj, type === 'delete'));
      },
      (err) => this.restarts.push(String(err)),
    );
  }

  static async start(kube: KubeClient, capi: CapiApi, namespace: string): Promise<MachineRecord> {
    const r = new MachineRecord(kube, capi, namespace);
    await r.cache.start();
    return r;
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }

  /** The changes of one Machine (by uid), oldest first. */
  of(uid: string): MachineChange[] {
    return this.changes.filter((c) => c.uid === uid);
  }

  /** Machines (by uid) that carried a mark (any, or JoinGuard's only) at some moment, with the first such change. */
  marked(which: 'any' | 'joinguard' = 'any'): Map<string, MachineChange> {
    const out = new Map<string, MachineChange>();
    for (const c of this.changes)
      if ((which === 'any' ? c.marked : c.joinGuardMark) && !out.has(c.uid)) out.set(c.uid, c);
    return out;
  }

  /** Distinct owner answers (OwnerRemediated reason and message) a Machine went through, in order. */
  ownerAnswers(uid: string): string[] {
    const out: string[] = [];
    for (const c of this.of(uid)) {
      const a = c.ownerRemediated ? `${c.ownerRemediated}: ${c.ownerMessage ?? ''}` : undefined;
      if (a !== undefined && out.at(-1) !== a) out.push(a);
    }
    return out;
  }
}
