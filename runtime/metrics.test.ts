// The exposition as Prometheus scrapes it: controller-runtime v0.24's family names, types, label names and
// buckets, fed through the hooks the controller, the REST client and the elector call. Unit tests, no fakes.
import { expect } from 'chai';
import { RuntimeMetrics } from './metrics.js';

/** `# TYPE` of every family, and the label names of each family's first sample. */
function families(text: string): Map<string, { type: string; labels: string[] }> {
  const out = new Map<string, { type: string; labels: string[] }>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(m[1]!, { type: m[2]!, labels: [] });
  for (const m of text.matchAll(/^([a-z_]+?)(?:_bucket|_sum|_count)?\{([^}]*)\} /gm)) {
    const f = out.get(m[1]!) ?? out.get(m[1]!.replace(/_(bucket|sum|count)$/, ''));
    if (f && f.labels.length === 0)
      f.labels = [...m[2]!.matchAll(/([a-z_]+)="/g)]
        .map((x) => x[1]!)
        .filter((l) => l !== 'le')
        .sort();
  }
  return out;
}

describe('RuntimeMetrics', () => {
  it("serves controller-runtime's families with their types and labels", async () => {
    const m = new RuntimeMetrics();
    m.registerController('machinejoincheck', 2);
    m.reconcileStarted('machinejoincheck');
    m.reconcileDone('machinejoincheck', 'requeue_after', 0.2);
    const q = m.queue('machinejoincheck');
    q.add('ns/a', 1);
    q.get('ns/a', 1);
    q.done('ns/a');
    q.retry();
    m.restRequest({ method: 'get', host: '127.0.0.1:6443', code: 200, seconds: 0.01 });
    m.leaderStatus('joinguard-leader', true);
    const f = families(await m.registry.metrics());
    const want: Record<string, [string, string[]]> = {
      controller_runtime_reconcile_total: ['counter', ['controller', 'result']],
      controller_runtime_reconcile_errors_total: ['counter', ['controller']],
      controller_runtime_terminal_reconcile_errors_total: ['counter', ['controller']],
      controller_runtime_reconcile_panics_total: ['counter', ['controller']],
      controller_runtime_reconcile_timeouts_total: ['counter', ['controller']],
      controller_runtime_reconcile_time_seconds: ['histogram', ['controller']],
      controller_runtime_max_concurrent_reconciles: ['gauge', ['controller']],
      controller_runtime_active_workers: ['gauge', ['controller']],
      workqueue_depth: ['gauge', ['controller', 'name', 'priority']],
      workqueue_adds_total: ['counter', ['controller', 'name']],
      workqueue_queue_duration_seconds: ['histogram', ['controller', 'name']],
      workqueue_work_duration_seconds: ['histogram', ['controller', 'name']],
      workqueue_unfinished_work_seconds: ['gauge', ['controller', 'name']],
      workqueue_longest_running_processor_seconds: ['gauge', ['controller', 'name']],
      workqueue_retries_total: ['counter', ['controller', 'name']],
      rest_client_requests_total: ['counter', ['code', 'host', 'method']],
      rest_client_request_duration_seconds: ['histogram', ['host', 'verb']],
      leader_election_master_status: ['gauge', ['name']],
      process_resident_memory_bytes: ['gauge', []],
      process_cpu_seconds_total: ['counter', []],
      nodejs_heap_size_used_bytes: ['gauge', []],
      nodejs_eventloop_lag_seconds: ['gauge', []],
    };
    for (const [name, [type, labels]] of Object.entries(want)) {
      expect(f.get(name), name).to.deep.equal({ type, labels });
    }
    expect(
      [...f.keys()].filter((n) => n.startsWith('joinguard_process') || n.includes('process_process')),
    ).to.deep.equal([]);
  });

  it('counts reconciles like controller-runtime: every result at 0 from the start, errors twice', async () => {
    const m = new RuntimeMetrics({ processMetrics: false });
    m.registerController('machinejoincheck', 4);
    let text = await m.registry.metrics();
    for (const r of ['success', 'error', 'requeue', 'requeue_after'])
      expect(text).to.include(`controller_runtime_reconcile_total{controller="machinejoincheck",result="${r}"} 0`);
    expect(text).to.include('controller_runtime_max_concurrent_reconciles{controller="machinejoincheck"} 4');
    m.reconcileStarted('machinejoincheck');
    m.reconcileStarted('machinejoincheck');
    text = await m.registry.metrics();
    expect(text).to.include('controller_runtime_active_workers{controller="machinejoincheck"} 2');
    m.reconcileDone('machinejoincheck', 'error', 0.3);
    m.reconcileDone('machinejoincheck', 'success', 61);
    text = await m.registry.metrics();
    expect(text).to.include('controller_runtime_active_workers{controller="machinejoincheck"} 0');
    expect(text).to.include('controller_runtime_reconcile_errors_total{controller="machinejoincheck"} 1');
    expect(text).to.include('controller_runtime_reconcile_total{controller="machinejoincheck",result="error"} 1');
    // controller-runtime's buckets end at 60; 61 s lands in +Inf only.
    expect(text).to.include(
      'controller_runtime_reconcile_time_seconds_bucket{le="60",controller="machinejoincheck"} 1',
    );
    expect(text).to.include(
      'controller_runtime_reconcile_time_seconds_bucket{le="+Inf",controller="machinejoincheck"} 2',
    );
  });

  it("labels REST requests as client-go does (code, method, host; <error> without an answer) and the lease's status", async () => {
    const m = new RuntimeMetrics({ processMetrics: false });
    m.restRequest({ method: 'PUT', host: 'api:6443', code: 409, seconds: 0.02 });
    m.restRequest({ method: 'GET', host: 'api:6443', code: 0, seconds: 30 });
    m.leaderStatus('joinguard-leader', false);
    let text = await m.registry.metrics();
    expect(text).to.include('rest_client_requests_total{code="409",method="PUT",host="api:6443"} 1');
    expect(text).to.include('rest_client_requests_total{code="<error>",method="GET",host="api:6443"} 1');
    expect(text).to.include('rest_client_request_duration_seconds_bucket{le="0.025",verb="PUT",host="api:6443"} 1');
    expect(text).to.include('leader_election_master_status{name="joinguard-leader"} 0');
    m.leaderStatus('joinguard-leader', true);
    text = await m.registry.metrics();
    expect(text).to.include('leader_election_master_status{name="joinguard-leader"} 1');
  });
  it("serves controller-runtime's webhook families while the webhook serves, and none once it stopped", async () => {
    const m = new RuntimeMetrics({ processMetrics: false });
    const path = '/validate-joinguard-io-v1alpha1-machinejoincheck';
    expect(await m.registry.metrics()).not.to.match(/^controller_runtime_webhook_\w+\{/m);
    const hooks = m.webhook(path);
    let text = await m.registry.metrics();
    // controller-runtime's InstrumentedHook: codes 200 and 500 exist at 0 from registration.
    expect(text).to.include(`controller_runtime_webhook_requests_total{webhook="${path}",code="200"} 0`);
    expect(text).to.include(`controller_runtime_webhook_requests_total{webhook="${path}",code="500"} 0`);
    expect(text).to.include(`controller_runtime_webhook_requests_in_flight{webhook="${path}"} 0`);
    const end = hooks.start();
    expect(await m.registry.metrics()).to.include(`controller_runtime_webhook_requests_in_flight{webhook="${path}"} 1`);
    end(200);
    end(200); // once only
    hooks.start()(400);
    text = await m.registry.metrics();
    expect(text).to.include(`controller_runtime_webhook_requests_total{webhook="${path}",code="200"} 1`);
    expect(text).to.include(`controller_runtime_webhook_requests_total{webhook="${path}",code="400"} 1`);
    expect(text).to.include(`controller_runtime_webhook_requests_in_flight{webhook="${path}"} 0`);
    expect(text).to.include(`controller_runtime_webhook_latency_seconds_count{webhook="${path}"} 2`);
    const f = families(text);
    expect(f.get('controller_runtime_webhook_latency_seconds')).to.deep.equal({
      type: 'histogram',
      labels: ['webhook'],
    });
    expect(f.get('controller_runtime_webhook_requests_total')).to.deep.equal({
      type: 'counter',
      labels: ['code', 'webhook'],
    });
    expect(f.get('controller_runtime_webhook_requests_in_flight')).to.deep.equal({
      type: 'gauge',
      labels: ['webhook'],
    });
    hooks.remove();
    expect(await m.registry.metrics()).not.to.match(/^controller_runtime_webhook_\w+\{/m);
  });

  it('says whether a replica elects (joinguard_leader_election_enabled) and which build it is', async () => {
    const m = new RuntimeMetrics({ processMetrics: false });
    m.leaderElection('joinguard-shard-a', false);
    m.setBuildInfo('v0.1.0', 'abc123');
    const text = await m.registry.metrics();
    expect(text).to.include('joinguard_leader_election_enabled{name="joinguard-shard-a"} 0');
    expect(text).to.include('joinguard_build_info{version="v0.1.0",git_commit="abc123"} 1');
  });
});
