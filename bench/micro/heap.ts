// `npm run bench -- --heap [--machines N] [--settings "A|B|..."] [--repeat R] [--rtt-ms MS] [--probe] [--out FILE]`
// V8 heap settings for the image, chosen by measurement: JoinGuard as deployed (the compiled command with the
// Deployment's flags, bench/controller-process.ts) against the in-memory apiserver serving the end-to-end
// fleet's shape (100 Machines per Cluster, two checks per Cluster), once per setting (node flags before the
// script, as an ENTRYPOINT would put them, after optional `NAME=value` environment words such as glibc's
// MALLOC_ARENA_MAX: bench/controller-process.ts runtimeSetting), each on a fresh copy of the same world:
//   start      list everything, reconcile every check once
//   churn      2,000 Machine updates JoinGuard does not read, 50 per second (CAPI's status patches; at 200
//              per second the controller before the rework saturated a core and lost its Lease)
//   marks      5% of the Machines stuck, 8 deadlines per second
// With --rest-s S, a quiet window of S seconds after the first reconcile (and 40 s for a display-only status write
// coalesced then, executor.ts): JoinGuard's requests per minute at rest, by verb and resource, Leases apart; with
// --resting-joining the resting Machines are Provisioned with no Node, on their 24h clock, as in `npm run bench`'s
// fleet (what status.timedMachines lists at rest), instead of joined.
// Per setting: the load average at its start, peak RSS (VmHWM), RSS at the end and where it sits (glibc's main
// heap, anonymous, file pages), the V8 heap at the end, CPU seconds, GC count and pause time by kind
// (prom-client's nodejs_gc_duration_seconds), the marks' latency, and whether the process survived.
// A setting may end with ` -- ` and JoinGuard's own flags (`... -- --machinejoincheck-concurrency=2`). Every
// second: RSS (anon, file), the V8 heap, external memory, TLS sockets open (JoinGuard's handles) and
// connections to the apiserver, kept as a series (`series`) and summed up at the marks' start and end.
// --probe preloads memory-probe.cjs into JoinGuard: V8's malloc'd memory and open handles by kind (`probe`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tailFile } from '../../hack/testenv/process.js';
import { compileController, JoinGuardProcess } from '../controller-process.js';
import { residentParts } from '../proc.js';
import { byLabel, sum } from '../prom.js';
import { percentile, round } from '../stats.js';
import { FakeApiserver, type Json } from '../../testing/fake-apiserver.js';
import { type DuringPhase, HeapSeries, readProbe } from './heap-series.js';
import { makeTls, writeKubeconfig } from '../../testing/tls.js';
import { addStuck, clusterName, NS, seed } from '../../testing/world.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (line: string) => process.stderr.write(`[heap ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
const PER_CLUSTER = 100;

/** `[NAME=value ...] [node flags] [-- joinguard flags]`: the runtime setting and the controller's flags. */
export function splitSetting(setting: string): { runtime: string; flags: string[] } {
  const words = setting.split(/\s+/).filter(Boolean);
  const at = words.indexOf('--');
  return at < 0
    ? { runtime: words.join(' '), flags: [] }
    : { runtime: words.slice(0, at).join(' '), flags: words.slice(at + 1) };
}

export const DEFAULT_SETTINGS = [
  '',
  '--max-semi-space-size=2',
  '--max-semi-space-size=4',
  '--max-semi-space-size=8',
  '--max-old-space-size=128',
  '--max-old-space-size=192',
  '--max-old-space-size=256',
  '--max-old-space-size=192 --max-semi-space-size=4',
  '--optimize-for-size',
];

