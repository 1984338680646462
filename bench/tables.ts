// The tables `npm run bench` prints (and docs/benchmarks.md quotes), rendered from results.json.
import type { Results } from './report.js';
import type { Percentile } from './latency.js';

const f = (v: number | string | undefined | null, unit = '') => (v === undefined || v === null ? '—' : `${v}${unit}`);
const pct = (p: Percentile | undefined) => (p ? `${p.censored ? '> ' : ''}${p.s} s` : '—');
/** `2026-12-04 a83e1a4`: when and on which commit a run was measured. */
const when = (r: { measured?: { date?: string; commit?: string } } | undefined) =>
  r?.measured ? `${r.measured.date?.slice(0, 16).replace('T', ' ') ?? '?'} ${r.measured.commit ?? '?'}` : '—';
const loads = (r: Results['runs'][keyof Results['runs']]) =>
  r
    ? (['quietStart', 'quietEnd', 'detectionStart', 'detectionEnd'] as const)
        .map((k) => r.edges[k].loadavg.join('/'))
        .join(', ')
    : '—';

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

function detectionTable(res: Results): string {
  const rows = [
    [
      'run',
      'side',
      'stuck',
      'marked',
      'censored',
      'p50 (all)',
      'p99 (all)',
      'max (all)',
      'p99 (marked only)',
      'marked how',
      'measured (UTC, commit)',
    ],
  ];
  for (const [name, r] of Object.entries(res.runs)) {
    for (const [side, d] of Object.entries(r.detection)) {
      rows.push([
        name,
        side === 'mhc' ? 'MHC' : 'JoinGuard',
        String(d.stuck),
        String(d.marked),
        String(d.censored),
        pct(d.p50),
        pct(d.p99),
        pct(d.max),
        f(d.markedOnly.p99, ' s'),
        Object.entries(d.how)
          .map(([k, v]) => `${k} ${v}`)
          .join(', '),
        when(r),
      ]);
    }
  }
  return table(rows);
}

function costTable(res: Results): string {
  const jg = res.perRun.joinguard?.joinguard;
  const cm = res.perRun.mhc?.core;
  const cj = res.perRun.joinguard?.core;
  const s = res.summary.mhc;
  const [rj, rm] = [res.runs.joinguard, res.runs.mhc];
  const rows: string[][] = [
    [
      '',
      'JoinGuard (run joinguard)',
      'CAPI core manager, whole (run mhc)',
      'core manager without MHCs (run joinguard)',
      'MHC share (estimate)',
    ],
    [
      'measured (UTC, commit)',
      when(rj),
      when(rm),
      when(rj),
      rj && rm && when(rj) !== when(rm) ? 'two runs, see dates' : '',
    ],
  ];
  const add = (label: string, a: string, b: string, c: string, d = '') => rows.push([label, a, b, c, d]);
  add(
    'peak RSS',
    f(jg?.peakRssMiB, ' MiB'),
    f(cm?.peakRssMiB, ' MiB'),
    f(cj?.peakRssMiB, ' MiB'),
    f(s.peakRssMiBMhcShareEstimate, ' MiB'),
  );
  add(
    "RSS at the quiet window's start",
    f(jg?.rssAtQuietStartMiB, ' MiB'),
    f(cm?.rssAtQuietStartMiB, ' MiB'),
    f(cj?.rssAtQuietStartMiB, ' MiB'),
  );
  add(
    'CPU s: quiet window / detection window',
    `${f(jg?.cpuSeconds.quiet)} / ${f(jg?.cpuSeconds.detection)}`,
    `${f(cm?.cpuSeconds.quiet)} / ${f(cm?.cpuSeconds.detection)}`,
    `${f(cj?.cpuSeconds.quiet)} / ${f(cj?.cpuSeconds.detection)}`,
    `— / ${f(s.cpuSecondsDetectionMhcShareEstimate)}`,
  );
  add(
    'quiet window (at rest)',
    f(jg?.atRest.minutes, ' min'),
    f(cm?.atRest.minutes, ' min'),
    f(cj?.atRest.minutes, ' min'),
  );
  add(
    'requests/min at rest (all)',
    f(jg?.atRest.requestsPerMin),
    f(cm?.atRest.requestsPerMin),
    f(cj?.atRest.requestsPerMin),
    f(s.atRestRequestsPerMinMhcShareEstimate),
  );
  add(
    '  of which Lease renewals',
    f(jg?.atRest.leaseRequestsPerMin),
    f(cm?.atRest.leaseRequestsPerMin),
    f(cj?.atRest.leaseRequestsPerMin),
  );
  add(
    'watches opened/min at rest',
    f(jg?.atRest.watchesOpenedPerMin),
    f(cm?.atRest.watchesOpenedPerMin),
    f(cj?.atRest.watchesOpenedPerMin),
  );
  add(
    'workload-cluster requests/min at rest',
    f(jg?.atRest.workloadClusterRequestsPerMin),
    f(cm?.atRest.workloadClusterRequestsPerMin),
    f(cj?.atRest.workloadClusterRequestsPerMin),
  );
  add(
    'requests per mark (detection window, no leases)',
    f(jg?.requestsPerMark),
    f(s.requestsPerMark),
    '',
    f(s.requestsPerMarkMhcShareEstimate),
  );
  add('first complete reconcile from spawn', f(jg?.firstReconcileS, ' s'), '—', '—');
  add('  of which caches synced (/readyz)', f(jg?.readyS, ' s'), '—', '—');
  add("MHC controller's share of reconcile time (detection)", '', f(s.mhcShareOfReconcileTimeDetection), '');
  return table(rows);
}

