// Phase `replicas`: JoinGuard as the Deployment runs it, two replicas (each with a client identity of its own, so the
// audit log tells their requests apart), the leader and a warm standby that caches everything; then two events, each
// with stuck Machines whose deadlines fall just after it, so that what is measured is how soon marks flow again:
//   failover  the leader is killed (SIGKILL: no Lease handed back, as a lost node); the standby takes the Lease when
//             it expires (15 s lease) and marks; the killed replica is started again as the new standby
//   re-list   every watch of both replicas expires at once: each replica reaches the apiserver through a fault proxy
//             of its own (e2e/support/fault-proxy.ts, plain HTTP to it, its own client certificate onwards), which
//             ends every open watch stream and answers the next re-watches 410 Expired, as an apiserver whose watch
//             cache no longer holds the resourceVersion does; each replica lists everything again while its old cache
//             is still held. (A restarted kube-apiserver was tried first: under load it took more than the 10 s renew
//             deadline of CAPI's managers, which then exited, and with them the conversion webhooks they serve.)
// Per event: when it happened, the first and last mark after it, p50/p99 over its Machines from their deadlines, each
// replica's peak RSS within the event, who leads after it and whether every process still runs.
import fs from 'node:fs';
import path from 'node:path';
import { FaultProxy, upstreamFromKubeconfig } from '../e2e/support/fault-proxy.js';
import type { JoinGuardProcess } from './controller-process.js';
import { clusterTimes, freshChecks, stuckMachines } from './fleet.js';
import { deadline, detection } from './latency.js';
import { emptyResult, phasePeaks, type EventFigures, type PhasePlan, type PhaseResult } from './phase.js';
import {
  createPaced,
  edge,
  flipPaced,
  firstReconcile,
  lastDeadline,
  provisioned,
  removeMachines,
  sleep,
  startJoinGuard,
  stopFigures,
  waitFor,
  window,
  type Context,
} from './phase-kit.js';
import { mib, round } from './stats.js';

export const REPLICAS = ['replica-a', 'replica-b'];
export const replicaUser = (r: string) => `joinguard-${r}`;
export const REPLICA_USERS = REPLICAS.map(replicaUser);

const alive = (pid: number | undefined) => {
  try {
    return pid !== undefined && process.kill(pid, 0);
  } catch {
    return false;
  }
};

async function leader(procs: JoinGuardProcess[]): Promise<JoinGuardProcess | undefined> {
  for (const p of procs) if (p.proc.running && (await p.isLeader())) return p;
  return undefined;
}

type Ctx = Context & { commit: string };

/** Stuck Machines due just after `act`; the detection over them and what the event did. */
async function event(
  ctx: Ctx,
  p: PhasePlan,
  kind: EventFigures['kind'],
  procs: () => JoinGuardProcess[],
  act: () => Promise<Partial<EventFigures>>,
  names: string[],
): Promise<EventFigures> {
  const t = ctx.timing;
  const specs = stuckMachines(ctx.shape, `${p.tag}${kind[0]}`);
  names.push(...specs.map((s) => s.name));
  const win = window(`${p.id}:${kind}`);
  // Saved parked in the fleet (bench/fleet.ts parkedTags) and flipped; made now only if not.
  if (specs.every((s) => ctx.parked?.has(s.name))) await flipPaced(ctx, specs, t.eventSpreadMs, { mhcWatches: false });
  else await createPaced(ctx, specs, t.eventSpreadMs);
  const at = win.from + t.joinTimeoutS * 1000 - t.eventLeadMs;
  await sleep(Math.max(0, at - Date.now()));
  const eventAt = Date.now();
  ctx.log(`${kind}: now`);
  const done = await act();
  await provisioned(
    ctx,
    specs.map((s) => s.name),
    t.joinTimeoutS * 1000 + 300_000,
  );
  const clusters = await clusterTimes(ctx.bench.driver);
  const records = ctx.machines.named(specs.map((s) => s.name));
  // Room for a takeover: the Lease (15 s) expires before the standby may mark.
  const windowEnd = lastDeadline(records, clusters, { joinguard: t.joinTimeoutS }) + Math.max(t.tailMs, 30_000);
  await sleep(Math.max(0, windowEnd - Date.now()));
  win.to = Date.now();
  const d = detection('joinguard', records, clusters, t.joinTimeoutS * 1000, windowEnd);
  const firstDeadline = Math.min(
    ...records.map(
      (x) => deadline('joinguard', x, clusters.get(x.pool.replace(/-watch$/, '')), t.joinTimeoutS * 1000) ?? Infinity,
    ),
  );
  const seen = records
    .map((x) => x.marks.joinguard?.seenAt)
    .filter((x): x is number => x !== undefined && x >= eventAt && x <= windowEnd);
  const after = (x: number) => round((x - eventAt) / 1000, 3)!;
  const replicas: EventFigures['replicas'] = {};
  for (const x of procs())
    replicas[x.sampler.label] = {
      peakRssMiB: mib(x.sampler.peakBetween(win.from, win.to)),
      running: x.proc.running,
      ...(x.proc.running ? { leading: (await x.isLeader()) ?? false } : {}),
    };
  const pids = ctx.bench.env.pids;
  const f: EventFigures = {
    kind,
    at: eventAt,
    ...done,
    firstDeadlineAfterS: after(Number.isFinite(firstDeadline) ? firstDeadline : windowEnd - t.tailMs),
    ...(seen.length ? { firstMarkAfterS: after(Math.min(...seen)) } : {}),
    ...(d.censored === 0 && seen.length ? { lastMarkAfterS: after(Math.max(...seen)) } : {}),
    detection: d,
    replicas,
    controlPlaneRunning: Object.fromEntries(
      ['kube-apiserver', 'capi-core', 'capi-kubeadm-bootstrap', 'capi-kubeadm-control-plane'].map((c) => [
        c,
        alive(pids[c]),
      ]),
    ),
  };
  ctx.log(
    `${kind}: marked ${d.marked}/${d.stuck}, first mark ${f.firstMarkAfterS ?? '—'} s after it, p99 ${d.p99?.censored ? '> ' : ''}${d.p99?.s} s`,
  );
  return f;
}