async function runSetting(
  setting: string,
  machines: number,
  tls: { cert: string; key: string; caPem: string },
  dir: string,
  rttMs = 0,
  probe = false,
  rest: { seconds: number; joining: boolean } = { seconds: 0, joining: false },
) {
  const loadAvgAtStart = os.loadavg().map((x) => round(x, 2));
  const api = new FakeApiserver(tls);
  api.delayMs = rttMs;
  const server = await api.start();
  const { runtime, flags } = splitSetting(setting);
  // The probe's own lines (memory-probe.cjs), one file per run.
  const probeFile = path.join(dir, `probe-${Date.now()}.jsonl`);
  const probed = probe
    ? `JOINGUARD_MEMORY_PROBE=${probeFile} ${runtime} --require ${path.join(here, 'memory-probe.cjs')}`
    : runtime;
  const clusters = Math.ceil(machines / PER_CLUSTER);
  seed(api, { clusters, perCluster: PER_CLUSTER, mhc: false, now: Date.now(), restJoining: rest.joining });
  const jg = await JoinGuardProcess.start({
    kubeconfig: writeKubeconfig(path.join(dir, 'kubeconfig'), server, tls.caPem),
    webhookCertDir: path.join(dir, 'serving'),
    logFile: path.join(dir, `joinguard-${Date.now()}.log`),
    nodeOptions: probed,
    extraFlags: flags,
  });
  const series = new HeapSeries(jg, () => ({ now: api.connections, peak: api.peakConnections }));
  try {
    await jg.waitReady(300_000);
    const checks = () => [...api.objects('machinejoinchecks').values()];
    while (!checks().every((c) => c.status && Object.keys(c.status).length > 0)) {
      if (!jg.proc.running) throw new Error(`exited: ${jg.proc.describeExit()}`);
      await sleep(50);
    }
    const firstReconcileS = round((Date.now() - jg.spawnedAt) / 1000, 2);
    const afterStart = jg.sampler.take();
    const atRest = rest.seconds > 0 ? await quietWindow(api, rest.seconds) : undefined;

    // Churn: updates JoinGuard does not read, 50 per second.
    series.phase = 'churn';
    const keys = [...api.objects('machines').keys()];
    for (let i = 0; i < 2000; i++) {
      const m = structuredClone<Json>(api.objects('machines').get(keys[(i * 7919) % keys.length]!)!);
      (m.status.conditions as { type: string; message: string }[]).find((x) => x.type === 'Ready')!.message =
        `churn ${i}`;
      api.put('machines', m);
      if (i % 5 === 4) await sleep(100);
    }

    // Marks: 5% stuck, spread over the Clusters, 8 deadlines per second.
    const k = Math.round(machines * 0.05);
    await series.begin('marks');
    const names = Array.from({ length: clusters }, (_, i) => clusterName(i));
    const { deadlines, marked, lastDeadline } = await addStuck(
      api,
      k,
      names,
      Math.ceil(Date.now() / 1000) * 1000 + 4000,
    );
    const end = lastDeadline + 60_000;
    while (marked.size < k && Date.now() < end && jg.proc.running) await sleep(200);
    await sleep(2000);
    const duringMarks = await series.end('end');
    const metrics = await jg.metrics();
    const last = jg.sampler.take();
    const parts = residentParts(jg.proc.pid);
    const lat = [...deadlines]
      .map(([n, d]) => (marked.has(n) ? (marked.get(n)! - d) / 1000 : Infinity))
      .sort((a, b) => a - b);
    const gcCount = byLabel(metrics ?? [], 'nodejs_gc_duration_seconds_count', 'kind');
    const gcSum = byLabel(metrics ?? [], 'nodejs_gc_duration_seconds_sum', 'kind');
    return {
      setting: setting || '(Node defaults)',
      rttMs,
      loadAvgAtStart,
      memoryLimit: jg.memoryLimit,
      survived: jg.proc.running,
      error: jg.proc.running ? undefined : `${jg.proc.describeExit()}: ${tailFile(jg.proc.logFile, 3)}`,
      firstReconcileS,
      atRest,
      rssAfterStartMiB: round((afterStart?.rssKiB ?? 0) / 1024, 1),
      peakRssMiB: round(Math.max(jg.sampler.peakRssKiB, last?.hwmKiB ?? 0) / 1024, 1),
      rssAtEndMiB: round((last?.rssKiB ?? 0) / 1024, 1),
      // At the end: glibc's main heap, all anonymous memory, file pages (docs/benchmarks.md "Where the RSS sits").
      mainHeapAtEndMiB: parts && round(parts.mainHeapKiB / 1024, 1),
      rssAnonAtEndMiB: parts && round(parts.anonKiB / 1024, 1),
      rssFileAtEndMiB: parts && round(parts.fileKiB / 1024, 1),
      heapUsedAtEndMiB: round(sum(metrics ?? [], 'nodejs_heap_size_used_bytes') / 2 ** 20, 1),
      heapTotalAtEndMiB: round(sum(metrics ?? [], 'nodejs_heap_size_total_bytes') / 2 ** 20, 1),
      cpuSeconds: round(last?.cpuSeconds, 2),
      gc: Object.fromEntries(
        Object.keys(gcCount).map((kind) => [kind, { count: gcCount[kind], seconds: round(gcSum[kind], 3) }]),
      ),
      gcSeconds: round(
        Object.values(gcSum).reduce((a, b) => a + b, 0),
        3,
      ),
      marks: {
        stuck: k,
        marked: marked.size,
        p50S: round(percentile(lat, 50), 3),
        p99S: round(percentile(lat, 99), 3),
      },
      /** The marks' phase: its first and last sample, its highest, and the connections opened before and in it. */
      duringMarks: duringMarks as DuringPhase | undefined,
      series: series.points,
      probe: probe ? readProbe(probeFile, jg.spawnedAt) : undefined,
    };
  } finally {
    series.stop();
    await jg.stop();
    await api.stop();
  }
}

