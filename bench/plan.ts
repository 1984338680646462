// `--plan headline` (issue 37, item 1): the whole measurement of a size in one invocation within a time budget, with
// each phase's budget printed at the start and its actual beside it as the run goes. Its phases, in this order:
//   mhc-long#1   the MHC at CAPI's default nodeStartupTimeout (10m) on a pool of its own (`<cluster>-long`, which no
//                check and no other MHC selects), flipped first; while it waits for its deadlines it HOSTS
//     joinguard#1  JoinGuard alone (round 1), on the watch pools
//     mhc#1        the MHC alone at 60 s, on the watch pools: the short and the realistic timeout in the same window
//                then, after the hosted phases (15 s before its first deadline), its marks on a settled fleet
//   both#1       JoinGuard and the MHC (60 s) on the same Machines
//   joinguard#2  round 2
//   cpu#1        JoinGuard under the Deployment's CPU request
//   joinguard#3  round 3
//   burst#1      500 deadlines within a second (5 % of the fleet, at most 500)
//   replicas#1   two replicas, a failover and a re-list (last: its fault proxies end every watch)
// Three runs of JoinGuard alone (the summary's medians), one of each other case. Why hosting does not distort the
// figures it overlaps: the host's pool is selected by no check and no other MHC, and between its flips and its first
// deadline CAPI's MHC controller only waits on its requeue (a Machine event enqueues the MHCs whose selector takes that
// Machine, not the Cluster's others); the hosted phases run only while their budget ends before the host's first
// deadline less a margin, and a hosted phase that does not fit runs after the host instead. The host's own counts
// (requests, CPU, reconciles) come from its marks window, after the hosted phases; its flips have a window of their
// own. docs/decisions/bench-plan-headline.md says what was chosen and why.
import type { BenchArgs } from './args.js';
import type { FleetShape } from './fleet.js';
import type { PhaseKind, PhasePlan } from './phase.js';
import type { Timing } from './phase-kit.js';

export const PLANS = ['rounds', 'headline'] as const;
export type PlanName = (typeof PLANS)[number];

/** The headline plan's phases in order; `hostedBy` ones run inside their host's wait when they fit. */
const HEADLINE: { kind: PhaseKind; repeat: number; pool?: string; hostedBy?: string }[] = [
  { kind: 'mhc-long', repeat: 1, pool: 'long' },
  { kind: 'joinguard', repeat: 1, hostedBy: 'mhc-long#1' },
  { kind: 'mhc', repeat: 1, hostedBy: 'mhc-long#1' },
  { kind: 'both', repeat: 1 },
  { kind: 'joinguard', repeat: 2 },
  { kind: 'cpu', repeat: 1 },
  { kind: 'joinguard', repeat: 3 },
  { kind: 'burst', repeat: 1 },
  { kind: 'replicas', repeat: 1 },
];

/** JoinGuard's quiet window in each round of the headline plan (minutes; the smoke size: 0.1). */
export const HEADLINE_QUIET_MIN = 1;

export function headlinePlan(a: Pick<BenchArgs, 'quietMin'>): PhasePlan[] {
  const plan: PhasePlan[] = HEADLINE.map((h, i) => ({
    kind: h.kind,
    repeat: h.repeat,
    id: `${h.kind}#${h.repeat}`,
    tag: `p${String(i + 1).padStart(2, '0')}`,
    quietMs: (a.quietMin[h.kind] ?? 0) * 60_000,
    ...(h.pool ? { pool: h.pool } : {}),
    ...(h.hostedBy ? { hostedBy: h.hostedBy } : {}),
  }));
  for (const p of plan) {
    const hosted = plan.filter((x) => x.hostedBy === p.id).map((x) => x.id);
    if (hosted.length) p.hosts = hosted;
  }
  return plan;
}

/**
 * What a phase costs beyond the windows its timing fixes, in seconds: a fixed part and a part per Machine of the
 * fleet (its checks made afresh, settling, JoinGuard's start and first reconcile, its Machines deleted). From the
 * validation runs of docs/benchmarks.md "Reproduce" (smoke, 40 and 200 Machines) and the stored runs at 200 and 1,000;
 * an estimate until a 10,000 run measures it.
 */
export const OVERHEAD: Record<PhaseKind | 'restore', { fixedS: number; perMachineS: number }> = {
  restore: { fixedS: 25, perMachineS: 0.015 },
  joinguard: { fixedS: 20, perMachineS: 0.006 },
  mhc: { fixedS: 12, perMachineS: 0.004 },
  'mhc-long': { fixedS: 12, perMachineS: 0.004 },
  both: { fixedS: 20, perMachineS: 0.006 },
  sharded: { fixedS: 20, perMachineS: 0.008 },
  // The start under a 50m quota: 9.84 s at 200, 17.86 s at 1,000 (stored runs): ~0.01 s per Machine.
  cpu: { fixedS: 20, perMachineS: 0.016 },
  burst: { fixedS: 20, perMachineS: 0.006 },
  replicas: { fixedS: 30, perMachineS: 0.012 },
};

