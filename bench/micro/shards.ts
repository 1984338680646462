// `npm run bench -- --shards [--machines 100000] [--shard-count 10] [--curve 50,20,5] [--measure all|first]
//                    [--stuck-pct 5] [--out FILE]`
// A fleet too large for one process, over shards: JoinGuard as deployed (the compiled command, the Deployment's flags,
// runtime and 512Mi memory limit: bench/controller-process.ts) with --watch-filter=<shard>, against the in-memory
// apiserver (testing/fake-apiserver.ts) serving the whole fleet: 100 Machines per Cluster, each Cluster with its paused
// KubeadmControlPlane, 3 control-plane Machines and their KubeadmConfigs, its MachineHealthChecks, MachineSets and
// checks (world.ts seedFleet), labelled with its shard. A shard lists its own Clusters, Machines, MachineSets and
// checks, and every MHC, KCP and control-plane KubeadmConfig of the whole fleet (unfiltered by design,
// docs/install.md): that part does not shrink with more shards. One shard at a time (each with the 2 cores to
// itself; in a cluster each shard is a pod of its own), per shard: its peak RSS (VmHWM) and what its memory cgroup
// charged, V8's heap at the end, its first complete reconcile, and its marks (5 % of its Machines stuck, 8 deadlines
// per second, p50/p99 from the deadline to the mark's write). The curve: one shard of the same fleet split into
// other counts (--curve), so Machines per shard vary while the unfiltered part stays. Written into the results file
// under `sharded100k`, the rest of the file left as it is.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileController, deployedRuntime, JoinGuardProcess } from '../controller-process.js';
import { sum } from '../prom.js';
import { percentile, round } from '../stats.js';
import { table } from '../tables.js';
import { FakeApiserver, type Json } from '../../testing/fake-apiserver.js';
import { makeTls, writeKubeconfig, type Tls } from '../../testing/tls.js';
import { joining, markOf, NS, seedFleet, shardName } from '../../testing/world.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (line: string) => process.stderr.write(`[shards ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const PER_CLUSTER = 100;
const CONTROL_PLANE = 3;

export interface ShardArgs {
  machines: number;
  shardCount: number;
  curve: number[];
  measure: 'all' | 'first';
  stuckPct: number;
  out: string;
}

export function parseShardArgs(argv: string[]): ShardArgs {
  const a: ShardArgs = {
    machines: 100_000,
    shardCount: 10,
    curve: [50, 20, 5],
    measure: 'all',
    stuckPct: 5,
    out: path.join(here, '..', 'results.json'),
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--shards') continue;
    else if (flag === '--machines') a.machines = Number(value());
    else if (flag === '--shard-count') a.shardCount = Number(value());
    else if (flag === '--curve') a.curve = value().split(',').filter(Boolean).map(Number);
    else if (flag === '--measure') a.measure = value() === 'first' ? 'first' : 'all';
    else if (flag === '--stuck-pct') a.stuckPct = Number(value());
    else if (flag === '--out') a.out = value();
    else
      throw new Error(
        `unknown argument ${argv[i]}; usage: npm run bench -- --shards [--machines N] [--shard-count K] [--curve K,K] [--measure all|first] [--stuck-pct P] [--out FILE]`,
      );
  }
  return a;
}

