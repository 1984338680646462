// Issue 12, "Must show": /metrics scraped as Prometheus scrapes a CAPI manager — over HTTPS, with a
// ServiceAccount token the real kube-apiserver authenticates (TokenReview) and authorizes (SubjectAccessReview)
// through the shipped joinguard-metrics-reader ClusterRole; 401 without a token, 403 with a token lacking the
// role; controller-runtime's families with their labels, and JoinGuard's for a check.
import { clusterAccessFromKubeconfig } from '../../runtime/client/kubeconfig.js';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { startController } from '../../controllers/manager.js';
import { substitute } from '../../manifests/substitute.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { waitFor } from '../support/cluster-view.js';
import { CapturedLog, createCheck, installJoinGuardCrd } from '../support/joinguard.js';
import { getTestEnv } from '../support/testenv.js';
import type { RunningController } from '../../controllers/options.js';

interface Scrape {
  code: number;
  body: string;
  peerSubject?: string;
  peerSan?: string;
}

function scrape(port: number, token?: string, path = '/metrics'): Promise<Scrape> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      {
        host: '127.0.0.1',
        port,
        path,
        rejectUnauthorized: false,
        agent: false,
        ...(token ? { headers: { Authorization: `Bearer ${token}` } } : {}),
      },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerCertificate();
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () =>
          resolve({
            code: res.statusCode ?? 0,
            body,
            peerSubject: String(peer.subject?.CN),
            peerSan: peer.subjectaltname,
          }),
        );
      },
    );
    req.on('error', reject);
  });
}

