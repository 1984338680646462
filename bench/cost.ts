// What one side costs in one phase, from the audit log's counts of its windows and /proc at their edges. Who is who:
//   JoinGuard            its own client identity: joinguard-bench (phases with one process), joinguard-replica-a/-b,
//                        joinguard-shard-a/-b; any User-Agent
//   workload requests    user bench-workload (whoever used a `<cluster>-kubeconfig` Secret), the User-Agent product
//                        says who (joinguard…, capi-core…)
//   CAPI core manager    admin, User-Agent capi-core (the whole manager: the MHC and every other controller)
import { sumClients, type ClientCounts, type AuditWindow } from './audit.js';
import { USER_WORKLOAD } from './env.js';
import type { PhaseResult } from './phase.js';
import type { Edge } from './phase-kit.js';
import { byLabel, sum, type Sample } from './prom.js';
import { mib, round } from './stats.js';

export const isCore = (client: string) => client === 'admin:capi-core';
export const isCoreWorkload = (client: string) => client === `${USER_WORKLOAD}:capi-core`;
export const isJoinGuardWorkload = (client: string) => client.startsWith(`${USER_WORKLOAD}:joinguard`);
export const ofUser = (user: string) => (client: string) => client.startsWith(`${user}:`);
export const isLease = (verbResource: string) => verbResource.endsWith(' leases');

const minutes = (w: AuditWindow) => (w.to - w.from) / 60_000;
const perMin = (n: number, w: AuditWindow) => round(n / minutes(w), 1)!;
const without = (c: ClientCounts, drop: (k: string) => boolean) =>
  Object.entries(c.byVerbResource)
    .filter(([k]) => !drop(k))
    .reduce((a, [, v]) => a + v, 0);
const rates = (c: ClientCounts, w: AuditWindow) =>
  Object.fromEntries(
    Object.entries(c.byVerbResource)
      .sort(([, a], [, b]) => b - a)
      .map(([k, v]) => [k, perMin(v, w)]),
  );
const cpu = (e: Edge | undefined, who: string) => e?.proc[who]?.cpuSeconds;
const delta = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? undefined : round(b - a, 2);

/** A side's cost in a phase; `who` is its /proc label. */
export function cost(p: PhaseResult, who: string, client: (c: string) => boolean, workload: (c: string) => boolean) {
  // Audit-derived figures exist once the log is read, when the invocation ends (undefined in results so far).
  const at = (w: AuditWindow | undefined, who = client) =>
    w && p.audit ? sumClients(p.audit.windows[w.name], who) : undefined;
  const { quiet: q, detection: d, startup: s } = p.windows;
  const quiet = at(q);
  const detect = at(d);
  const wq = at(q, workload);
  const start = at(s);
  return {
    rssAtDetectionStartMiB: mib(p.edges.detectionStart?.proc[who]?.rssKiB),
    cpuSeconds: {
      quiet: delta(cpu(p.edges.quietStart, who), cpu(p.edges.quietEnd, who)),
      detection: delta(cpu(p.edges.detectionStart, who), cpu(p.edges.detectionEnd, who)),
    },
    atRest:
      quiet && wq && q
        ? {
            minutes: round(minutes(q), 2),
            requestsPerMin: perMin(quiet.requests, q),
            leaseRequestsPerMin: perMin(quiet.requests - without(quiet, isLease), q),
            otherRequestsPerMin: perMin(without(quiet, isLease), q),
            watchesOpenedPerMin: perMin(quiet.watches, q),
            workloadClusterRequestsPerMin: perMin(wq.requests, q),
            byVerbResourcePerMin: rates(quiet, q),
            workloadByVerbResourcePerMin: rates(wq, q),
          }
        : undefined,
    detection:
      detect && d
        ? {
            seconds: round((d.to - d.from) / 1000, 1),
            requests: detect.requests,
            nonLeaseRequests: without(detect, isLease),
            byVerbResource: detect.byVerbResource,
          }
        : undefined,
    startup: start && { requests: start.requests, byVerbResource: start.byVerbResource },
  };
}

export type Cost = ReturnType<typeof cost>;

/** Requests per mark in the detection window (Leases aside), in all and by kind. */
export function perMark(c: Cost, marks: number) {
  if (!c.detection || !marks) return { requestsPerMark: undefined, requestsPerMarkByKind: undefined };
  return {
    requestsPerMark: round(c.detection.nonLeaseRequests / marks, 2),
    requestsPerMarkByKind: Object.fromEntries(
      Object.entries(c.detection.byVerbResource)
        .filter(([k]) => !isLease(k))
        .sort(([, a], [, b]) => b - a)
        .map(([k, v]) => [k, round(v / marks, 2)!]),
    ),
  };
}

/** Per-controller reconcile seconds of CAPI's core manager between two edges (controller-runtime's metrics). */
export function reconcileSeconds(a: Edge | undefined, b: Edge | undefined): Record<string, number> {
  const x = byLabel(a?.core ?? [], 'controller_runtime_reconcile_time_seconds_sum', 'controller');
  const y = byLabel(b?.core ?? [], 'controller_runtime_reconcile_time_seconds_sum', 'controller');
  return Object.fromEntries(
    Object.entries(y)
      .map(([k, v]) => [k, round(v - (x[k] ?? 0), 3)!] as const)
      .filter(([, v]) => v > 0)
      .sort(([, p], [, q]) => q - p),
  );
}

/** JoinGuard's V8 heap at an edge and its GC between two (prom-client's default metrics). */
export function heapAndGc(a: Edge | undefined, b: Edge | undefined) {
  const m = b?.joinguard ?? [];
  const gc = (s: Sample[], f: string) => byLabel(s, `nodejs_gc_duration_seconds_${f}`, 'kind');
  const [c0, c1, s0, s1] = [
    gc(a?.joinguard ?? [], 'count'),
    gc(m, 'count'),
    gc(a?.joinguard ?? [], 'sum'),
    gc(m, 'sum'),
  ];
  return {
    heapUsedMiB: mib(sum(m, 'nodejs_heap_size_used_bytes') / 1024),
    heapTotalMiB: mib(sum(m, 'nodejs_heap_size_total_bytes') / 1024),
    externalMiB: mib(sum(m, 'nodejs_external_memory_bytes') / 1024),
    gc: Object.fromEntries(
      Object.keys(c1).map((k) => [k, { count: c1[k]! - (c0[k] ?? 0), seconds: round(s1[k]! - (s0[k] ?? 0), 3) }]),
    ),
  };
}
