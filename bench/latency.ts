// Detection latency: from a stuck Machine's deadline to each controller's mark being visible. Each side's
// deadline is computed with that controller's own clock rule, from the same objects it reads:
//   JoinGuard (DESIGN): latest of Machine creation, InfrastructureReady, BootstrapConfigReady and the
//     Cluster's ControlPlaneInitialized, + joinTimeout
//   MHC (CAPI v1.14 machinehealthcheck_targets.go): latest of Machine creation, Cluster
//     ControlPlaneInitialized, Cluster InfrastructureReady and Machine InfrastructureReady, + nodeStartupTimeout
// Transition times have whole-second precision in the API; both controllers see the same truncated
// values, so the latency is measured from the deadline they can know.
import type { ClusterTimes, FleetShape, Side } from './fleet.js';
import { round, summarize, type Summary } from './stats.js';
import type { MachineRecord, MachineWatcher } from './watch.js';

export interface LatencyResult {
  stuck: number;
  marked: number;
  /** Stuck Machines whose mark was never seen within the wait. */
  missed: string[];
  /** Resting Machines (24h timeout) that got marked: must be 0. */
  falseMarks: string[];
  markReasons: Record<string, number>;
  /** Seconds from deadline to visible mark. */
  seconds: Summary;
  /** Marks seen before the deadline (negative latency): must be 0. */
  early: number;
}

function deadline(side: Side, r: MachineRecord, c: ClusterTimes | undefined, timeoutMs: number): number {
  const times = side === 'joinguard'
    ? [r.createdAt, r.infraReadyAt, r.bootstrapReadyAt, c?.controlPlaneInitializedAt]
    : [r.createdAt, c?.controlPlaneInitializedAt, c?.infrastructureReadyAt, r.infraReadyAt];
  return Math.max(...times.filter((x): x is number => x !== undefined)) + timeoutMs;
}

export function latencies(side: Side, w: MachineWatcher, clusters: Map<string, ClusterTimes>, shape: FleetShape): LatencyResult {
  const values: number[] = [];
  const missed: string[] = [];
  const falseMarks: string[] = [];
  const markReasons: Record<string, number> = {};
  let stuck = 0;
  let early = 0;
  for (const r of w.machines.values()) {
    const isStuck = r.pool.endsWith('-watch');
    const mark = r.marks[side];
    if (!isStuck) {
      if (mark) falseMarks.push(r.name);
      continue;
    }
    stuck++;
    if (!mark) {
      missed.push(r.name);
      continue;
    }
    markReasons[mark.reason ?? '?'] = (markReasons[mark.reason ?? '?'] ?? 0) + 1;
    const cluster = clusters.get(r.pool.replace(/-watch$/, ''));
    const s = (mark.seenAt - deadline(side, r, cluster, shape.joinTimeoutS * 1000)) / 1000;
    if (s < 0) early++;
    values.push(s);
  }
  const sum = summarize(values);
  return {
    stuck, marked: values.length, missed, falseMarks, markReasons, early,
    seconds: { n: sum.n, p50: round(sum.p50), p99: round(sum.p99), max: round(sum.max), min: round(sum.min) },
  };
}