function byKindTable(res: Results): string {
  const jg = res.perRun.joinguard?.joinguard;
  const rows = [['JoinGuard request (run joinguard)', 'per mark', 'per min at rest']];
  const kinds = new Set([
    ...Object.keys(jg?.requestsPerMarkByKind ?? {}),
    ...Object.keys(jg?.atRest.byVerbResourcePerMin ?? {}),
  ]);
  for (const k of kinds) rows.push([k, f(jg?.requestsPerMarkByKind?.[k]), f(jg?.atRest.byVerbResourcePerMin[k])]);
  return table(rows);
}

function atRestTable(res: Results): string {
  const rows = [['run', 'client', 'verb resource', 'per min at rest']];
  for (const [name, p] of Object.entries(res.perRun)) {
    for (const [who, c] of [
      ['JoinGuard', p.joinguard?.atRest],
      ['CAPI core', p.core.atRest],
    ] as const) {
      for (const [k, v] of Object.entries(c?.byVerbResourcePerMin ?? {})) rows.push([name, who, k, String(v)]);
      for (const [k, v] of Object.entries(c?.workloadByVerbResourcePerMin ?? {}))
        rows.push([name, `${who} → workload cluster`, k, String(v)]);
    }
  }
  return table(rows);
}

function loadTable(res: Results): string {
  const rows = [
    [
      'run',
      'measured (UTC, commit)',
      'load average 1/5/15 min at quiet start, quiet end, detection start, detection end',
    ],
  ];
  for (const [name, r] of Object.entries(res.runs)) rows.push([name, when(r), loads(r)]);
  return table(rows);
}

function shardTable(res: Results): string | undefined {
  const sh = res.sharded;
  if (!sh) return undefined;
  const rows = [
    [
      'shard (run sharded)',
      'Clusters',
      'peak RSS',
      'first reconcile',
      'stuck',
      'marked',
      'marked by other shard',
      'p50 (all)',
      'p99 (all)',
      'requests per mark',
      'requests/min at rest',
      'requests outside shard',
      'unfiltered lists/watches',
    ],
  ];
  for (const s of sh.shards)
    rows.push([
      s.name,
      String(s.clusters),
      f(s.peakRssMiB, ' MiB'),
      f(s.firstReconcileS, ' s'),
      f(s.stuck),
      f(s.marked),
      f(s.markedByOtherShard),
      f(s.detectionP50AllS, ' s'),
      `${s.detectionP99AllCensored ? '> ' : ''}${f(s.detectionP99AllS, ' s')}`,
      f(s.requestsPerMark),
      f(s.atRestRequestsPerMin),
      f(s.requestsOutsideShard),
      f(s.unfilteredListsOrWatches),
    ]);
  const unfiltered = sh.shards
    .map(
      (s) =>
        `${s.name}: ${
          Object.entries(s.unfilteredListsOrWatchesByResource)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ') || 'none'
        }`,
    )
    .join('; ');
  return `${table(rows)}\nrun sharded measured ${when(res.runs.sharded)}; lists/watches without a shard selector (any kind): ${unfiltered}`;
}

export function renderTables(res: Results): string {
  const out = [detectionTable(res), costTable(res), byKindTable(res), atRestTable(res)];
  const shards = shardTable(res);
  if (shards) out.push(shards);
  out.push(loadTable(res));
  const race = res.summary.both?.race;
  if (race)
    out.push(
      `beside each other (run both): JoinGuard's mark first on ${race.joinguardFirst}, the MHC's own timeout first on ${race.mhcFirst}, neither on ${race.neither}`,
    );
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
    `\nJoinGuard benchmark — ${s.machines} Machines (${s.resting} resting + ${s.stuck} stuck), ${s.clusters} Clusters, ` +
      `joinTimeout = nodeStartupTimeout = ${s.joinTimeoutS}s for stuck pools; runs ${res.run.runs.join(', ')}; ${res.run.host.cpus} CPUs; wall ${res.run.wallS} s\n\n${renderTables(res)}\n\n`,
  );
}
