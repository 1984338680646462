// The tables `npm run bench` prints (and docs/benchmarks.md quotes), rendered from results.json.
import type { PhaseSummary } from './phase-summary.js';
import type { Results } from './report.js';

type Cell = number | string | undefined | null;
const f = (v: Cell, unit = '') => (v === undefined || v === null ? '—' : `${v}${unit}`);
const when = (p: { measured?: { date?: string; commit?: string } } | undefined) =>
  p?.measured ? `${p.measured.date?.slice(0, 16).replace('T', ' ') ?? '?'} ${p.measured.commit ?? '?'}` : '—';
/** `0.7 s (0.66–0.81)`: a median with its range over the runs. */
const med = (s: { range: Record<string, [number, number]> } & Record<string, unknown>, k: string, unit = '') => {
  const m = s[k] as number | undefined;
  const r = s.range[k];
  return m === undefined ? '—' : `${m}${unit}${r && r[0] !== r[1] ? ` (${r[0]}–${r[1]})` : ''}`;
};

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

function headline(res: Results): string {
  const s = res.summary;
  const m = s.mhc;
  const l = s.mhcLong;
  const b = s.both;
  const rows = [
    [
      'median (lowest–highest) over the runs',
      `JoinGuard alone (${s.measured.runs})`,
      `MHC, ${f(m?.nodeStartupTimeoutS)} s (${f(m?.measured.runs)})`,
      `MHC, ${f(l?.nodeStartupTimeoutS)} s (${f(l?.measured.runs)})`,
      `both: JoinGuard / MHC (${f(b?.measured.runs)})`,
    ],
    [
      'p50 detection (all stuck)',
      med(s, 'detectionP50AllS', ' s'),
      m ? med(m, 'detectionP50AllS', ' s') : '—',
      l ? med(l, 'detectionP50AllS', ' s') : '—',
      b ? `${med(b.joinguard, 'detectionP50AllS', ' s')} / ${med(b.mhc, 'detectionP50AllS', ' s')}` : '—',
    ],
    [
      'p99 detection (all stuck)',
      med(s, 'detectionP99AllS', ' s'),
      m ? med(m, 'detectionP99AllS', ' s') : '—',
      l ? med(l, 'detectionP99AllS', ' s') : '—',
      b ? `${med(b.joinguard, 'detectionP99AllS', ' s')} / ${med(b.mhc, 'detectionP99AllS', ' s')}` : '—',
    ],
    [
      'censored (unmarked at window end)',
      med(s, 'censored'),
      m ? med(m, 'censored') : '—',
      l ? med(l, 'censored') : '—',
      b ? `${med(b.joinguard, 'censored')} / ${med(b.mhc, 'censored')}` : '—',
    ],
    [
      'requests per mark (detection, no leases)',
      med(s, 'requestsPerMark'),
      m ? `${med(m, 'coreRequestsPerMark')} core manager, ${med(m, 'requestsPerMarkMhcShareEstimate')} MHC share` : '—',
      l ? `${med(l, 'coreRequestsPerMark')} core, ${med(l, 'requestsPerMarkMhcShareEstimate')} MHC share` : '—',
      '',
    ],
    [
      'peak RSS (VmHWM; core manager: within the phase)',
      med(s, 'peakRssMiB', ' MiB'),
      m ? med(m, 'corePhasePeakRssMiB', ' MiB') : '—',
      l ? med(l, 'corePhasePeakRssMiB', ' MiB') : '—',
      '',
    ],
    ['memory charged by its cgroup (peak)', med(s, 'memoryPeakMiB', ' MiB'), '', '', ''],
    ['first complete reconcile from spawn', med(s, 'firstReconcileS', ' s'), '', '', ''],
    ['  of which caches synced (/readyz)', med(s, 'readyS', ' s'), '', '', ''],
    [
      'CPU s in the detection window',
      med(s, 'cpuSecondsDetection'),
      m ? `${med(m, 'coreCpuSecondsDetection')} core manager` : '—',
      l ? `${med(l, 'coreCpuSecondsDetection')} core manager` : '—',
      '',
    ],
    [
      'requests/min at rest (of which Lease; other)',
      `${med(s, 'atRestRequestsPerMin')} (${med(s, 'atRestLeaseRequestsPerMin')}; ${med(s, 'atRestOtherRequestsPerMin')})`,
      `core manager ${med(s, 'coreAtRestRequestsPerMin')} (Lease ${med(s, 'coreAtRestLeaseRequestsPerMin')})`,
      '',
      '',
    ],
  ];
  const race = b?.race;
  return `${table(rows)}${race ? `\nbeside each other (both): JoinGuard's mark first on ${med(race, 'joinguardFirst')}, the MHC's own timeout first on ${med(race, 'mhcFirst')}, neither on ${med(race, 'neither')}` : ''}`;
}

