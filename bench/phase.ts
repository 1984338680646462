// One phase of an invocation on the shared fleet (bench/session.ts), and the kinds there are:
//   joinguard  JoinGuard alone: MachineJoinChecks on the watch pools, no MHC selects their Machines
//   mhc        CAPI's MHC alone on the watch pools, nodeStartupTimeout = the short timeout (as joinTimeout)
//   mhc-long   the same at a realistic nodeStartupTimeout (its default, 10m): what part of the MHC's latency is its
//              requeue at a short timeout
//   both       both on the same Machines (JoinGuard's default strategy then asks the MHC through its annotation)
//   cpu        as joinguard, JoinGuard under a CPU quota at the Deployment's CPU request (bench/cpu-limit.ts)
//   sharded    as joinguard, JoinGuard as two shards (--watch-filter, a Lease and a client identity each)
//   burst      bench/burst.ts        replicas   bench/replicas.ts (two replicas, a failover and a re-list)
// Each phase: its checks made as the kind needs (every MachineJoinCheck afresh before JoinGuard starts, so that each
// start is a first install's), JoinGuard started and its first complete reconcile, an optional quiet window, then
// its own stuck Machines added at a steady pace and the detection window closed a fixed time after the last
// deadline (a Machine unmarked by then is censored); its Machines deleted at the end.
import type { AuditWindow, ClientCounts, ShardAudit } from './audit.js';
import type { JoinGuardProcess } from './controller-process.js';
import { USER_JOINGUARD } from './env.js';
import {
  clusterTimes,
  freshChecks,
  SHARDS,
  shardOfName,
  stuckMachines,
  watchHealthChecks,
  withLiveOwner,
} from './fleet.js';
import { checkPath, livePool } from './fleet-objects.js';
import type { Json } from '../hack/testenv/kube-client.js';
import { clusterOfPool, deadline, detection, machineRows, race, type SideDetection } from './latency.js';
import {
  afterGrace,
  createPaced,
  flipPaced,
  edge,
  firstReconcile,
  lastDeadline,
  provisioned,
  removeMachines,
  sleep,
  startJoinGuard,
  stopFigures,
  window,
  type Context,
  type Edge,
  type ProcessFigures,
} from './phase-kit.js';
import { HOST_MARGIN_MS } from './plan.js';
import { shardDetection, shardUser, type ShardFigures } from './sharded.js';
import type { LatencyBySecond, FirstWrites } from './audit-latency.js';
import type { Side } from './watch.js';

export type PhaseKind = 'joinguard' | 'mhc' | 'mhc-long' | 'both' | 'cpu' | 'burst' | 'replicas' | 'sharded';
export const PHASE_SIDES: Record<PhaseKind, Side[]> = {
  joinguard: ['joinguard'],
  mhc: ['mhc'],
  'mhc-long': ['mhc'],
  both: ['joinguard', 'mhc'],
  cpu: ['joinguard'],
  burst: ['joinguard'],
  replicas: ['joinguard'],
  sharded: ['joinguard'],
};

export interface PhasePlan {
  kind: PhaseKind;
  /** 1, 2, 3 … among the phases of its kind. */
  repeat: number;
  /** `joinguard#2`. */
  id: string;
  /** Short and unique in the invocation, in Machine names: `p07`. */
  tag: string;
  quietMs: number;
  /** The pool suffix of its stuck Machines and MHC when not `watch` (a host's `long`, bench/plan.ts). */
  pool?: string;
  /** Phases run while this one waits for its deadlines (its pool is selected by nothing of theirs). */
  hosts?: string[];
  /** The host this phase runs inside, when it fits (else after the host). */
  hostedBy?: string;
  /** Its time budget in seconds (bench/plan.ts), printed at the start and beside the actual. */
  budgetS?: number;
}

/** A host phase's wait: run other phases until `until` (ms since the epoch), the host's first deadline less a margin. */
export type Idle = (until: number) => Promise<void>;

