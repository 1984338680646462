// `npx tsx bench/micro/list-memory.ts [--machines N] [--rounds R] [--impl DIR] [--modes watchlist,list] [--label L] [--out FILE]`
// What one list of N Machines costs the informer: a child process per case (fresh heap, the Deployment's
// NODE_OPTIONS and --expose-gc) runs runtime's Informer — from this tree, or from DIR (a checkout
// of an older commit, for a before/after) — with the cache's real transform (readMachine: the Machine model
// the controller keeps) against the in-memory apiserver (testing/fake-apiserver.ts) serving N Machines captured from
// CAPI's managers (~6 KB each, 45 % managedFields), in pages of 500. Per case:
//   peak RSS over the list        VmHWM, reset just before the list starts (/proc/self/clear_refs 5), minus
//                                 the RSS at that moment
//   heap peak over the list       the largest V8 heap used seen by a 5 ms sampler, minus the heap before
//   kept after GC                 heap used after the list and two full GCs, minus the heap before
//   CPU                           the child's user+system CPU from the start of the list to synced
// Modes: `list` (the apiserver refuses WatchList: paged LISTs) and `watchlist` (it serves WatchList); an old
// informer that knows neither lists in pages and parses each page whole.
import { execFileSync, fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { percentile, round } from '../stats.js';
import { FakeApiserver } from '../../testing/fake-apiserver.js';
import { makeTls } from '../../testing/tls.js';
import { joined, NS } from '../../testing/world.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..');
const r1 = (x: number) => Math.round(x * 10) / 10;
const r3 = (x: number) => Math.round(x * 1000) / 1000;
const log = (line: string) => process.stderr.write(`[list-memory] ${line}\n`);

interface ChildResult {
  rssBeforeMiB: number;
  peakRssOverMiB: number;
  heapBeforeMiB: number;
  heapPeakOverMiB: number;
  keptAfterGcMiB: number;
  cpuS: number;
  wallS: number;
  cached: number;
  syncs: unknown;
}

async function child(): Promise<void> {
  const [server, caFile, implDir] = process.argv.slice(3) as [string, string, string];
  const v8 = await import('node:v8');
  const vm = await import('node:vm');
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const { RestClient } = (await import(
    path.join(implDir, 'runtime/client/rest.ts')
  )) as typeof import('../../runtime/client/rest.js');
  const { Informer } = (await import(
    path.join(implDir, 'runtime/informers/informer.ts')
  )) as typeof import('../../runtime/informers/informer.js');
  const { readMachine } = await import('../../api/capi/readers.js');
  const { silentLogger } = await import('../../runtime/logger.js');
  const rest = new RestClient(
    { server: new URL(server), ca: fs.readFileSync(caFile) },
    { userAgent: 'list-memory', qps: 0 },
  );
  const inf = new Informer({
    rest,
    resource: { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'machines', namespaced: true },
    name: 'machines',
    log: silentLogger(),
    livenessMs: 600_000,
    onEvent: () => undefined,
    transform: (raw) => {
      try {
        return { facts: readMachine(raw, 'v1beta2') };
      } catch (e) {
        return { malformed: (e as Error).message };
      }
    },
  });
  gc();
  gc();
  const status = () => fs.readFileSync('/proc/self/status', 'utf8');
  const kib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status())![1]);
  const heapBefore = process.memoryUsage().heapUsed;
  fs.writeFileSync('/proc/self/clear_refs', '5'); // VmHWM := VmRSS
  const rssBefore = kib('VmRSS');
  let heapPeak = heapBefore;
  const sampler = setInterval(() => (heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)), 5);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  inf.start();
  await inf.synced;
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - t0;
  heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
  clearInterval(sampler);
  const peak = kib('VmHWM');
  inf.stop();
  rest.close();
  gc();
  gc();
  const mib = (b: number) => r1(b / 2 ** 20);
  const out: ChildResult = {
    rssBeforeMiB: r1(rssBefore / 1024),
    peakRssOverMiB: r1((peak - rssBefore) / 1024),
    heapBeforeMiB: mib(heapBefore),
    heapPeakOverMiB: mib(heapPeak - heapBefore),
    keptAfterGcMiB: mib(process.memoryUsage().heapUsed - heapBefore),
    cpuS: r3((cpu.user + cpu.system) / 1e6),
    wallS: r3(wall / 1000),
    cached: inf.store.size,
    syncs: (inf as { syncs?: unknown }).syncs ?? 'paged (whole pages)',
  };
  process.send!(out);
  process.exit(0);
}

