// JoinGuard's own metric families, on the process's registry beside controller-runtime's (runtime/metrics.ts).
// Per-check families carry cluster_namespace, cluster_name (CAPI's names for a workload cluster in its own series,
// e.g. capi_cluster_cache_*) and check: no label a scrape sets (namespace, pod, provider, job, instance) or a
// multi-cluster Prometheus sets (cluster), so nothing is renamed exported_*. Counters count transitions between the
// status read
// and the status written, so a restart neither loses nor repeats an increment beyond the counter's reset.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import { COUNTED_AS } from './counts.js';
import type { MachineState, RefusedKind } from '../types.js';

export interface CheckRef {
  namespace: string;
  check: string;
  cluster: string;
}

/** What observe needs of a planner verdict. */
export interface ObservedVerdict {
  uid: string;
  state: MachineState;
  clockStart?: number;
  deadline?: number;
}

export type WriteResult = 'ok' | 'conflict' | 'gone' | 'error' | 'forbidden';

const CHECK_LABELS = ['cluster_namespace', 'check', 'cluster_name'] as const;
type CheckLabels = Record<(typeof CHECK_LABELS)[number], string>;
/** A check's series labels (the check lives in its Cluster's namespace). */
const labelsOf = (r: CheckRef): CheckLabels => ({
  cluster_namespace: r.namespace,
  check: r.check,
  cluster_name: r.cluster,
});
const JOIN_BUCKETS = [15, 30, 60, 120, 180, 300, 450, 600, 900, 1200, 1800, 3600];
/** Every kind of write a refusal can hit, each a series of its own (0 when none), so an alert can tell them apart. */
const REFUSED_KINDS: readonly RefusedKind[] = ['mark', 'withdraw', 'delete'];
/** status.joinDurations as quantiles: p50, p95 and the maximum (quantile 1). */
const RECENT_JOINS = [
  ['0.5', 'p50Seconds'],
  ['0.95', 'p95Seconds'],
  ['1', 'maxSeconds'],
] as const;
const epochSeconds = (t: string | undefined): number => {
  const ms = t === undefined ? NaN : Date.parse(t);
  return Number.isFinite(ms) ? ms / 1000 : 0;
};

interface CheckMemory {
  ref: CheckRef;
  labels: CheckLabels;
  /** `state|verdict` of the joinguard_machines series this check has. */
  states: Set<string>;
  conditions: Map<string, { type: string; status: string; reason: string }>;
  /** Machines seen Joining in this process (uid -> clock start), for join durations. */
  joining: Map<string, number>;
  /** `path|outcome` of the remediation series this check has. */
  remediations: Set<string>;
  /** The earliest deadline among stuck Machines, and the clocks when it was observed. */
  pastDeadline?: { deadline: number; observedAt: number; wallAt: number };
}

const keyOf = (r: CheckRef) => `${r.namespace}/${r.check}`;

type Registers = Registry[];

/** The Machines' families: how many in each state, what was done to them, how long they took to join. */
function machineFamilies(registers: Registers, collectPastDeadline: (g: Gauge) => void) {
  return {
    // state: the status count the Machine is in (counts.ts, as kubectl get mjc shows it); verdict: the finer verdict.
    machines: new Gauge({
      name: 'joinguard_machines',
      help:
        'Machines in scope of a check, by state (the status count: ' +
        'Joined, Joining, Stuck, Skipped, Deleting) and verdict',
      labelNames: [...CHECK_LABELS, 'state', 'verdict'],
      registers,
    }),
    remediations: new Counter({
      name: 'joinguard_remediations_total',
      help: 'Remediation outcomes reached, by path and outcome (each outcome once per Machine)',
      labelNames: [...CHECK_LABELS, 'path', 'outcome'],
      registers,
    }),
    suspicions: new Counter({
      name: 'joinguard_suspicions_raised_total',
      help: 'Suspicions raised (BootstrapCredentialSuspect or RolloutSuspect)',
      labelNames: [...CHECK_LABELS],
      registers,
    }),
    joinDuration: new Histogram({
      name: 'joinguard_join_duration_seconds',
      help: 'Time from the join clock start to the Node, of Machines that joined while this process watched',
      labelNames: [...CHECK_LABELS],
      buckets: JOIN_BUCKETS,
      registers,
    }),
    pastDeadlineSeconds: new Gauge({
      name: 'joinguard_past_deadline_seconds',
      help: 'How long the stuck Machine of a check furthest past its deadline has been past it (0 when none)',
      labelNames: [...CHECK_LABELS],
      registers,
      collect() {
        collectPastDeadline(this);
      },
    }),
  };
}

