// The planner and the executor together, over random histories in an in-memory world (a FAKE of the apiserver and
// of CAPI: testing/world.ts, owners.ts): CAPI v1.14 (v1beta2) or v1.10 (v1beta1, owners answering in
// status.v1beta2.conditions); MachineSets (with a MachineDeployment's maxInFlight and failing preflight checks), a
// KubeadmControlPlane (first control-plane Machine, remediation-for, retry period, maxRetry, CannotBeRemediated,
// waiting while a control-plane Machine provisions), a MachineHealthCheck (the annotation, JoinGuardJoined,
// nodeStartupTimeout); Clusters whose control plane initializes during the history; creations, provisioning (also
// with a clock ahead), joins just before and after deadlines, deletions, condition flickers, connection loss,
// resumes, skip annotations, withdraw-all, the check deleted and created again; writes that fail (500), conflict
// (409), are lost or crash the controller, Machines whose writes a webhook refuses for good (403/422), Machines that
// change between the live read and the write (real 409s), caches that lag per object, cache events inside a
// reconcile (a Machine joins, the Cluster is paused or the control plane initialized right after the write-ahead,
// delivered before the Machine writes; an older copy delivered after a write), owners' clocks a few seconds off,
// clusterctl move stripping every status, restarts, and two leaders overlapping for one renew period.
//
// The safety invariants are judged by testing/oracle.ts, a reference judge that shares no code with the product,
// from the world's own record of accepted writes (docs/planner.md lists each tag). This file adds the product's own
// consistency checks: requests unique, only canaries while suspected, planning twice changes nothing, a restart
// decides the same, the settled partition changes nothing, and at the end of every history, once converged, no
// joined Machine carries JoinGuard's mark.
//
// Requests in flight together (the executor writes Machines several at once) reach the world in a seeded order:
// PROPERTY_INTERLEAVE=0 applies each when made, as the kept histories found before it do (=1 interleaves them too).
//
// Seeded and reproducible: PROPERTY_SEED=<seed> (printed) replays a run, PROPERTY_REPLAY=<counterexample JSON>
// replays one history; PROPERTY_RUNS sets the count; PROPERTY_NO_SHRINK=1 stops at the first failure (hack/mutants). A failure names the oracle's invariant and the number of
// histories it took (hack/mutants reads both).
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AssertionError, expect } from 'chai';
import fc from 'fast-check';
import { plan } from './plan/planner.js';
import type { Cache } from './testing/cache.js';
import {
  Controller,
  DISRUPTIVE,
  setupArb,
  startWorld,
  stepArb,
  worldStep,
  type Setup,
  type Step,
} from './testing/history.js';
import { MINUTE, T0 } from './testing/builders.js';
import { count, exercised, type World } from './testing/world.js';
import { pause } from './testing/world-changes.js';
import type { Plan, Snapshot, Live } from './types.js';
import type { Json } from '../../runtime/client/rest.js';

const SEED =
  process.env['PROPERTY_SEED'] !== undefined
    ? Number(process.env['PROPERTY_SEED'])
    : Math.floor(Math.random() * 2 ** 31);
const RUNS = Number(process.env['PROPERTY_RUNS'] ?? 1000);
let histories = 0;
let steps = 0;
const stepKinds: Record<string, number> = {};
const oracleCounts: Record<string, number> = {};
const SURVEY = process.env['PROPERTY_SURVEY'] === '1';
let current: [Setup, Step[]] | undefined;
const survey: Record<string, { count: number; first: string }> = {};
const product = { suspicions: 0, canaries: 0, resumes: 0, budgetStops: 0, plansWithSettledOut: 0, partitionChecks: 0 };

/** Histories kept in testing/ (the defects found and fixed), each named with what it found. */
function keptHistories(
  file: string,
): { name: string; found: string; setup: Setup; history: Step[]; interleave?: boolean }[] {
  return JSON.parse(readFileSync(new URL(`./testing/${file}`, import.meta.url), 'utf8')) as ReturnType<
    typeof keptHistories
  >;
}

