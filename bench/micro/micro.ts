// `npm run bench -- --micro [--sizes 100,1000,10000] [--sides alone,mhc] [--events N] [--rtt-ms MS] [--label L] [--out FILE]`
// The controller's event path, measured on its own: JoinGuard (compiled, in its own process) against the
// in-memory apiserver (testing/fake-apiserver.ts) serving one Cluster of N Machines captured from CAPI's managers.
// Per case (N Machines per Cluster × alone / beside MHCs):
//   startup        caches synced and every check reconciled once, from fork
//   CPU per event  one Machine event at a time, the controller idle before and after, its own CPU time
//                  (µs) minus what the same wait costs with no event; two kinds of event:
//                    unread  a change JoinGuard never reads (a condition's message, as CAPI writes often)
//                    fact    a change it reads (the joinguard.io/skip annotation set or removed)
//   heap/Machine   live heap after full GCs, before and after adding N/10 Machines (min 100)
//   marks          5% of N (min 5) stuck Machines, each appearing 3 s before its deadline, 8 deadlines per
//                  second: requests per mark by kind (informer lists and watches aside), and each mark's
//                  latency from its deadline to the mark's write (unmarked 60 s after the last deadline = censored)
// Every event's and every mark's figure is kept in the results (bench/micro-results.json).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileController } from '../controller-process.js';
import { percentile, round } from '../stats.js';
import { ControllerChild } from './child.js';
import { FakeApiserver } from '../../testing/fake-apiserver.js';
import { makeTls, type Tls, writeKubeconfig } from '../../testing/tls.js';
import { addStuck, clusterName, joined, seed, NS } from '../../testing/world.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (line: string) => process.stderr.write(`[micro ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

export interface MicroArgs {
  sizes: number[];
  sides: ('alone' | 'mhc')[];
  events?: number;
  rttMs: number;
  label: string;
  out: string;
}

const summarize = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return {
    n: s.length,
    median: round(percentile(s, 50), 3),
    p90: round(percentile(s, 90), 3),
    max: round(s.at(-1), 3),
  };
};
const countsOf = (api: FakeApiserver) => new Map(api.counts);
const deltaCounts = (a: Map<string, number>, b: Map<string, number>): Record<string, number> =>
  Object.fromEntries([...b].map(([k, v]) => [k, v - (a.get(k) ?? 0)] as const).filter(([, v]) => v > 0));

/** Waits until the controller is idle: nothing in flight, no request for 30 ms, three 20 ms polls under 0.5 ms of CPU each. */
async function idle(api: FakeApiserver, child: ControllerChild, since: number): Promise<number> {
  let prev = await child.cpuUs();
  let quiet = 0;
  for (;;) {
    await sleep(20);
    const c = await child.cpuUs();
    const busy = c - prev > 500 || api.inFlight > 0 || Date.now() - api.lastRequestAt < 30 || Date.now() - since < 50;
    prev = c;
    quiet = busy ? 0 : quiet + 1;
    if (quiet >= 3) return c;
  }
}