/** JoinGuard's requests at rest: nothing changes for `seconds` (after 40 s for a coalesced status write to go). */
async function quietWindow(api: FakeApiserver, seconds: number) {
  await sleep(40_000);
  const before = new Map(api.counts);
  await sleep(seconds * 1000);
  const perMin = (n: number) => round((n * 60) / seconds, 2) ?? 0;
  const byRequest: Record<string, number> = {};
  for (const [k, n] of api.counts) if (n - (before.get(k) ?? 0) > 0) byRequest[k] = perMin(n - (before.get(k) ?? 0));
  const leases = Object.entries(byRequest)
    .filter(([k]) => k.endsWith(' leases'))
    .reduce((x, [, n]) => x + n, 0);
  const all = Object.values(byRequest).reduce((x, n) => x + n, 0);
  // What the checks show at rest (status.timedMachines: none before the list existed).
  const timedEntries = [...api.objects('machinejoinchecks').values()].reduce(
    (n, c) => n + ((c.status?.timedMachines as unknown[] | undefined)?.length ?? 0),
    0,
  );
  return {
    seconds,
    timedEntries,
    byRequestPerMin: byRequest,
    perMinButLeases: round(all - leases, 2) ?? 0,
    statusWritesPerMin: byRequest['update machinejoinchecks/status'] ?? 0,
  };
}

export type HeapCase = Awaited<ReturnType<typeof runSetting>>;

function failed(setting: string, e: Error, rttMs = 0): HeapCase {
  return {
    setting: setting || '(Node defaults)',
    rttMs,
    loadAvgAtStart: os.loadavg().map((x) => round(x, 2)),
    memoryLimit: 'unknown (the run failed)',
    survived: false,
    error: e.message.slice(0, 600),
    firstReconcileS: undefined,
    atRest: undefined,
    rssAfterStartMiB: undefined,
    peakRssMiB: undefined,
    rssAtEndMiB: undefined,
    mainHeapAtEndMiB: undefined,
    rssAnonAtEndMiB: undefined,
    rssFileAtEndMiB: undefined,
    heapUsedAtEndMiB: undefined,
    heapTotalAtEndMiB: undefined,
    cpuSeconds: undefined,
    gc: {},
    gcSeconds: undefined,
    marks: { stuck: 0, marked: 0, p50S: undefined, p99S: undefined },
    duringMarks: undefined,
    series: [],
    probe: undefined,
  };
}

export function parseHeapArgs(argv: string[]) {
  const a = {
    machines: 10_000,
    settings: DEFAULT_SETTINGS,
    repeat: 1,
    rttMs: 0,
    probe: false,
    restS: 0,
    restingJoining: false,
    out: path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'heap-results.json'),
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--heap') continue;
    else if (flag === '--machines') a.machines = Number(value());
    else if (flag === '--settings')
      a.settings = value()
        .split('|')
        .map((x) => x.trim());
    else if (flag === '--repeat') a.repeat = Number(value());
    else if (flag === '--rtt-ms') a.rttMs = Number(value());
    else if (flag === '--probe') a.probe = true;
    else if (flag === '--rest-s') a.restS = Number(value());
    else if (flag === '--resting-joining') a.restingJoining = true;
    else if (flag === '--out') a.out = value();
    else
      throw new Error(
        `unknown argument ${argv[i]}; usage: npm run bench -- --heap [--machines N] [--settings "A|B|..."] [--repeat R] [--rtt-ms MS] [--probe] [--rest-s S] [--resting-joining] [--out FILE]`,
      );
  }
  return a;
}