/** Every snapshot the executor plans on: the settled partition changes nothing against a plan over every Machine. */
function samePartition(cache: Cache, live: Live, s: Snapshot | undefined): void {
  const all = cache.build(live, false);
  if (s === undefined || all === undefined) return;
  const [p, q] = [plan(s), plan(all)].map((x) =>
    JSON.parse(JSON.stringify({ status: x.status, intents: x.intents, events: x.events })),
  );
  if (JSON.stringify(p) !== JSON.stringify(q)) expect(p, 'the settled partition changes the plan').to.deep.equal(q);
  product.partitionChecks++;
}

/** PROPERTY_WITHOUT=kind,kind leaves step kinds out (to tell which feature of the world a failure needs). */
const WITHOUT = new Set((process.env['PROPERTY_WITHOUT'] ?? '').split(',').filter((x) => x !== ''));

/**
 * One history. `interleave`: the requests a pass has in flight together reach the world in a seeded order (the
 * executor's concurrent Machine writes, two leaders' requests); off for the kept histories found before it.
 */
/**
 * PROPERTY_WIDE=<n> multiplies the budgets a history draws (maxInFlight, maxPerOwner, and the budget steps') by n: more
 * marks due in one pass, so more Machine writes in flight together (the random stream is the same; a printed history
 * replays with the same PROPERTY_WIDE).
 */
const WIDE = Number(process.env['PROPERTY_WIDE'] ?? 1);

async function run(setup: Setup, all: Step[], interleave = process.env['PROPERTY_INTERLEAVE'] !== '0'): Promise<void> {
  histories++;
  const history = all
    .filter((x) => !WITHOUT.has(x.k) && !(setup.calm === true && DISRUPTIVE.has(x.k)))
    .map((x) =>
      x.k === 'budget' && WIDE > 1 ? { ...x, maxInFlight: x.maxInFlight * WIDE, maxPerOwner: x.maxPerOwner * WIDE } : x,
    );
  if (WIDE > 1) setup = { ...setup, maxInFlight: setup.maxInFlight * WIDE, maxPerOwner: setup.maxPerOwner * WIDE };
  current = [setup, history];
  const w = startWorld(T0, setup);
  count(`setups: ${setup.release}`);
  count(`setups: ${setup.initialized ? 'initialized' : 'control plane initializing'}`);
  let c = new Controller(w, samePartition);
  let deposed: Controller | undefined;
  // Mid-reconcile events and stale copies go to the caches of the process that wrote.
  w.cacheOf = (who) => (who === c.name ? c.cache : who === deposed?.name ? deposed.cache : undefined);
  const pick = (i: number, of: (m: Json) => boolean = () => true) => {
    const all = w.live().filter(of);
    return all.length === 0 ? undefined : all[i % all.length];
  };
  for (const [n, step] of history.entries()) {
    steps++;
    stepKinds[step.k] = (stepKinds[step.k] ?? 0) + 1;
    const incarnation = w.check?.metadata.uid;
    const before = structuredClone(w.check?.status ?? {});
    switch (step.k) {
      case 'reconcile': {
        w.faults = [...step.faults];
        w.races = step.races;
        // The order in which this pass's concurrent requests reach the world: seeded by the step's place in the
        // history, so a printed history replays the same (the kept histories found before it: as they were found).
        w.interleave = interleave ? (0x2545f491 + n * 0x9e3779b1) | 0 : undefined;
        for (const f of step.faults) if (f !== 'ok') count(`faults: ${f}`);
        // (A pass that meets a mid-reconcile event or stale copies is not clean: its caches change under it.)
        const clean =
          step.faults.every((f) => f === 'ok') &&
          step.races === 0 &&
          deposed === undefined &&
          w.midway === undefined &&
          w.staleAfterWrite === 0;
        const procs = deposed !== undefined ? [deposed, c] : [c];
        if (deposed !== undefined) count('passes with two leaders');
        const results = await Promise.allSettled(procs.map((x) => x.reconcile()));
        for (const [n, r] of results.entries()) {
          if (r.status === 'fulfilled') {
            if (procs[n] === c && r.value !== undefined) afterPlan(c, w, r.value, before);
            continue;
          }
          // A failed request is part of the history; a broken invariant (checked inside) is the test failing.
          if (r.reason instanceof AssertionError) throw r.reason;
        }
        // What the controller's caches show joined after a pass of it alone (a deposed leader may not have seen it).
        if (deposed === undefined)
          w.oracle.controllerSaw(
            w.t,
            new Set([...c.cache.machines.values()].filter((m) => m.status?.nodeRef).map((m) => m.metadata.uid)),
          );
        // A process that crashed is dead (whatever its code did with the error); a new one starts from status.
        if (w.crashed.has(c.name)) c = new Controller(w, samePartition);
        w.reconciled();
        deposed = undefined; // its lease ran out: it writes nothing more
        w.faults = [];
        w.races = 0;
        w.interleave = undefined;
        if (w.check !== undefined)
          w.oracle.afterPass(
            w.t,
            clean,
            (uid) => c.cache.seesWhy(uid),
            (uid) => w.refusedForLiveness(uid),
            (uid) => w.mustBeClean(uid),
          );
        break;
      }
      case 'deliver': {
        const stale = c.cache.stale();
        if (stale.length > 0) c.cache.deliver(stale[step.i % stale.length]!);
        break;
      }
      case 'sync':
        c.cache.sync();
        break;
      case 'restart':
        c = new Controller(w, samePartition);
        break;
      case 'failover':
        if (deposed === undefined) [deposed, c] = [c, new Controller(w, samePartition)];
        break;
      case 'move': {
        // clusterctl move re-created the objects in the target: its JoinGuard starts with empty caches.
        const moves = w.moves;
        worldStep(w, step, pick);
        if (w.moves !== moves) [c, deposed] = [new Controller(w, samePartition), undefined];
        break;
      }
      default:
        worldStep(w, step, pick);
    }
    if (process.env['PROPERTY_DEBUG']) debug(w, step);
    const where = `at ${new Date(w.t).toISOString()} after ${JSON.stringify(step)}`;
    judged(w, where);
    if (w.check !== undefined && w.check.metadata.uid === incarnation) checkStatus(w, where);
  }
  await checkConverged(w);
  for (const [k, v] of [...Object.entries(w.oracle.counts), ...Object.entries(w.oracle.runs.counts)])
    oracleCounts[k] = (oracleCounts[k] ?? 0) + v;
}

