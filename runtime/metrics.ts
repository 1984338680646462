// The metric families controller-runtime v0.24 serves (pkg/internal/controller/metrics, pkg/internal/metrics
// workqueue.go, pkg/metrics client_go_adapter.go and leaderelection.go), with the same names, types, labels and
// buckets, so that dashboards and alerts written for CAPI's managers work unchanged. Plus client-go's
// rest_client_request_duration_seconds (component-base's buckets), controller-runtime's webhook families
// (pkg/webhook/internal/metrics: they exist while the webhook server serves) and prom-client's process_* /
// nodejs_* families, unprefixed. Two of JoinGuard's own: joinguard_build_info and
// joinguard_leader_election_enabled (whether a replica elects; the alerts need to tell a replica without leader
// election from a standby). One Registry per process (per started controller in tests).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type ReconcileResult = 'success' | 'error' | 'requeue' | 'requeue_after';
const RESULTS: ReconcileResult[] = ['error', 'requeue_after', 'requeue', 'success'];

/** The hooks a WorkQueue calls (controller-runtime's priorityqueue metrics, item by item). */
export interface QueueMetrics {
  /** An item became ready in the lane of `priority` (a new ready item: adds_total, depth). */
  add(key: string, priority: number): void;
  /** A ready item moved to a higher lane. */
  promote(from: number, to: number): void;
  /** A worker took the item (depth, queue_duration_seconds). */
  get(key: string, priority: number): void;
  /** The worker finished the item (work_duration_seconds). */
  done(key: string): void;
  /** An add with a non-zero delay (timers, retries): retries_total, as controller-runtime counts it. */
  retry(): void;
}

/** One API request as the REST client saw it (client-go's RequestResult and RequestLatency). */
export interface RestRequest {
  method: string;
  host: string;
  /** HTTP status; 0 when no answer came (client-go's `<error>`). */
  code: number;
  seconds: number;
}

// controller-runtime's ReconcileTime buckets.
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75,
  2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
// prometheus.ExponentialBuckets(10e-9, 10, 12): 1e-8 .. 1e3.
const QUEUE_BUCKETS = Array.from({ length: 12 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));
// controller-runtime's webhook RequestLatency buckets: prometheus.ExponentialBuckets(10e-9, 10, 12).
const WEBHOOK_BUCKETS = QUEUE_BUCKETS;
// component-base's restclient requestLatency buckets.
const REST_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0];
// controller-runtime keeps priority labels below this many values (depthWithPriorityMetric).
const MAX_PRIORITIES = 25;

export class RuntimeMetrics {
  readonly registry = new Registry();
  private readonly processing = new Map<string, Map<string, number>>();

