// bench/results.json's `summary`: each headline figure as the median over the runs of its phase (all in one
// invocation, one fleet, one commit), with every run's value (`runs`) and the lowest and highest (`range`); the MHC's
// figures from the same invocation, at the short and at the realistic nodeStartupTimeout; and the objects of the
// other cases (CPU-limited, burst, two replicas, re-list, failover, sharded), each the median of its runs where it
// has several. Targets are compared with the medians, never assumed.
import type { PhaseSummary } from './phase-summary.js';
import type { RebuildResult } from './rebuilds.js';
import { round, spread, type Spread } from './stats.js';

type Field = (p: PhaseSummary) => number | undefined;

/** Medians of fields over phases: `{ median fields..., runs: {field: [...]}, range: {field: [min, max]} }`. */
function medians<K extends string>(phases: PhaseSummary[], fields: Record<K, Field>) {
  const out = {} as Record<K, number | undefined>;
  const runs = {} as Record<K, number[]>;
  const range = {} as Record<K, [number, number]>;
  for (const [k, f] of Object.entries(fields) as [K, Field][]) {
    const s: Spread | undefined = spread(phases.map(f));
    out[k] = s?.median;
    if (s) {
      runs[k] = s.runs;
      range[k] = [s.min, s.max];
    }
  }
  return { ...out, runs, range };
}

const measured = (phases: PhaseSummary[]) => ({
  runs: phases.length,
  ids: phases.map((p) => p.id),
  from: phases[0]?.measured.date,
  commits: [...new Set(phases.map((p) => p.measured.commit))],
});

const jgDetection = (side: 'joinguard' | 'mhc') => ({
  detectionP50AllS: (p: PhaseSummary) => p.detection[side]?.p50AllS,
  detectionP99AllS: (p: PhaseSummary) => p.detection[side]?.p99AllS,
  detectionMaxAllS: (p: PhaseSummary) => p.detection[side]?.maxAllS,
  censored: (p: PhaseSummary) => p.detection[side]?.censored,
});

/** Core manager requests per minute in a phase's detection window (Leases aside). */
const coreRate = (p: PhaseSummary) =>
  p.core.detectionRequests !== undefined && p.core.detectionSeconds
    ? (p.core.detectionRequests * 60) / p.core.detectionSeconds
    : undefined;

function mhcSummary(phases: PhaseSummary[], baseline: PhaseSummary[]) {
  if (!phases.length) return null;
  // The MHC's own share: the core manager's request rate beside the MHC minus its rate in JoinGuard's phases (same
  // fleet, no MHC on the watch pools), over the MHC's marks.
  const base = spread(baseline.map(coreRate))?.median;
  const share = (p: PhaseSummary) => {
    const rate = coreRate(p);
    const marks = p.detection.mhc?.marked;
    return rate === undefined || base === undefined || !marks || !p.core.detectionSeconds
      ? undefined
      : round(((rate - base) * p.core.detectionSeconds) / 60 / marks, 2);
  };
  return {
    nodeStartupTimeoutS: phases[0]!.timeoutS.mhc,
    measured: measured(phases),
    ...medians(phases, {
      ...jgDetection('mhc'),
      coreRequestsPerMark: (p) => p.core.requestsPerMark,
      requestsPerMarkMhcShareEstimate: share,
      corePhasePeakRssMiB: (p) => p.core.phasePeakRssMiB,
      coreCpuSecondsDetection: (p) => p.core.cpuSeconds.detection,
      mhcShareOfReconcileTimeDetection: (p) => p.core.mhcShareOfReconcileTimeDetection,
    }),
  };
}

