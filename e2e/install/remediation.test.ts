// The controller under the add-on's own identity: installed from the components as clusterctl would, it runs
// with a TokenRequest token of the ServiceAccount `joinguard-controller-manager` (bound only to the
// manifests' ClusterRole and Lease Role) and completes a remediation with CAPI's real controllers — proving
// the RBAC is enough. The worker's infrastructure is provisioned by the test (stand-in-providers.ts) and its
// Node never comes; JoinGuard marks it through the remediation contract and the MachineSet replaces it.
import { expect } from 'chai';
import { Writable } from 'node:stream';
import winston from 'winston';
import { Watch } from '@kubernetes/client-node';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { startController } from '../../controllers/manager.js';
import { clusterAccessFromKubeconfig } from '../../runtime/client/kubeconfig.js';
import { install, raw, type Installed } from './install-env.js';
import { CERT_MANAGER_START_TIMEOUT_MS } from '../support/cert-manager.js';
import {
  createMachineSet,
  createReadyCluster,
  ensureStandInCrds,
  machinesOf,
  provisionInfrastructure,
} from './stand-in-providers.js';
import type { RunningController } from '../../controllers/options.js';

type Json = Record<string, any>;
const CAPI = '/apis/cluster.x-k8s.io/v1beta2';
const CLUSTER = 'c1';
const POOL = 'c1-md-0';
const LEASE = 'joinguard-install-test';

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Every object version a watch delivers, into `into`. client-node ends a watch after 30 s without an event,
 * so it is started again from the last resourceVersion seen until stop().
 */
function recordAll(w: Watch, path: string, into: Json[]): { stop(): void } {
  let stopped = false;
  let current: AbortController | undefined;
  let rv: string | undefined;
  const start = async (): Promise<void> => {
    if (stopped) return;
    current = await w.watch(
      path,
      { allowWatchBookmarks: true, ...(rv ? { resourceVersion: rv } : {}) },
      (type, obj: Json) => {
        rv = obj?.metadata?.resourceVersion ?? rv;
        if (type !== 'BOOKMARK') into.push(obj);
      },
      () => void setTimeout(() => void start().catch(() => undefined), 100),
    );
    if (stopped) current.abort();
  };
  void start().catch(() => undefined);
  return {
    stop() {
      stopped = true;
      current?.abort();
    },
  };
}

const condition = (m: Json, type: string): Json | undefined =>
  (m.status?.conditions ?? []).find((c: Json) => c.type === type);

