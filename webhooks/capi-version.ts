// The CAPI release the webhook judges against: asked of the one discovery function
// (runtime/client/discovery.ts discoverCapi) when the server starts, then again only rarely — a CAPI
// upgrade (clusterctl upgrade) is the only thing that changes it. An admission never waits on a slow
// apiserver for it longer than a short bound: it is judged with what is known, and says so.
import type { CapiApiVersion } from '../api/capi/model.js';

/** What the webhook needs of discoverCapi's answer (runtime/client/discovery.ts CapiVersionInfo). */
export interface CapiVersionFacts {
  apiVersion: CapiApiVersion;
  /** The CAPI minor (14 for v1.14.2); undefined when discovery could not tell. */
  minor?: number;
  version?: string;
  /** Where the minor came from. */
  source?: string;
}

export interface CapiKnowledge {
  facts?: CapiVersionFacts;
  /** Why the last discovery failed, when it did. */
  error?: string;
}

export interface CapiVersionWatchOptions {
  /** Rediscover after this long (default 10 min). */
  refreshMs?: number;
  /** After a failed discovery, try again on the next admission after this long (default 30 s). */
  retryMs?: number;
  /** How long an admission waits for a discovery in flight when nothing is known yet (default 2 s). */
  waitMs?: number;
  now?: () => number;
  onChange?: (facts: CapiVersionFacts) => void;
  onError?: (message: string) => void;
}

export class CapiVersionWatch {
  private facts?: CapiVersionFacts;
  private error?: string;
  private attemptedAt = -Infinity;
  private pending?: Promise<void>;
  private readonly now: () => number;

  constructor(
    private readonly discover: () => Promise<CapiVersionFacts>,
    private readonly o: CapiVersionWatchOptions = {},
  ) {
    this.now = o.now ?? Date.now;
  }

  /** Starts the first discovery; the returned promise settles when it is done (it never rejects). */
  start(): Promise<void> {
    return this.refresh();
  }

  /** What is known now; starts a refresh when it is stale, and waits (bounded) only when nothing is known. */
  async get(): Promise<CapiKnowledge> {
    const age = this.now() - this.attemptedAt;
    if (
      !this.pending &&
      age >= (this.facts && !this.error ? (this.o.refreshMs ?? 600_000) : (this.o.retryMs ?? 30_000))
    )
      void this.refresh();
    if (!this.facts && this.pending) await within(this.pending, this.o.waitMs ?? 2_000);
    return { ...(this.facts ? { facts: this.facts } : {}), ...(this.error ? { error: this.error } : {}) };
  }

  private refresh(): Promise<void> {
    this.pending ??= (async () => {
      try {
        const facts = await this.discover();
        const changed = JSON.stringify(facts) !== JSON.stringify(this.facts);
        this.facts = facts;
        this.error = undefined;
        if (changed) this.o.onChange?.(facts);
      } catch (e) {
        // The last facts stay: a failed refresh does not make a known release unknown.
        this.error = (e as Error).message;
        this.o.onError?.(this.error);
      } finally {
        this.attemptedAt = this.now();
        this.pending = undefined;
      }
    })();
    return this.pending;
  }
}

function within(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
