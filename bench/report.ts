// The results: one JSON document (bench/results.json) and the table printed on stdout, which is also the
// table docs/benchmarks.md shows. Only measured values go in; targets are compared, never assumed.
import fs from 'node:fs';
import os from 'node:os';
import { sumClients, type AuditCounts, type AuditWindow } from './audit.js';
import type { ControllerMilestones } from './controller-process.js';
import { USER_JOINGUARD, USER_WORKLOAD, JOINGUARD_USER_AGENT } from './env.js';
import type { FleetShape } from './fleet.js';
import type { LatencyResult } from './latency.js';
import type { ProcSample } from './proc.js';
import type { RebuildResult } from './rebuilds.js';
import { mib, round } from './stats.js';

export interface RawResults {
  args: { machines: number; smoke: boolean };
  shape: FleetShape;
  timing: { joinTimeoutS: number; restMs: number; stuckSpreadMs: number; connectionGraceMs: number };
  phase: Record<string, number>;
  wallS: number;
  metricLabels: string[];
  latency: { joinguard: LatencyResult; mhc: LatencyResult };
  audit: { counts: AuditCounts; lines: number; userAgents: Record<string, string> };
  restWindow: AuditWindow;
  detectWindow: AuditWindow;
  joinguard: { milestones: ControllerMilestones; atRestStart: ProcSample; atRestEnd: ProcSample; last: ProcSample; peakRssKiB: number };
  core: { atRestStart: ProcSample; atRestEnd: ProcSample; last: ProcSample; memory?: { rssKiB: number; hwmKiB: number } };
  rebuilds: RebuildResult;
}

// The CAPI core manager's own User-Agent product (cmd name); the other managers are told apart the same way.
const isCore = (client: string) => client.startsWith('admin:') && /cluster-api-controller-manager|^admin:manager$|capi-core/.test(client);
const isJoinGuard = (client: string) => client === `${USER_JOINGUARD}:${JOINGUARD_USER_AGENT}`;
const isCoreWorkload = (client: string) => client.startsWith(`${USER_WORKLOAD}:`) && /cluster-api-controller-manager|manager|capi-core/.test(client);

function host() {
  const mem = fs.readFileSync('/proc/meminfo', 'utf8');
  const memKiB = Number(/^MemTotal:\s+(\d+)/m.exec(mem)?.[1] ?? 0);
  return { cpus: os.availableParallelism(), cpuModel: os.cpus()[0]?.model ?? 'unknown', memTotalGiB: round(memKiB / 1024 / 1024, 1), kernel: os.release(), node: process.version };
}

const perMin = (n: number, w: AuditWindow) => round((n * 60_000) / (w.to - w.from), 1)!;
const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : b === 0 ? (a === 0 ? 1 : null) : round(a / b, 2));