/** One shard's process from start to its marks. */
async function measureShard(
  api: FakeApiserver,
  kubeconfig: string,
  dir: string,
  shard: string,
  clusters: string[],
  stuckPct: number,
) {
  const loadAvgAtStart = os.loadavg().map((x) => round(x, 2));
  const jg = await JoinGuardProcess.start({
    kubeconfig,
    webhookCertDir: path.join(dir, 'serving'),
    logFile: path.join(dir, `joinguard-${shard}.log`),
    nodeOptions: deployedRuntime(),
    extraFlags: [`--watch-filter=${shard}`, `--leader-elect-resource-name=joinguard-leader-${shard}`],
    label: `joinguard-${shard}`,
  });
  const added: string[] = [];
  try {
    await jg.waitReady(600_000);
    const mine = () =>
      [...api.objects('machinejoinchecks').values()].filter(
        (c) => c.metadata.labels?.['cluster.x-k8s.io/watch-filter'] === shard,
      );
    while (!mine().every((c) => c.status && Object.keys(c.status).length > 0)) {
      if (!jg.proc.running) throw new Error(`${shard}: ${jg.proc.describeExit()}`);
      await sleep(50);
    }
    const firstReconcileS = round((Date.now() - jg.spawnedAt) / 1000, 2);
    const afterStart = jg.sampler.take();
    // Marks: stuck Machines of the shard's Clusters, 8 deadlines per second, each appearing 3 s before it.
    const k = Math.max(5, Math.round((clusters.length * PER_CLUSTER * stuckPct) / 100));
    const deadlines = new Map<string, number>();
    const marked = new Map<string, number>();
    api.onWrite = (verb, resource, obj) => {
      const n = markOf(verb, resource, obj);
      if (n && deadlines.has(n) && !marked.has(n)) marked.set(n, Date.now());
    };
    const base = Math.ceil(Date.now() / 1000) * 1000 + 4000;
    for (let i = 0; i < k; i++) {
      const d = base + Math.floor(i / 8) * 1000;
      const m: Json = joining(clusters[i % clusters.length]!, Math.floor(i / clusters.length), d);
      m.metadata.labels['cluster.x-k8s.io/watch-filter'] = shard;
      deadlines.set(m.metadata.name, d);
      const wait = d - 3000 + (i % 8) * 125 - Date.now();
      if (wait > 0) await sleep(wait);
      api.put('machines', m);
      added.push(m.metadata.name);
    }
    const end = base + Math.floor((k - 1) / 8) * 1000 + 60_000;
    while (marked.size < k && Date.now() < end && jg.proc.running) await sleep(200);
    await sleep(2000);
    const metrics = await jg.metrics();
    const last = jg.sampler.take();
    const lat = [...deadlines]
      .map(([n, d]) => (marked.has(n) ? (marked.get(n)! - d) / 1000 : Infinity))
      .sort((x, y) => x - y);
    const hwmKiB = Math.max(jg.sampler.peakRssKiB, last?.hwmKiB ?? 0);
    await jg.stop();
    return {
      shard,
      clusters: clusters.length,
      machines: clusters.length * PER_CLUSTER,
      loadAvgAtStart,
      survived: jg.proc.exitSignal === null || jg.proc.exitSignal === 'SIGTERM',
      exit: jg.proc.describeExit(),
      memoryLimit: jg.memoryLimit,
      firstReconcileS,
      rssAfterStartMiB: round((afterStart?.rssKiB ?? 0) / 1024, 1),
      peakRssMiB: round(hwmKiB / 1024, 1),
      memoryPeakMiB: jg.memoryPeakMiB,
      heapUsedAtEndMiB: round(sum(metrics ?? [], 'nodejs_heap_size_used_bytes') / 2 ** 20, 1),
      heapTotalAtEndMiB: round(sum(metrics ?? [], 'nodejs_heap_size_total_bytes') / 2 ** 20, 1),
      cpuSeconds: round(last?.cpuSeconds, 2),
      marks: {
        stuck: k,
        marked: marked.size,
        p50S: round(percentile(lat, 50), 3),
        p99S: round(percentile(lat, 99), 3),
      },
    };
  } finally {
    api.onWrite = undefined;
    await jg.stop();
    for (const n of added) api.remove('machines', NS, n);
  }
}

type ShardCase = Awaited<ReturnType<typeof measureShard>>;

