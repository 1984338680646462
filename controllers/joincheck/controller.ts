// The MachineJoinCheck controller: the caches (cache.ts) map each object event to the checks it concerns and
// enqueue their keys; a worker takes a key, builds the check's snapshot and hands it to the executor, which
// converges the world to the plan. Work is level-triggered: each reconcile ends by arming a timer at the plan's
// next deadline (deadline wake-ups go ahead of event work), and every check is reconciled again each sync period.
import type { Logger } from 'winston';
import type { CapiApiVersion } from '../../api/capi/model.js';
import { API_VERSION, KIND, type MachineJoinCheckStatus } from '../../api/v1alpha1/types.js';
import { machineLogger, reconcileLogger } from '../../runtime/logger.js';
import type { ReconcileResult, RuntimeMetrics } from '../../runtime/metrics.js';
import { WorkQueue } from '../../runtime/informers/queue.js';
import type { Json, RestClient } from '../../runtime/client/rest.js';
import { DEFAULT_CONCURRENCY, MACHINEJOINCHECK_CONTROLLER } from '../options.js';
import { Caches } from './world/cache.js';
import type { EventRecorder } from './act/events.js';
import { execute } from './act/executor.js';
import { Refusals } from './act/refusals.js';
import type { CheckRef, JoinGuardMetrics } from './report/metrics.js';
import type { ExecutorDeps } from './act/deps.js';
import type { CapiInfo, Plan, PlannedEvent, PreviousView, SnapshotSource } from './types.js';
import { tlsAnswers, type WorkloadNodeReader } from './world/workload-access.js';

type WorkloadNodes = NonNullable<Awaited<ReturnType<WorkloadNodeReader['nodesFor']>>>;

export interface JoinCheckControllerOptions {
  rest: RestClient;
  apiVersion: CapiApiVersion;
  /** The CAPI minor release, when discovery found it (features such as MachineCondition need one). */
  capiMinor?: number;
  kubeadm: { controlPlane: boolean; bootstrap: boolean };
  namespace?: string;
  /** Only Clusters labelled cluster.x-k8s.io/watch-filter=<value>, and what belongs to them. */
  watchFilter?: string;
  log: Logger;
  metrics: JoinGuardMetrics;
  /** controller-runtime's families: reconcile counts and times, the queue's. */
  runtimeMetrics?: RuntimeMetrics;
  events: EventRecorder;
  clock: () => number;
  livenessMs: number;
  connectionGraceMs?: number;
  /** A visible mark nobody acted on for this long is withdrawn (default 15m; the e2e shortens it). */
  unansweredAfterMs?: number;
  /** --allow-machine-delete: strategy Delete may delete Machines. */
  allowMachineDelete?: boolean;
  workloadNodes?: WorkloadNodeReader;
  workers?: number;
  /** Every check is reconciled again this often (CAPI's managers: 10m). */
  syncPeriodMs?: number;
}

const CONTROLLER_NAME = MACHINEJOINCHECK_CONTROLLER.name;
const PROBE_TIMEOUT_MS = 3_000;
/** Workers until every check has been reconciled once (at least --machinejoincheck-concurrency). */
const WARMUP_WORKERS = 8;

export class JoinCheckController {
  readonly queue: WorkQueue;
  readonly caches: Caches;
  private readonly capi: CapiInfo;
  private readonly views = new Map<string, PreviousView>();
  private readonly probes = new Map<string, { reachable: boolean; at: number }>();
  private readonly probing = new Set<string>();
  private readonly statusWrites = new Map<string, number>();
  /** Per check: Machines whose writes are refused, with their back-off. */
  private readonly refusals = new Map<string, Refusals>();
  private readonly loggedProblems = new Map<string, string>();
  readonly reconciled = new Set<string>();
  private fullAt?: number;
  private started = false;
  private resync?: NodeJS.Timeout;

  constructor(private readonly o: JoinCheckControllerOptions) {
    this.queue = new WorkQueue(o.clock, o.runtimeMetrics?.queue(CONTROLLER_NAME));
    this.capi = { apiVersion: o.apiVersion, ...(o.capiMinor !== undefined ? { minor: o.capiMinor } : {}) };
    this.caches = new Caches({
      rest: o.rest,
      apiVersion: o.apiVersion,
      kubeadm: o.kubeadm,
      ...(o.namespace ? { namespace: o.namespace } : {}),
      ...(o.watchFilter !== undefined ? { watchFilter: o.watchFilter } : {}),
      log: o.log,
      livenessMs: o.livenessMs,
      enqueue: (key) => this.queue.add(key),
      onRestart: (informer) => o.metrics.watchRestart(informer),
      onCurrent: (informer, current) => this.onInformerCurrent(informer, current),
    });
  }

