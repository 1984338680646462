// The results of one `npm run bench`: bench/results.json (every run's raw figures, per-Machine rows, and a
// `summary`) and the tables printed on stdout (bench/tables.ts), which docs/benchmarks.md quotes. Only
// measured values go in; targets are compared, never assumed. Who is who in the audit log:
//   JoinGuard            user joinguard-bench (any User-Agent)
//   workload requests    user bench-workload: whoever used a `<cluster>-kubeconfig` Secret; the User-Agent
//                        product says who (joinguard…, capi-core…)
//   CAPI core manager    admin, User-Agent capi-core (the whole manager: MHC and every other controller)
import fs from 'node:fs';
import os from 'node:os';
import { sumClients, type ClientCounts, type AuditWindow } from './audit.js';
import { USER_JOINGUARD, USER_WORKLOAD } from './env.js';
import type { FleetShape } from './fleet.js';
import type { SideDetection } from './latency.js';
import type { Edge, RunName, RunResult, RunTiming } from './run.js';
import type { RebuildResult } from './rebuilds.js';
import { byLabel, sum, type Sample } from './prom.js';
import { mib, round } from './stats.js';

const isJoinGuard = (client: string) => client.startsWith(`${USER_JOINGUARD}:`);
const isCore = (client: string) => client === 'admin:capi-core';
const isJoinGuardWorkload = (client: string) => client.startsWith(`${USER_WORKLOAD}:joinguard`);
const isCoreWorkload = (client: string) => client === `${USER_WORKLOAD}:capi-core`;
const isLease = (verbResource: string) => verbResource.endsWith(' leases');

function host() {
  const mem = fs.readFileSync('/proc/meminfo', 'utf8');
  const memKiB = Number(/^MemTotal:\s+(\d+)/m.exec(mem)?.[1] ?? 0);
  return {
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memTotalGiB: round(memKiB / 1024 / 1024, 1),
    kernel: os.release(),
    node: process.version,
  };
}

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
const cpu = (e: Edge, who: string) => e.proc[who]?.cpuSeconds;
const delta = (a: number | undefined, b: number | undefined) =>
  a === undefined || b === undefined ? undefined : round(b - a, 2);

/** What one side costs in one run, from the audit log and /proc. `who` is the process label. */
function cost(r: RunResult, who: string, client: (c: string) => boolean, workload: (c: string) => boolean) {
  const at = (name: 'quiet' | 'detection' | 'startup') => sumClients(r.audit.counts[name], client);
  const quiet = at('quiet');
  const detect = at('detection');
  const wq = sumClients(r.audit.counts.quiet, workload);
  return {
    peakRssMiB: mib(r.peakRssKiB[who]),
    rssAtQuietStartMiB: mib(r.edges.quietStart.proc[who]?.rssKiB),
    rssAtEndMiB: mib(r.edges.detectionEnd.proc[who]?.rssKiB),
    cpuSeconds: {
      total: round(cpu(r.edges.detectionEnd, who), 2),
      quiet: delta(cpu(r.edges.quietStart, who), cpu(r.edges.quietEnd, who)),
      detection: delta(cpu(r.edges.detectionStart, who), cpu(r.edges.detectionEnd, who)),
    },
    atRest: {
      minutes: round(minutes(r.windows.quiet), 2),
      requestsPerMin: perMin(quiet.requests, r.windows.quiet),
      leaseRequestsPerMin: perMin(quiet.requests - without(quiet, isLease), r.windows.quiet),
      otherRequestsPerMin: perMin(without(quiet, isLease), r.windows.quiet),
      watchesOpenedPerMin: perMin(quiet.watches, r.windows.quiet),
      workloadClusterRequestsPerMin: perMin(wq.requests, r.windows.quiet),
      workloadClusterWatchesOpenedPerMin: perMin(wq.watches, r.windows.quiet),
      byVerbResourcePerMin: rates(quiet, r.windows.quiet),
      workloadByVerbResourcePerMin: rates(wq, r.windows.quiet),
    },
    detection: {
      seconds: round((r.windows.detection.to - r.windows.detection.from) / 1000, 1),
      requests: detect.requests,
      nonLeaseRequests: without(detect, isLease),
      byVerbResource: detect.byVerbResource,
    },
    startup: { requests: at('startup').requests, byVerbResource: at('startup').byVerbResource },
  };
}