export async function runReplicas(ctx: Ctx, p: PhasePlan): Promise<PhaseResult> {
  const t = ctx.timing;
  const start = Date.now();
  const r = emptyResult(ctx, p, start);
  r.timeoutS = { joinguard: t.joinTimeoutS };
  const all: JoinGuardProcess[] = [];
  const running = () => all.filter((x) => x.proc.running);
  const names: string[] = [];
  const firstAt = new Map<JoinGuardProcess, number>();
  const proxies = new Map<string, FaultProxy>();
  try {
    for (const rep of REPLICAS) {
      const user = replicaUser(rep);
      const kubeconfig = fs.readFileSync(ctx.bench.kubeconfigs[user]!, 'utf8');
      const proxy = await FaultProxy.start(upstreamFromKubeconfig(kubeconfig));
      fs.writeFileSync(path.join(ctx.bench.dir, `${user}-proxied.kubeconfig`), proxy.kubeconfigYaml(user));
      proxies.set(rep, proxy);
    }
    const made = await freshChecks(ctx.bench.driver, ctx.shape, t.joinTimeoutS, ctx.clusters);
    await ctx.machines.settle(t.settleMs, 300_000);
    const startup = window(`${p.id}:startup`);
    const start2 = (rep: string) =>
      startJoinGuard(ctx, {
        user: replicaUser(rep),
        label: `joinguard-${rep}`,
        phaseId: p.id,
        kubeconfig: path.join(ctx.bench.dir, `${replicaUser(rep)}-proxied.kubeconfig`),
      });
    all.push(...(await Promise.all(REPLICAS.map(start2))));
    await Promise.all(all.map((x) => x.waitReady(600_000)));
    const first = await firstReconcile(
      ctx,
      made.map((m) => m.uid),
      all,
    );
    const lead = await leader(all);
    if (!lead) throw new Error('no replica leads after the first reconcile');
    firstAt.set(lead, first);
    const standby = all.find((x) => x !== lead)!;
    r.replicas = { leaderAtStart: lead.sampler.label, standbyAtStart: standby.sampler.label };
    await sleep(3000);
    startup.to = Date.now();
    r.windows.startup = startup;
    r.edges.eventsStart = await edge(ctx, all);

    r.failover = await event(
      ctx,
      p,
      'failover',
      running,
      async () => {
        const killedAt = Date.now();
        await lead.kill();
        await waitFor('the standby to take the Lease', 120_000, async () => (await standby.isLeader()) === true);
        return { killed: lead.sampler.label, takeoverS: round((Date.now() - killedAt) / 1000, 2)! };
      },
      names,
    );
    r.windows.failover = { name: `${p.id}:failover`, from: r.failover.at, to: Date.now() };
    // The killed replica back, as the pod it was: the new standby.
    const again = await start2(REPLICAS[all.indexOf(lead)]!);
    all.push(again);
    await again.waitReady(600_000);

    r.relist = await event(
      ctx,
      p,
      'relist',
      running,
      async () => {
        const expired: Record<string, number> = {};
        for (const [rep, proxy] of proxies) {
          // Each watch open now ends, and its re-watch is told that its resourceVersion is gone.
          const open = proxy.requests.filter((x) => x.watch && x.end === undefined && x.code === 200).length;
          proxy.addRule({
            watch: true,
            times: open,
            fault: { status: 410, reason: 'Expired', message: 'too old resource version (bench/replicas.ts)' },
          });
          proxy.dropStreams();
          expired[`joinguard-${rep}`] = open;
        }
        return { watchesExpired: expired };
      },
      names,
    );
    r.windows.relist = { name: `${p.id}:relist`, from: r.relist.at, to: Date.now() };
    r.edges.eventsEnd = await edge(ctx, running());
    for (const x of all) r.joinguard.push(await stopFigures(x, x === lead ? made.length : 0, firstAt.get(x)));
    return r;
  } finally {
    for (const x of all) await x.stop().catch(() => undefined);
    for (const x of proxies.values()) await x.stop().catch(() => undefined);
    r.phasePeakKiB = phasePeaks(ctx, start);
    r.durationS = Math.round((Date.now() - start) / 1000);
    await removeMachines(ctx, names).catch((e: Error) => ctx.log(`Machines not removed: ${e.message}`));
  }
}
