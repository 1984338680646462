// `npm run bench` arguments, the timings they choose and the order of the phases (bench/session.ts).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { deployedCpuRequest, deployedRuntime } from './controller-process.js';
import type { PhaseKind, PhasePlan } from './phase.js';
import type { Timing } from './phase-kit.js';
import { HEADLINE_QUIET_MIN, headlinePlan, PLANS, type PlanName } from './plan.js';

const here = path.dirname(fileURLToPath(import.meta.url));

export const USAGE = `usage: npm run bench -- [--machines N] [--smoke] [--plan headline] [--phases K,K,...] [--repeat R | K=R,...]
  [--quiet-min M | K=M,...] [--mhc-long-timeout S] [--cpu-limit Q] [--burst N] [--node-options "..."]
  [--out FILE] [--raw FILE] [--fleet-only] [--rebuild-fleet]
  --fleet-only     build (if not saved) and restore the fleet, then stop: no phase, no results written
  --rebuild-fleet  build and save the fleet even if a usable one is saved (bench/fleet-cache.ts)
  --plan headline  the whole measurement in one invocation within a budget (bench/plan.ts): JoinGuard alone 3 times,
                   the MHC at 60 s and at 10m (the 10m one hosting a round), both, cpu, burst, replicas; not with
                   --phases or --repeat; the default plan (rounds) runs --phases in rounds
phases (K): joinguard mhc mhc-long both cpu burst replicas sharded (default: all but sharded)
also: npm run bench -- --micro ... | --heap ... | --shards ... (bench/micro/)`;

/** The order of a round; `replicas` comes last of all (its re-list restarts the apiserver CAPI's managers need). */
export const KINDS: PhaseKind[] = ['joinguard', 'mhc', 'mhc-long', 'both', 'cpu', 'sharded', 'burst', 'replicas'];

export interface BenchArgs {
  machines: number;
  smoke: boolean;
  /** rounds: --phases in rounds (the default); headline: bench/plan.ts. */
  plan: PlanName;
  phases: PhaseKind[];
  repeat: Partial<Record<PhaseKind, number>>;
  quietMin: Partial<Record<PhaseKind, number>>;
  mhcLongTimeoutS?: number;
  /** The CPU quota of phase cpu (default: the Deployment's CPU request). */
  cpuLimit: string;
  burst?: number;
  /** Node flags for JoinGuard after optional `NAME=value` environment words; default: the Deployment's. */
  nodeOptions: string;
  out: string;
  raw: string;
  fleetOnly: boolean;
  rebuildFleet: boolean;
}

function perKind(v: string, what: string): Partial<Record<PhaseKind, number>> | number {
  if (!v.includes('=')) return Number(v);
  const out: Partial<Record<PhaseKind, number>> = {};
  for (const part of v.split(',')) {
    const [k, n] = part.split('=') as [PhaseKind, string];
    if (!KINDS.includes(k) || !(Number(n) >= 0)) throw new Error(`bad ${what} ${part}; ${USAGE}`);
    out[k] = Number(n);
  }
  return out;
}

export function parseArgs(argv: string[]): BenchArgs {
  let repeat: ReturnType<typeof perKind> | undefined;
  let quietArg: ReturnType<typeof perKind> | undefined;
  const a: BenchArgs = {
    machines: 0,
    smoke: false,
    plan: 'rounds',
    phases: KINDS.filter((k) => k !== 'sharded'),
    repeat: {},
    quietMin: {},
    cpuLimit: deployedCpuRequest(),
    nodeOptions: deployedRuntime(),
    out: '',
    raw: '',
    fleetOnly: false,
    rebuildFleet: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--smoke') a.smoke = true;
    else if (flag === '--fleet-only') a.fleetOnly = true;
    else if (flag === '--rebuild-fleet') a.rebuildFleet = true;
    else if (flag === '--machines') a.machines = Number(value());
    else if (flag === '--plan') {
      a.plan = value() as PlanName;
      if (!PLANS.includes(a.plan)) throw new Error(`unknown plan ${a.plan}; ${USAGE}`);
    } else if (flag === '--repeat') repeat = perKind(value(), '--repeat');
    else if (flag === '--quiet-min') quietArg = perKind(value(), '--quiet-min');
    else if (flag === '--mhc-long-timeout') a.mhcLongTimeoutS = Number(value());
    else if (flag === '--cpu-limit') a.cpuLimit = value();
    else if (flag === '--burst') a.burst = Number(value());
    else if (flag === '--node-options') a.nodeOptions = value();
    else if (flag === '--out') a.out = value();
    else if (flag === '--raw') a.raw = value();
    else if (flag === '--phases') {
      a.phases = value().split(',') as PhaseKind[];
      for (const k of a.phases) if (!KINDS.includes(k)) throw new Error(`unknown phase ${k}; ${USAGE}`);
    } else throw new Error(`unknown argument ${argv[i]}; ${USAGE}`);
  }
  if (a.plan === 'headline' && (argv.includes('--phases') || argv.includes('--repeat')))
    throw new Error(`--plan headline fixes its phases and repeats; ${USAGE}`);
  if (a.plan === 'headline') a.phases = KINDS.filter((k) => k !== 'sharded');
  // A smoke run is small and short: it proves the pipeline, not the numbers.
  a.machines ||= a.smoke ? 200 : 2000;
  if (!Number.isInteger(a.machines) || a.machines < 20) throw new Error('--machines must be an integer of at least 20');
  // Three runs of each headline phase, one of each other case; the smoke size runs each once.
  const headline: PhaseKind[] = ['joinguard', 'mhc', 'mhc-long', 'both'];
  for (const k of KINDS) a.repeat[k] = a.smoke ? 1 : headline.includes(k) ? 3 : 1;
  if (typeof repeat === 'number') for (const k of KINDS) a.repeat[k] = repeat;
  else Object.assign(a.repeat, repeat);
  // A quiet window in JoinGuard's phases only: longer than its 4–6 min re-watch cycle (client-go's: 5–10 min).
  const quiet = a.plan === 'headline' ? HEADLINE_QUIET_MIN : 10;
  for (const k of KINDS) a.quietMin[k] = k === 'joinguard' ? (a.smoke ? 0.1 : quiet) : 0;
  if (typeof quietArg === 'number') for (const k of KINDS) a.quietMin[k] = quietArg;
  else Object.assign(a.quietMin, quietArg);
  // The smoke run must not overwrite the committed results; raw data never goes into the tree.
  const stamp = new Date().toISOString().slice(0, 16).replace(/[:T]/g, '-');
  a.out ||= a.smoke ? path.join(here, 'runs', 'results.smoke.json') : path.join(here, 'results.json');
  a.raw ||= path.join(here, 'runs', `raw-${a.smoke ? 'smoke-' : ''}${a.machines}-${stamp}.json`);
  return a;
}