/** Per-controller reconcile seconds of CAPI's core manager between two edges (controller-runtime's metrics). */
function reconcileSeconds(a: Edge, b: Edge): Record<string, number> {
  const x = byLabel(a.core ?? [], 'controller_runtime_reconcile_time_seconds_sum', 'controller');
  const y = byLabel(b.core ?? [], 'controller_runtime_reconcile_time_seconds_sum', 'controller');
  return Object.fromEntries(
    Object.entries(y)
      .map(([k, v]) => [k, round(v - (x[k] ?? 0), 3)!])
      .filter(([, v]) => (v as number) > 0)
      .sort(([, p], [, q]) => (q as number) - (p as number)),
  );
}

/** JoinGuard's V8 heap and GC between two edges (prom-client's default metrics). */
function heapAndGc(a: Edge, b: Edge) {
  const m = b.joinguard ?? [];
  const gc = (s: Sample[], f: string) => byLabel(s, `nodejs_gc_duration_seconds_${f}`, 'kind');
  const [c0, c1, s0, s1] = [gc(a.joinguard ?? [], 'count'), gc(m, 'count'), gc(a.joinguard ?? [], 'sum'), gc(m, 'sum')];
  return {
    heapUsedMiB: mib(sum(m, 'nodejs_heap_size_used_bytes') / 1024),
    heapTotalMiB: mib(sum(m, 'nodejs_heap_size_total_bytes') / 1024),
    externalMiB: mib(sum(m, 'nodejs_external_memory_bytes') / 1024),
    gc: Object.fromEntries(
      Object.keys(c1).map((k) => [k, { count: c1[k]! - (c0[k] ?? 0), seconds: round(s1[k]! - (s0[k] ?? 0), 3) }]),
    ),
  };
}

function runSummary(r: RunResult) {
  const jg =
    r.sides.includes('joinguard') && r.joinguard ? cost(r, 'joinguard', isJoinGuard, isJoinGuardWorkload) : undefined;
  const core = cost(r, 'capi-core', isCore, isCoreWorkload);
  const marks = r.detection.joinguard?.marked ?? 0;
  return {
    joinguard: jg && {
      ...jg,
      readyS: round((r.joinguard!.readyAt - r.joinguard!.spawnedAt) / 1000, 2),
      firstReconcileS: round((r.joinguard!.firstReconcileAt - r.joinguard!.spawnedAt) / 1000, 2),
      requestsPerMark: marks ? round(jg.detection.nonLeaseRequests / marks, 2) : undefined,
      requestsPerMarkByKind: marks
        ? Object.fromEntries(
            Object.entries(jg.detection.byVerbResource)
              .filter(([k]) => !isLease(k))
              .sort(([, a], [, b]) => b - a)
              .map(([k, v]) => [k, round(v / marks, 2)]),
          )
        : undefined,
      heapAtEnd: heapAndGc(r.edges.quietStart, r.edges.detectionEnd),
      logLines: r.joinguard!.logLines,
    },
    core: {
      ...core,
      reconcileSecondsQuiet: reconcileSeconds(r.edges.quietStart, r.edges.quietEnd),
      reconcileSecondsDetection: reconcileSeconds(r.edges.detectionStart, r.edges.detectionEnd),
    },
  };
}

export interface BenchInputs {
  machines: number;
  smoke: boolean;
  shape: FleetShape;
  timing: RunTiming;
  /** The quiet window's length per run, in minutes (as asked; each run's atRest.minutes is as measured). */
  quietMin: Record<string, number>;
  nodeOptions: string;
  wallS: number;
  runs: Partial<Record<RunName, RunResult>>;
  rebuilds: RebuildResult;
  /** This bench's commit (git HEAD, `-dirty` when the tree had changes). */
  commit: string;
  /** --merge: runs of an earlier results file that were not re-run, kept as they were (their own date and commit). */
  kept?: { runs: Partial<Record<RunName, RunResult>>; perRun: PerRun; quietMin: Record<string, number> };
}

/** When and on which commit a run was measured, and the machine's load averages (1/5/15 min) at its window edges. */
export function measuredOf(r: RunResult) {
  return {
    date: r.measured?.date,
    commit: r.measured?.commit,
    loadavg: Object.fromEntries(Object.entries(r.edges).map(([k, e]) => [k, e.loadavg])),
  };
}