export interface PhaseResult {
  id: string;
  kind: PhaseKind;
  repeat: number;
  tag: string;
  measured: { date: string; commit: string };
  durationS: number;
  sides: Side[];
  /** Each side's timeout on the Machines measured (joinTimeout, nodeStartupTimeout). */
  timeoutS: Partial<Record<Side, number>>;
  windows: Record<string, AuditWindow>;
  edges: Record<string, Edge>;
  /** The highest RSS sampled within the phase, per control-plane process (KiB). */
  phasePeakKiB: Record<string, number | undefined>;
  joinguard: ProcessFigures[];
  detection: Partial<Record<Side, SideDetection>>;
  race?: ReturnType<typeof race>;
  burst?: BurstFigures;
  failover?: EventFigures;
  relist?: EventFigures;
  /** Phase replicas: which replica led after the first reconcile, which waited. */
  replicas?: { leaderAtStart: string; standbyAtStart: string };
  shards?: ShardFigures[];
  /** Its budget in seconds (bench/plan.ts), beside durationS. */
  budgetS?: number;
  /** A host: when the phases it hosted ran, its first deadline, how far past it they ran (0: they ended before). */
  hosted?: { from: number; to: number; firstDeadline: number; overranS: number };
  /** The phase's Machines whose owner is a live MachineSet (bench/fleet-objects.ts livePool): see ownersAnswered. */
  owners?: OwnerFigures;
  /** Read from the audit log when the invocation ends (bench/session.ts). */
  audit?: {
    windows: Record<string, Record<string, ClientCounts>>;
    shards?: Record<string, ShardAudit>;
  };
  apiserverLatency?: LatencyBySecond;
  joinguardFirstWrites?: FirstWrites;
  /** Kept in the raw file only (bench/report.ts): every stuck Machine's inputs and marks. */
  machineRows?: ReturnType<typeof machineRows>;
  error?: string;
}

export interface OwnerFigures {
  /** Stuck Machines owned by a live MachineSet. */
  live: number;
  /** Of those, the ones their owner deleted (marked, then gone) within the detection window. */
  answered: number;
  /** JoinGuard's closing writes (a remediation's finishedTime) on them within the window: counted in requestsPerMark. */
  closingWrites: number;
}

/** At the detection window's end (`to`): what the live owners did with the phase's Machines, and JoinGuard after. */
async function ownersAnswered(ctx: Context, live: string[], to: number): Promise<OwnerFigures> {
  const names = new Set(live);
  const checks = (await ctx.bench.driver.list(checkPath())).items;
  // finishedTime has whole seconds: a second's margin keeps a write after `to` out of the count.
  const closed = checks
    .flatMap((c) => (c.status?.remediations ?? []) as Json[])
    .filter((e) => names.has(e.machine) && e.finishedTime && Date.parse(e.finishedTime) + 1000 <= to);
  return {
    live: live.length,
    answered: live.filter((n) => !ctx.machines.present.has(n)).length,
    closingWrites: new Set(closed.map((e) => e.machine)).size,
  };
}

function firstDeadline(
  records: ReturnType<Context['machines']['named']>,
  clusters: Awaited<ReturnType<typeof clusterTimes>>,
  timeoutS: Partial<Record<Side, number>>,
): number {
  let first = Infinity;
  for (const rec of records)
    for (const [side, t] of Object.entries(timeoutS) as [Side, number][]) {
      const d = deadline(side, rec, clusters.get(clusterOfPool(rec.pool)), t * 1000);
      if (d !== undefined) first = Math.min(first, d);
    }
  return first;
}

/** The control-plane processes' peaks within [from, now]. */
export function phasePeaks(ctx: Context, from: number): Record<string, number | undefined> {
  return Object.fromEntries(ctx.samplers.map((s) => [s.label, s.peakBetween(from, Date.now())]));
}

export function emptyResult(ctx: Context & { commit: string }, p: PhasePlan, start: number): PhaseResult {
  return {
    id: p.id,
    kind: p.kind,
    repeat: p.repeat,
    tag: p.tag,
    measured: { date: new Date(start).toISOString(), commit: ctx.commit },
    durationS: 0,
    sides: PHASE_SIDES[p.kind],
    timeoutS: {},
    windows: {},
    edges: {},
    phasePeakKiB: {},
    joinguard: [],
    detection: {},
  };
}

