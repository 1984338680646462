// Detection latency over EVERY stuck Machine: from its deadline to a side's mark being visible. A stuck
// Machine a side had not marked when the detection window closed is censored at the window's end: its
// latency is only known to be above (end − deadline). Percentiles rank censored Machines last; a percentile
// that lands on one is reported as that lower bound with `censored: true`, never dropped.
// Each side's deadline uses that controller's own clock rule, from the same objects it reads:
//   JoinGuard (DESIGN): latest of Machine creation, InfrastructureReady, BootstrapConfigReady and the
//     Cluster's ControlPlaneInitialized (or, where the bench wrote a KCP's status initialized first, that second:
//     initializedWhenSaid), + joinTimeout
//   MHC (CAPI v1.14 machinehealthcheck_targets.go): latest of Machine creation, Cluster
//     ControlPlaneInitialized, Cluster InfrastructureReady and Machine InfrastructureReady, + nodeStartupTimeout
// Transition times have whole-second precision in the API; both controllers see the same truncated values.
import type { ClusterTimes } from './fleet.js';
import { percentile as nearestRank, round } from './stats.js';
import type { MachineRecord, Side } from './watch.js';

export interface Percentile {
  s: number;
  /** The rank landed on a censored Machine: the latency is above `s`. */
  censored: boolean;
}

export interface SideDetection {
  stuck: number;
  marked: number;
  /** Stuck Machines this side had not marked when the window closed. */
  censored: number;
  censoredNames: string[];
  /** Marks seen before the deadline (must be 0) and marks on resting Machines (must be 0). */
  early: number;
  falseMarks: string[];
  how: Record<string, number>;
  /** Over all stuck Machines, censored ones included as lower bounds. */
  p50?: Percentile;
  p99?: Percentile;
  max?: Percentile;
  /** Over the marked ones only (for comparison with earlier reports; survivor-biased). */
  markedOnly: { p50?: number; p99?: number; max?: number };
  /** Every stuck Machine's latency in ms, sorted: marked ones, then the censored ones' lower bounds. */
  latenciesMs: number[];
}

/** nearest-rank percentile over values where censored ones sort after every observed one. */
function percentile(items: { s: number; censored: boolean }[], p: number): Percentile | undefined {
  const x = nearestRank(
    [...items].sort((a, b) => Number(a.censored) - Number(b.censored) || a.s - b.s),
    p,
  );
  return x && { s: round(x.s)!, censored: x.censored };
}

export function deadline(
  side: Side,
  r: MachineRecord,
  c: ClusterTimes | undefined,
  timeoutMs: number,
): number | undefined {
  const times =
    side === 'joinguard'
      ? [r.createdAt, r.infraReadyAt, r.bootstrapReadyAt, c?.controlPlaneInitializedAt]
      : [r.createdAt, c?.controlPlaneInitializedAt, c?.infrastructureReadyAt, r.infraReadyAt];
  if (times.some((t) => t === undefined)) return undefined;
  return Math.max(...(times as number[])) + timeoutMs;
}

/**
 * Clusters whose control plane the bench said initialized at a known moment (the burst writes its KubeadmControlPlanes'
 * status, bench/fleet.ts initializeControlPlane): their initialization as JoinGuard's clock may take it. JoinGuard
 * takes either the Cluster's or the KubeadmControlPlane's word (DESIGN: "the Cluster or the KubeadmControlPlane says
 * initialized"); the KCP's status has no time, so JoinGuard keeps the first time it saw it, in whole seconds
 * (controllers/joincheck/rules/clocks.ts controlPlaneInitializedAt), and CAPI's condition on the Cluster comes later.
 * The deadline starts at the earlier of the condition and the second in which the bench wrote the KCP's status:
 * JoinGuard cannot have seen it before, so no mark of its can be early by this rule, and a latency is at most that
 * gap (well under a second here) longer than from JoinGuard's own time.
 */
export function initializedWhenSaid(
  clusters: Map<string, ClusterTimes>,
  saidAt: Map<string, number>,
): Map<string, ClusterTimes> {
  const out = new Map(clusters);
  for (const [name, said] of saidAt) {
    const c = clusters.get(name);
    const cond = c?.controlPlaneInitializedAt;
    if (!c || cond === undefined) continue;
    out.set(name, { ...c, controlPlaneInitializedAt: Math.min(cond, Math.floor(said / 1000) * 1000) });
  }
  return out;
}

// A phase's stuck Machines are in `<cluster>-watch`, a host phase's in `<cluster>-long` (bench/plan.ts).
const isStuck = (r: MachineRecord) => /-(watch|long)$/.test(r.pool);
export const clusterOfPool = (pool: string) => pool.replace(/-(watch|rest|long)$/, '');