/** Over every stuck Machine, censored ones included (bench/latency.ts). */
const detectionFields = (d: SideDetection | undefined) => ({
  stuck: d?.stuck,
  marked: d?.marked,
  censored: d?.censored,
  detectionP50AllS: d?.p50?.s,
  detectionP99AllS: d?.p99?.s,
  detectionP99AllCensored: d?.p99?.censored,
  detectionMaxAllS: d?.max?.s,
  detectionMaxAllCensored: d?.max?.censored,
});

export type PerRun = Partial<Record<RunName, ReturnType<typeof runSummary>>>;

function buildSummary(b: BenchInputs, per: PerRun) {
  const jgRun = b.runs.joinguard;
  const mhcRun = b.runs.mhc;
  const jg = per.joinguard?.joinguard;
  const coreJ = per.joinguard?.core;
  const coreM = per.mhc?.core;
  const dj = jgRun?.detection.joinguard;
  const dm = mhcRun?.detection.mhc;
  const mhcMarks = dm?.marked ?? 0;
  // The MHC's own share: the core manager with MachineHealthChecks (mhc run) minus the same manager on an
  // identical fleet without any (joinguard run); and, within the mhc run, the MHC controller's share of
  // the manager's reconcile time (controller-runtime's metrics).
  const diff = (f: (c: NonNullable<typeof coreM>) => number | undefined) =>
    coreM && coreJ ? round((f(coreM) ?? 0) - (f(coreJ) ?? 0), 2) : undefined;
  const mhcReconcile = per.mhc?.core.reconcileSecondsDetection ?? {};
  const allReconcile = Object.values(mhcReconcile).reduce((a, v) => a + v, 0);
  return {
    machines: b.machines,
    measured: jgRun && measuredOf(jgRun),
    note: "JoinGuard alone (run joinguard); under mhc: the MHC alone (run mhc), where memory, CPU and requests are the whole CAPI core manager and *MhcShareEstimate is the MHC's own part (see docs/benchmarks.md)",
    ...detectionFields(dj),
    peakRssMiB: jg?.peakRssMiB,
    firstReconcileS: jg?.firstReconcileS,
    requestsPerMark: jg?.requestsPerMark,
    requestsPerMarkByKind: jg?.requestsPerMarkByKind,
    atRestRequestsPerMin: jg?.atRest.requestsPerMin,
    atRestLeaseRequestsPerMin: jg?.atRest.leaseRequestsPerMin,
    atRestOtherRequestsPerMin: jg?.atRest.otherRequestsPerMin,
    atRestWorkloadClusterRequestsPerMin: jg?.atRest.workloadClusterRequestsPerMin,
    mhc: {
      measured: mhcRun && measuredOf(mhcRun),
      measuredNote:
        mhcRun && jgRun && mhcRun.measured?.date?.slice(0, 10) !== jgRun.measured?.date?.slice(0, 10)
          ? `the mhc run is from ${mhcRun.measured?.date ?? '?'} (commit ${mhcRun.measured?.commit ?? '?'}), the joinguard run from ${jgRun.measured?.date ?? '?'} (commit ${jgRun.measured?.commit ?? '?'}): the *MhcShareEstimate figures subtract figures of two different days`
          : undefined,
      ...detectionFields(dm),
      peakRssMiB: coreM?.peakRssMiB,
      peakRssMiBMhcShareEstimate: diff((c) => c.peakRssMiB),
      firstReconcileS: null,
      firstReconcileNote: 'not measured: the core manager runs before the fleet exists (it is what builds it)',
      requestsPerMark: coreM && mhcMarks ? round(coreM.detection.nonLeaseRequests / mhcMarks, 2) : undefined,
      requestsPerMarkMhcShareEstimate:
        coreM && coreJ && mhcMarks
          ? round((coreM.detection.nonLeaseRequests - coreJ.detection.nonLeaseRequests) / mhcMarks, 2)
          : undefined,
      atRestRequestsPerMin: coreM?.atRest.requestsPerMin,
      atRestRequestsPerMinMhcShareEstimate: diff((c) => c.atRest.requestsPerMin),
      atRestLeaseRequestsPerMin: coreM?.atRest.leaseRequestsPerMin,
      atRestWorkloadClusterRequestsPerMin: coreM?.atRest.workloadClusterRequestsPerMin,
      cpuSecondsDetection: coreM?.cpuSeconds.detection,
      cpuSecondsDetectionMhcShareEstimate: diff((c) => c.cpuSeconds.detection),
      mhcShareOfReconcileTimeDetection: allReconcile
        ? round((mhcReconcile['machinehealthcheck'] ?? 0) / allReconcile, 3)
        : undefined,
    },
    both: b.runs.both && {
      measured: measuredOf(b.runs.both),
      joinguard: pick(b.runs.both.detection.joinguard),
      mhc: pick(b.runs.both.detection.mhc),
      race: b.runs.both.race && {
        joinguardFirst: b.runs.both.race.joinguardFirst,
        mhcFirst: b.runs.both.race.mhcFirst.length,
        neither: b.runs.both.race.neither.length,
      },
    },
  };
}