/**
 * Full runs: 60 s timeouts (the MHC refuses less than 30 s; both sides arm a timer for the deadline, so the latency
 * does not depend on the timeout's length), stuck Machines over 60 s, the window closed 120 s after the last
 * deadline; the MHC also at its default 10m. The smoke size shortens everything, JoinGuard's connection grace and
 * joinTimeout (8 s: admitted with a warning) too.
 */
export function timingFor(a: BenchArgs): Timing {
  const t: Timing = a.smoke
    ? {
        joinTimeoutS: 8,
        mhcTimeoutS: 30,
        mhcLongTimeoutS: 35,
        stuckSpreadMs: 3_000,
        tailMs: 8_000,
        mhcTailMs: 25_000,
        connectionGraceMs: 5_000,
        settleMs: 2_000,
        eventLeadMs: 3_000,
        eventSpreadMs: 2_000,
      }
    : {
        joinTimeoutS: 60,
        mhcTimeoutS: 60,
        mhcLongTimeoutS: 600,
        stuckSpreadMs: 60_000,
        tailMs: 120_000,
        mhcTailMs: 120_000,
        settleMs: 10_000,
        eventLeadMs: 5_000,
        eventSpreadMs: 20_000,
      };
  if (a.plan === 'headline') {
    // Tails as long as the figures need, not more: JoinGuard's p99 target is 1 s (30 s leaves a mark 30 times later
    // still counted; later ones are censored, never dropped), the MHC's p99 was ~14 s at 60 s (60 s); the cpu phase
    // triples JoinGuard's. The smoke size: the 10m MHC at 150 s, so that its wait hosts the two phases at that size too.
    // JoinGuard's joinTimeout 30 s where it runs without the MHC (both sides arm a timer for the deadline: the
    // latency does not depend on the timeout's length); beside the MHC both stay at 60 s.
    if (a.smoke) t.mhcLongTimeoutS = 150;
    else Object.assign(t, { joinTimeoutS: 30, tailMs: 30_000, mhcTailMs: 60_000 });
  }
  if (a.mhcLongTimeoutS !== undefined) t.mhcLongTimeoutS = a.mhcLongTimeoutS;
  return t;
}

/** Rounds of the phases asked, each round in KINDS' order, so that a drift of the shared machine spreads over all. */
export function planOf(a: BenchArgs): PhasePlan[] {
  if (a.plan === 'headline') return headlinePlan(a);
  const plan: PhasePlan[] = [];
  const rounds = Math.max(...a.phases.map((k) => a.repeat[k] ?? 1));
  const add = (kind: PhaseKind, repeat: number) =>
    plan.push({
      kind,
      repeat,
      id: `${kind}#${repeat}`,
      tag: `p${String(plan.length + 1).padStart(2, '0')}`,
      quietMs: (a.quietMin[kind] ?? 0) * 60_000,
    });
  for (let r = 1; r <= rounds; r++)
    for (const k of KINDS) if (k !== 'replicas' && a.phases.includes(k) && r <= (a.repeat[k] ?? 1)) add(k, r);
  if (a.phases.includes('replicas')) for (let r = 1; r <= (a.repeat.replicas ?? 1); r++) add('replicas', r);
  return plan;
}