async function runCase(n: number, side: 'alone' | 'mhc', tls: Tls, dir: string, a: MicroArgs) {
  const api = new FakeApiserver(tls);
  api.delayMs = a.rttMs;
  const server = await api.start();
  const c = clusterName(0);
  seed(api, { clusters: 1, perCluster: n, mhc: side === 'mhc', now: Date.now() });
  const child = new ControllerChild(writeKubeconfig(path.join(dir, 'kubeconfig'), server, tls.caPem), []);
  try {
    await child.fullReconcile();
    const startup = {
      readyS: round((child.readyAt! - child.spawnedAt) / 1000, 3),
      fullReconcileS: round((child.fullReconcileAt! - child.spawnedAt) / 1000, 3),
      requests: Object.fromEntries(api.counts),
      peakRssMiB: round(child.peakRssKiB() / 1024, 1),
    };
    await idle(api, child, Date.now());

    // What waiting for idle costs with no event, per ms (IPC polls, timers): subtracted from every event.
    const idleRates: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t = Date.now();
      const c0 = await child.cpuUs();
      const c1 = await idle(api, child, t);
      idleRates.push((c1 - c0) / Math.max(1, Date.now() - t));
    }
    const idleUsPerMs = percentile(
      [...idleRates].sort((x, y) => x - y),
      50,
    )!;

    const events = a.events ?? (n >= 10_000 ? 20 : 50);
    const cpuMs: Record<'unread' | 'fact', number[]> = { unread: [], fact: [] };
    const before = countsOf(api);
    for (const kind of ['unread', 'fact'] as const) {
      for (let i = 0; i < events; i++) {
        const key = `${NS}/${c}-rest-${String((i * 7919) % n).padStart(5, '0')}`;
        const m = structuredClone(api.objects('machines').get(key)!);
        if (kind === 'unread') {
          const ready = (m.status.conditions as { type: string; message: string }[]).find((x) => x.type === 'Ready')!;
          ready.message = `bench ${i}`;
        } else {
          const ann = (m.metadata.annotations ??= {});
          if ('joinguard.io/skip' in ann) delete ann['joinguard.io/skip'];
          else ann['joinguard.io/skip'] = '';
        }
        const c0 = await child.cpuUs();
        const t = Date.now();
        api.put('machines', m);
        const c1 = await idle(api, child, t);
        cpuMs[kind].push(round((c1 - c0 - idleUsPerMs * (Date.now() - t)) / 1000, 3)!);
      }
    }
    const eventRequests = deltaCounts(before, countsOf(api));

    // Heap per cached Machine: add N/10 joined Machines (min 100) and compare live heaps.
    const h0 = await child.heap();
    const added = Math.max(100, Math.round(n / 10));
    for (let j = 0; j < added; j++) api.put('machines', joined(c, n + j));
    await idle(api, child, Date.now());
    const h1 = await child.heap();
    const heap = {
      usedMiB: round(h0.heap.used_heap_size / 2 ** 20, 1),
      totalMiB: round(h0.heap.total_heap_size / 2 ** 20, 1),
      bytesPerMachine: Math.round((h1.heap.used_heap_size - h0.heap.used_heap_size) / added),
      added,
    };

    // Marks: 5% stuck (min 5), 8 deadlines per second.
    const k = Math.max(5, Math.round(n * 0.05));
    const m0 = countsOf(api);
    const { deadlines, marked, lastDeadline } = await addStuck(api, k, [c], Math.ceil(Date.now() / 1000) * 1000 + 4000);
    // Latency is censored 60 s after the last deadline; requests are counted until every mark is made and
    // the controller is idle (bounded), and divided by the marks made.
    const windowEnd = lastDeadline + 60_000;
    while (marked.size < k && Date.now() < windowEnd) await sleep(100);
    const drainEnd = Date.now() + 600_000;
    while (marked.size < k && Date.now() < drainEnd) await sleep(200);
    await idle(api, child, Date.now());
    // Lists and watches are the informers' own restarts (server-side watch timeouts), not the marks' work.
    const markRequests = Object.fromEntries(
      Object.entries(deltaCounts(m0, countsOf(api))).filter(([kk]) => !/^(list|watch) /.test(kk)),
    );
    const total = Object.values(markRequests).reduce((x, y) => x + y, 0);
    const latencies = [...deadlines].map(([name, d]) => {
      const at = marked.get(name);
      return at !== undefined && at <= windowEnd
        ? { s: (at - d) / 1000, censored: false }
        : { s: (windowEnd - d) / 1000, censored: true };
    });
    const sorted = [...latencies].sort((x, y) => Number(x.censored) - Number(y.censored) || x.s - y.s);
    const p = (q: number) => {
      const x = percentile(sorted, q);
      return x && { s: round(x.s, 3), censored: x.censored };
    };
    return {
      n,
      side,
      rttMs: a.rttMs,
      startup,
      idleUsPerMs: round(idleUsPerMs, 3),
      cpuPerEventMs: {
        unread: { ...summarize(cpuMs.unread), items: cpuMs.unread },
        fact: { ...summarize(cpuMs.fact), items: cpuMs.fact },
      },
      eventRequests,
      heap,
      marks: {
        stuck: k,
        markedInWindow: latencies.filter((x) => !x.censored).length,
        censored: latencies.filter((x) => x.censored).length,
        markedInTheEnd: marked.size,
        requestsPerMark: round(total / Math.max(1, marked.size), 2),
        byKindPerMark: Object.fromEntries(
          Object.entries(markRequests)
            .sort(([, x], [, y]) => y - x)
            .map(([kk, v]) => [kk, round(v / Math.max(1, marked.size), 2)]),
        ),
        p50: p(50),
        p99: p(99),
        max: p(100),
        windowEnd,
        /** Per stuck Machine (ms epoch): its deadline and when its mark was written (null: never). */
        perMachine: [...deadlines].map(([name, d]) => ({ name, deadline: d, markAt: marked.get(name) ?? null })),
      },
      peakRssMiB: round(child.peakRssKiB() / 1024, 1),
    };
  } finally {
    await child.stop();
    await api.stop();
  }
}