function nodeOptions(): string {
  const manifest = fs.readFileSync(path.join(root, 'manifests/manager/manager.yaml'), 'utf8');
  return /NODE_OPTIONS[\s\S]*?value:\s*"?([^"\n]+)"?/.exec(manifest)?.[1]?.trim() ?? '';
}

async function runCase(server: string, caFile: string, implDir: string): Promise<ChildResult> {
  const flags = nodeOptions().split(/\s+/).filter(Boolean);
  const c = fork(fileURLToPath(import.meta.url), ['--child', server, caFile, implDir], {
    execArgv: ['--import', 'tsx', ...flags],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    c.once('message', (m) => resolve(m as ChildResult));
    c.once('exit', (code) => reject(new Error(`child exited ${code}`)));
  });
}

async function main(): Promise<void> {
  const a = { machines: 10_000, rounds: 3, impl: root, modes: ['watchlist', 'list'], label: 'this tree', out: '' };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const v = () => argv[++i] ?? '';
    if (argv[i] === '--machines') a.machines = Number(v());
    else if (argv[i] === '--rounds') a.rounds = Number(v());
    else if (argv[i] === '--impl') a.impl = path.resolve(v());
    else if (argv[i] === '--modes') a.modes = v().split(',');
    else if (argv[i] === '--label') a.label = v();
    else if (argv[i] === '--out') a.out = v();
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-list-memory-'));
  const tls = await makeTls(dir);
  const caFile = path.join(dir, 'ca.pem');
  fs.writeFileSync(caFile, tls.caPem);
  const api = new FakeApiserver(tls);
  const server = await api.start();
  for (let i = 0; i < a.machines; i++)
    api.put('machines', joined(`c${String(Math.floor(i / 100)).padStart(4, '0')}`, i % 100));
  const bytes = [...api.objects('machines').values()].reduce((n, m) => n + JSON.stringify(m).length, 0);
  log(
    `${a.machines} Machines in ${NS}, ${round(bytes / 2 ** 20, 1)} MiB of JSON; informer from ${a.impl} (${a.label}); node ${nodeOptions()}`,
  );
  const results: Record<string, ChildResult[]> = {};
  try {
    // Rounds, not one mode R times in a row: a drift of the shared machine spreads over the modes.
    for (let r = 0; r < a.rounds; r++) {
      for (const mode of a.modes) {
        api.watchList = mode === 'watchlist';
        const res = await runCase(server, caFile, a.impl);
        (results[mode] ??= []).push(res);
        log(`round ${r + 1} ${mode}: ${JSON.stringify(res)}`);
      }
    }
  } finally {
    await api.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const med = (xs: number[]) =>
    round(
      percentile(
        [...xs].sort((x, y) => x - y),
        50,
      ),
      2,
    );
  const rows = Object.entries(results).map(([mode, rs]) => ({
    mode,
    runs: rs.length,
    peakRssOverMiB: med(rs.map((x) => x.peakRssOverMiB)),
    heapPeakOverMiB: med(rs.map((x) => x.heapPeakOverMiB)),
    keptAfterGcMiB: med(rs.map((x) => x.keptAfterGcMiB)),
    cpuS: med(rs.map((x) => x.cpuS)),
    wallS: med(rs.map((x) => x.wallS)),
    syncs: rs[0]!.syncs,
  }));
  const commit = (() => {
    try {
      return execFileSync('git', ['-C', a.impl, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    } catch {
      return 'unknown';
    }
  })();
  const summary = {
    date: new Date().toISOString(),
    label: a.label,
    impl: commit,
    machines: a.machines,
    jsonMiB: round(bytes / 2 ** 20, 1),
    nodeOptions: nodeOptions(),
    loadavg: os.loadavg().map((x) => round(x, 2)),
    medians: rows,
    runs: results,
  };
  process.stdout.write(`${JSON.stringify({ label: a.label, impl: commit, medians: rows }, null, 1)}\n`);
  if (a.out) fs.writeFileSync(a.out, `${JSON.stringify(summary, null, 1)}\n`);
}

if (process.argv[2] === '--child') void child();
else void main();