  readonly reconcileTotal = new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'Total number of reconciliations per controller',
    labelNames: ['controller', 'result'],
    registers: [this.registry],
  });
  readonly reconcileErrors = new Counter({
    name: 'controller_runtime_reconcile_errors_total',
    help: 'Total number of reconciliation errors per controller',
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly terminalErrors = new Counter({
    name: 'controller_runtime_terminal_reconcile_errors_total',
    help: 'Total number of terminal reconciliation errors per controller',
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly panics = new Counter({
    name: 'controller_runtime_reconcile_panics_total',
    help: 'Total number of reconciliation panics per controller',
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly timeouts = new Counter({
    name: 'controller_runtime_reconcile_timeouts_total',
    help: 'Total number of reconciliation timeouts per controller',
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly reconcileTime = new Histogram({
    name: 'controller_runtime_reconcile_time_seconds',
    help: 'Length of time per reconciliation per controller',
    labelNames: ['controller'],
    buckets: RECONCILE_BUCKETS,
    registers: [this.registry],
  });
  readonly workerCount = new Gauge({
    name: 'controller_runtime_max_concurrent_reconciles',
    help: 'Maximum number of concurrent reconciles per controller',
    labelNames: ['controller'],
    registers: [this.registry],
  });
  readonly activeWorkers = new Gauge({
    name: 'controller_runtime_active_workers',
    help: 'Number of currently used workers per controller',
    labelNames: ['controller'],
    registers: [this.registry],
  });

  readonly depth = new Gauge({
    name: 'workqueue_depth',
    help: 'Current depth of workqueue by workqueue and priority',
    labelNames: ['name', 'controller', 'priority'],
    registers: [this.registry],
  });
  readonly adds = new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue',
    labelNames: ['name', 'controller'],
    registers: [this.registry],
  });
  readonly queueLatency = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested',
    labelNames: ['name', 'controller'],
    buckets: QUEUE_BUCKETS,
    registers: [this.registry],
  });
  readonly workDuration = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes.',
    labelNames: ['name', 'controller'],
    buckets: QUEUE_BUCKETS,
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: 'workqueue_retries_total',
    help:
      'Total number of items added to the workqueue with a non-zero ' +
      'delay (rate-limited requeues, explicit RequeueAfter or AddAfter ' +
      'calls)',
    labelNames: ['name', 'controller'],
    registers: [this.registry],
  });
  // Read at scrape time from the items in progress (controller-runtime refreshes them every 500 ms).
  readonly unfinished: Gauge;
  readonly longestRunning: Gauge;

  readonly restRequests = new Counter({
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests, partitioned by status code, method, and host.',
    labelNames: ['code', 'method', 'host'],
    registers: [this.registry],
  });
  readonly restLatency = new Histogram({
    name: 'rest_client_request_duration_seconds',
    help: 'Request latency in seconds. Broken down by verb, and host.',
    labelNames: ['verb', 'host'],
    buckets: REST_BUCKETS,
    registers: [this.registry],
  });
  readonly webhookLatency = new Histogram({
    name: 'controller_runtime_webhook_latency_seconds',
    help: 'Histogram of the latency of processing admission requests',
    labelNames: ['webhook'],
    buckets: WEBHOOK_BUCKETS,
    registers: [this.registry],
  });
  readonly webhookRequests = new Counter({
    name: 'controller_runtime_webhook_requests_total',
    help: 'Total number of admission requests by HTTP status code.',
    labelNames: ['webhook', 'code'],
    registers: [this.registry],
  });
  readonly webhookInFlight = new Gauge({
    name: 'controller_runtime_webhook_requests_in_flight',
    help: 'Current number of admission requests being served.',
    labelNames: ['webhook'],
    registers: [this.registry],
  });
  readonly buildInfo = new Gauge({
    name: 'joinguard_build_info',
    help: 'Always 1: the version and git commit of the running JoinGuard',
    labelNames: ['version', 'git_commit'],
    registers: [this.registry],
  });
  readonly leaderElectionEnabled = new Gauge({
    name: 'joinguard_leader_election_enabled',
    help:
      '1 when this replica takes part in leader election on the ' +
      "Lease 'name', 0 when it runs without (--leader-elect=false: " +
      'it must be the only replica)',
    labelNames: ['name'],
    registers: [this.registry],
  });
  readonly leader = new Gauge({
    name: 'leader_election_master_status',
    help:
      'Gauge of if the reporting system is master of the relevant ' +
      "lease, 0 indicates backup, 1 indicates master. 'name' is " +
      'the string used to identify the lease. Please make sure ' +
      'to group by name.',
    labelNames: ['name'],
    registers: [this.registry],
  });

  constructor(o: { processMetrics?: boolean } = {}) {
    this.unfinished = this.inProgressGauge(
      'workqueue_unfinished_work_seconds',
      'How many seconds of work has been done that is in progress ' +
        "and hasn't been observed by work_duration. Large values " +
        'indicate stuck threads. One can deduce the number of stuck ' +
        'threads by observing the rate at which this increases.',
      (ages) => ages.reduce((s, x) => s + x, 0),
    );
    this.longestRunning = this.inProgressGauge(
      'workqueue_longest_running_processor_seconds',
      'How many seconds has the longest running processor for workqueue been running.',
      (ages) => ages.reduce((m, x) => Math.max(m, x), 0),
    );
    if (o.processMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** A per-queue gauge computed at scrape time from the ages (seconds) of the items being worked on. */
  private inProgressGauge(name: string, help: string, pick: (agesSeconds: number[]) => number): Gauge {
    const processing = this.processing;
    return new Gauge({
      name,
      help,
      labelNames: ['name', 'controller'],
      registers: [this.registry],
      collect() {
        const now = performance.now();
        for (const [queue, started] of processing) {
          this.set({ name: queue, controller: queue }, pick([...started.values()].map((t) => (now - t) / 1000)));
        }
      },
    });
  }

  /** controller-runtime's initMetrics: every series of the controller exists from the start, at 0. */
  registerController(controller: string, maxConcurrentReconciles: number): void {
    for (const result of RESULTS) this.reconcileTotal.inc({ controller, result }, 0);
    for (const c of [this.reconcileErrors, this.terminalErrors, this.panics, this.timeouts]) c.inc({ controller }, 0);
    this.workerCount.set({ controller }, maxConcurrentReconciles);
    this.activeWorkers.set({ controller }, 0);
  }

  reconcileStarted(controller: string): void {
    this.activeWorkers.inc({ controller });
  }

  reconcileDone(controller: string, result: ReconcileResult, seconds: number): void {
    this.activeWorkers.dec({ controller });
    this.reconcileTotal.inc({ controller, result });
    if (result === 'error') this.reconcileErrors.inc({ controller });
    this.reconcileTime.observe({ controller }, seconds);
  }

  /** The hooks of the work queue `name` (controller-runtime names a controller's queue after it). */
  queue(name: string): QueueMetrics {
    const labels = { name, controller: name };
    const addedAt = new Map<string, number>();
    const started = new Map<string, number>();
    this.processing.set(name, started);
    // Like the metrics provider's WithLabelValues at queue creation: every series but depth exists at 0.
    this.adds.inc(labels, 0);
    this.retries.inc(labels, 0);
    this.queueLatency.zero(labels);
    this.workDuration.zero(labels);
    this.unfinished.set(labels, 0);
    this.longestRunning.set(labels, 0);
    const seen = new Set<number>();
    const priority = (p: number): string => {
      if (seen.size >= MAX_PRIORITIES && !seen.has(p)) return 'exceeded_cardinality_limit';
      seen.add(p);
      return String(p);
    };
    return {
      add: (key, p) => {
        this.adds.inc(labels);
        this.depth.inc({ ...labels, priority: priority(p) });
        if (!addedAt.has(key)) addedAt.set(key, performance.now());
      },
      promote: (from, to) => {
        this.depth.dec({ ...labels, priority: priority(from) });
        this.depth.inc({ ...labels, priority: priority(to) });
      },
      get: (key, p) => {
        this.depth.dec({ ...labels, priority: priority(p) });
        const now = performance.now();
        started.set(key, now);
        const t = addedAt.get(key);
        if (t !== undefined) this.queueLatency.observe(labels, (now - t) / 1000);
        addedAt.delete(key);
      },
      done: (key) => {
        const t = started.get(key);
        if (t !== undefined) this.workDuration.observe(labels, (performance.now() - t) / 1000);
        started.delete(key);
      },
      retry: () => this.retries.inc(labels),
    };
  }

  /** RestClient's onRequest: client-go's request result counter and latency histogram. */
  readonly restRequest = (r: RestRequest): void => {
    const method = r.method.toUpperCase();
    this.restRequests.inc({ code: r.code === 0 ? '<error>' : String(r.code), method, host: r.host });
    this.restLatency.observe({ verb: method, host: r.host }, r.seconds);
  };

  /**
   * The hooks of one admission webhook (controller-runtime's InstrumentedHook), by path. Its series exist from
   * this call, as controller-runtime initializes codes 200 and 500, until `remove()`: the webhook server calls it
   * once it listens and removes it when it stops, so "no replica serves the webhook" is their absence.
   */
  webhook(path: string): { start(): (code: number) => void; remove(): void } {
    const lbl = { webhook: path };
    const codes = new Set(['200', '500']);
    for (const code of codes) this.webhookRequests.inc({ ...lbl, code }, 0);
    this.webhookInFlight.set(lbl, 0);
    this.webhookLatency.zero(lbl);
    return {
      // One admission request: in flight until the returned function is called with its HTTP status.
      start: () => {
        const t = performance.now();
        this.webhookInFlight.inc(lbl);
        let ended = false;
        return (code: number) => {
          if (ended) return;
          ended = true;
          this.webhookInFlight.dec(lbl);
          codes.add(String(code));
          this.webhookRequests.inc({ ...lbl, code: String(code) });
          this.webhookLatency.observe(lbl, (performance.now() - t) / 1000);
        };
      },
      remove: () => {
        for (const code of codes) this.webhookRequests.remove({ ...lbl, code });
        this.webhookInFlight.remove(lbl);
        this.webhookLatency.remove(lbl);
      },
    };
  }

  /** joinguard_build_info. */
  setBuildInfo(version: string, gitCommit: string): void {
    this.buildInfo.set({ version, git_commit: gitCommit }, 1);
  }

  /** Whether this replica elects on the Lease `name` (joinguard_leader_election_enabled). */
  leaderElection(name: string, enabled: boolean): void {
    this.leaderElectionEnabled.set({ name }, enabled ? 1 : 0);
  }

  /** LeaderElector's onStatus: 1 while leading the Lease `name`, 0 as a standby. */
  leaderStatus(name: string, leading: boolean): void {
    this.leader.set({ name }, leading ? 1 : 0);
  }
}
