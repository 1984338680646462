// Every change to the Machines of one namespace, in the apiserver's order (a list, then a watch from its
// resourceVersion; test-only). A sampled poll can miss a state that lasted 50 ms; a watch delivers each
// change of each Machine, so a count "at any moment" is reconstructed exactly, event by event.
import { ResourceCache } from '../sim/cache.js';
import { capiApi } from '../sim/capi-api.js';
import type { Json, KubeClient as Kube } from '../../hack/testenv/kube-client.js';

// The fault specs run on CAPI v1.14 only (.ci/run); their Machines are v1beta2.
const MACHINES_V1BETA2 = capiApi('v1beta2').resource('Machine');

/** What the fault specs judge of a Machine at one moment. */
export interface MachineState {
  at: number;
  name: string;
  uid: string;
  gone: boolean;
  deleting: boolean;
  node?: string;
  /** HealthCheckSucceeded and OwnerRemediated (v1beta2 conditions), `status/reason`. */
  healthCheck?: string;
  ownerRemediated?: string;
  ownerMessage?: string;
}

const cond = (m: Json, type: string): Json | undefined =>
  ((m.status?.conditions ?? []) as Json[]).find((c) => c.type === type);

function stateOf(m: Json, gone: boolean): MachineState {
  const hc = cond(m, 'HealthCheckSucceeded');
  const or = cond(m, 'OwnerRemediated');
  return {
    at: Date.now(),
    name: m.metadata.name,
    uid: m.metadata.uid,
    gone,
    deleting: m.metadata.deletionTimestamp !== undefined,
    ...(m.status?.nodeRef?.name ? { node: m.status.nodeRef.name } : {}),
    ...(hc ? { healthCheck: `${hc.status}/${hc.reason}` } : {}),
    ...(or ? { ownerRemediated: `${or.status}/${or.reason}`, ownerMessage: String(or.message ?? '') } : {}),
  };
}

/** JoinGuard's mark on the remediation-contract path: HealthCheckSucceeded=False for a join or provision timeout. */
export const carriesJoinGuardMark = (s: MachineState): boolean =>
  /^False\/(JoinTimeout|ProvisionTimeout)$/.test(s.healthCheck ?? '');

export class MachineHistory {
  readonly changes: MachineState[] = [];
  /** Errors that made the watch start over with a list (a change could have been missed then). */
  readonly restarts: string[] = [];
  private readonly cache: ResourceCache;

  private constructor(
    kube: Kube,
    private readonly namespace: string,
  ) {
    this.cache = new ResourceCache(
      kube,
      MACHINES_V1BETA2,
      (type, obj) => {
        if (obj.metadata?.namespace === this.namespace) this.changes.push(stateOf(obj, type === 'delete'));
      },
      (err) => this.restarts.push(String(err)),
    );
  }

  static async start(kube: Kube, namespace: string): Promise<MachineHistory> {
    const h = new MachineHistory(kube, namespace);
    await h.cache.start();
    return h;
  }

  stop(): Promise<void> {
    return this.cache.stop();
  }

  /** Replays the changes and returns the most Machines for which `pred` held at one moment, and which. */
  peak(pred: (s: MachineState) => boolean): { count: number; at: number; names: string[] } {
    const now = new Map<string, MachineState>();
    let best = { count: 0, at: 0, names: [] as string[] };
    for (const s of this.changes) {
      if (s.gone) now.delete(s.uid);
      else now.set(s.uid, s);
      const holding = [...now.values()].filter(pred);
      if (holding.length > best.count) best = { count: holding.length, at: s.at, names: holding.map((x) => x.name) };
    }
    return best;
  }

  /** Every recorded state of the Machines for which `pred` held. */
  where(pred: (s: MachineState) => boolean): MachineState[] {
    return this.changes.filter(pred);
  }

  /** Distinct Machines (by uid) for which `pred` held at some moment. */
  distinct(pred: (s: MachineState) => boolean): string[] {
    return [...new Set(this.changes.filter(pred).map((s) => s.name))];
  }

  /** The latest state of a Machine by name. */
  last(name: string): MachineState | undefined {
    return this.changes.findLast((s) => s.name === name);
  }
}
