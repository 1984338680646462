// Requests per client, from the apiserver's audit log (JSON lines, level Metadata). A request is counted
// when it completes (stage ResponseComplete); a watch when it is opened (stage ResponseStarted), so the
// watches a client keeps open and the requests it makes are told apart. Time is the apiserver's
// requestReceivedTimestamp. Clients are (user, User-Agent product) pairs: the CAPI managers share the
// admin identity but not their User-Agent.
// The log runs in blocking mode; that no event was lost is still checked against the apiserver's own
// counters (apiserver_audit_event_total, apiserver_audit_error_total), and a loss fails the run.
// One pass reads the log (`readAudit`): each line is parsed once and handed to every reader of the run (the counts
// below, a shard's requests, the apiserver's latency by second in audit-latency.ts).
import fs from 'node:fs';
import readline from 'node:readline';
import { sum, type Sample } from './prom.js';

/** The fields of an audit event (level Metadata) that the readers use. */
export interface AuditEvent {
  stage?: string;
  verb?: string;
  user?: { username?: string };
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  requestURI?: string;
  requestReceivedTimestamp?: string;
  stageTimestamp?: string;
}

/** A reader of the log: takes every event once, in the log's order. */
export interface AuditConsumer {
  take(e: AuditEvent): void;
}

/** Reads the log once, handing each event to every consumer; returns its non-empty lines (parsed or not). */
export async function readAudit(file: string, consumers: AuditConsumer[]): Promise<number> {
  let lines = 0;
  if (!fs.existsSync(file)) return lines;
  const rl = readline.createInterface({ input: fs.createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line) continue;
    lines++;
    let e: AuditEvent;
    try {
      e = JSON.parse(line) as AuditEvent;
    } catch {
      continue;
    }
    for (const c of consumers) c.take(e);
  }
  return lines;
}

/** A request when it completes, a watch when it is opened (see above). */
const counted = (e: AuditEvent) =>
  e.verb === 'watch' ? e.stage === 'ResponseStarted' : e.stage === 'ResponseComplete';

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

/** Requests and watches per client in each window. */
export class AuditCounter implements AuditConsumer {
  readonly counts: AuditCounts;
  readonly userAgents: Record<string, string> = {};

  constructor(private readonly windows: AuditWindow[]) {
    this.counts = Object.fromEntries(windows.map((w) => [w.name, {}]));
  }

  take(e: AuditEvent): void {
    if (!counted(e)) return;
    const at = Date.parse(e.requestReceivedTimestamp ?? '');
    const client = clientOf(e.user?.username ?? '', e.userAgent ?? '');
    this.userAgents[client] ??= e.userAgent ?? '';
    for (const w of this.windows) {
      if (at < w.from || at >= w.to) continue;
      const c = (this.counts[w.name]![client] ??= { requests: 0, watches: 0, byVerbResource: {}, byNamespace: {} });
      if (e.verb === 'watch') c.watches++;
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

/** Kinds a shard must only list or watch through its label selector (the ones a Cluster's objects are of). */
const SHARD_LIST_KINDS = new Set([
  'clusters',
  'machines',
  'machinejoinchecks',
  'machinesets',
  'machinedeployments',
  'machinepools',
  'secrets',
]);

export interface ShardAudit {
  requests: number;
  watches: number;
  /** Requests on an object of another shard's Cluster, or a list/watch of SHARD_LIST_KINDS without this shard's selector. */
  outside: number;
  outsideByVerbResource: Record<string, number>;
  outsideExamples: string[];
  /** Lists and watches of SHARD_LIST_KINDS without `cluster.x-k8s.io/watch-filter=<shard>` (part of `outside`). */
  unfilteredListsOrWatches: number;
  /** Every list/watch with no watch-filter selector, any kind (MHCs, KCPs, configs are unfiltered by design). */
  unfilteredByResource: Record<string, number>;
  /** Requests on a named object not named after a Cluster (Leases, the bootstrap Secret, …): neither inside nor outside. */
  notClusterObjects: Record<string, number>;
  /** Requests naming no object that are not lists or watches (e.g. creates at audit level Metadata). */
  unnamed: Record<string, number>;
}

const inc = (o: Record<string, number>, k: string) => (o[k] = (o[k] ?? 0) + 1);

/**
 * Per shard, every request its JoinGuard made (told apart by identity: one client certificate per shard), checked
 * against the shard's Clusters: `shardOfName` maps an object's name to the shard of the Cluster it is named after.
 * Also who wrote each Machine (patch/update of machines or machines/status): the marks' authors.
 */
export class ShardAuditor implements AuditConsumer {
  readonly shards: Record<string, ShardAudit>;
  readonly machineWriters: Record<string, string[]> = {};
  private readonly shardOfUser: Map<string, string>;

  constructor(
    users: Record<string, string>,
    private readonly shardOfName: (name: string) => string | undefined,
    private readonly filterLabel: string,
  ) {
    this.shardOfUser = new Map(Object.entries(users).map(([shard, user]) => [user, shard]));
    this.shards = Object.fromEntries(
      Object.keys(users).map((s) => [
        s,
        {
          requests: 0,
          watches: 0,
          outside: 0,
          outsideByVerbResource: {},
          outsideExamples: [],
          unfilteredListsOrWatches: 0,
          unfilteredByResource: {},
          notClusterObjects: {},
          unnamed: {},
        },
      ]),
    );
  }

  take(e: AuditEvent): void {
    const shard = this.shardOfUser.get(e.user?.username ?? '');
    if (!shard || !counted(e)) return;
    const isWatch = e.verb === 'watch';
    const a = this.shards[shard]!;
    if (isWatch) a.watches++;
    else a.requests++;
    const resource = e.objectRef?.resource ?? '';
    const vr = `${e.verb} ${resource}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
    const outside = (why: string) => {
      a.outside++;
      inc(a.outsideByVerbResource, vr);
      if (a.outsideExamples.length < 10) a.outsideExamples.push(`${why}: ${e.verb} ${e.requestURI ?? ''}`);
    };
    const name = e.objectRef?.name;
    const owner = name === undefined ? undefined : this.shardOfName(name);
    if (e.verb === 'list' || isWatch) {
      const own = `${this.filterLabel}=${shard}`;
      const query = new URLSearchParams((e.requestURI ?? '').split('?')[1] ?? '');
      const selector = (query.get('labelSelector') ?? '').split(',').map((x) => x.replace('==', '='));
      const mine = selector.includes(own);
      const other = selector.some((x) => x.startsWith(`${this.filterLabel}=`) && x !== own);
      if (!mine) inc(a.unfilteredByResource, `${e.verb} ${resource}`);
      if (other) outside('another shard selected');
      else if (!mine && SHARD_LIST_KINDS.has(resource) && !name) {
        a.unfilteredListsOrWatches++;
        outside('no shard selector');
      } else if (owner !== undefined && owner !== shard) outside('another shard');
      return;
    }
    if (!name) {
      inc(a.unnamed, vr);
      return;
    }
    if (owner === undefined) inc(a.notClusterObjects, vr);
    else if (owner !== shard) outside('another shard');
    if (resource === 'machines' && (e.verb === 'patch' || e.verb === 'update')) {
      const w = (this.machineWriters[name] ??= []);
      if (!w.includes(shard)) w.push(shard);
    }
  }
}