/**
 * The oracle's verdict: its first violation fails the history, named by its invariant's tag. PROPERTY_SURVEY=1
 * instead counts every violation by tag (first example of each kept) and goes on: how a product defect shows.
 */
function judged(w: World, where: string): void {
  const v = w.oracle.violations.splice(0);
  if (v.length === 0) return;
  if (SURVEY) {
    for (const x of v) {
      const tag = x.slice(0, x.indexOf(']') + 1);
      if (survey[tag] === undefined) {
        const file = join(tmpdir(), `property-survey-${tag.slice(1, -1)}.json`);
        writeFileSync(file, JSON.stringify(current));
        survey[tag] = {
          count: 0,
          first: `history ${histories}: ${x} (${where}); replay: PROPERTY_REPLAY="$(cat ${file})"`,
        };
      }
      survey[tag].count++;
    }
    return;
  }
  throw new AssertionError(`${v[0]} (${where})${v.length > 1 ? ` and ${v.length - 1} more` : ''}`);
}

function afterPlan(c: Controller, w: World, p: Plan, before: Record<string, any>): void {
  checkPlanning(c, w);
  if (p.status.suspicion !== undefined && before.suspicion === undefined) product.suspicions++;
  const known = new Set((before.requests ?? []).map((r: { uid: string }) => r.uid));
  product.canaries += (p.status.requests ?? []).filter((r) => r.canary === true && !known.has(r.uid)).length;
  if (p.status.lastResume?.time !== before.lastResume?.time) product.resumes++;
  if ((p.status.conditions ?? []).some((x) => x.reason === 'RemediationBudgetExhausted')) product.budgetStops++;
  if (p.settledInScope > 0) product.plansWithSettledOut++;
}