function phaseTable(res: Results): string {
  const rows = [
    [
      'phase',
      'side',
      'timeout',
      'stuck',
      'marked',
      'censored',
      'p50 (all)',
      'p99 (all)',
      'max (all)',
      'first reconcile',
      'peak RSS',
      'req/mark',
      'marked how',
      'load 1-min (start, end)',
      'measured (UTC, commit)',
    ],
  ];
  const pct = (v: number | undefined, c?: boolean) => (v === undefined ? '—' : `${c ? '> ' : ''}${v} s`);
  for (const p of res.phases) {
    if (p.error) {
      rows.push([p.id, '—', '', '', '', '', '', '', '', '', '', '', `FAILED: ${p.error.slice(0, 80)}`, '', when(p)]);
      continue;
    }
    for (const [side, d] of Object.entries(p.detection)) {
      const jg = side === 'joinguard' ? p.joinguard : undefined;
      const load = Object.values(p.loadavg);
      rows.push([
        p.id,
        side === 'mhc' ? 'MHC' : 'JoinGuard',
        f(p.timeoutS[side as 'joinguard' | 'mhc'], ' s'),
        f(d?.stuck),
        f(d?.marked),
        f(d?.censored),
        pct(d?.p50AllS),
        pct(d?.p99AllS, d?.p99AllCensored),
        pct(d?.maxAllS, d?.maxAllCensored),
        f(jg?.firstReconcileS, ' s'),
        f(jg?.peakRssMiB, ' MiB'),
        f(side === 'mhc' ? p.core.requestsPerMark : jg?.requestsPerMark),
        Object.entries(d?.how ?? {})
          .map(([k, v]) => `${k} ${v}`)
          .join(', '),
        `${f(load[0]?.[0])}, ${f(load.at(-1)?.[0])}`,
        when(p),
      ]);
    }
  }
  return table(rows);
}

function byKindTable(res: Results): string {
  const s = res.summary;
  const jg = res.phases.find((p) => p.kind === 'joinguard' && !p.error)?.joinguard;
  const kinds = new Set([
    ...Object.keys(s.requestsPerMarkByKind),
    ...Object.keys(jg?.atRest?.byVerbResourcePerMin ?? {}),
  ]);
  const rows = [
    [
      'JoinGuard request (phase joinguard)',
      'per mark (median)',
      `per min at rest (${res.phases.find((p) => p.kind === 'joinguard')?.id ?? '—'})`,
    ],
  ];
  for (const k of kinds) rows.push([k, f(s.requestsPerMarkByKind[k]), f(jg?.atRest?.byVerbResourcePerMin[k])]);
  return table(rows);
}

