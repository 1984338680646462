// Wasted rebuilds while a pool's join credential is expired for 24 hours: every Machine created in that
// time reaches Joining and never gets a Node, so every rebuild is wasted.
//
// - JoinGuard with DESIGN's defaults: measured by driving the real planner (controllers/joincheck/plan/planner.ts)
//   on a simulated clock with the test Scenario driver, which replans each step twice to prove idempotence.
//   The MachineSet's part is modelled: a marked Machine is deleted and replaced `replaceMs` later, and the
//   replacement's infrastructure and bootstrap data are ready `provisionMs` after creation. Durations are
//   the real ones (20m, 30m, 8h): the clock is simulated, so nothing is scaled.
// - MHC alone and a per-slot cap: arithmetic (stated as such), from the same durations.
import { Scenario, requested } from '../controllers/joincheck/testing/scenario.js';
import { HOUR, MINUTE, SECOND, T0, check, snapshot, worker } from '../controllers/joincheck/testing/builders.js';
import type { MachineFacts } from '../api/capi/model.js';
import type { CheckSettings } from '../api/v1alpha1/types.js';

export interface RebuildParams {
  slots: number;
  horizonMs: number;
  joinTimeoutMs: number;
  provisionMs: number;
  replaceMs: number;
  perSlotCap: number;
}

export const DEFAULT_REBUILD_PARAMS: RebuildParams = {
  slots: 5,
  horizonMs: 24 * HOUR,
  joinTimeoutMs: 20 * MINUTE,
  provisionMs: 5 * MINUTE,
  replaceMs: 1 * MINUTE,
  perSlotCap: 5,
};

export interface RebuildRow {
  guard: string;
  rebuilds: number;
  how: 'planner, simulated clock' | 'arithmetic';
  detail: string;
}

export interface RebuildResult {
  params: RebuildParams;
  rows: RebuildRow[];
  /** Hours after the credential expired at which JoinGuard requested each rebuild. */
  joinguardRebuildHours: number[];
  joinguardPlans: number;
  unbudgetedRebuildHours: number[];
  wallMs: number;
}

/** MHC alone: each slot is rebuilt once per (provisioning + nodeStartupTimeout), then replaced. */
export function mhcRebuildsPerSlot(p: RebuildParams): number {
  const first = p.provisionMs + p.joinTimeoutMs;
  if (first >= p.horizonMs) return 0;
  return Math.floor((p.horizonMs - 1 - first) / (first + p.replaceMs)) + 1;
}

/** JoinGuard with defaults on a 5-worker pool whose 5 Machines are (re)created at T0 under an expired credential. */
export function simulateJoinGuard(
  p: RebuildParams,
  settings: Partial<CheckSettings> = {},
): { rebuildTimes: number[]; plans: number } {
  let gen = 0;
  const fresh = (slot: number, at: number): MachineFacts =>
    worker(`w${slot}-${gen++}`, {
      createdAt: at,
      phase: 'Provisioning',
      infrastructureReady: { value: false },
      bootstrapReady: { value: false },
    });
  const machines = Array.from({ length: p.slots }, (_, i) => fresh(i, T0));
  // The pool worked before the credential expired (everJoined), as in the user reports.
  const sc = new Scenario(snapshot({ check: check({ status: { everJoined: true } }), machines, now: T0, settings }));
  const slotOf = new Map(machines.map((m, i) => [m.name, i]));
  const provisionAt = new Map(machines.map((m) => [m.name, T0 + p.provisionMs]));
  const replaceAt = new Map<string, number>();
  const rebuildTimes: number[] = [];
  const end = T0 + p.horizonMs;
  let wakeAt: number | undefined = T0;

  for (;;) {
    const next = Math.min(wakeAt ?? Infinity, ...provisionAt.values(), ...replaceAt.values());
    if (!Number.isFinite(next) || next >= end) break;
    sc.at(next);
    // The MachineSet deletes marked Machines and creates their replacements.
    for (const [name, at] of [...replaceAt]) {
      if (at > next) continue;
      replaceAt.delete(name);
      const slot = slotOf.get(name)!;
      sc.remove(name);
      const m = fresh(slot, next);
      slotOf.set(m.name, slot);
      provisionAt.set(m.name, next + p.provisionMs);
      sc.add(m);
    }
    // Infrastructure and bootstrap data become ready; the Node never comes.
    for (const [name, at] of [...provisionAt]) {
      if (at > next) continue;
      provisionAt.delete(name);
      sc.update(name, {
        phase: 'Provisioned',
        infrastructureReady: { value: true, since: at },
        bootstrapReady: { value: true, since: at },
      });
    }
    const planned = sc.plan();
    for (const name of requested(planned)) {
      rebuildTimes.push(next - T0);
      // The mark as the owner sees it; the MachineSet acts on it a little later.
      sc.update(name, { healthCheckSucceeded: { status: 'False', reason: 'JoinTimeout' } });
      replaceAt.set(name, next + p.replaceMs);
    }
    // A wake-up at the same instant means "still blocked at this very moment": look again a second later.
    wakeAt = planned.wakeAt === undefined ? undefined : Math.max(planned.wakeAt, next + SECOND);
  }
  return { rebuildTimes, plans: sc.plans.length };
}

export function wastedRebuilds(p: RebuildParams = DEFAULT_REBUILD_PARAMS): RebuildResult {
  const t0 = Date.now();
  const jg = simulateJoinGuard(p);
  // The same run without the per-owner budget shows the canary schedule alone.
  const unbudgeted = simulateJoinGuard(p, { maxPerOwner: 1_000_000 });
  const mhcPerSlot = mhcRebuildsPerSlot(p);
  const capped = Math.min(p.perSlotCap, mhcPerSlot);
  const min = (ms: number) => `${ms / MINUTE}m`;
  const cycle = `${min(p.provisionMs)} provisioning + ${min(p.joinTimeoutMs)} timeout + ${min(p.replaceMs)} replacement`;
  return {
    params: p,
    rows: [
      {
        guard: 'MHC alone (nodeStartupTimeout 20m)',
        rebuilds: mhcPerSlot * p.slots,
        how: 'arithmetic',
        detail: `${mhcPerSlot} per slot × ${p.slots} slots; one rebuild per ${cycle}`,
      },
      {
        guard: `per-slot cap (${p.perSlotCap} per slot per 24h)`,
        rebuilds: capped * p.slots,
        how: 'arithmetic',
        detail: `min(${p.perSlotCap}, ${mhcPerSlot}) × ${p.slots} slots`,
      },
      {
        guard: 'JoinGuard, defaults',
        rebuilds: jg.rebuildTimes.length,
        how: 'planner, simulated clock',
        detail: `at ${jg.rebuildTimes.map((t) => fmtHours(t)).join(', ')} after expiry`,
      },
      {
        guard: 'JoinGuard, defaults but maxPerOwner unlimited',
        rebuilds: unbudgeted.rebuildTimes.length,
        how: 'planner, simulated clock',
        detail: `at ${unbudgeted.rebuildTimes.map((t) => fmtHours(t)).join(', ')} after expiry`,
      },
    ],
    joinguardRebuildHours: jg.rebuildTimes.map((t) => Math.round((t / HOUR) * 1000) / 1000),
    joinguardPlans: jg.plans,
    unbudgetedRebuildHours: unbudgeted.rebuildTimes.map((t) => Math.round((t / HOUR) * 1000) / 1000),
    wallMs: Date.now() - t0,
  };
}

function fmtHours(ms: number): string {
  const m = Math.round(ms / MINUTE);
  return m < 60 ? `${m}m` : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
