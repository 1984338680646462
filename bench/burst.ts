// Phase `burst`: many deadlines within one second, on top of the fleet. A Machine's join clock starts at the latest
// of its creation, its infrastructure and bootstrap data ready and its Cluster's control plane initialized (DESIGN),
// so Machines that wait for their control plane share one deadline. The phase makes B more Clusters whose control
// plane is not initialized (100 stuck Machines each, Provisioned, their clock not running), starts JoinGuard, then
// marks the B control planes initialized at once: CAPI's Cluster controller sets ControlPlaneInitialized on each
// within a second or so, and every Machine's deadline is that moment (or the second the bench wrote the KCPs'
// status, if earlier: JoinGuard may take the KCP's word first, latency.ts initializedWhenSaid) plus joinTimeout. joinTimeout here is the
// connection grace + the phases' joinTimeout (60 s): the Clusters' workload connection comes up at about the same time, and no verdict is
// given within the grace after it (DESIGN: Unobservable). Measured: the deadlines' spread, the time from the first
// deadline until the last Machine is marked, p50/p99/max over all of them (censored ones included).
import { USER_JOINGUARD } from './env.js';
import {
  BURST_PER_CLUSTER,
  clusterName,
  clusterTimes,
  createCluster,
  freshChecks,
  initializeControlPlane,
  stuckMachines,
} from './fleet.js';
import { deadline, detection, initializedWhenSaid, machineRows } from './latency.js';
import { emptyResult, phasePeaks, type PhasePlan, type PhaseResult } from './phase.js';
import {
  createPaced,
  edge,
  firstReconcile,
  provisioned,
  removeMachines,
  sleep,
  startJoinGuard,
  stopFigures,
  waitFor,
  window,
  type Context,
} from './phase-kit.js';
import type { JoinGuardProcess } from './controller-process.js';
import { round } from './stats.js';

export async function runBurst(
  ctx: Context & { commit: string; burst: number; burstsSoFar: number },
  p: PhasePlan,
): Promise<PhaseResult> {
  const kube = ctx.bench.driver;
  const t = ctx.timing;
  const start = Date.now();
  const r = emptyResult(ctx, p, start);
  const grace = t.connectionGraceMs ?? 120_000;
  const joinTimeoutS = Math.round(grace / 1000) + t.joinTimeoutS;
  r.timeoutS = { joinguard: joinTimeoutS };
  const n = Math.ceil(ctx.burst / BURST_PER_CLUSTER);
  // Clusters after the fleet's (and after an earlier burst's, whose control planes are initialized already).
  const first = ctx.shape.clusters + ctx.burstsSoFar * n;
  const burstClusters = Array.from({ length: n }, (_, i) => clusterName(first + i));
  const o = { server: new URL(ctx.bench.env.server), kubeconfigYaml: ctx.bench.workloadKubeconfigYaml };
  let jg: JoinGuardProcess | undefined;
  let names: string[] = [];
  try {
    const specs = stuckMachines(ctx.shape, p.tag, ctx.burst, burstClusters);
    names = specs.map((s) => s.name);
    // The first burst's Clusters and Machines are saved in the fleet (bench/fleet.ts burstFleet); a later one's made now.
    if (!specs.every((s) => ctx.parked?.has(s.name))) {
      for (const c of burstClusters)
        await createCluster(kube, ctx.shape, c, { ...o, initialized: false, healthChecks: true }, ctx.owners);
      await createPaced(ctx, specs, 0);
    }
    await provisioned(ctx, names, 600_000);
    const made = [
      ...(await freshChecks(kube, ctx.shape, t.joinTimeoutS, ctx.clusters)),
      ...(await freshChecks(kube, ctx.shape, joinTimeoutS, burstClusters)),
    ];
    await ctx.machines.settle(t.settleMs, 300_000);
    const startup = window(`${p.id}:startup`);
    jg = await startJoinGuard(ctx, { user: USER_JOINGUARD, label: 'joinguard', phaseId: p.id });
    startup.from = jg.spawnedAt;
    await jg.waitReady(600_000);
    const firstAt = await firstReconcile(
      ctx,
      made.map((m) => m.uid),
      [jg],
    );
    await sleep(3000);
    startup.to = Date.now();
    r.windows.startup = startup;

    r.edges.detectionStart = await edge(ctx, [jg]);
    const detect = window(`${p.id}:detection`);
    const initializedAt = Date.now();
    await Promise.all(burstClusters.map((c) => initializeControlPlane(kube, c)));
    // The deadlines start when the KCPs were said initialized, if before CAPI's condition (latency.ts initializedWhenSaid).
    const said = new Map(burstClusters.map((c) => [c, initializedAt]));
    let clusters = await clusterTimes(kube);
    await waitFor('the burst Clusters initialized', 120_000, async () => {
      clusters = await clusterTimes(kube);
      return burstClusters.every((c) => clusters.get(c)?.controlPlaneInitializedAt !== undefined);
    });
    clusters = initializedWhenSaid(clusters, said);
    const initializedWithinS = round((Date.now() - initializedAt) / 1000, 2)!;
    const records = ctx.machines.named(names);
    const deadlines = records.map((x) =>
      deadline('joinguard', x, clusters.get(x.pool.replace(/-watch$/, '')), joinTimeoutS * 1000)!,
    );
    const firstDeadlineAt = Math.min(...deadlines);
    const windowEnd = Math.max(...deadlines) + t.tailMs;
    ctx.log(
      `${names.length} deadlines within ${(Math.max(...deadlines) - firstDeadlineAt) / 1000} s, ${Math.round((firstDeadlineAt - Date.now()) / 1000)} s from now`,
    );
    await sleep(Math.max(0, windowEnd - Date.now()));
    detect.to = Date.now();
    r.windows.detection = detect;
    r.edges.detectionEnd = await edge(ctx, [jg]);
    clusters = initializedWhenSaid(await clusterTimes(kube), said);
    const d = detection('joinguard', records, clusters, joinTimeoutS * 1000, windowEnd);
    r.detection.joinguard = d;
    r.machineRows = machineRows(records, clusters, { joinguard: joinTimeoutS * 1000, mhc: 0 });
    const seen = records.map((x) => x.marks.joinguard?.seenAt).filter((x): x is number => x !== undefined);
    r.burst = {
      machines: names.length,
      clusters: burstClusters,
      joinTimeoutS,
      initializedAt,
      initializedWithinS,
      firstDeadlineAt,
      deadlineSpreadS: (Math.max(...deadlines) - firstDeadlineAt) / 1000,
      distinctDeadlineSeconds: new Set(deadlines.map((x) => Math.floor(x / 1000))).size,
      ...(d.censored === 0 ? { lastMarkedAfterS: round((Math.max(...seen) - firstDeadlineAt) / 1000, 3)! } : {}),
      graceHeld: burstClusters.filter((c) => (clusters.get(c)?.remoteConnectionAt ?? 0) + grace > firstDeadlineAt),
    };
    ctx.log(
      `burst: ${d.marked}/${d.stuck} marked, the last ${r.burst.lastMarkedAfterS ?? '—'} s after the first deadline, p99 ${d.p99?.censored ? '> ' : ''}${d.p99?.s} s`,
    );
    r.joinguard.push(await stopFigures(jg, made.length, firstAt));
    return r;
  } finally {
    await jg?.stop().catch(() => undefined);
    r.phasePeakKiB = phasePeaks(ctx, start);
    r.durationS = Math.round((Date.now() - start) / 1000);
    await removeMachines(ctx, names).catch((e: Error) => ctx.log(`Machines not removed: ${e.message}`));
  }
}