describe('install: the controller under the add-on ServiceAccount completes a remediation', function () {
  this.timeout(180_000);
  let env: TestEnv;
  let installed: Installed;
  let controller: RunningController | undefined;
  let recorder: { stop(): void } | undefined;
  const ns = `jg-remediate-${process.pid}`;
  const fleet = `jg-remediate-fleet-${process.pid}`;
  // Every version of every Machine seen, so that a mark that lives only until CAPI deletes it is not missed.
  const seen: Json[] = [];
  const logged: Json[] = [];
  let stuck: Json;

  before(async function () {
    this.timeout(CERT_MANAGER_START_TIMEOUT_MS);
    env = await getTestEnv();
    installed = await install(env, ns);
    const admin = env.kubeConfig();
    await ensureStandInCrds(admin);
    expect((await raw(admin, 'POST', '/api/v1/namespaces', { metadata: { name: fleet } })).status).to.equal(201);
    await createReadyCluster(admin, fleet, CLUSTER, env.server, env.kubeconfigPath);
    recorder = recordAll(new Watch(admin), `${CAPI}/namespaces/${fleet}/machines`, seen);
    await createMachineSet(admin, fleet, CLUSTER, POOL, 1);

    // The first Machine: its infrastructure comes up, its Node never does.
    stuck = await until(
      'the MachineSet to create a Machine',
      60_000,
      async () => (await machinesOf(admin, fleet, POOL))[0],
    );
    await provisionInfrastructure(admin, fleet, stuck);
    stuck = await until('the Machine to reach phase Provisioned', 60_000, async () => {
      const m = (await machinesOf(admin, fleet, POOL)).find((x) => x.metadata.uid === stuck.metadata.uid);
      return m?.status?.phase === 'Provisioned' ? m : undefined;
    });
    await until('the Cluster to be observable (RemoteConnectionProbe=True)', 60_000, async () => {
      const c = JSON.parse((await raw(admin, 'GET', `${CAPI}/namespaces/${fleet}/clusters/${CLUSTER}`)).body) as Json;
      return condition(c, 'RemoteConnectionProbe')?.status === 'True' ? true : undefined;
    });

    // Admitted through the add-on's webhooks (with the short-timeout warning).
    const check = await raw(admin, 'POST', `/apis/joinguard.io/v1alpha1/namespaces/${fleet}/machinejoinchecks`, {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: { name: POOL },
      spec: {
        clusterName: CLUSTER,
        selector: { matchLabels: { pool: POOL } },
        joinTimeout: '15s',
        remediation: { strategy: 'OwnerRemediated' },
      },
    });
    expect(check.status, check.body).to.equal(201);
    expect(check.warnings.join()).to.match(/joinTimeout/);

    // Every log entry, as an object: the last test reads the warnings and errors.
    const collect = new winston.transports.Stream({
      stream: new Writable({ objectMode: true, write: (info: Json, _enc, done) => (logged.push(info), done()) }),
    });
    controller = await startController({
      access: clusterAccessFromKubeconfig(installed.sa.exportConfig()),
      namespace: fleet,
      leaderElect: true,
      leaderElectionNamespace: ns,
      leaderElectionId: LEASE,
      identity: 'install-test',
      // The Cluster connected moments ago; verdicts wait this long after a (re)connection (default 2m).
      connectionGraceMs: 2_000,
      metricsBindAddress: '127.0.0.1:0',
      healthProbeBindAddress: '127.0.0.1:0',
      collectDefaultMetrics: false,
      logger: winston.createLogger({ level: 'info', transports: [collect] }),
    });
  });

  after(async () => {
    await controller?.stop();
    recorder?.stop();
    // CAPI deletes the Cluster's MachineSet and Machines itself, so nothing of this spec keeps CAPI busy.
    if (env) await raw(env.kubeConfig(), 'DELETE', `${CAPI}/namespaces/${fleet}/clusters/${CLUSTER}`);
    await installed?.uninstall();
  });

  it('takes the Lease in the provider Namespace and syncs its caches', async () => {
    await controller!.ready();
    const lease = JSON.parse(
      (await raw(env.kubeConfig(), 'GET', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${LEASE}`)).body,
    ) as Json;
    expect(lease.spec?.holderIdentity).to.equal('install-test');
  });

  it('marks the Machine for its owner: HealthCheckSucceeded=False/JoinTimeout, OwnerRemediated=False (v1beta2)', async () => {
    const marked = await until('JoinGuard to mark the Machine', 90_000, async () =>
      seen.find(
        (m) => m.metadata.uid === stuck.metadata.uid && condition(m, 'HealthCheckSucceeded')?.status === 'False',
      ),
    );
    expect(condition(marked, 'HealthCheckSucceeded')).to.deep.include({ status: 'False', reason: 'JoinTimeout' });
    expect(condition(marked, 'OwnerRemediated')?.status).to.equal('False');
    // Nobody but JoinGuard writes HealthCheckSucceeded here (there is no MachineHealthCheck).
    const mhcs = JSON.parse(
      (await raw(env.kubeConfig(), 'GET', `${CAPI}/namespaces/${fleet}/machinehealthchecks`)).body,
    ) as Json;
    expect(mhcs.items).to.deep.equal([]);
  });

  it("CAPI's MachineSet controller deletes it and creates a replacement", async () => {
    const admin = env.kubeConfig();
    await until('the stuck Machine to be gone', 90_000, async () => {
      const res = await raw(admin, 'GET', `${CAPI}/namespaces/${fleet}/machines/${stuck.metadata.name}`);
      return res.status === 404 ? true : undefined;
    });
    expect(
      seen.some(
        (m) => m.metadata.uid === stuck.metadata.uid && condition(m, 'OwnerRemediated')?.reason === 'MachineDeleting',
      ),
    ).to.equal(true);
    const replacement = await until('a replacement Machine', 60_000, async () =>
      (await machinesOf(admin, fleet, POOL)).find((m) => m.metadata.uid !== stuck.metadata.uid),
    );
    expect(replacement.metadata.ownerReferences?.[0]).to.deep.include({ kind: 'MachineSet', name: POOL });
  });

  it('records the remediation in the check status as Replaced', async () => {
    const record = await until('status.remediations to say Replaced', 60_000, async () => {
      const check = JSON.parse(
        (
          await raw(
            env.kubeConfig(),
            'GET',
            `/apis/joinguard.io/v1alpha1/namespaces/${fleet}/machinejoinchecks/${POOL}`,
          )
        ).body,
      ) as Json;
      return ((check.status?.remediations ?? []) as Json[]).find(
        (r) => r.uid === stuck.metadata.uid && r.outcome === 'Replaced',
      );
    });
    expect(record).to.deep.include({ machine: stuck.metadata.name, path: 'OwnerRemediated', kind: 'JoinTimeout' });
  });

  it('left Events on the Machine (created under the same identity)', async () => {
    const list = JSON.parse(
      (
        await raw(
          env.kubeConfig(),
          'GET',
          `/api/v1/namespaces/${fleet}/events?fieldSelector=${encodeURIComponent(`involvedObject.uid=${stuck.metadata.uid}`)}`,
        )
      ).body,
    ) as Json;
    const ours = (list.items as Json[]).filter((e) => e.source?.component === 'joinguard');
    // JoinTimedOut only when the Machine was held before it was asked (docs/decisions/requests-marks-and-withdrawal.md, "Events only for writes that happened"): the request says it.
    const requested = ours.find((e) => e.reason === 'RemediationRequested');
    expect(requested?.message, JSON.stringify(ours.map((e) => e.reason))).to.match(
      /: JoinTimeout\. JoinGuard asks for its replacement via path OwnerRemediated/,
    );
    expect(requested?.type).to.equal('Warning');
  });

  it('was refused nothing along the way (no 403 in its requests or its log), and never deleted a Machine (no delete grant)', async () => {
    const text = await controller!.metrics.registry.metrics();
    expect(text).not.to.match(/rest_client_requests_total\{code="403"/);
    expect(text).not.to.match(/method="DELETE"/);
    const problems = logged
      .filter((l) => l.level === 'warn' || l.level === 'error')
      .map((l) => `${l.level}: ${l.message} ${l['error'] ?? ''}`);
    expect(problems.filter((p) => /\b403\b|forbidden/i.test(p))).to.deep.equal([]);
  });

  it('is refused what the manifests do not grant: the Cluster kubeconfig Secret (workload-node check off)', async () => {
    const res = await raw(installed.sa, 'GET', `/api/v1/namespaces/${fleet}/secrets/${CLUSTER}-kubeconfig`);
    expect(res.status, res.body).to.equal(403);
  });
});
