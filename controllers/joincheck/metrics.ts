// Prometheus metrics, prefix `joinguard_`, on a registry of their own (so tests can run two controllers).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { MachineJoinCheckStatus, RemediationRecord } from '../../api/v1alpha1/types.js';
import type { MachineVerdict } from './types.js';

export class ControllerMetrics {
  readonly registry = new Registry();
  readonly machines = new Gauge({ name: 'joinguard_machines', help: 'Machines in scope of a check, by state', labelNames: ['namespace', 'check', 'state'], registers: [this.registry] });
  readonly remediations = new Counter({ name: 'joinguard_remediations_total', help: 'Remediation records by path and outcome (each outcome counted once per Machine)', labelNames: ['path', 'outcome'], registers: [this.registry] });
  readonly suspicions = new Counter({ name: 'joinguard_suspicions_raised_total', help: 'BootstrapCredentialSuspect suspicions raised', labelNames: ['namespace', 'check'], registers: [this.registry] });
  readonly joinDuration = new Histogram({
    name: 'joinguard_join_duration_seconds',
    help: 'Time from the join clock start to the Node, of Machines that joined while watched',
    buckets: [15, 30, 60, 120, 180, 300, 450, 600, 900, 1200, 1800, 3600],
    registers: [this.registry],
  });
  readonly reconcileDuration = new Histogram({
    name: 'joinguard_reconcile_duration_seconds',
    help: 'Time of one reconcile of a check',
    labelNames: ['result'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  readonly writes = new Counter({ name: 'joinguard_api_writes_total', help: 'Writes made, by kind and result', labelNames: ['write', 'result'], registers: [this.registry] });
  readonly watchRestarts = new Gauge({ name: 'joinguard_watch_restarts', help: 'List+watch restarts after errors or silence, by informer', labelNames: ['informer'], registers: [this.registry] });
  private readonly states = new Map<string, Set<string>>();
  private readonly seenOutcomes = new Set<string>();
  private readonly watching = new Map<string, { start: number }>();

  constructor(defaults = true) {
    if (defaults) collectDefaultMetrics({ register: this.registry, prefix: 'joinguard_process_' });
  }

  /** Updates gauges and counters from one applied plan. */
  observe(ns: string, check: string, verdicts: MachineVerdict[], prev: MachineJoinCheckStatus, next: MachineJoinCheckStatus, now: number): void {
    const counts = new Map<string, number>();
    for (const v of verdicts) counts.set(v.state, (counts.get(v.state) ?? 0) + 1);
    const key = `${ns}/${check}`;
    const had = this.states.get(key) ?? new Set();
    for (const s of had) if (!counts.has(s)) this.machines.set({ namespace: ns, check, state: s }, 0);
    for (const [s, n] of counts) this.machines.set({ namespace: ns, check, state: s }, n);
    this.states.set(key, new Set(counts.keys()));

    for (const r of next.remediations ?? []) this.countOutcome(r);
    if (next.suspicion && next.suspicion.since !== prev.suspicion?.since) this.suspicions.inc({ namespace: ns, check });

    // Join durations of Machines this process saw joining.
    for (const v of verdicts) {
      const id = v.uid;
      if (v.state === 'Joining' && v.clockStart !== undefined) this.watching.set(id, { start: v.clockStart });
      else if (v.state === 'Joined') {
        const w = this.watching.get(id);
        if (w) this.joinDuration.observe(Math.max(0, (now - w.start) / 1000));
        this.watching.delete(id);
      } else if (v.state !== 'Stuck' && v.state !== 'Held') this.watching.delete(id);
    }
  }

  private countOutcome(r: RemediationRecord): void {
    const k = `${r.uid}|${r.outcome}`;
    if (this.seenOutcomes.has(k)) return;
    this.seenOutcomes.add(k);
    if (this.seenOutcomes.size > 100_000) this.seenOutcomes.clear();
    this.remediations.inc({ path: r.path, outcome: r.outcome });
  }

  forget(ns: string, check: string): void {
    for (const s of this.states.get(`${ns}/${check}`) ?? []) this.machines.remove({ namespace: ns, check, state: s });
    this.states.delete(`${ns}/${check}`);
  }
}
