// One phase of `npm run bench`, compact (what bench/results.json keeps of it, and what the summary and the tables
// read): its own file so that report.ts (which writes the results) and summary.ts (which takes medians over the
// phases) both import it and not each other.
import {
  cost,
  heapAndGc,
  isCore,
  isCoreWorkload,
  isJoinGuardWorkload,
  ofUser,
  perMark,
  reconcileSeconds,
} from './cost.js';
import { USER_JOINGUARD } from './env.js';
import type { SideDetection } from './latency.js';
import type { PhaseResult } from './phase.js';
import { mib, round } from './stats.js';

/** Over every stuck Machine, censored ones included (bench/latency.ts); the latencies kept to recompute them. */
export const detectionFields = (d: SideDetection | undefined) =>
  d && {
    stuck: d.stuck,
    marked: d.marked,
    censored: d.censored,
    early: d.early,
    falseMarks: d.falseMarks.length,
    how: d.how,
    p50AllS: d.p50?.s,
    p99AllS: d.p99?.s,
    p99AllCensored: d.p99?.censored,
    maxAllS: d.max?.s,
    maxAllCensored: d.max?.censored,
    markedOnlyP99S: d.markedOnly.p99,
    latenciesMs: d.latenciesMs,
  };

const userOf = (label: string) => (label === 'joinguard' ? USER_JOINGUARD : label);
const secondsFrom = (a: number, b: number | undefined) => (b === undefined ? undefined : round((b - a) / 1000, 2));

/** One phase, compact: what the summary and the tables read. */
export function phaseSummary(p: PhaseResult) {
  const proc = p.joinguard.find((f) => f.firstReconcileAt !== undefined) ?? p.joinguard[0];
  const jgCost = proc && cost(p, proc.label, ofUser(userOf(proc.label)), isJoinGuardWorkload);
  const core = cost(p, 'capi-core', isCore, isCoreWorkload);
  const recon = reconcileSeconds(p.edges.detectionStart, p.edges.detectionEnd);
  const allRecon = Object.values(recon).reduce((a, v) => a + v, 0);
  const mhcMarks = p.detection.mhc?.marked ?? 0;
  return {
    id: p.id,
    kind: p.kind,
    repeat: p.repeat,
    measured: p.measured,
    durationS: p.durationS,
    ...(p.budgetS ? { budgetS: p.budgetS } : {}),
    ...(p.hosted
      ? {
          hosted: {
            seconds: Math.round((p.hosted.to - p.hosted.from) / 1000),
            overranS: p.hosted.overranS,
          },
        }
      : {}),
    ...(p.error ? { error: p.error } : {}),
    timeoutS: p.timeoutS,
    loadavg: Object.fromEntries(Object.entries(p.edges).map(([k, e]) => [k, e.loadavg])),
    detection: Object.fromEntries(Object.entries(p.detection).map(([s, d]) => [s, detectionFields(d)])),
    ...(p.owners ? { owners: p.owners } : {}),
    ...(p.race
      ? {
          race: {
            joinguardFirst: p.race.joinguardFirst,
            mhcFirst: p.race.mhcFirst.length,
            neither: p.race.neither.length,
          },
        }
      : {}),
    joinguard: proc && {
      processes: p.joinguard.map((f) => ({
        label: f.label,
        readyS: secondsFrom(f.spawnedAt, f.readyAt),
        firstReconcileS: secondsFrom(f.spawnedAt, f.firstReconcileAt),
        checks: f.checks,
        peakRssMiB: mib(f.hwmKiB),
        memoryPeakMiB: f.memoryPeakMiB,
        memoryLimit: f.memoryLimit,
        cpuLimit: f.cpuLimit,
        throttling: f.throttling,
        logLines: f.logLines,
        exit: f.exit,
      })),
      readyS: secondsFrom(proc.spawnedAt, proc.readyAt),
      firstReconcileS: secondsFrom(proc.spawnedAt, proc.firstReconcileAt),
      peakRssMiB: mib(proc.hwmKiB),
      memoryPeakMiB: proc.memoryPeakMiB,
      // Two shards: per shard below (the first process's requests over every shard's marks would say nothing).
      ...perMark(jgCost!, p.shards ? 0 : (p.detection.joinguard?.marked ?? 0)),
      atRest: jgCost!.atRest,
      cpuSeconds: jgCost!.cpuSeconds,
      startupRequests: jgCost!.startup?.requests,
      heapAtEnd: heapAndGc(p.edges.detectionStart, p.edges.detectionEnd),
    },
    core: {
      phasePeakRssMiB: mib(p.phasePeakKiB['capi-core']),
      rssAtDetectionStartMiB: core.rssAtDetectionStartMiB,
      cpuSeconds: core.cpuSeconds,
      atRest: core.atRest,
      detectionRequests: core.detection?.nonLeaseRequests,
      detectionSeconds: core.detection?.seconds,
      requestsPerMark: perMark(core, mhcMarks).requestsPerMark,
      reconcileSecondsDetection: recon,
      mhcShareOfReconcileTimeDetection: allRecon ? round((recon['machinehealthcheck'] ?? 0) / allRecon, 3) : undefined,
    },
    apiserverPhasePeakRssMiB: mib(p.phasePeakKiB['kube-apiserver']),
    etcdPhasePeakRssMiB: mib(p.phasePeakKiB['etcd']),
    ...(p.burst ? { burst: p.burst } : {}),
    ...(p.failover ? { failover: { ...p.failover, detection: detectionFields(p.failover.detection) } } : {}),
    ...(p.relist ? { relist: { ...p.relist, detection: detectionFields(p.relist.detection) } } : {}),
    ...(p.replicas
      ? {
          replicas: {
            ...p.replicas,
            // Each replica's VmHWM when the events began: the standby's is what a warm standby holds.
            hwmAtEventsStartMiB: Object.fromEntries(
              Object.entries(p.edges.eventsStart?.proc ?? {})
                .filter(([k]) => k.startsWith('joinguard'))
                .map(([k, s]) => [k, mib(s?.hwmKiB)]),
            ),
          },
        }
      : {}),
    ...(p.shards
      ? {
          shards: p.shards.map((s) => {
            const f = p.joinguard.find((x) => x.label === `joinguard-${s.name}`);
            const c = cost(p, `joinguard-${s.name}`, ofUser(s.user), () => false);
            return {
              name: s.name,
              clusters: s.clusters,
              peakRssMiB: mib(f?.hwmKiB),
              memoryPeakMiB: f?.memoryPeakMiB,
              memoryLimit: f?.memoryLimit,
              firstReconcileS: f && secondsFrom(f.spawnedAt, f.firstReconcileAt),
              ...detectionFields(s.detection),
              markedByOtherShard: s.markedByOtherShard?.length,
              markedByThisShard: s.markedByThisShard,
              ...perMark(c, s.detection.marked),
              requests: s.audit?.requests,
              requestsOutsideShard: s.audit?.outside,
              unfilteredListsOrWatches: s.audit?.unfilteredListsOrWatches,
              unfilteredListsOrWatchesByResource: s.audit?.unfilteredByResource,
              outsideExamples: s.audit?.outsideExamples,
              writers: s.writers,
            };
          }),
        }
      : {}),
  };
}

export type PhaseSummary = ReturnType<typeof phaseSummary>;