export function detection(
  side: Side,
  machines: Iterable<MachineRecord>,
  clusters: Map<string, ClusterTimes>,
  timeoutMs: number,
  windowEnd: number,
): SideDetection {
  const items: { s: number; censored: boolean }[] = [];
  const censoredNames: string[] = [];
  const falseMarks: string[] = [];
  const how: Record<string, number> = {};
  let early = 0;
  for (const r of machines) {
    const mark = r.marks[side] && r.marks[side].seenAt <= windowEnd ? r.marks[side] : undefined;
    if (!isStuck(r)) {
      if (mark) falseMarks.push(r.name);
      continue;
    }
    const d = deadline(side, r, clusters.get(clusterOfPool(r.pool)), timeoutMs);
    if (d === undefined) throw new Error(`${r.name}: no deadline (never Provisioned?)`);
    if (!mark) {
      censoredNames.push(r.name);
      items.push({ s: (windowEnd - d) / 1000, censored: true });
      continue;
    }
    how[mark.how] = (how[mark.how] ?? 0) + 1;
    const s = (mark.seenAt - d) / 1000;
    if (s < 0) early++;
    items.push({ s, censored: false });
  }
  const marked = items.filter((x) => !x.censored);
  const p = (q: number) => percentile(marked, q)?.s;
  const ms = (xs: typeof items) => xs.map((x) => Math.round(x.s * 1000)).sort((a, b) => a - b);
  return {
    stuck: items.length,
    marked: marked.length,
    censored: censoredNames.length,
    censoredNames,
    early,
    falseMarks,
    how,
    p50: percentile(items, 50),
    p99: percentile(items, 99),
    max: percentile(items, 100),
    markedOnly: { p50: p(50), p99: p(99), max: p(100) },
    latenciesMs: [...ms(marked), ...ms(items.filter((x) => x.censored))],
  };
}

/** Percentiles again from a SideDetection's kept latencies (what a reader of the results recomputes). */
export function fromLatencies(latenciesMs: number[], censored: number, p: number): Percentile | undefined {
  const items = latenciesMs.map((ms, i) => ({ s: ms / 1000, censored: i >= latenciesMs.length - censored }));
  return percentile(items, p);
}

/** Beside each other: which side's own mark came first on each stuck Machine. */
export function race(
  machines: Iterable<MachineRecord>,
  windowEnd: number,
): { joinguardFirst: number; mhcFirst: string[]; neither: string[] } {
  let joinguardFirst = 0;
  const mhcFirst: string[] = [];
  const neither: string[] = [];
  for (const r of machines) {
    if (!isStuck(r)) continue;
    const jg = r.marks.joinguard && r.marks.joinguard.seenAt <= windowEnd ? r.marks.joinguard : undefined;
    // Only the MHC's own timeout counts against JoinGuard; HasRemediateAnnotation is the MHC acting on JoinGuard's ask.
    const mhc =
      r.marks.mhc && r.marks.mhc.seenAt <= windowEnd && r.marks.mhc.how === 'NodeStartupTimeout'
        ? r.marks.mhc
        : undefined;
    if (jg && (!mhc || jg.seenAt <= mhc.seenAt)) joinguardFirst++;
    else if (mhc) mhcFirst.push(r.name);
    else neither.push(r.name);
  }
  return { joinguardFirst, mhcFirst, neither };
}

/** Every stuck Machine's inputs and marks (ms epoch), so that every figure can be recomputed. */
export function machineRows(
  machines: Iterable<MachineRecord>,
  clusters: Map<string, ClusterTimes>,
  timeoutMs: Record<Side, number>,
) {
  const columns = [
    'name',
    'pool',
    'createdAt',
    'infraReadyAt',
    'bootstrapReadyAt',
    'joinguardDeadline',
    'joinguardMarkSeenAt',
    'joinguardMarkHow',
    'mhcDeadline',
    'mhcMarkSeenAt',
    'mhcMarkHow',
  ];
  const rows: (string | number | null)[][] = [];
  for (const r of machines) {
    if (!isStuck(r)) continue;
    const c = clusters.get(clusterOfPool(r.pool));
    rows.push([
      r.name,
      r.pool,
      r.createdAt,
      r.infraReadyAt ?? null,
      r.bootstrapReadyAt ?? null,
      deadline('joinguard', r, c, timeoutMs.joinguard) ?? null,
      r.marks.joinguard?.seenAt ?? null,
      r.marks.joinguard?.how ?? null,
      deadline('mhc', r, c, timeoutMs.mhc) ?? null,
      r.marks.mhc?.seenAt ?? null,
      r.marks.mhc?.how ?? null,
    ]);
  }
  return { columns, rows };
}
