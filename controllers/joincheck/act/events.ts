// Kubernetes Events on Machines and on checks, sent off the reconcile worker: a worker hands an event over and
// goes on; one sender posts them in order. An event is a courtesy: a failed post never fails a reconcile, and
// the queue is bounded (the oldest is dropped, and counted in the log). The same (object, reason, message) is
// not repeated within ten minutes, so a planner that re-emits on a restart, or a flapping object, cannot flood.
import type { Logger } from 'winston';
import type { RestClient } from '../../../runtime/client/rest.js';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
}

interface Pending {
  target: EventTarget;
  reason: string;
  message: string;
  warning: boolean;
  at: number;
}

const DEDUPE_MS = 10 * 60 * 1000;
const MAX_REMEMBERED = 10_000;
const MAX_QUEUED = 1_000;

export class EventRecorder {
  private readonly recent = new Map<string, number>();
  private readonly queue: Pending[] = [];
  private sending?: Promise<void>;
  private dropped = 0;

  constructor(
    private readonly rest: RestClient,
    private readonly log: Logger,
    private readonly instance: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** Queues an event; returns at once. */
  record(target: EventTarget, reason: string, message: string, warning: boolean): void {
    const key = `${target.uid ?? `${target.namespace}/${target.name}`}|${reason}|${message}`;
    const t = this.now();
    const last = this.recent.get(key);
    if (last !== undefined && t - last < DEDUPE_MS) return;
    this.recent.set(key, t);
    if (this.recent.size > MAX_REMEMBERED) this.prune(t);
    if (this.queue.length >= MAX_QUEUED) {
      this.queue.shift();
      this.dropped++;
    }
    this.queue.push({ target, reason, message, warning, at: t });
    this.sending ??= this.drain().finally(() => (this.sending = undefined));
  }

  /** Resolves once every queued event was sent (or failed). */
  async flush(): Promise<void> {
    while (this.sending) await this.sending;
  }

  private async drain(): Promise<void> {
    for (let e = this.queue.shift(); e !== undefined; e = this.queue.shift()) await this.post(e);
    if (this.dropped > 0) {
      this.log.warn('events dropped: the apiserver did not keep up', { dropped: this.dropped });
      this.dropped = 0;
    }
  }

  private async post(e: Pending): Promise<void> {
    const at = new Date(e.at).toISOString();
    const t = e.target;
    try {
      await this.rest.post(`/api/v1/namespaces/${encodeURIComponent(t.namespace)}/events`, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${t.name}.`, namespace: t.namespace },
        involvedObject: { apiVersion: t.apiVersion, kind: t.kind, name: t.name, namespace: t.namespace, uid: t.uid },
        reason: e.reason,
        message: e.message.length > 1024 ? `${e.message.slice(0, 1021)}...` : e.message,
        type: e.warning ? 'Warning' : 'Normal',
        source: { component: 'joinguard' },
        reportingComponent: 'joinguard.io/joinguard',
        reportingInstance: this.instance,
        firstTimestamp: at,
        lastTimestamp: at,
        count: 1,
      });
    } catch (err) {
      this.log.warn('event not recorded', {
        reason: e.reason,
        [t.kind]: { namespace: t.namespace, name: t.name },
        error: (err as Error).message,
      });
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