function casesTable(res: Results): string | undefined {
  const rows = [['case', 'figures (median, lowest–highest where several runs)']];
  const c = res.cpuLimited;
  if (c)
    rows.push([
      `CPU-limited (quota ${f(c.cpuLimit)})`,
      `first reconcile ${med(c, 'firstReconcileS', ' s')}, ready ${med(c, 'readyS', ' s')}, p50 ${med(c, 'detectionP50AllS', ' s')}, p99 ${med(c, 'detectionP99AllS', ' s')}, censored ${med(c, 'censored')}, throttled ${med(c, 'throttledS', ' s')} (${med(c, 'throttledPeriodsShare')} of periods), peak RSS ${med(c, 'peakRssMiB', ' MiB')}, cgroup peak ${med(c, 'memoryPeakMiB', ' MiB')}`,
    ]);
  const b = res.burst;
  if (b)
    rows.push([
      `burst (${f(b.machines)} Machines, joinTimeout ${f(b.joinTimeoutS)} s)`,
      `deadlines within ${med(b, 'deadlineSpreadS', ' s')} (${med(b, 'distinctDeadlineSeconds')} distinct seconds); last marked ${med(b, 'lastMarkedAfterS', ' s')} after the first deadline; p50 ${med(b, 'detectionP50AllS', ' s')}, p99 ${med(b, 'detectionP99AllS', ' s')}, censored ${med(b, 'censored')}; ${med(b, 'requestsPerMark')} requests per mark; grace held on ${b.graceHeld.length} Clusters`,
    ]);
  const r = res.replicas;
  if (r)
    rows.push([
      'two replicas',
      `leader: first reconcile ${med(r, 'leaderFirstReconcileS', ' s')}, VmHWM ${med(r, 'leaderHwmMiB', ' MiB')}; warm standby VmHWM ${med(r, 'standbyHwmMiB', ' MiB')} (both when the events began)`,
    ]);
  for (const k of ['failover', 'relist'] as const) {
    const e = res[k];
    if (!e) continue;
    const last = e.events.at(-1);
    const reps = Object.entries(last?.replicas ?? {})
      .map(([n, x]) => `${n} ${f(x.peakRssMiB, ' MiB')}${x.running ? (x.leading ? ' leading' : ' standby') : ' gone'}`)
      .join(', ');
    rows.push([
      k === 'failover' ? 'failover (leader killed)' : 're-list (every watch expired)',
      `${k === 'failover' ? `Lease taken ${med(e, 'takeoverS', ' s')}` : `${med(e, 'watchesExpired')} watches expired`} after it; first deadline ${med(e, 'firstDeadlineAfterS', ' s')}, first mark seen ${med(e, 'firstMarkAfterS', ' s')} (written ${med(e, 'firstWriteAfterS', ' s')}), last ${med(e, 'lastMarkAfterS', ' s')}; p99 ${med(e, 'detectionP99AllS', ' s')}, censored ${med(e, 'censored')}; peak RSS within it: ${reps}; CAPI ${
        Object.entries(last?.controlPlaneRunning ?? {})
          .filter(([, v]) => !v)
          .map(([n]) => `${n} exited`)
          .join(', ') || 'all running'
      }`,
    ]);
  }
  return rows.length > 1 ? table(rows) : undefined;
}

function shardTable(res: Results): string | undefined {
  const sh = res.phases.filter((p): p is PhaseSummary & { shards: NonNullable<PhaseSummary['shards']> } =>
    Boolean(p.shards),
  );
  if (!sh.length) return undefined;
  const rows = [
    [
      'shard',
      'phase',
      'Clusters',
      'peak RSS',
      'first reconcile',
      'stuck',
      'marked',
      'by other shard',
      'p99 (all)',
      'req/mark',
      'requests outside shard',
      'unfiltered lists/watches',
    ],
  ];
  for (const p of sh)
    for (const s of p.shards)
      rows.push([
        s.name,
        p.id,
        f(s.clusters),
        f(s.peakRssMiB, ' MiB'),
        f(s.firstReconcileS, ' s'),
        f(s.stuck),
        f(s.marked),
        f(s.markedByOtherShard),
        `${s.p99AllCensored ? '> ' : ''}${f(s.p99AllS, ' s')}`,
        f(s.requestsPerMark),
        f(s.requestsOutsideShard),
        f(s.unfilteredListsOrWatches),
      ]);
  return table(rows);
}

export function renderTables(res: Results): string {
  const out = [headline(res), phaseTable(res), byKindTable(res)];
  for (const x of [casesTable(res), shardTable(res)]) if (x) out.push(x);
  out.push(
    table([
      ['target', 'measured', 'met', 'scale'],
      ...res.targets.map((t) => [
        t.name,
        t.measured,
        t.met === undefined ? 'not run' : t.met ? 'yes' : 'NO',
        t.atScale,
      ]),
    ]),
  );
  out.push(
    table([
      ['24 h expired credential, pool of 5', 'rebuilds', 'how', 'detail'],
      ...res.rebuilds.rows.map((r) => [r.guard, String(r.rebuilds), r.how, r.detail]),
    ]),
  );
  return out.join('\n\n');
}

export function printTables(res: Results): void {
  const s = res.setup.shape;
  process.stdout.write(
    `\nJoinGuard benchmark — ${s.machines} Machines (${s.clusters * s.controlPlanePerCluster} control plane + ${s.resting} resting + ${s.stuck} stuck per phase), ${s.clusters} Clusters, one fleet; phases ${res.run.plan.join(', ')}; commit ${res.run.commit}; ${res.run.host.cpus} CPUs; fleet ${res.run.fleetS} s, wall ${res.run.wallS} s\n\n${renderTables(res)}\n\n`,
  );
}