export function buildSummary(phases: PhaseSummary[], machines: number) {
  const ok = (kind: string) => phases.filter((p) => p.kind === kind && !p.error);
  const jg = ok('joinguard');
  const byKind = new Set(jg.flatMap((p) => Object.keys(p.joinguard?.requestsPerMarkByKind ?? {})));
  const both = ok('both');
  return {
    machines,
    measured: measured(jg),
    note: 'medians over the runs of phase joinguard (JoinGuard alone), each run in `runs`, lowest and highest in `range`; mhc / mhcLong: the MHC alone at the short and at the realistic nodeStartupTimeout, both: beside each other, all from the same invocation and commit (see docs/benchmarks.md)',
    ...medians(jg, {
      ...jgDetection('joinguard'),
      peakRssMiB: (p) => p.joinguard?.peakRssMiB,
      memoryPeakMiB: (p) => p.joinguard?.memoryPeakMiB,
      firstReconcileS: (p) => p.joinguard?.firstReconcileS,
      readyS: (p) => p.joinguard?.readyS,
      requestsPerMark: (p) => p.joinguard?.requestsPerMark,
      atRestRequestsPerMin: (p) => p.joinguard?.atRest?.requestsPerMin,
      atRestLeaseRequestsPerMin: (p) => p.joinguard?.atRest?.leaseRequestsPerMin,
      atRestOtherRequestsPerMin: (p) => p.joinguard?.atRest?.otherRequestsPerMin,
      atRestWorkloadClusterRequestsPerMin: (p) => p.joinguard?.atRest?.workloadClusterRequestsPerMin,
      cpuSecondsDetection: (p) => p.joinguard?.cpuSeconds.detection,
      coreAtRestRequestsPerMin: (p) => p.core.atRest?.requestsPerMin,
      coreAtRestLeaseRequestsPerMin: (p) => p.core.atRest?.leaseRequestsPerMin,
      corePhasePeakRssMiB: (p) => p.core.phasePeakRssMiB,
    }),
    requestsPerMarkByKind: Object.fromEntries(
      [...byKind].map((k) => [k, spread(jg.map((p) => p.joinguard?.requestsPerMarkByKind?.[k] ?? 0))?.median]),
    ),
    mhc: mhcSummary(ok('mhc'), jg),
    mhcLong: mhcSummary(ok('mhc-long'), jg),
    both: both.length
      ? {
          measured: measured(both),
          joinguard: medians(both, jgDetection('joinguard')),
          mhc: medians(both, jgDetection('mhc')),
          race: medians(both, {
            joinguardFirst: (p) => p.race?.joinguardFirst,
            mhcFirst: (p) => p.race?.mhcFirst,
            neither: (p) => p.race?.neither,
          }),
        }
      : null,
  };
}

export type Summary = ReturnType<typeof buildSummary>;

/** The objects of the cases beside the headline: each null when its phase did not run. */
export function caseObjects(phases: PhaseSummary[]) {
  const ok = (kind: string) => phases.filter((p) => p.kind === kind && !p.error);
  const cpu = ok('cpu');
  const burst = ok('burst');
  const rep = ok('replicas');
  const sh = ok('sharded');
  const ev = (k: 'failover' | 'relist') =>
    rep.length
      ? {
          measured: measured(rep),
          ...medians(rep, {
            firstDeadlineAfterS: (p) => p[k]?.firstDeadlineAfterS,
            firstMarkAfterS: (p) => p[k]?.firstMarkAfterS,
            lastMarkAfterS: (p) => p[k]?.lastMarkAfterS,
            firstWriteAfterS: (p) => p[k]?.firstWriteAfterS,
            takeoverS: (p) => p[k]?.takeoverS,
            watchesExpired: (p) => Object.values(p[k]?.watchesExpired ?? {}).reduce((a, b) => a + b, 0) || undefined,
            detectionP50AllS: (p) => p[k]?.detection?.p50AllS,
            detectionP99AllS: (p) => p[k]?.detection?.p99AllS,
            censored: (p) => p[k]?.detection?.censored,
          }),
          events: rep.map((p) => p[k]),
        }
      : null;
  return {
    cpuLimited: cpu.length
      ? {
          cpuLimit: cpu[0]!.joinguard?.processes[0]?.cpuLimit,
          measured: measured(cpu),
          ...medians(cpu, {
            ...jgDetection('joinguard'),
            firstReconcileS: (p) => p.joinguard?.firstReconcileS,
            readyS: (p) => p.joinguard?.readyS,
            peakRssMiB: (p) => p.joinguard?.peakRssMiB,
            memoryPeakMiB: (p) => p.joinguard?.memoryPeakMiB,
            throttledS: (p) => p.joinguard?.processes[0]?.throttling?.throttledS,
            throttledPeriodsShare: (p) => {
              const t = p.joinguard?.processes[0]?.throttling;
              return t?.periods ? round(t.throttledPeriods / t.periods, 3) : undefined;
            },
            cpuSecondsDetection: (p) => p.joinguard?.cpuSeconds.detection,
            requestsPerMark: (p) => p.joinguard?.requestsPerMark,
          }),
        }
      : null,
    burst: burst.length
      ? {
          measured: measured(burst),
          machines: burst[0]!.burst?.machines,
          joinTimeoutS: burst[0]!.burst?.joinTimeoutS,
          ...medians(burst, {
            deadlineSpreadS: (p) => p.burst?.deadlineSpreadS,
            distinctDeadlineSeconds: (p) => p.burst?.distinctDeadlineSeconds,
            lastMarkedAfterS: (p) => p.burst?.lastMarkedAfterS,
            ...jgDetection('joinguard'),
            peakRssMiB: (p) => p.joinguard?.peakRssMiB,
            requestsPerMark: (p) => p.joinguard?.requestsPerMark,
          }),
          graceHeld: burst.flatMap((p) => p.burst?.graceHeld ?? []),
        }
      : null,
    replicas: rep.length
      ? {
          measured: measured(rep),
          ...medians(rep, {
            leaderFirstReconcileS: (p) => p.joinguard?.firstReconcileS,
            leaderHwmMiB: (p) => p.replicas && p.replicas.hwmAtEventsStartMiB[p.replicas.leaderAtStart],
            standbyHwmMiB: (p) => p.replicas && p.replicas.hwmAtEventsStartMiB[p.replicas.standbyAtStart],
          }),
          processes: rep.map((p) => p.joinguard?.processes),
        }
      : null,
    failover: ev('failover'),
    relist: ev('relist'),
    sharded: sh.length ? { measured: measured(sh), shards: sh.map((p) => p.shards) } : null,
  };
}