  /**
   * The decision gate (runtime wiring): after any list/watch failed, no check is reconciled until every cache has
   * synced again, so that no mark is decided from a view some cache had before an outage (issue 16: marks written
   * while the MachineHealthCheck and KubeadmControlPlane caches still backed off). Every check is reconciled
   * once the gate opens again.
   */
  private held = false;
  private onInformerCurrent(informer: string, current: boolean): void {
    const gate = this.caches.current();
    if (!current && !this.held && this.started) {
      this.held = true;
      this.o.log.info('Decisions held until every cache has re-listed', { informer, reason: gate.why });
    } else if (gate.ok && this.held) {
      this.held = false;
      this.o.log.info('Every cache has re-listed; decisions resume');
      this.enqueueAll();
    }
  }

  startInformers(): void {
    this.caches.start();
  }

  async synced(): Promise<void> {
    await this.caches.synced();
  }

  hasSynced(): boolean {
    return this.caches.hasSynced();
  }

  /** Readiness: caches synced and no informer without a live watch past its liveness bound. */
  health(): { ok: boolean; why?: string } {
    if (!this.caches.hasSynced()) return { ok: false, why: 'caches not synced yet' };
    return this.caches.health();
  }

  watchRestarts(): Record<string, number> {
    return this.caches.restarts();
  }

  /** Starts the workers (after the caches synced and, with leader election, the Lease is held). */
  startWorkers(): void {
    this.started = true;
    const workers = this.o.workers ?? DEFAULT_CONCURRENCY;
    this.queue.run(workers, (key) => this.reconcile(key));
    // Until every check has been reconciled once, more workers: a start's first pass is mostly waiting on writes
    // (each check's status and metadata), so the first complete reconcile comes sooner (issue 18 §4).
    this.queue.runWhile(
      Math.max(0, WARMUP_WORKERS - workers),
      (key) => this.reconcile(key),
      () => this.fullAt === undefined,
    );
    this.enqueueAll();
    const period = this.o.syncPeriodMs;
    if (period !== undefined && period > 0) {
      const tick = () => {
        this.enqueueAll();
        // Jittered like controller-runtime's resync, so that replicas and restarts spread out.
        this.resync = setTimeout(tick, period * (0.9 + Math.random() * 0.2));
      };
      this.resync = setTimeout(tick, period);
    }
  }

  private enqueueAll(): void {
    for (const k of this.caches.checkKeys()) if (!this.caches.filteredOut(k)) this.queue.add(k);
  }

  async stop(): Promise<void> {
    clearTimeout(this.resync);
    this.caches.stop();
    await this.queue.shutdown();
    await this.o.events.flush();
  }

  firstFullReconcileAt(): number | undefined {
    return this.fullAt;
  }

  get isStarted(): boolean {
    return this.started;
  }