/** The check's own families: its conditions, its last remediation finished, its recent join durations. */
function checkFamilies(registers: Registers) {
  return {
    condition: new Gauge({
      name: 'joinguard_check_condition',
      help: "The check's current conditions (1 for the current type, status and reason)",
      labelNames: [...CHECK_LABELS, 'type', 'status', 'reason'],
      registers,
    }),
    // Since when a check has been unhealthy: the dashboard's table of checks not progressing.
    conditionTransition: new Gauge({
      name: 'joinguard_check_condition_last_transition_timestamp_seconds',
      help: "The lastTransitionTime of the check's current conditions (Unix seconds), by type, status and reason",
      labelNames: [...CHECK_LABELS, 'type', 'status', 'reason'],
      registers,
    }),
    // Budget pacing told apart from a stall: remediations that finish say the budget frees (the stall alert).
    lastRemediationFinished: new Gauge({
      name: 'joinguard_last_remediation_finished_timestamp_seconds',
      help:
        'When the latest remediation of a check stopped being in flight (old Machine gone, or its mark ' +
        'withdrawn), Unix seconds, from status.remediations (0 when none has)',
      labelNames: [...CHECK_LABELS],
      registers,
    }),
    // The status's own figures, kept across restarts: join times that show when joins are rare.
    recentJoinDuration: new Gauge({
      name: 'joinguard_recent_join_duration_seconds',
      help:
        "p50 (quantile 0.5), p95 (0.95) and max (1) of the check's recent join durations, as status.joinDurations " +
        'keeps them (the last joins, whenever they happened)',
      labelNames: [...CHECK_LABELS, 'quantile'],
      registers,
    }),
  };
}

/** The process's families: its watch restarts, its writes, the Machines whose writes are refused. */
function writeFamilies(registers: Registers) {
  return {
    watchRestarts: new Counter({
      name: 'joinguard_watch_restarts_total',
      help: 'List+watch restarts after errors or silence, by informer',
      labelNames: ['informer'],
      registers,
    }),
    writes: new Counter({
      name: 'joinguard_api_writes_total',
      help: 'Writes made, by kind and result',
      labelNames: ['write', 'result'],
      registers,
    }),
    refusedMachines: new Gauge({
      name: 'joinguard_write_refused_machines',
      help:
        'Machines of a check whose last write the apiserver refused ' +
        '(403, an admission webhook, any error but 404/409), retried ' +
        'with back-off, by the write refused (mark, withdraw, delete)',
      labelNames: [...CHECK_LABELS, 'write'],
      registers,
    }),
  };
}

export class JoinGuardMetrics {
  readonly machines: Gauge;
  readonly remediations: Counter;
  readonly suspicions: Counter;
  readonly joinDuration: Histogram;
  readonly pastDeadlineSeconds: Gauge;
  readonly condition: Gauge;
  readonly conditionTransition: Gauge;
  readonly lastRemediationFinished: Gauge;
  readonly recentJoinDuration: Gauge;
  readonly watchRestarts: Counter;
  readonly writes: Counter;
  readonly refusedMachines: Gauge;
  private readonly checks = new Map<string, CheckMemory>();

