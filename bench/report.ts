// The results of one `npm run bench`: bench/results.json, compact (every phase's figures, each stuck Machine's
// latency, the `summary` of medians over the runs and the objects of the other cases: bench/summary.ts), and a raw
// file out of the tree (bench/runs/, git-ignored) with what recomputes every figure from its inputs: each stuck
// Machine's times, the audit counts of every window, JoinGuard's memory series. Only measured values go in.
import fs from 'node:fs';
import os from 'node:os';
import {
  cost,
  heapAndGc,
  isCore,
  isCoreWorkload,
  isJoinGuardWorkload,
  ofUser,
  perMark,
  reconcileSeconds,
} from './cost.js';
import { USER_JOINGUARD } from './env.js';
import type { FleetShape } from './fleet.js';
import type { SideDetection } from './latency.js';
import type { PhaseResult } from './phase.js';
import type { Timing } from './phase-kit.js';
import type { RebuildResult } from './rebuilds.js';
import type { SessionResult } from './session.js';
import { mib, round } from './stats.js';
import { buildSummary, caseObjects, targets } from './summary.js';

function host() {
  const mem = fs.readFileSync('/proc/meminfo', 'utf8');
  const memKiB = Number(/^MemTotal:\s+(\d+)/m.exec(mem)?.[1] ?? 0);
  return {
    cpus: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memTotalGiB: round(memKiB / 1024 / 1024, 1),
    kernel: os.release(),
    node: process.version,
  };
}

/** Over every stuck Machine, censored ones included (bench/latency.ts); the latencies kept to recompute them. */
export const detectionFields = (d: SideDetection | undefined) =>
  d && {
    stuck: d.stuck,
    marked: d.marked,
    censored: d.censored,
    early: d.early,
    falseMarks: d.falseMarks.length,
    how: d.how,
    p50AllS: d.p50?.s,
    p99AllS: d.p99?.s,
    p99AllCensored: d.p99?.censored,
    maxAllS: d.max?.s,
    maxAllCensored: d.max?.censored,
    markedOnlyP99S: d.markedOnly.p99,
    latenciesMs: d.latenciesMs,
  };

const userOf = (label: string) => (label === 'joinguard' ? USER_JOINGUARD : label);
const secondsFrom = (a: number, b: number | undefined) => (b === undefined ? undefined : round((b - a) / 1000, 2));

/** One phase, compact: what the summary and the tables read. */
export function phaseSummary(p: PhaseResult) {
  const proc = p.joinguard.find((f) => f.firstReconcileAt !== undefined) ?? p.joinguard[0];
  const jgCost = proc && cost(p, proc.label, ofUser(userOf(proc.label)), isJoinGuardWorkload);
  const core = cost(p, 'capi-core', isCore, isCoreWorkload);
  const recon = reconcileSeconds(p.edges.detectionStart, p.edges.detectionEnd);
  const allRecon = Object.values(recon).reduce((a, v) => a + v, 0);
  const mhcMarks = p.detection.mhc?.marked ?? 0;
  return {
    id: p.id,
    kind: p.kind,
    repeat: p.repeat,
    measured: p.measured,
    durationS: p.durationS,
    ...(p.error ? { error: p.error } : {}),
    timeoutS: p.timeoutS,
    loadavg: Object.fromEntries(Object.entries(p.edges).map(([k, e]) => [k, e.loadavg])),
    detection: Object.fromEntries(Object.entries(p.detection).map(([s, d]) => [s, detectionFields(d)])),
    ...(p.race
      ? {
          race: {
            joinguardFirst: p.race.joinguardFirst,
            mhcFirst: p.race.mhcFirst.length,
            neither: p.race.neither.length,
          },
        }
      : {}),
    joinguard: proc && {
      processes: p.joinguard.map((f) => ({
        label: f.label,
        readyS: secondsFrom(f.spawnedAt, f.readyAt),
        firstReconcileS: secondsFrom(f.spawnedAt, f.firstReconcileAt),
        checks: f.checks,
        peakRssMiB: mib(f.hwmKiB),
        memoryPeakMiB: f.memoryPeakMiB,
        memoryLimit: f.memoryLimit,
        cpuLimit: f.cpuLimit,
        throttling: f.throttling,
        logLines: f.logLines,
        exit: f.exit,
      })),
      readyS: secondsFrom(proc.spawnedAt, proc.readyAt),
      firstReconcileS: secondsFrom(proc.spawnedAt, proc.firstReconcileAt),
      peakRssMiB: mib(proc.hwmKiB),
      memoryPeakMiB: proc.memoryPeakMiB,
      // Two shards: per shard below (the first process's requests over every shard's marks would say nothing).
      ...perMark(jgCost!, p.shards ? 0 : (p.detection.joinguard?.marked ?? 0)),
      atRest: jgCost!.atRest,
      cpuSeconds: jgCost!.cpuSeconds,
      startupRequests: jgCost!.startup?.requests,
      heapAtEnd: heapAndGc(p.edges.detectionStart, p.edges.detectionEnd),
    },
    core: {
      phasePeakRssMiB: mib(p.phasePeakKiB['capi-core']),
      rssAtDetectionStartMiB: core.rssAtDetectionStartMiB,
      cpuSeconds: core.cpuSeconds,
      atRest: core.atRest,
      detectionRequests: core.detection?.nonLeaseRequests,
      detectionSeconds: core.detection?.seconds,
      requestsPerMark: perMark(core, mhcMarks).requestsPerMark,
      reconcileSecondsDetection: recon,
      mhcShareOfReconcileTimeDetection: allRecon ? round((recon['machinehealthcheck'] ?? 0) / allRecon, 3) : undefined,
    },
    apiserverPhasePeakRssMiB: mib(p.phasePeakKiB['kube-apiserver']),
    etcdPhasePeakRssMiB: mib(p.phasePeakKiB['etcd']),
    ...(p.burst ? { burst: p.burst } : {}),
    ...(p.failover ? { failover: { ...p.failover, detection: detectionFields(p.failover.detection) } } : {}),
    ...(p.relist ? { relist: { ...p.relist, detection: detectionFields(p.relist.detection) } } : {}),
    ...(p.replicas
      ? {
          replicas: {
            ...p.replicas,
            // Each replica's VmHWM when the events began: the standby's is what a warm standby holds.
            hwmAtEventsStartMiB: Object.fromEntries(
              Object.entries(p.edges.eventsStart?.proc ?? {})
                .filter(([k]) => k.startsWith('joinguard'))
                .map(([k, s]) => [k, mib(s?.hwmKiB)]),
            ),
          },
        }
      : {}),
    ...(p.shards
      ? {
          shards: p.shards.map((s) => {
            const f = p.joinguard.find((x) => x.label === `joinguard-${s.name}`);
            const c = cost(p, `joinguard-${s.name}`, ofUser(s.user), () => false);
            return {
              name: s.name,
              clusters: s.clusters,
              peakRssMiB: mib(f?.hwmKiB),
              memoryPeakMiB: f?.memoryPeakMiB,
              memoryLimit: f?.memoryLimit,
              firstReconcileS: f && secondsFrom(f.spawnedAt, f.firstReconcileAt),
              ...detectionFields(s.detection),
              markedByOtherShard: s.markedByOtherShard?.length,
              markedByThisShard: s.markedByThisShard,
              ...perMark(c, s.detection.marked),
              requests: s.audit?.requests,
              requestsOutsideShard: s.audit?.outside,
              unfilteredListsOrWatches: s.audit?.unfilteredListsOrWatches,
              unfilteredListsOrWatchesByResource: s.audit?.unfilteredByResource,
              outsideExamples: s.audit?.outsideExamples,
              writers: s.writers,
            };
          }),
        }
      : {}),
  };
}