export async function runStandard(
  ctx: Context & { commit: string; cpuLimit: string },
  p: PhasePlan,
  idle?: Idle,
): Promise<PhaseResult> {
  const kube = ctx.bench.driver;
  const t = ctx.timing;
  const start = Date.now();
  const r = emptyResult(ctx, p, start);
  const hasJg = r.sides.includes('joinguard');
  const hasMhc = r.sides.includes('mhc');
  // Beside the MHC, joinTimeout = nodeStartupTimeout (as in full runs, where both are 60 s).
  const jgTimeoutS = hasMhc ? t.mhcTimeoutS : t.joinTimeoutS;
  r.timeoutS = {
    ...(hasJg ? { joinguard: jgTimeoutS } : {}),
    ...(hasMhc ? { mhc: p.kind === 'mhc-long' ? t.mhcLongTimeoutS : t.mhcTimeoutS } : {}),
  };
  const procs: JoinGuardProcess[] = [];
  let names: string[] = [];
  try {
    const suffix = p.pool ?? 'watch';
    if (hasMhc) await watchHealthChecks(kube, ctx.clusters, r.timeoutS.mhc, suffix);
    const made = hasJg ? await freshChecks(kube, ctx.shape, jgTimeoutS, ctx.clusters) : [];
    await ctx.machines.settle(t.settleMs, 300_000);
    const firstAt = new Map<JoinGuardProcess, { at: number; checks: number }>();
    const startup = window(`${p.id}:startup`);
    if (p.kind === 'sharded') {
      for (const shard of SHARDS)
        procs.push(
          await startJoinGuard(ctx, {
            user: shardUser(shard),
            label: `joinguard-${shard}`,
            phaseId: p.id,
            extraFlags: [`--watch-filter=${shard}`, `--leader-elect-resource-name=joinguard-leader-${shard}`],
          }),
        );
    } else if (hasJg) {
      const cpuLimit = p.kind === 'cpu' ? ctx.cpuLimit : undefined;
      procs.push(
        await startJoinGuard(ctx, {
          user: USER_JOINGUARD,
          label: 'joinguard',
          phaseId: p.id,
          ...(cpuLimit ? { cpuLimit } : {}),
        }),
      );
    }
    if (procs.length) {
      startup.from = Math.min(...procs.map((x) => x.spawnedAt));
      // Under a CPU quota the start takes what it takes: wait for it (the figure is the point).
      const limitMs = p.kind === 'cpu' ? 3_600_000 : 600_000;
      await Promise.all(procs.map((x) => x.waitReady(limitMs)));
      for (const [i, x] of procs.entries()) {
        const mine = p.kind === 'sharded' ? made.filter((m) => shardOfName(ctx.shape, m.cluster) === SHARDS[i]) : made;
        firstAt.set(x, {
          at: await firstReconcile(
            ctx,
            mine.map((m) => m.uid),
            procs,
            limitMs,
          ),
          checks: mine.length,
        });
        ctx.log(
          `${x.sampler.label}: ready ${(x.readyAt! - x.spawnedAt) / 1000} s, its ${mine.length} checks reconciled ${(firstAt.get(x)!.at - x.spawnedAt) / 1000} s after spawn`,
        );
      }
      await sleep(3000);
      startup.to = Date.now();
      r.windows.startup = startup;
    }
    if (p.quietMs > 0) {
      r.edges.quietStart = await edge(ctx, procs);
      const quiet = window(`${p.id}:quiet`);
      ctx.log(`quiet for ${p.quietMs / 1000} s`);
      await sleep(p.quietMs);
      quiet.to = Date.now();
      r.windows.quiet = quiet;
      r.edges.quietEnd = await edge(ctx, procs);
    }
    await afterGrace(ctx, Math.min(...Object.values(r.timeoutS)));

    r.edges.detectionStart = await edge(ctx, procs);
    let detect = window(`${p.id}:detection`);
    const specs = stuckMachines(ctx.shape, p.tag, undefined, undefined, suffix);
    names = specs.map((s) => s.name);
    const flipped = specs.every((s) => ctx.parked?.has(s.name));
    if (flipped) await flipPaced(ctx, specs, t.stuckSpreadMs, { mhcWatches: hasMhc });
    else await createPaced(ctx, specs, t.stuckSpreadMs);
    // Parked phases only: their first Machine is saved owned by the live MachineSet (bench/fleet.ts parkedMachines).
    const live = flipped ? withLiveOwner(specs).flatMap((s) => (s.owner === livePool(s.cluster) ? [s.name] : [])) : [];
    await provisioned(ctx, names, Math.max(...Object.values(r.timeoutS)) * 1000 + 300_000);
    const clusters = await clusterTimes(kube);
    const records = ctx.machines.named(names);
    // Under a CPU quota marks may lag far behind: a longer tail before the rest is censored.
    const tail = hasMhc ? t.mhcTailMs : t.tailMs * (p.kind === 'cpu' ? 3 : 1);
    const windowEnd = lastDeadline(records, clusters, r.timeoutS) + tail;
    ctx.log(
      `${names.length} stuck Machines created; the detection window closes in ${Math.round((windowEnd - Date.now()) / 1000)} s`,
    );
    if (idle) {
      // A host: other phases run until shortly before its first deadline. Its counts (requests, CPU, reconciles)
      // then come from its marks window only, from the end of that wait; its flips are a window of their own.
      const first = firstDeadline(records, clusters, r.timeoutS);
      const from = Date.now();
      await idle(first - HOST_MARGIN_MS);
      r.windows.flips = { ...detect, name: `${p.id}:flips`, to: from };
      if (Date.now() > first)
        ctx.log(`${p.id}: the hosted phases ran ${Math.round((Date.now() - first) / 1000)} s past its first deadline`);
      r.hosted = {
        from,
        to: Date.now(),
        firstDeadline: first,
        overranS: Math.max(0, Math.round((Date.now() - first) / 1000)),
      };
      r.edges.detectionStart = await edge(ctx, procs);
      detect = window(`${p.id}:detection`);
    }
    await sleep(Math.max(0, windowEnd - Date.now()));
    detect.to = Date.now();
    r.windows.detection = detect;
    r.edges.detectionEnd = await edge(ctx, procs);
    if (live.length) r.owners = await ownersAnswered(ctx, live, detect.to);
    for (const s of r.sides) r.detection[s] = detection(s, records, clusters, r.timeoutS[s]! * 1000, windowEnd);
    if (r.sides.length === 2) r.race = race(records, windowEnd);
    r.machineRows = machineRows(records, clusters, {
      joinguard: (r.timeoutS.joinguard ?? 0) * 1000,
      mhc: (r.timeoutS.mhc ?? 0) * 1000,
    });
    if (p.kind === 'sharded') r.shards = shardDetection(ctx, records, clusters, t.joinTimeoutS * 1000, windowEnd);
    for (const s of r.sides) {
      const d = r.detection[s]!;
      ctx.log(
        `${s}: marked ${d.marked}/${d.stuck}, censored ${d.censored}, p50 ${d.p50?.s} s, p99 ${d.p99?.censored ? '> ' : ''}${d.p99?.s} s`,
      );
    }
    for (const x of procs) {
      const f = firstAt.get(x);
      r.joinguard.push(await stopFigures(x, f?.checks ?? 0, f?.at));
    }
    return r;
  } finally {
    for (const x of procs) await x.stop().catch(() => undefined);
    r.phasePeakKiB = phasePeaks(ctx, start);
    r.durationS = Math.round((Date.now() - start) / 1000);
    if (hasMhc)
      await watchHealthChecks(kube, ctx.clusters, undefined, p.pool).catch((e: Error) =>
        ctx.log(`MHCs not removed: ${e.message}`),
      );
    await removeMachines(ctx, names).catch((e: Error) => ctx.log(`Machines not removed: ${e.message}`));
  }
}