export function buildResults(r: RawResults) {
  const rest = r.audit.counts[r.restWindow.name];
  const detect = r.audit.counts[r.detectWindow.name];
  const jgRest = sumClients(rest, isJoinGuard);
  const coreRest = sumClients(rest, isCore);
  const coreWorkloadRest = sumClients(rest, isCoreWorkload);
  const jgDetect = sumClients(detect, isJoinGuard);
  const coreDetect = sumClients(detect, isCore);
  const ms = r.joinguard.milestones;
  const restS = (r.restWindow.to - r.restWindow.from) / 1000;
  const jg = {
    detectionSeconds: r.latency.joinguard.seconds,
    detection: r.latency.joinguard,
    restRequestsPerMin: perMin(jgRest.requests, r.restWindow),
    restWatchOpensPerMin: perMin(jgRest.watches, r.restWindow),
    restRequests: jgRest,
    detectionRequests: jgDetect,
    rssMiB: mib(r.joinguard.last.rssKiB),
    peakRssMiB: mib(Math.max(r.joinguard.last.hwmKiB, r.joinguard.peakRssKiB)),
    cpuSeconds: round(r.joinguard.last.cpuSeconds, 2),
    cpuSecondsAtRest: round(r.joinguard.atRestEnd.cpuSeconds - r.joinguard.atRestStart.cpuSeconds, 2),
    readyS: round((ms.readyAt! - ms.spawnedAt) / 1000, 2),
    firstFullReconcileS: round((ms.fullReconcileAt! - ms.spawnedAt) / 1000, 2),
    firstFullReconcileFromStartControllerS: round((ms.fullReconcileAt! - ms.startedAt!) / 1000, 2),
    checksReconciled: ms.checksReconciled,
    watchRestarts: ms.watchRestarts,
    memoryAtStopMiB: ms.memory && Object.fromEntries(Object.entries(ms.memory).map(([k, v]) => [k, mib(v / 1024)])),
  };
  const mhc = {
    detectionSeconds: r.latency.mhc.seconds,
    detection: r.latency.mhc,
    restRequestsPerMin: perMin(coreRest.requests, r.restWindow),
    restWatchOpensPerMin: perMin(coreRest.watches, r.restWindow),
    restWorkloadRequestsPerMin: perMin(coreWorkloadRest.requests, r.restWindow),
    restRequests: coreRest,
    restWorkloadRequests: coreWorkloadRest,
    detectionRequests: coreDetect,
    rssMiB: mib(r.core.memory?.rssKiB ?? r.core.last.rssKiB),
    peakRssMiB: mib(r.core.memory?.hwmKiB ?? r.core.last.hwmKiB),
    cpuSeconds: round(r.core.last.cpuSeconds, 2),
    cpuSecondsAtRest: round(r.core.atRestEnd.cpuSeconds - r.core.atRestStart.cpuSeconds, 2),
  };
  const at10k = r.args.machines >= 10_000;
  const target = (name: string, measured: number | undefined, ok: boolean) => ({ name, measured, met: ok, atScale: at10k ? 'at 10,000' : `at ${r.args.machines} (target is for 10,000)` });
  const jgDefault = r.rebuilds.rows.find((x) => x.guard === 'JoinGuard, defaults')!.rebuilds;
  return {
    run: { date: new Date().toISOString(), machines: r.args.machines, smoke: r.args.smoke, wallS: round(r.wallS, 1), phasesS: r.phase, host: host() },
    setup: {
      shape: r.shape,
      timing: r.timing,
      sides: 'the same Machines, namespace bench: per pool one MachineJoinCheck (strategy MachineCondition: JoinGuard writes only JoinGuardJoined=False) and one MachineHealthCheck (marks HealthCheckSucceeded=False); the MHC column is the CAPI core manager process, which runs the MHC controller and every other core controller',
      apiserverRequestTotalLabels: r.metricLabels,
      requestCounting: 'apiserver audit log (level Metadata): apiserver_request_total has no client label',
      auditLines: r.audit.lines,
      clients: r.audit.userAgents,
      restWindowS: round(restS, 1),
      windows: { rest: [new Date(r.restWindow.from).toISOString(), new Date(r.restWindow.to).toISOString()], detection: [new Date(r.detectWindow.from).toISOString(), new Date(r.detectWindow.to).toISOString()] },
    },
    joinguard: jg,
    mhc,
    ratios: {
      note: 'MHC (CAPI core manager) ÷ JoinGuard; null = JoinGuard measured 0',
      detectionP50: ratio(mhc.detectionSeconds.p50, jg.detectionSeconds.p50),
      detectionP99: ratio(mhc.detectionSeconds.p99, jg.detectionSeconds.p99),
      restRequestsPerMin: ratio(mhc.restRequestsPerMin, jg.restRequestsPerMin),
      rss: ratio(mhc.rssMiB, jg.rssMiB),
    },
    targets: [
      target('p99 detection latency < 1 s', jg.detectionSeconds.p99, (jg.detectionSeconds.p99 ?? Infinity) < 1 && r.latency.joinguard.missed.length === 0),
      target('no requests at rest besides the watches', jgRest.requests, jgRest.requests === 0),
      target('RSS < 200 MiB (peak)', jg.peakRssMiB, (jg.peakRssMiB ?? Infinity) < 200),
      target('first complete reconcile < 10 s (from process spawn)', jg.firstFullReconcileS, (jg.firstFullReconcileS ?? Infinity) < 10),
      { name: 'wasted rebuilds in 24 h with defaults <= 7', measured: jgDefault, met: jgDefault <= 7, atScale: 'pool of 5' },
    ],
    restByClient: rest,
    rebuilds: r.rebuilds,
  };
}

