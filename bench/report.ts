// The results of one `npm run bench`: bench/results.json, compact (every phase's figures, each stuck Machine's
// latency, the `summary` of medians over the runs and the objects of the other cases: bench/summary.ts), and a raw
// file out of the tree (bench/runs/, git-ignored) with what recomputes every figure from its inputs: each stuck
// Machine's times, the audit counts of every window, JoinGuard's memory series. Only measured values go in.
import fs from 'node:fs';
import os from 'node:os';
import type { FleetShape } from './fleet.js';
import type { Timing } from './phase-kit.js';
import type { RebuildResult } from './rebuilds.js';
import type { SessionResult } from './session.js';
import { round } from './stats.js';
import { phaseSummary } from './phase-summary.js';
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
      ...(b.session.fleet ? { fleet: b.session.fleet } : {}),
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
        'one control plane and one fleet for every phase of the invocation, the fleet built through CAPI once, saved as etcd data and restored (bench/fleet-cache.ts; run.fleet): per Cluster a paused KubeadmControlPlane (3 control-plane Machines with their KubeadmConfigs), paused MachineSets of resting workers (each Machine with a KubeadmConfig), the MachineHealthChecks a ClusterClass makes (control plane, resting workers: 365 days), every Cluster labelled with a shard; each phase adds its own stuck Machines to the watch pools and deletes them when it ends (bench/fleet-objects.ts)',
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
