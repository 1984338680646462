// Requests per client, from the apiserver's audit log (JSON lines, level Metadata). A request is counted
// when it completes (stage ResponseComplete); a watch when it is opened (stage ResponseStarted), so the
// watches a client keeps open and the requests it makes are told apart. Time is the apiserver's
// requestReceivedTimestamp. Clients are (user, User-Agent product) pairs: the CAPI managers share the
// admin identity but not their User-Agent.
// The log runs in blocking mode; that no event was lost is still checked against the apiserver's own
// counters (apiserver_audit_event_total, apiserver_audit_error_total), and a loss fails the run.
import fs from 'node:fs';
import readline from 'node:readline';
import { sum, type Sample } from './prom.js';

export interface AuditWindow {
  name: string;
  from: number;
  to: number;
}

export interface ClientCounts {
  requests: number;
  watches: number;
  /** `verb resource[/subresource]` -> count, for requests (not watches). */
  byVerbResource: Record<string, number>;
  /** namespace ('' = cluster-scoped) -> count, for requests: tells the two sides of the bench apart. */
  byNamespace: Record<string, number>;
}

/** window name -> client -> counts. */
export type AuditCounts = Record<string, Record<string, ClientCounts>>;

export function clientOf(user: string, userAgent: string): string {
  const product = (userAgent || 'unknown').split(' ')[0]!.split('/')[0]!;
  return `${user}:${product}`;
}

export async function countAudit(
  file: string,
  windows: AuditWindow[],
): Promise<{ counts: AuditCounts; lines: number; userAgents: Record<string, string> }> {
  const counts: AuditCounts = Object.fromEntries(windows.map((w) => [w.name, {}]));
  const userAgents: Record<string, string> = {};
  let lines = 0;
  if (!fs.existsSync(file)) return { counts, lines, userAgents };
  const rl = readline.createInterface({ input: fs.createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line) continue;
    lines++;
    let e: {
      stage: string;
      verb: string;
      user?: { username?: string };
      userAgent?: string;
      objectRef?: { resource?: string; subresource?: string; namespace?: string };
      requestURI?: string;
      requestReceivedTimestamp: string;
    };
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    const isWatch = e.verb === 'watch';
    if (isWatch ? e.stage !== 'ResponseStarted' : e.stage !== 'ResponseComplete') continue;
    const at = Date.parse(e.requestReceivedTimestamp);
    const client = clientOf(e.user?.username ?? '', e.userAgent ?? '');
    userAgents[client] ??= e.userAgent ?? '';
    for (const w of windows) {
      if (at < w.from || at >= w.to) continue;
      const c = (counts[w.name]![client] ??= { requests: 0, watches: 0, byVerbResource: {}, byNamespace: {} });
      if (isWatch) c.watches++;
      else {
        c.requests++;
        const res = e.objectRef?.resource
          ? `${e.objectRef.resource}${e.objectRef.subresource ? `/${e.objectRef.subresource}` : ''}`
          : (e.requestURI ?? '').split('?')[0]!;
        const k = `${e.verb} ${res}`;
        c.byVerbResource[k] = (c.byVerbResource[k] ?? 0) + 1;
        const ns = e.objectRef?.namespace ?? '';
        c.byNamespace[ns] = (c.byNamespace[ns] ?? 0) + 1;
      }
    }
  }
  return { counts, lines, userAgents };
}

/** Sums the counts of every client whose key matches. */
export function sumClients(
  byClient: Record<string, ClientCounts> | undefined,
  match: (client: string) => boolean,
): ClientCounts {
  const out: ClientCounts = { requests: 0, watches: 0, byVerbResource: {}, byNamespace: {} };
  for (const [client, c] of Object.entries(byClient ?? {})) {
    if (!match(client)) continue;
    out.requests += c.requests;
    out.watches += c.watches;
    for (const [k, v] of Object.entries(c.byVerbResource)) out.byVerbResource[k] = (out.byVerbResource[k] ?? 0) + v;
    for (const [k, v] of Object.entries(c.byNamespace)) out.byNamespace[k] = (out.byNamespace[k] ?? 0) + v;
  }
  return out;
}

export interface AuditIntegrity {
  /** apiserver_audit_event_total when scraped just before the apiserver stopped. */
  eventsGenerated: number;
  /** apiserver_audit_error_total (every plugin): events that could not be written. */
  errors: number;
  /** Lines in the log file after the apiserver stopped (>= eventsGenerated: later events come after the scrape). */
  lines: number;
}

/** Throws unless every audit event the apiserver generated is in the file. */
export function checkAuditComplete(apiserverMetrics: Sample[], lines: number): AuditIntegrity {
  const r = {
    eventsGenerated: sum(apiserverMetrics, 'apiserver_audit_event_total'),
    errors: sum(apiserverMetrics, 'apiserver_audit_error_total'),
    lines,
  };
  if (r.eventsGenerated === 0)
    throw new Error('audit: the apiserver reports no audit event generated; the audit log is not on');
  if (r.errors > 0 || lines < r.eventsGenerated) {
    throw new Error(
      `audit: events lost — apiserver_audit_error_total ${r.errors}, ${r.eventsGenerated} generated before the last scrape, ${lines} in the log; the request counts would be short`,
    );
  }
  return r;
}