export async function heapSettings(a: {
  machines: number;
  settings: string[];
  repeat: number;
  rttMs?: number;
  probe?: boolean;
  restS?: number;
  restingJoining?: boolean;
  out: string;
}): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-heap-'));
  try {
    compileController();
    const tls = await makeTls(dir);
    const cases: HeapCase[] = [];
    // Rounds, not one setting R times in a row: a drift of the shared machine then spreads over all settings.
    for (let r = 0; r < a.repeat; r++) {
      for (const s of a.settings) {
        log(`round ${r + 1}/${a.repeat}: node ${s}`);
        // A setting that kills the process (out of heap) is a result, not a failure of the benchmark.
        const rest = { seconds: a.restS ?? 0, joining: a.restingJoining ?? false };
        const c = await runSetting(s, a.machines, tls, dir, a.rttMs, a.probe, rest).catch((e: Error) =>
          failed(s, e, a.rttMs),
        );
        log(
          `  load ${c.loadAvgAtStart.join(' ')}, peak RSS ${c.peakRssMiB} MiB, end ${c.rssAtEndMiB} MiB (main heap ${c.mainHeapAtEndMiB}, anon ${c.rssAnonAtEndMiB}, file ${c.rssFileAtEndMiB}), first reconcile ${c.firstReconcileS} s, heap used ${c.heapUsedAtEndMiB}/${c.heapTotalAtEndMiB} MiB, CPU ${c.cpuSeconds} s, GC ${c.gcSeconds} s, marks p99 ${c.marks.p99S} s${c.survived ? '' : ' — DIED'}`,
        );
        if (c.atRest)
          log(
            `  at rest (${c.atRest.seconds} s): ${c.atRest.perMinButLeases}/min but Leases, status writes ${c.atRest.statusWritesPerMin}/min, ${c.atRest.timedEntries} timedMachines entries: ${JSON.stringify(c.atRest.byRequestPerMin)}`,
          );
        const d = c.duringMarks;
        log(
          `  marks: RSS ${d?.atStart?.rssMiB} -> ${d?.atEnd?.rssMiB} MiB (peak ${d?.peakRssMiB}, anon ${d?.atStart?.anonMiB} -> ${d?.atEnd?.anonMiB}), heap total ${d?.atStart?.heapTotalMiB} -> ${d?.atEnd?.heapTotalMiB}, 256 KiB page mappings ${d?.atStart?.pageMappingsMiB} -> ${d?.atEnd?.pageMappingsMiB}, main heap ${d?.atStart?.mainHeapMiB} -> ${d?.atEnd?.mainHeapMiB}, external ${d?.atStart?.externalMiB} -> ${d?.atEnd?.externalMiB}, TLS sockets peak ${d?.peakTlsSockets}, connections peak ${d?.peakConnections} (before ${d?.peakConnectionsBefore})`,
        );
        cases.push(c);
      }
    }
    const rows = [
      [
        'node flags',
        'load at start',
        'survived',
        'peak RSS',
        'RSS at end',
        'heap used/total at end',
        'CPU s',
        'GC s (count)',
        'first reconcile',
        'marks p99',
      ],
    ];
    for (const c of cases) {
      const n = Object.values(c.gc).reduce((x, y) => x + (y.count ?? 0), 0);
      rows.push([
        c.setting,
        c.loadAvgAtStart.join(' '),
        c.survived ? 'yes' : 'NO',
        `${c.peakRssMiB} MiB`,
        `${c.rssAtEndMiB} MiB (main heap ${c.mainHeapAtEndMiB})`,
        `${c.heapUsedAtEndMiB} / ${c.heapTotalAtEndMiB} MiB`,
        String(c.cpuSeconds),
        `${c.gcSeconds} (${n})`,
        `${c.firstReconcileS} s`,
        `${c.marks.p99S} s`,
      ]);
    }
    const w = rows[0]!.map((_, i) => Math.max(...rows.map((x) => x[i]!.length)));
    const line = (x: string[]) => `| ${x.map((c, i) => c.padEnd(w[i]!)).join(' | ')} |`;
    fs.mkdirSync(path.dirname(a.out), { recursive: true });
    fs.writeFileSync(
      a.out,
      `${JSON.stringify({ run: { date: new Date().toISOString(), machines: a.machines, rttMs: a.rttMs ?? 0, host: { cpus: os.availableParallelism(), node: process.version } }, cases }, null, 1)}\n`,
    );
    process.stdout.write(
      `\nV8 heap settings, ${a.machines} Machines (${NS}: ${PER_CLUSTER} per Cluster)\n\n${[line(rows[0]!), `|${w.map((x) => '-'.repeat(x + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n')}\n\n`,
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