const isNum = (x: unknown): x is number => typeof x === 'number';

export function targets(s: Summary, phases: PhaseSummary[], rebuilds: RebuildResult, machines: number) {
  const scale = machines >= 10_000 ? 'at 10,000' : `at ${machines} (the target is for 10,000)`;
  const t = (name: string, measuredText: string, met: boolean | undefined, atScale = scale) => ({
    name,
    measured: measuredText,
    met,
    atScale,
  });
  const n = `median of ${s.measured.runs}`;
  const jgDefault = rebuilds.rows.find((x) => x.guard === 'JoinGuard, defaults')!.rebuilds;
  const both = s.both?.race;
  const cpu = phases.filter((p) => p.kind === 'cpu' && !p.error);
  const cpuP99 = spread(cpu.map((p) => p.detection.joinguard?.p99AllS))?.median;
  const cpuFirst = spread(cpu.map((p) => p.joinguard?.firstReconcileS))?.median;
  return [
    t(
      'p99 detection < 1 s over every stuck Machine (JoinGuard alone)',
      `${s.detectionP99AllS ?? '—'} s (${n}; ${s.range.censored?.[1] ?? 0} censored at most)`,
      isNum(s.detectionP99AllS) ? s.detectionP99AllS < 1 && !s.range.censored?.[1] : undefined,
    ),
    t('peak RSS < 150 MiB', `${s.peakRssMiB ?? '—'} MiB (${n})`, isNum(s.peakRssMiB) ? s.peakRssMiB < 150 : undefined),
    t(
      'first complete reconcile < 5 s from process start',
      `${s.firstReconcileS ?? '—'} s (${n})`,
      isNum(s.firstReconcileS) ? s.firstReconcileS < 5 : undefined,
    ),
    t(
      '<= 4 requests per mark',
      `${s.requestsPerMark ?? '—'} (${n})`,
      isNum(s.requestsPerMark) ? s.requestsPerMark <= 4 : undefined,
    ),
    t(
      "at rest: only lease renewals, no more often than CAPI's core manager renews",
      `${s.atRestOtherRequestsPerMin ?? '—'}/min other, ${s.atRestLeaseRequestsPerMin ?? '—'}/min lease (core manager: ${s.coreAtRestLeaseRequestsPerMin ?? '—'}/min; ${n})`,
      isNum(s.atRestLeaseRequestsPerMin) && isNum(s.coreAtRestLeaseRequestsPerMin)
        ? s.atRestOtherRequestsPerMin === 0 && s.atRestLeaseRequestsPerMin <= s.coreAtRestLeaseRequestsPerMin
        : undefined,
    ),
    t(
      'beside the MHC: JoinGuard marks every stuck Machine first',
      both
        ? `median ${both.joinguardFirst} first (MHC first ${both.mhcFirst}, neither ${both.neither}; runs ${JSON.stringify(both.runs)})`
        : '—',
      both ? both.range.mhcFirst?.[1] === 0 && both.range.neither?.[1] === 0 : undefined,
    ),
    t(
      "peak RSS below the CAPI core manager's",
      `${s.peakRssMiB ?? '—'} vs ${s.corePhasePeakRssMiB ?? '—'} MiB`,
      isNum(s.peakRssMiB) && isNum(s.corePhasePeakRssMiB) ? s.peakRssMiB < s.corePhasePeakRssMiB : undefined,
    ),
    t(
      "under the Deployment's CPU request (quota): p99 < 1 s and first reconcile < 5 s",
      cpu.length ? `p99 ${cpuP99 ?? '—'} s, first reconcile ${cpuFirst ?? '—'} s (median of ${cpu.length})` : '—',
      isNum(cpuP99) && isNum(cpuFirst) ? cpuP99 < 1 && cpuFirst < 5 : undefined,
    ),
    t('wasted rebuilds in 24 h with defaults <= 7', String(jgDefault), jgDefault <= 7, 'pool of 5'),
  ];
}