/** Label names of the first sample of a family (histograms: of its _bucket, without `le`). */
function labelsOf(text: string, family: string): string[] | undefined {
  const m = new RegExp(`^${family}(?:_bucket)?\\{([^}]*)\\} `, 'm').exec(text);
  return m
    ? [...m[1]!.matchAll(/([a-z_]+)="/g)]
        .map((x) => x[1]!)
        .filter((l) => l !== 'le')
        .sort()
    : undefined;
}

describe('operate: /metrics over HTTPS behind TokenReview and SubjectAccessReview (real kube-apiserver)', function () {
  this.timeout(240_000);
  const ns = `jg-metrics-${process.pid}`;
  const binding = `jg-metrics-reader-${process.pid}`;
  const lease = `jg-metrics-${process.pid}`;
  let kube: KubeClient;
  let controller: RunningController | undefined;
  const log = new CapturedLog('info');
  let readerToken = '';
  let otherToken = '';
  let role: Json;

  before(async () => {
    const env = await getTestEnv();
    kube = env.kube();
    await installJoinGuardCrd(kube);
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    for (const sa of ['prometheus', 'other']) {
      await kube.create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
        apiVersion: 'v1',
        kind: 'ServiceAccount',
        metadata: { name: sa },
      });
    }
    // The ClusterRole as shipped (manifests/rbac/metrics_reader.yaml), bound to one ServiceAccount only.
    // (The file also holds the ServiceMonitor's reader ServiceAccount, its token Secret and binding: the ClusterRole is the first.)
    role = parseAllDocuments(
      substitute(await readFile(new URL('../../manifests/rbac/metrics_reader.yaml', import.meta.url), 'utf8'), {}),
    )
      .map((d) => d.toJS() as Json)
      .find((o) => o.kind === 'ClusterRole')!;
    const roles = '/apis/rbac.authorization.k8s.io/v1/clusterroles';
    if (await kube.get(`${roles}/${role.metadata.name}`)) await kube.delete(`${roles}/${role.metadata.name}`);
    await kube.create(roles, role);
    await kube.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: binding },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name },
      subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: ns }],
    });
    const token = async (sa: string) =>
      (
        await kube.create(`/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { expirationSeconds: 600 },
        })
      ).status.token as string;
    readerToken = await token('prometheus');
    otherToken = await token('other');

    controller = await startController({
      access: clusterAccessFromKubeconfig(env.kubeConfig().exportConfig()),
      namespace: ns,
      logger: log.logger,
      metricsBindAddress: '127.0.0.1:0',
      healthProbeBindAddress: '127.0.0.1:0',
      leaderElect: true,
      leaderElectionNamespace: ns,
      leaderElectionId: lease,
    });
    await controller.ready();
    await createCheck(kube, ns, 'workers', {
      clusterName: 'nowhere',
      selector: { matchLabels: { pool: 'workers' } },
      joinTimeout: '10m',
    });
    await waitFor('the check reconciled once', async () => controller!.reconciledChecks().has(`${ns}/workers`), {
      timeoutMs: 30_000,
      describe: async () => log.tail(20),
    });
  });

  after(async () => {
    await controller?.stop();
    await kube?.delete(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${binding}`);
    if (role) await kube?.delete(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${role.metadata.name}`);
    kube?.close();
  });

  it('serves HTTPS with a self-signed certificate for localhost and 127.0.0.1, and 401 without a token', async () => {
    const r = await scrape(controller!.metricsPort!);
    expect(r).to.include({ code: 401, body: 'Unauthorized\n', peerSubject: 'localhost' });
    expect(r.peerSan).to.include('IP Address:127.0.0.1');
    expect((await scrape(controller!.metricsPort!, 'not-a-token')).code).to.equal(401);
  });

  it('403 with a ServiceAccount token whose user lacks the metrics-reader role', async () => {
    const r = await scrape(controller!.metricsPort!, otherToken);
    expect(r).to.include({ code: 403, body: `Authorization denied for user system:serviceaccount:${ns}:other\n` });
  });

  it("200 with the role: controller-runtime's families with their labels, and JoinGuard's", async () => {
    const r = await scrape(controller!.metricsPort!, readerToken);
    expect(r.code, r.body).to.equal(200);
    const t = r.body;
    const want: Record<string, string[]> = {
      controller_runtime_reconcile_total: ['controller', 'result'],
      controller_runtime_reconcile_errors_total: ['controller'],
      controller_runtime_reconcile_time_seconds: ['controller'],
      controller_runtime_active_workers: ['controller'],
      controller_runtime_max_concurrent_reconciles: ['controller'],
      workqueue_depth: ['controller', 'name', 'priority'],
      workqueue_adds_total: ['controller', 'name'],
      workqueue_queue_duration_seconds: ['controller', 'name'],
      workqueue_work_duration_seconds: ['controller', 'name'],
      workqueue_retries_total: ['controller', 'name'],
      workqueue_unfinished_work_seconds: ['controller', 'name'],
      workqueue_longest_running_processor_seconds: ['controller', 'name'],
      rest_client_requests_total: ['code', 'host', 'method'],
      rest_client_request_duration_seconds: ['host', 'verb'],
      leader_election_master_status: ['name'],
      joinguard_check_condition: ['check', 'cluster_name', 'cluster_namespace', 'reason', 'status', 'type'],
      joinguard_api_writes_total: ['result', 'write'],
      // What the alerts and the fleet dashboard read (issue 30).
      joinguard_check_condition_last_transition_timestamp_seconds: [
        'check',
        'cluster_name',
        'cluster_namespace',
        'reason',
        'status',
        'type',
      ],
      joinguard_write_refused_machines: ['check', 'cluster_name', 'cluster_namespace', 'write'],
      joinguard_last_remediation_finished_timestamp_seconds: ['check', 'cluster_name', 'cluster_namespace'],
      joinguard_past_deadline_seconds: ['check', 'cluster_name', 'cluster_namespace'],
    };
    for (const [family, labels] of Object.entries(want)) expect(labelsOf(t, family), family).to.deep.equal(labels);
    expect(t).to.match(/^controller_runtime_reconcile_total\{controller="machinejoincheck",result="success"\} [1-9]/m);
    expect(t).to.include('controller_runtime_max_concurrent_reconciles{controller="machinejoincheck"} 2');
    expect(t).to.include(`leader_election_master_status{name="${lease}"} 1`);
    expect(t).to.match(/^rest_client_requests_total\{code="200",method="GET",host="127\.0\.0\.1:\d+"\} [1-9]/m);
    expect(t).to.match(
      new RegExp(
        `^joinguard_check_condition\\{cluster_namespace="${ns}",check="workers",cluster_name="nowhere",type="[A-Za-z]+",status="(True|False|Unknown)",reason="[A-Za-z]*"\\} 1$`,
        'm',
      ),
    );
    for (const family of [
      'process_resident_memory_bytes',
      'process_cpu_seconds_total',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(t, family).to.match(new RegExp(`^${family} [0-9.e+-]+$`, 'm'));
    }
    expect(t).not.to.include('joinguard_process_');
  });

  it('the probes answer on their own address, plain HTTP: /readyz ok once caches synced', async () => {
    const res = await fetch(`http://127.0.0.1:${controller!.healthPort}/readyz`);
    expect(res.status).to.equal(200);
    expect((await fetch(`http://127.0.0.1:${controller!.healthPort}/healthz`)).status).to.equal(200);
  });
});