/** What the burst phase measured (bench/burst.ts). */
export interface BurstFigures {
  machines: number;
  clusters: string[];
  joinTimeoutS: number;
  /** When the bench marked the control planes initialized, and how long CAPI took to say so on every Cluster. */
  initializedAt: number;
  initializedWithinS: number;
  firstDeadlineAt: number;
  /** Last deadline minus first: how close together the deadlines fell. */
  deadlineSpreadS: number;
  distinctDeadlineSeconds: number;
  /** From the first deadline until the last Machine's mark was seen (undefined: not all were marked). */
  lastMarkedAfterS?: number;
  /** Clusters whose workload connection came up so late that the grace still held at their deadline. */
  graceHeld: string[];
}

/** What a failover or a re-list measured (bench/replicas.ts). */
export interface EventFigures {
  kind: 'failover' | 'relist';
  at: number;
  /** failover: the replica killed, and how long until the other one held the Lease. */
  killed?: string;
  takeoverS?: number;
  /** relist: the watch streams ended (and their re-watches answered 410), per replica. */
  watchesExpired?: Record<string, number>;
  /** The first of the event's Machines' deadlines, after the event. */
  firstDeadlineAfterS: number;
  /** After the event: the first and the last mark seen (undefined: none, or not all). */
  firstMarkAfterS?: number;
  lastMarkAfterS?: number;
  /** From the audit log: JoinGuard's first write of the first and of the last of these Machines, after the event. */
  firstWriteAfterS?: number;
  lastWriteAfterS?: number;
  detection: SideDetection;
  /** Per replica: its highest RSS within the event's window, whether it runs at the end, who leads. */
  replicas: Record<string, { peakRssMiB?: number; running: boolean; leading?: boolean }>;
  /** CAPI's managers and the apiserver still running at the end of the event. */
  controlPlaneRunning: Record<string, boolean>;
}