/** The fleet split into k shards: every shard measured (or the first), one after another. */
async function split(a: ShardArgs, k: number, all: boolean, tls: Tls, dir: string): Promise<ShardCase[]> {
  const clusters = Math.ceil(a.machines / PER_CLUSTER);
  const api = new FakeApiserver(tls);
  const t = Date.now();
  const shardOf = seedFleet(api, {
    clusters,
    perCluster: PER_CLUSTER,
    controlPlanePerCluster: CONTROL_PLANE,
    shards: k,
    now: Date.now(),
  });
  log(`${a.machines} Machines over ${clusters} Clusters in ${k} shards: seeded in ${(Date.now() - t) / 1000} s`);
  const kubeconfig = writeKubeconfig(path.join(dir, 'kubeconfig'), await api.start(), tls.caPem);
  const out: ShardCase[] = [];
  try {
    for (let s = 0; s < (all ? k : 1); s++) {
      const shard = shardName(Math.ceil((s * clusters) / k), clusters, k);
      const mine = [...shardOf].filter(([, x]) => x === shard).map(([c]) => c);
      const r = await measureShard(api, kubeconfig, dir, shard, mine, a.stuckPct);
      log(
        `  ${shard}: ${r.machines} Machines, first reconcile ${r.firstReconcileS} s, peak RSS ${r.peakRssMiB} MiB (cgroup ${r.memoryPeakMiB}), heap ${r.heapUsedAtEndMiB}/${r.heapTotalAtEndMiB} MiB, marks ${r.marks.marked}/${r.marks.stuck} p99 ${r.marks.p99S} s${r.survived ? '' : ` — ${r.exit}`}`,
      );
      out.push(r);
    }
  } finally {
    await api.stop();
  }
  return out;
}

export async function shardsInMemory(a: ShardArgs, commit: string): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-shards-'));
  try {
    compileController();
    const tls = await makeTls(dir);
    const t0 = Date.now();
    const shards = await split(a, a.shardCount, a.measure === 'all', tls, dir);
    const curve = [];
    for (const k of a.curve) curve.push({ shards: k, ...(await split(a, k, false, tls, dir))[0]! });
    const clusters = Math.ceil(a.machines / PER_CLUSTER);
    const result = {
      measured: { date: new Date(t0).toISOString(), commit, wallS: Math.round((Date.now() - t0) / 1000) },
      note: "in-memory apiserver (bench/micro/shards.ts), one shard at a time, each under the Deployment's memory limit; every shard lists the whole fleet's MHCs, KubeadmControlPlanes and control-plane KubeadmConfigs",
      machines: a.machines,
      clusters,
      shardCount: a.shardCount,
      stuckPct: a.stuckPct,
      unfilteredPerShard: {
        machineHealthChecks: clusters * 2,
        kubeadmControlPlanes: clusters,
        controlPlaneKubeadmConfigs: clusters * CONTROL_PLANE,
      },
      host: { cpus: os.availableParallelism(), node: process.version },
      shards,
      curve: [...curve, { shards: a.shardCount, ...shards[0]! }].sort((x, y) => x.machines - y.machines),
    };
    let file: Json = {};
    try {
      file = JSON.parse(fs.readFileSync(a.out, 'utf8')) as Json;
    } catch {
      // a new file
    }
    file.sharded100k = result;
    fs.mkdirSync(path.dirname(a.out), { recursive: true });
    fs.writeFileSync(a.out, `${JSON.stringify(file, null, 1)}\n`);
    process.stdout.write(`\n${renderShards(result)}\n\n`);
    log(`results in ${path.relative(process.cwd(), a.out)} (sharded100k)`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function renderShards(r: {
  shards: ShardCase[];
  curve: (ShardCase & { shards: number })[];
  machines: number;
}): string {
  const row = (x: ShardCase, k?: number) => [
    k === undefined ? x.shard : `${k} shards`,
    String(x.machines),
    `${x.firstReconcileS} s`,
    `${x.peakRssMiB} MiB`,
    `${x.memoryPeakMiB ?? '—'} MiB`,
    `${x.heapUsedAtEndMiB} / ${x.heapTotalAtEndMiB} MiB`,
    `${x.marks.marked}/${x.marks.stuck}`,
    `${x.marks.p50S} / ${x.marks.p99S} s`,
    x.survived ? 'yes' : `NO (${x.exit})`,
  ];
  const head = [
    'shard',
    'Machines',
    'first reconcile',
    'peak RSS',
    'cgroup peak',
    'heap used/total',
    'marked',
    'p50 / p99',
    'survived',
  ];
  return `${r.machines} Machines, each shard alone:\n${table([head, ...r.shards.map((x) => row(x))])}\n\nper-shard cost by Machines per shard (one shard of the fleet split so):\n${table([head, ...r.curve.map((x) => row(x, x.shards))])}`;
}