export type Results = ReturnType<typeof buildResults>;

const f = (v: number | undefined | null, unit = '') => (v === undefined ? '—' : v === null ? 'n/a' : `${v}${unit}`);

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

export function renderTables(res: Results): string {
  const j = res.joinguard;
  const m = res.mhc;
  const main = table([
    ['', 'JoinGuard', 'MHC (CAPI core)', 'MHC ÷ JoinGuard'],
    ['stuck Machines marked', `${j.detection.marked}/${j.detection.stuck}`, `${m.detection.marked}/${m.detection.stuck}`, ''],
    ['detection p50', f(j.detectionSeconds.p50, ' s'), f(m.detectionSeconds.p50, ' s'), f(res.ratios.detectionP50, '×')],
    ['detection p99', f(j.detectionSeconds.p99, ' s'), f(m.detectionSeconds.p99, ' s'), f(res.ratios.detectionP99, '×')],
    ['detection max', f(j.detectionSeconds.max, ' s'), f(m.detectionSeconds.max, ' s'), ''],
    ['requests/min at rest (not watches)', f(j.restRequestsPerMin), f(m.restRequestsPerMin), f(res.ratios.restRequestsPerMin, '×')],
    ['watches opened/min at rest', f(j.restWatchOpensPerMin), f(m.restWatchOpensPerMin), ''],
    ['workload-cluster requests/min at rest', '0 (none made)', f(m.restWorkloadRequestsPerMin), ''],
    ['RSS at end', f(j.rssMiB, ' MiB'), f(m.rssMiB, ' MiB'), f(res.ratios.rss, '×')],
    ['peak RSS', f(j.peakRssMiB, ' MiB'), f(m.peakRssMiB, ' MiB'), ''],
    ['CPU seconds, whole run / at rest', `${f(j.cpuSeconds)} / ${f(j.cpuSecondsAtRest)}`, `${f(m.cpuSeconds)} / ${f(m.cpuSecondsAtRest)}`, ''],
    ['first complete reconcile (from spawn)', f(j.firstFullReconcileS, ' s'), '—', ''],
    ['  of which caches synced (list of everything)', f(j.readyS, ' s'), '—', ''],
  ]);
  const targets = table([['target', 'measured', 'met', 'scale'], ...res.targets.map((t) => [t.name, f(t.measured), t.met ? 'yes' : 'NO', t.atScale])]);
  const rb = table([['24 h expired credential, pool of 5', 'rebuilds', 'how', 'detail'], ...res.rebuilds.rows.map((r) => [r.guard, String(r.rebuilds), r.how, r.detail])]);
  return `${main}\n\n${targets}\n\n${rb}`;
}

export function printTable(res: Results): void {
  const s = res.setup.shape;
  process.stdout.write(
    `\nJoinGuard benchmark — ${s.machines} Machines (${s.resting} resting + ${s.stuck} stuck), ${s.clusters} Clusters, ` +
      `joinTimeout = nodeStartupTimeout = ${s.joinTimeoutS}s for stuck pools; ${res.run.host.cpus} CPUs; wall ${res.run.wallS} s\n\n${renderTables(res)}\n\n`,
  );
}