  async reconcile(key: string): Promise<void> {
    const started = process.hrtime.bigint();
    const [ns, name] = key.split('/') as [string, string];
    const entry = this.caches.checks.store.get(key);
    const cluster = typeof entry?.raw?.spec?.clusterName === 'string' ? entry.raw.spec.clusterName : '';
    const ref = { namespace: ns, check: name, cluster };
    let result: ReconcileResult = 'success';
    this.o.runtimeMetrics?.reconcileStarted(CONTROLLER_NAME);
    const log = reconcileLogger(this.o.log, MACHINEJOINCHECK_CONTROLLER, {
      namespace: ns,
      name,
      ...(cluster ? { cluster } : {}),
    });
    try {
      if (entry === undefined) return this.forget(key, ref);
      if (this.caches.filteredOut(key)) {
        log.debug('the Cluster is outside --watch-filter: left alone');
        return;
      }
      const gate = this.caches.current();
      if (!gate.ok) {
        log.debug(`decision held: ${gate.why}`); // reconciled again when the gate opens
        return;
      }
      const target = this.o.workloadNodes ? this.caches.anyUnjoined(key) : undefined;
      const workloadNodes = target ? await this.o.workloadNodes!.nodesFor(target.namespace, target.cluster) : undefined;
      let refusals = this.refusals.get(key);
      if (refusals === undefined) this.refusals.set(key, (refusals = new Refusals()));
      const r = await execute(this.executorDeps(key, log, refusals), this.snapshotSource(key, refusals, workloadNodes));
      this.keepPlan(key, r.plan, ref, entry.raw.status ?? {}, log);
      if (r.statusWrittenAt !== undefined) this.statusWrites.set(key, r.statusWrittenAt);
      this.queue.succeeded(key);
      if (r.requeueAfterMs !== undefined) this.queue.addAfter(key, r.requeueAfterMs);
      if (r.wakeAt !== undefined) this.queue.addAfter(key, Math.max(0, r.wakeAt - this.o.clock()) + 5);
      if (r.requeueAfterMs !== undefined || r.wakeAt !== undefined) result = 'requeue_after';
      this.markReconciled(key);
    } catch (e) {
      result = 'error';
      const delay = this.queue.retry(key);
      log.error('Reconciler error, retrying', { err: (e as Error).message, retryInMs: delay });
    } finally {
      const refused = this.refusals.get(key);
      if (refused !== undefined && this.caches.checks.store.get(key) !== undefined)
        this.o.metrics.refused(ref, refused.list());
      this.o.runtimeMetrics?.reconcileDone(CONTROLLER_NAME, result, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  private executorDeps(key: string, log: Logger, refusals: Refusals): ExecutorDeps {
    return {
      rest: this.o.rest,
      apiVersion: this.o.apiVersion,
      log,
      emit: (e, check) => this.emit(e, check, log),
      writeMetric: (write, res) => this.o.metrics.write(write, res),
      remember: (kind, raw) => this.caches.remember(kind, raw),
      refusals,
      ...(this.statusWrites.has(key) ? { lastStatusWrite: this.statusWrites.get(key)! } : {}),
      now: this.o.clock,
    };
  }

  /** The check's snapshot from the caches, with what this process remembers of it between reconciles. */
  private snapshotSource(key: string, refusals: Refusals, workloadNodes: WorkloadNodes | undefined): SnapshotSource {
    return {
      build: (live) =>
        this.caches.snapshot(key, live, this.capi, {
          ...(this.views.has(key) ? { previous: this.views.get(key)! } : {}),
          ...(this.probes.has(key) ? { endpointProbe: this.probes.get(key)! } : {}),
          ...(workloadNodes ? { workloadNodes } : {}),
          ...(this.o.connectionGraceMs !== undefined ? { connectionGraceMs: this.o.connectionGraceMs } : {}),
          ...(this.o.unansweredAfterMs !== undefined ? { unansweredAfterMs: this.o.unansweredAfterMs } : {}),
          allowMachineDelete: this.o.allowMachineDelete === true,
          refusedWrites: refusals.list(),
          now: this.o.clock(),
        }),
    };
  }

  /** An applied plan: its view kept for the next reconcile, its notes logged once, its probe started, its metrics. */
  private keepPlan(key: string, p: Plan | undefined, ref: CheckRef, prev: MachineJoinCheckStatus, log: Logger): void {
    if (p === undefined) return;
    this.views.set(key, p.view);
    this.logOnce(key, log, p.memoryNotes);
    if (p.probe !== undefined) this.probe(key, p.probe.host, p.probe.port, log);
    this.o.metrics.observe(ref, p.verdicts, prev, p.status, this.o.clock(), p.settledInScope);
    this.caches.consumed(key);
  }

  private forget(key: string, ref: { namespace: string; check: string; cluster: string }): void {
    this.queue.forget(key);
    for (const m of [this.views, this.probes, this.statusWrites, this.loggedProblems, this.refusals]) m.delete(key);
    this.reconciled.delete(key);
    this.o.metrics.forget(ref);
  }

  /** The endpoint probe runs off the worker; its answer reconciles the check again. */
  private probe(key: string, host: string, port: number, log: Logger): void {
    if (this.probing.has(key)) return;
    this.probing.add(key);
    void tlsAnswers(host, port, PROBE_TIMEOUT_MS).then((reachable) => {
      this.probing.delete(key);
      this.probes.set(key, { reachable, at: this.o.clock() });
      log.info(`control-plane endpoint ${host}:${port} ${reachable ? 'answers' : 'does not answer'}`, {
        endpoint: `${host}:${port}`,
      });
      this.queue.add(key);
    });
  }

  private emit(e: PlannedEvent, check: Json, log: Logger): void {
    const target =
      e.on === 'Machine'
        ? {
            apiVersion: `cluster.x-k8s.io/${this.o.apiVersion}`,
            kind: 'Machine',
            name: e.machine.name,
            namespace: e.machine.namespace,
            uid: e.machine.uid,
          }
        : {
            apiVersion: API_VERSION,
            kind: KIND,
            name: check.metadata.name,
            namespace: check.metadata.namespace,
            uid: check.metadata.uid,
          };
    this.o.events.record(target, e.reason, e.message, e.warning);
    (e.on === 'Machine' ? machineLogger(log, e.machine.namespace, e.machine.name) : log).info(e.message, {
      event: e.reason,
    });
  }

  private markReconciled(key: string): void {
    this.reconciled.add(key);
    if (this.fullAt !== undefined) return;
    for (const k of this.caches.checkKeys()) if (!this.reconciled.has(k)) return;
    this.fullAt = this.o.clock();
  }

  /** What could not be read (objects, status values) is logged once per change, never acted on. */
  private logOnce(key: string, log: Logger, notes: string[]): void {
    const text = notes.join(' | ');
    if ((this.loggedProblems.get(key) ?? '') === text) return;
    this.loggedProblems.set(key, text);
    for (const n of notes) log.warn(`status value not trusted: ${n}`);
  }
}