type Summary = ReturnType<typeof buildSummary>;

export function buildResults(b0: BenchInputs) {
  const fresh = Object.fromEntries(Object.entries(b0.runs).map(([k, r]) => [k, runSummary(r)])) as PerRun;
  const per = { ...b0.kept?.perRun, ...fresh } as PerRun;
  const b = { ...b0, runs: { ...b0.kept?.runs, ...b0.runs }, quietMin: { ...b0.kept?.quietMin, ...b0.quietMin } };
  const summary = buildSummary(b, per);
  return {
    run: {
      date: new Date().toISOString(),
      commit: b.commit,
      machines: b.machines,
      smoke: b.smoke,
      wallS: round(b.wallS, 1),
      runs: Object.keys(b.runs),
      rerun: Object.keys(b0.runs),
      keptFromEarlier: Object.fromEntries(
        Object.entries(b0.kept?.runs ?? {}).map(([k, r]) => [
          k,
          { date: r.measured?.date, commit: r.measured?.commit },
        ]),
      ),
      host: host(),
      joinguardNodeOptions: b.nodeOptions,
      joinguardMemoryLimit: b.runs.joinguard?.joinguard?.memoryLimit ?? b.runs.both?.joinguard?.memoryLimit,
    },
    setup: {
      shape: b.shape,
      timing: b.timing,
      quietMinByRun: b.quietMin,
      runs: "each run on a control plane and a fleet of its own, built afresh: joinguard = MachineJoinChecks only; mhc = MachineHealthChecks only; both = both on the same Machines. Checks use the default strategy (Auto); JoinGuard runs as the Deployment does (--leader-elect, default lease timings, webhook server in process); CAPI's three managers with --leader-elect (defaults)",
      requestCounting:
        'apiserver audit log (level Metadata, blocking mode, checked complete against apiserver_audit_event_total/error_total): apiserver_request_total has no client label',
      apiserverRequestTotalLabels: Object.values(b.runs)[0]?.apiserverRequestTotalLabels,
      clients: Object.assign({}, ...Object.values(b.runs).map((r) => r.audit.userAgents)),
    },
    summary,
    sharded: b.runs.sharded && shardedSummary(b.runs.sharded, b.machines),
    targets: targets(b, summary, per),
    perRun: per,
    runs: b.runs,
    rebuilds: b.rebuilds,
  };
}

const pick = (d: SideDetection | undefined) => d && { ...detectionFields(d), how: d.how };

export type Results = ReturnType<typeof buildResults>;