  constructor(registry: Registry) {
    const registers = [registry];
    const machines = machineFamilies(registers, (g) => this.collectPastDeadline(g));
    this.machines = machines.machines;
    this.remediations = machines.remediations;
    this.suspicions = machines.suspicions;
    this.joinDuration = machines.joinDuration;
    this.pastDeadlineSeconds = machines.pastDeadlineSeconds;
    const checks = checkFamilies(registers);
    this.condition = checks.condition;
    this.conditionTransition = checks.conditionTransition;
    this.lastRemediationFinished = checks.lastRemediationFinished;
    this.recentJoinDuration = checks.recentJoinDuration;
    const writes = writeFamilies(registers);
    this.watchRestarts = writes.watchRestarts;
    this.writes = writes.writes;
    this.refusedMachines = writes.refusedMachines;
  }

  /** Updates the check's series from one applied plan: `prev` the status read, `next` the status written. */
  observe(
    ref: CheckRef,
    verdicts: ObservedVerdict[],
    prev: MachineJoinCheckStatus,
    next: MachineJoinCheckStatus,
    now: number,
    settledJoined = 0,
  ): void {
    const m = this.memory(ref);
    const labels = { ...m.labels };

    // Settled Machines (joined for good) are counted, not listed, by the planner.
    const counts = new Map<string, number>(settledJoined > 0 ? [['Joined|Joined', settledJoined]] : []);
    for (const v of verdicts) {
      const k = `${COUNTED_AS[v.state]}|${v.state}`;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    const series = (k: string) => {
      const [state, verdict] = k.split('|') as [string, string];
      return { ...labels, state, verdict };
    };
    for (const k of m.states) if (!counts.has(k)) this.machines.set(series(k), 0);
    for (const [k, n] of counts) this.machines.set(series(k), n);
    m.states = new Set([...m.states, ...counts.keys()]);

    const before = new Set((prev.remediations ?? []).map((r) => `${r.uid}|${r.outcome}`));
    for (const r of next.remediations ?? []) {
      if (before.has(`${r.uid}|${r.outcome}`)) continue;
      this.remediations.inc({ ...labels, path: r.path, outcome: r.outcome });
      m.remediations.add(`${r.path}|${r.outcome}`);
    }
    if (next.suspicion && next.suspicion.since !== prev.suspicion?.since) this.suspicions.inc(labels);

    const stuck = verdicts.filter((v) => v.state === 'Stuck' && v.deadline !== undefined).map((v) => v.deadline!);
    if (stuck.length > 0) m.pastDeadline = { deadline: Math.min(...stuck), observedAt: now, wallAt: Date.now() };
    else delete m.pastDeadline;

    this.observeJoins(m, verdicts, now);
    this.observeConditions(m, next);
    const finished = (next.remediations ?? []).map((r) => epochSeconds(r.finishedTime));
    this.lastRemediationFinished.set(labels, Math.max(0, ...finished));
    const d = next.joinDurations;
    for (const [quantile, field] of RECENT_JOINS) {
      const v = d !== undefined && d.count > 0 ? d[field] : undefined;
      if (v === undefined) this.recentJoinDuration.remove({ ...labels, quantile });
      else this.recentJoinDuration.set({ ...labels, quantile }, v);
    }
  }

  private observeJoins(m: CheckMemory, verdicts: ObservedVerdict[], now: number): void {
    const present = new Set<string>();
    for (const v of verdicts) {
      present.add(v.uid);
      if (v.state === 'Joining' && v.clockStart !== undefined) m.joining.set(v.uid, v.clockStart);
      else if (v.state === 'Joined') {
        const start = m.joining.get(v.uid);
        if (start !== undefined) this.joinDuration.observe({ ...m.labels }, Math.max(0, (now - start) / 1000));
        m.joining.delete(v.uid);
      } else if (v.state !== 'Stuck' && v.state !== 'Held') m.joining.delete(v.uid);
    }
    for (const uid of m.joining.keys()) if (!present.has(uid)) m.joining.delete(uid);
  }

  private observeConditions(m: CheckMemory, next: MachineJoinCheckStatus): void {
    const current = new Map<string, { type: string; status: string; reason: string }>();
    const since = new Map<string, number>();
    for (const c of next.conditions ?? []) {
      const l = { type: c.type, status: c.status, reason: c.reason ?? '' };
      current.set(`${l.type}|${l.status}|${l.reason}`, l);
      since.set(`${l.type}|${l.status}|${l.reason}`, epochSeconds(c.lastTransitionTime));
    }
    for (const [k, l] of m.conditions)
      if (!current.has(k)) {
        this.condition.remove({ ...m.labels, ...l });
        this.conditionTransition.remove({ ...m.labels, ...l });
      }
    for (const [k, l] of current) {
      this.condition.set({ ...m.labels, ...l }, 1);
      this.conditionTransition.set({ ...m.labels, ...l }, since.get(k)!);
    }
    m.conditions = current;
  }

  private collectPastDeadline(gauge: Gauge): void {
    const wall = Date.now();
    for (const m of this.checks.values()) {
      const p = m.pastDeadline;
      // The planner's clock may be shifted (tests); age it by the wall time since it was observed.
      const seconds = p ? Math.max(0, (p.observedAt - p.deadline + (wall - p.wallAt)) / 1000) : 0;
      gauge.set({ ...m.labels }, seconds);
    }
  }

  /** Drops every series of a check that is gone. */
  forget(ref: Pick<CheckRef, 'namespace' | 'check'>): void {
    const m = this.checks.get(keyOf(ref as CheckRef));
    if (!m) return;
    this.checks.delete(keyOf(m.ref));
    const labels = { ...m.labels };
    for (const k of m.states) {
      const [state, verdict] = k.split('|') as [string, string];
      this.machines.remove({ ...labels, state, verdict });
    }
    for (const l of m.conditions.values()) {
      this.condition.remove({ ...labels, ...l });
      this.conditionTransition.remove({ ...labels, ...l });
    }
    this.pastDeadlineSeconds.remove(labels);
    for (const write of REFUSED_KINDS) this.refusedMachines.remove({ ...labels, write });
    this.lastRemediationFinished.remove(labels);
    for (const [quantile] of RECENT_JOINS) this.recentJoinDuration.remove({ ...labels, quantile });
    this.suspicions.remove(labels);
    this.joinDuration.remove(labels);
    for (const po of m.remediations) {
      const [path, outcome] = po.split('|') as [string, string];
      this.remediations.remove({ ...labels, path, outcome });
    }
  }

  /** How many of the check's Machines have a write refused now, by the write: a refused withdrawal is the urgent one. */
  refused(ref: CheckRef, refused: readonly { write: RefusedKind }[]): void {
    this.memory(ref);
    for (const write of REFUSED_KINDS)
      this.refusedMachines.set({ ...labelsOf(ref), write }, refused.filter((r) => r.write === write).length);
  }

  write(kind: string, result: WriteResult): void {
    this.writes.inc({ write: kind, result });
  }

  watchRestart(informer: string): void {
    this.watchRestarts.inc({ informer });
  }

  private memory(ref: CheckRef): CheckMemory {
    const k = keyOf(ref);
    let m = this.checks.get(k);
    if (m && m.ref.cluster !== ref.cluster) {
      // spec.clusterName is immutable in practice; if it changed, start the series afresh.
      this.forget(ref);
      m = undefined;
    }
    if (!m) {
      m = {
        ref: { namespace: ref.namespace, check: ref.check, cluster: ref.cluster },
        labels: labelsOf(ref),
        states: new Set(),
        conditions: new Map(),
        joining: new Map(),
        remediations: new Set(),
      };
      this.checks.set(k, m);
    }
    return m;
  }
}