/** Requests unique by uid (the suspicion and its canaries are the oracle's: judged from the world's writes). */
function checkStatus(w: World, where: string): void {
  const requests: any[] = w.check?.status?.requests ?? [];
  expect(new Set(requests.map((r) => r.uid)).size, `uids unique in status.requests ${where}`).to.equal(requests.length);
}

/** Planning twice changes nothing; a restart (no in-process view) decides the same. */
function checkPlanning(c: Controller, w: World): void {
  if (w.check === undefined) return;
  const s = c.cache.build({ machines: new Map(), cluster: w.cluster, check: w.check });
  if (s === undefined) return;
  const p = plan(s);
  const again = plan({ ...s, check: { ...s.check, status: JSON.parse(JSON.stringify(p.status)) }, previous: p.view });
  expect(JSON.parse(JSON.stringify(again.events)), 'planning twice emits nothing').to.deep.equal([]);
  expect(JSON.parse(JSON.stringify(again.status)), 'planning twice changes no status').to.deep.equal(
    JSON.parse(JSON.stringify(p.status)),
  );
  const { previous: _view, ...fresh } = s;
  const r = plan(fresh);
  const decisions = (x: Plan) => ({
    intents: JSON.parse(JSON.stringify(x.intents)),
    requests: x.status.requests,
    suspicion: x.status.suspicion,
    windows: x.status.ownerWindows,
  });
  expect(decisions(r), 'a restart decides the same').to.deep.equal(decisions(p));
}

/** Once the executor converges (no faults, refusals lifted, caches current), no joined Machine carries JoinGuard's mark. */
async function checkConverged(w: World): Promise<void> {
  if (w.check === undefined) return; // the check went: the oracle judged what it left behind
  w.reconciled(); // (a mid-reconcile event armed by the history's last steps does not happen)
  w.unrefuseAll();
  w.statusRefused = false;
  if (w.clusterPaused) pause(w, 'cluster', false); // (and CAPI rebuilds what a move left)
  w.t += 11 * MINUTE; // past any back-off of a once-refused Machine
  const c = new Controller(w);
  for (let i = 0; i < 6; i++) {
    c.cache.sync();
    const writes = w.writes;
    await c.reconcile().catch((e) => {
      if (e instanceof AssertionError) throw e;
    });
    if (w.writes === writes) break;
  }
  judged(w, 'converging at the end of the history');
  const all = w.check !== undefined && 'joinguard.io/withdraw-all' in (w.check.metadata.annotations ?? {});
  for (const m of w.live()) {
    if (m.metadata.deletionTimestamp !== undefined || !(m.status.nodeRef || all)) continue;
    const marks = w.oracle.marksOf(m.metadata.uid);
    if (marks !== undefined)
      w.oracle.violations.push(
        `[converged] ${m.metadata.name} still carries JoinGuard's mark (${marks}) once converged${all ? ' under withdraw-all' : ''}`,
      );
  }
  w.oracle.checkMarkers(w.t, w.live());
  judged(w, 'converged at the end of the history');
}

function debug(w: World, step: Step): void {
  console.log(
    JSON.stringify(step),
    new Date(w.t).toISOString(),
    JSON.stringify({
      check: w.check?.metadata.uid,
      sus: w.check?.status?.suspicion,
      cjf: w.check?.status?.consecutiveJoinFailures,
      obs: w.check?.status?.observations?.map((o: any) => o.machine),
      req: w.check?.status?.requests?.map((r: any) => [r.machine, r.state, r.path, r.time, r.kind]),
      machines: w
        .live()
        .map((m) => [
          m.metadata.name,
          !!m.status.nodeRef,
          m.metadata.deletionTimestamp !== undefined,
          w.oracle.marksOf(m.metadata.uid) ?? '',
        ]),
    }),
  );
}