function targets(b: BenchInputs, s: Summary, per: PerRun) {
  const scale = b.machines >= 10_000 ? 'at 10,000' : `at ${b.machines} (the target is for 10,000)`;
  const t = (name: string, measured: string, met: boolean | undefined, atScale = scale) => ({
    name,
    measured,
    met,
    atScale,
  });
  const coreBeside = per.joinguard?.core.peakRssMiB;
  const race = s.both?.race;
  const jgDefault = b.rebuilds.rows.find((x) => x.guard === 'JoinGuard, defaults')!.rebuilds;
  const lease = s.atRestLeaseRequestsPerMin;
  const coreLease = per.joinguard?.core.atRest.leaseRequestsPerMin;
  return [
    t(
      'p99 detection < 1 s over every stuck Machine (JoinGuard alone)',
      s.detectionP99AllS === undefined
        ? '—'
        : `${s.detectionP99AllCensored ? '> ' : ''}${s.detectionP99AllS} s (${s.censored} censored)`,
      s.detectionP99AllS === undefined ? undefined : !s.detectionP99AllCensored && s.detectionP99AllS < 1,
    ),
    t('peak RSS < 150 MiB', `${s.peakRssMiB} MiB`, s.peakRssMiB === undefined ? undefined : s.peakRssMiB < 150),
    t(
      'first complete reconcile < 5 s from process start',
      `${s.firstReconcileS} s`,
      s.firstReconcileS === undefined ? undefined : s.firstReconcileS < 5,
    ),
    t(
      '<= 4 requests per mark',
      `${s.requestsPerMark}`,
      s.requestsPerMark === undefined ? undefined : s.requestsPerMark <= 4,
    ),
    t(
      "at rest: only lease renewals, no more often than CAPI's core manager renews",
      `${s.atRestOtherRequestsPerMin}/min other, ${lease}/min lease (core manager: ${coreLease}/min)`,
      lease === undefined || coreLease === undefined
        ? undefined
        : s.atRestOtherRequestsPerMin === 0 && lease <= coreLease,
    ),
    t(
      'beside the MHC: JoinGuard marks every stuck Machine first',
      race
        ? `${race.joinguardFirst}/${s.both!.joinguard!.stuck} first (MHC first on ${race.mhcFirst}, neither on ${race.neither})`
        : '—',
      race ? race.mhcFirst === 0 && race.neither === 0 : undefined,
    ),
    t(
      "peak RSS below the CAPI core manager's",
      `${s.peakRssMiB} vs ${coreBeside} MiB`,
      s.peakRssMiB === undefined || coreBeside === undefined ? undefined : s.peakRssMiB < coreBeside,
      b.machines === 2000 || b.machines >= 10_000
        ? `at ${b.machines}`
        : `at ${b.machines} (the target is for 2,000 and 10,000)`,
    ),
    t('wasted rebuilds in 24 h with defaults <= 7', String(jgDefault), jgDefault <= 7, 'pool of 5'),
  ];
}

/** Run `sharded`: each shard's memory, first reconcile, marks (and whose), latency, requests, and what it touched outside. */
function shardedSummary(r: RunResult, machines: number) {
  return {
    machines,
    measured: measuredOf(r),
    note: "two JoinGuard processes over one fleet, each --watch-filter=<shard> and its own Lease; requests attributed by each shard's client identity in the audit log; 'outside' = a request on an object of the other shard's Clusters, or a list/watch of Clusters, Machines, checks, MachineSets, MachineDeployments, MachinePools or Secrets without the shard's selector",
    stuck: r.detection.joinguard?.stuck,
    marked: r.detection.joinguard?.marked,
    detectionP99AllS: r.detection.joinguard?.p99?.s,
    detectionP99AllCensored: r.detection.joinguard?.p99?.censored,
    shards: (r.shards ?? []).map((s) => {
      const client = (c: string) => c.startsWith(`${s.user}:`);
      const c = cost(r, `joinguard-${s.name}`, client, () => false);
      const d = s.detection;
      return {
        name: s.name,
        lease: s.lease,
        clusters: s.clusters,
        checks: s.checks,
        peakRssMiB: mib(s.peakRssKiB),
        memoryLimit: s.memoryLimit ?? 'not recorded (run before 2026-12-04 23:00)',
        rssAtQuietStartMiB: c.rssAtQuietStartMiB,
        readyS: round((s.readyAt - s.spawnedAt) / 1000, 2),
        firstReconcileS: round((s.firstReconcileAt - s.spawnedAt) / 1000, 2),
        stuck: d.stuck,
        marked: d.marked,
        censored: d.censored,
        markedByOtherShard: s.markedByOtherShard.length,
        markedByOtherShardNames: s.markedByOtherShard,
        markedByThisShard: s.markedByThisShard,
        falseMarks: d.falseMarks.length,
        detectionP50AllS: d.p50?.s,
        detectionP99AllS: d.p99?.s,
        detectionP99AllCensored: d.p99?.censored,
        requestsPerMark: d.marked ? round(c.detection.nonLeaseRequests / d.marked, 2) : undefined,
        atRestRequestsPerMin: c.atRest.requestsPerMin,
        atRestOtherRequestsPerMin: c.atRest.otherRequestsPerMin,
        cpuSeconds: c.cpuSeconds,
        requests: s.audit.requests,
        watchesOpened: s.audit.watches,
        requestsOutsideShard: s.audit.outside,
        unfilteredListsOrWatches: s.audit.unfilteredListsOrWatches,
        outsideByVerbResource: s.audit.outsideByVerbResource,
        outsideExamples: s.audit.outsideExamples,
        unfilteredListsOrWatchesByResource: s.audit.unfilteredByResource,
        requestsOnNoClusterObject: s.audit.notClusterObjects,
        requestsNamingNoObject: s.audit.unnamed,
        logLines: s.logLines,
        exit: s.exit,
      };
    }),
  };
}