export type MicroCase = Awaited<ReturnType<typeof runCase>>;

function table(cases: MicroCase[]): string {
  const rows = [
    [
      'Machines/Cluster',
      'side',
      'first full reconcile',
      'CPU/event unread (median, p90)',
      'CPU/event fact (median, p90)',
      'heap B/Machine',
      'requests/mark',
      'mark p50 / p99',
      'peak RSS',
    ],
  ];
  for (const x of cases) {
    rows.push([
      String(x.n),
      x.side,
      `${x.startup.fullReconcileS} s`,
      `${x.cpuPerEventMs.unread.median} / ${x.cpuPerEventMs.unread.p90} ms`,
      `${x.cpuPerEventMs.fact.median} / ${x.cpuPerEventMs.fact.p90} ms`,
      String(x.heap.bytesPerMachine),
      String(x.marks.requestsPerMark),
      `${x.marks.p50?.s} / ${x.marks.p99?.censored ? '> ' : ''}${x.marks.p99?.s} s`,
      `${x.peakRssMiB} MiB`,
    ]);
  }
  const w = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(w[i]!)).join(' | ')} |`;
  return [line(rows[0]!), `|${w.map((x) => '-'.repeat(x + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

export async function micro(a: MicroArgs): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-micro-'));
  try {
    compileController(['bench/micro/run-controller.ts']);
    const tls = await makeTls(dir);
    const cases: MicroCase[] = [];
    for (const n of a.sizes) {
      for (const side of a.sides) {
        log(`${n} Machines per Cluster, ${side}`);
        const r = await runCase(n, side, tls, dir, a);
        log(
          `  full reconcile ${r.startup.fullReconcileS} s; CPU/event unread ${r.cpuPerEventMs.unread.median} ms, fact ${r.cpuPerEventMs.fact.median} ms; heap ${r.heap.bytesPerMachine} B/Machine; ${r.marks.requestsPerMark} requests/mark; marks p99 ${r.marks.p99?.s} s`,
        );
        cases.push(r);
      }
    }
    const results = {
      run: {
        date: new Date().toISOString(),
        label: a.label,
        host: { cpus: os.availableParallelism(), node: process.version },
        rttMs: a.rttMs,
      },
      cases,
    };
    fs.mkdirSync(path.dirname(a.out), { recursive: true });
    fs.writeFileSync(a.out, `${JSON.stringify(results, null, 1)}\n`);
    process.stdout.write(`\nmicro-benchmark (${a.label}), round trip ${a.rttMs} ms\n\n${table(cases)}\n\n`);
    log(`results in ${path.relative(process.cwd(), a.out)}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function parseMicroArgs(argv: string[]): MicroArgs {
  const a: MicroArgs = {
    sizes: [100, 1000, 10_000],
    sides: ['alone', 'mhc'],
    rttMs: 0,
    label: 'current',
    out: path.join(here, '..', 'micro-results.json'),
  };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    const value = () => inline ?? argv[++i] ?? '';
    if (flag === '--micro') continue;
    else if (flag === '--sizes') a.sizes = value().split(',').map(Number);
    else if (flag === '--sides') a.sides = value().split(',') as MicroArgs['sides'];
    else if (flag === '--events') a.events = Number(value());
    else if (flag === '--rtt-ms') a.rttMs = Number(value());
    else if (flag === '--label') a.label = value();
    else if (flag === '--out') a.out = value();
    else
      throw new Error(
        `unknown argument ${argv[i]}; usage: npm run bench -- --micro [--sizes 100,1000,10000] [--sides alone,mhc] [--events N] [--rtt-ms MS] [--label L] [--out FILE]`,
      );
  }
  return a;
}