/** The seconds a phase's timing fixes: quiet, its Machines' spread, timeout and tail (a burst's, its grace too). */
export function windowS(p: PhasePlan, t: Timing, burst: number): number {
  const s = (ms: number) => ms / 1000;
  const grace = s(t.connectionGraceMs ?? 120_000);
  switch (p.kind) {
    case 'mhc':
    case 'both':
      return s(p.quietMs + t.stuckSpreadMs + t.mhcTailMs) + t.mhcTimeoutS + t.settleMs / 1000;
    case 'mhc-long':
      return s(t.stuckSpreadMs + t.mhcTailMs) + t.mhcLongTimeoutS + t.settleMs / 1000;
    case 'cpu':
      return s(p.quietMs + t.stuckSpreadMs + 3 * t.tailMs) + t.joinTimeoutS + t.settleMs / 1000;
    case 'burst':
      // Its Clusters and Machines are saved in the fleet (bench/fleet.ts burstFleet): the grace and joinTimeout
      // after the control planes are initialized, then the tail.
      void burst;
      return grace + t.joinTimeoutS + s(t.tailMs) + 3 + t.settleMs / 1000;
    case 'replicas': {
      // Two events, each its Machines over eventSpread, due joinTimeout after, a tail of at least 30 s.
      const event = s(t.eventSpreadMs) + t.joinTimeoutS + Math.max(s(t.tailMs), 30);
      return 2 * event + 15 + 2 * (t.settleMs / 1000);
    }
    default:
      return s(p.quietMs + t.stuckSpreadMs + t.tailMs) + t.joinTimeoutS + 3 + t.settleMs / 1000;
  }
}

/** How long a host (mhc-long) waits between its flips and its first deadline less the margin (bench/phase.ts). */
export const hostWaitS = (t: Timing) => t.mhcLongTimeoutS - t.stuckSpreadMs / 1000 - HOST_MARGIN_MS / 1000;

/** A host's hosted phases end this long before its first deadline: its marks come on a settled fleet. */
export const HOST_MARGIN_MS = 15_000;

/** A phase's budget: its windows plus its overhead at this fleet's size (hosted phases included in the host's). */
export function budgetS(p: PhasePlan, t: Timing, shape: FleetShape, burst: number): number {
  const o = OVERHEAD[p.kind];
  return Math.round(windowS(p, t, burst) + o.fixedS + o.perMachineS * shape.machines);
}

export function restoreBudgetS(shape: FleetShape): number {
  return Math.round(OVERHEAD.restore.fixedS + OVERHEAD.restore.perMachineS * shape.machines);
}

/** The invocation's estimate: the restore and every phase not run inside a host (a host's wait covers its guests). */
export function planBudget(plan: PhasePlan[], t: Timing, shape: FleetShape, burst: number) {
  for (const p of plan) p.budgetS = budgetS(p, t, shape, burst);
  const restore = restoreBudgetS(shape);
  const byId = new Map(plan.map((p) => [p.id, p]));
  let total = restore;
  const lines: string[] = [`restore the saved fleet: ~${fmt(restore)}`];
  // As the session does: a hosted phase runs inside its host's wait if its budget fits what is left of it, else after.
  const after = new Set<string>();
  for (const p of plan) {
    if (p.hostedBy) {
      lines.push(
        after.has(p.id)
          ? `${p.id}: ~${fmt(p.budgetS)} after ${p.hostedBy} (does not fit in its wait)`
          : `  ${p.id}: ~${fmt(p.budgetS)} inside ${p.hostedBy}'s wait`,
      );
      if (after.has(p.id)) total += p.budgetS!;
      continue;
    }
    total += p.budgetS!;
    let room = p.hosts ? hostWaitS(t) : 0;
    const inside: string[] = [];
    for (const id of p.hosts ?? []) {
      const h = byId.get(id)!;
      if (h.budgetS! <= room) {
        room -= h.budgetS!;
        inside.push(id);
      } else after.add(id);
    }
    lines.push(
      `${p.id}: ~${fmt(p.budgetS)}${p.hosts ? ` (its wait ~${fmt(hostWaitS(t))} hosts ${inside.join(', ') || 'none'}, ~${fmt(room)} to spare)` : ''}`,
    );
  }
  return { totalS: total, restoreS: restore, lines };
}

export function fmt(seconds: number | undefined): string {
  if (seconds === undefined) return '—';
  const s = Math.round(seconds);
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}