export type PhaseSummary = ReturnType<typeof phaseSummary>;

export interface BenchInputs {
  machines: number;
  smoke: boolean;
  shape: FleetShape;
  timing: Timing;
  plan: string[];
  nodeOptions: string;
  cpuLimit: string;
  wallS: number;
  session: Pick<SessionResult, 'fleetS' | 'phases'> & Partial<SessionResult>;
  rebuilds: RebuildResult;
  commit: string;
  /** The in-memory 100,000-Machine sharded run, kept from the results file when it was run apart (`--shards`). */
  sharded100k?: unknown;
}

export function buildResults(b: BenchInputs) {
  const phases = b.session.phases.map(phaseSummary);
  const summary = buildSummary(phases, b.machines);
  return {
    run: {
      date: new Date().toISOString(),
      commit: b.commit,
      machines: b.machines,
      smoke: b.smoke,
      wallS: round(b.wallS, 1),
      fleetS: b.session.fleetS,
      plan: b.plan,
      ...(b.session.aborted ? { aborted: b.session.aborted } : {}),
      host: host(),
      joinguardNodeOptions: b.nodeOptions,
      joinguardMemoryLimit: phases.find((p) => p.joinguard)?.joinguard?.processes[0]?.memoryLimit,
      cpuLimitOfPhaseCpu: b.cpuLimit,
    },
    setup: {
      shape: b.shape,
      timing: b.timing,
      fleet:
        'one control plane and one fleet for every phase of the invocation: per Cluster a paused KubeadmControlPlane (3 control-plane Machines with their KubeadmConfigs), paused MachineSets of resting workers (each Machine with a KubeadmConfig), the MachineHealthChecks a ClusterClass makes (control plane, resting workers: 24h), every Cluster labelled with a shard; each phase adds its own stuck Machines to the watch pools and deletes them when it ends (bench/fleet-objects.ts)',
      requestCounting:
        'apiserver audit log (level Metadata, blocking mode, checked complete against apiserver_audit_event_total/error_total): apiserver_request_total has no client label',
      apiserverRequestTotalLabels: b.session.apiserverRequestTotalLabels,
      clients: b.session.audit?.userAgents,
      auditIntegrity: b.session.audit?.integrity,
    },
    summary,
    ...caseObjects(phases),
    sharded100k: b.sharded100k ?? null,
    targets: targets(summary, phases, b.rebuilds, b.machines),
    phases,
    rebuilds: b.rebuilds,
  };
}

export type Results = ReturnType<typeof buildResults>;

/** What recomputes the figures, for the raw file: per stuck Machine its inputs and marks, the audit counts, series. */
export function rawOf(b: BenchInputs) {
  return {
    commit: b.commit,
    shape: b.shape,
    phases: b.session.phases.map((p) => ({
      id: p.id,
      windows: p.windows,
      machineRows: p.machineRows,
      audit: p.audit,
      apiserverLatency: p.apiserverLatency,
      joinguardFirstWrites: p.joinguardFirstWrites,
      edges: p.edges,
    })),
  };
}