describe('planner and executor: properties over random histories (seeded), judged by an independent oracle', function () {
  this.timeout(900_000);

  after(() => {
    const sorted = (o: Record<string, number>) =>
      Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1)));
    console.log(`      property: seed ${SEED}, ${histories} histories, ${steps} steps (replay: PROPERTY_SEED=${SEED})`);
    console.log(`      property: steps by kind ${JSON.stringify(sorted(stepKinds))}`);
    console.log(`      property: the world ${JSON.stringify(sorted(exercised))}`);
    console.log(
      `      property: the oracle judged ${JSON.stringify(oracleCounts)}; the product ${JSON.stringify(product)}`,
    );
    if (SURVEY)
      for (const [tag, x] of Object.entries(survey))
        console.log(`      survey: ${tag} ${x.count} violations; first: ${x.first}`);
  });

  // A counterexample printed by a failed run can be replayed alone: PROPERTY_REPLAY='<its JSON>'.
  const replay = process.env['PROPERTY_REPLAY'];
  if (replay !== undefined) {
    it('replays PROPERTY_REPLAY', async () => {
      const [setup, history] = JSON.parse(replay.replace(/__proto__:null,?/g, '')) as [Setup, Step[]]; // fast-check prints records so
      await run(setup, history);
    });
  }

  // PROPERTY_SHRINK=<file of a printed counterexample>: cut steps away while it fails with the same invariant's tag
  // (faster than fast-check's shrinking on long histories); the smaller one is written beside it, <file>.min.json.
  const shrinkFile = process.env['PROPERTY_SHRINK'];
  if (shrinkFile !== undefined) {
    it('shrinks PROPERTY_SHRINK', async function () {
      this.timeout(0);
      const [setup, history] = JSON.parse(readFileSync(shrinkFile, 'utf8').replace(/__proto__:null,?/g, '')) as [
        Setup,
        Step[],
      ];
      const tagOf = async (h: Step[]) => {
        try {
          await run(setup, h);
          return undefined;
        } catch (e) {
          return /^\[[^\]]+\]/.exec((e as Error).message)?.[0] ?? 'error';
        }
      };
      const tag = await tagOf(history);
      expect(tag, 'the history fails').to.not.equal(undefined);
      let h = history;
      for (let chunk = Math.ceil(h.length / 2); chunk >= 1;) {
        let cut = false;
        for (let i = 0; i < h.length;) {
          const shorter = [...h.slice(0, i), ...h.slice(i + chunk)];
          if ((await tagOf(shorter)) === tag) [h, cut] = [shorter, true];
          else i += chunk;
        }
        if (!cut) chunk = Math.floor(chunk / 2);
      }
      writeFileSync(`${shrinkFile}.min.json`, JSON.stringify([setup, h]));
      console.log(`      shrunk: ${tag}, ${history.length} steps to ${h.length}: ${shrinkFile}.min.json`);
    });
  }

  // The histories that found defects (each fixed), replayed every run: testing/regressions.json.
  const regressions = keptHistories('regressions.json');
  // (hack/mutants skips them with PROPERTY_REGRESSIONS=0: it reports how many random histories a defect takes.)
  if (process.env['PROPERTY_REGRESSIONS'] !== '0')
    it(`replays the ${regressions.length} histories that found defects`, async () => {
      for (const r of regressions) {
        try {
          await run(r.setup, r.history, r.interleave === true || process.env['PROPERTY_INTERLEAVE'] === '1');
        } catch (e) {
          throw new AssertionError(`${r.name} (${r.found}): ${(e as Error).message}`);
        }
      }
    });

  it('keeps every invariant, after every step, whatever fails and whenever it crashes', async () => {
    await fc.assert(
      fc.asyncProperty(setupArb, fc.array(stepArb, { minLength: 30, maxLength: 150, size: 'max' }), (setup, history) =>
        run(setup, history),
      ),
      { seed: SEED, numRuns: RUNS, ...(process.env['PROPERTY_NO_SHRINK'] === '1' ? { endOnFailure: true } : {}) },
    );
  });
});
