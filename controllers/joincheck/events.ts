// Kubernetes Events on Machines and on checks. An event is a courtesy: a failed event never fails a
// reconcile. The same (object, reason, message) is not repeated within ten minutes, so a planner that
// re-emits on a restart, or a flapping object, cannot flood the apiserver.
import type { Logger } from 'winston';
import type { RestClient } from '../runtime/rest.js';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
}

const DEDUPE_MS = 10 * 60 * 1000;
const MAX_REMEMBERED = 10_000;

export class EventRecorder {
  private readonly recent = new Map<string, number>();

  constructor(
    private readonly rest: RestClient,
    private readonly log: Logger,
    private readonly instance: string,
    private readonly now: () => number = Date.now,
  ) {}

  async record(target: EventTarget, reason: string, message: string, warning: boolean): Promise<void> {
    const key = `${target.uid ?? `${target.namespace}/${target.name}`}|${reason}|${message}`;
    const t = this.now();
    const last = this.recent.get(key);
    if (last !== undefined && t - last < DEDUPE_MS) return;
    this.recent.set(key, t);
    if (this.recent.size > MAX_REMEMBERED) this.prune(t);
    const at = new Date(t).toISOString();
    try {
      await this.rest.post(`/api/v1/namespaces/${encodeURIComponent(target.namespace)}/events`, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${target.name}.`, namespace: target.namespace },
        involvedObject: { apiVersion: target.apiVersion, kind: target.kind, name: target.name, namespace: target.namespace, uid: target.uid },
        reason,
        message: message.length > 1024 ? `${message.slice(0, 1021)}...` : message,
        type: warning ? 'Warning' : 'Normal',
        source: { component: 'joinguard' },
        reportingComponent: 'joinguard.io/joinguard',
        reportingInstance: this.instance,
        firstTimestamp: at,
        lastTimestamp: at,
        count: 1,
      });
    } catch (e) {
      this.log.warn('event not recorded', { reason, object: `${target.kind}/${target.namespace}/${target.name}`, error: (e as Error).message });
    }
  }

  private prune(t: number): void {
    for (const [k, at] of this.recent) if (t - at >= DEDUPE_MS) this.recent.delete(k);
    // Still too many: drop the oldest half (insertion order is age order).
    if (this.recent.size > MAX_REMEMBERED) {
      let n = this.recent.size / 2;
      for (const k of this.recent.keys()) {
        if (n-- <= 0) break;
        this.recent.delete(k);
      }
    }
  }
}
