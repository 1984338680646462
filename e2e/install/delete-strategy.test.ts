// remediation.strategy Delete under the add-on's own identity, installed with JOINGUARD_ALLOW_MACHINE_DELETE=true:
// the ServiceAccount (a TokenRequest token, bound only to the manifests' roles, the Machine delete role among them)
// deletes the worker that never gets a Node itself, and CAPI's real MachineSet controller replaces it. The default
// install grants no delete (e2e/install/rbac.test.ts); e2e/install/remediation.test.ts runs a remediation under it. Without
// --allow-machine-delete the same grant deletes nothing: the flag, not only the role, holds strategy Delete back.
import { expect } from 'chai';
import { Writable } from 'node:stream';
import winston from 'winston';
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
const POOL = 'c1-md-del';

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** JoinGuard under the add-on's ServiceAccount, with or without --allow-machine-delete; its log lines collected. */
async function startJoinGuard(
  installed: Installed,
  ns: string,
  fleet: string,
  allowMachineDelete: boolean,
  logged: Json[],
): Promise<RunningController> {
  const collect = new winston.transports.Stream({
    stream: new Writable({ objectMode: true, write: (info: Json, _e, done) => (logged.push(info), done()) }),
  });
  // As in the pod: --namespace names what is watched (the fleet); the Lease goes to the pod's namespace, the add-on's
  // (controller-runtime's rule, issue 19 item 1), found from $POD_NAMESPACE — no leaderElectionNamespace given.
  const before = process.env['POD_NAMESPACE'];
  process.env['POD_NAMESPACE'] = ns;
  try {
    return await startController({
      access: clusterAccessFromKubeconfig(installed.sa.exportConfig()),
      namespace: fleet,
      leaderElect: true,
      leaderElectionId: 'joinguard-delete-test',
      identity: `delete-test-${allowMachineDelete}`,
      allowMachineDelete,
      connectionGraceMs: 2_000,
      metricsBindAddress: '127.0.0.1:0',
      healthProbeBindAddress: '127.0.0.1:0',
      collectDefaultMetrics: false,
      logger: winston.createLogger({ level: 'info', transports: [collect] }),
    });
  } finally {
    if (before === undefined) delete process.env['POD_NAMESPACE'];
    else process.env['POD_NAMESPACE'] = before;
  }
}

describe('install: strategy Delete under the add-on ServiceAccount with JOINGUARD_ALLOW_MACHINE_DELETE=true, with and without --allow-machine-delete', function () {
  this.timeout(180_000);
  let env: TestEnv;
  let installed: Installed;
  let controller: RunningController | undefined;
  const ns = `jg-delete-${process.pid}`;
  const fleet = `jg-delete-fleet-${process.pid}`;
  const logged: Json[] = [];
  let stuck: Json;

  before(async function () {
    this.timeout(CERT_MANAGER_START_TIMEOUT_MS);
    env = await getTestEnv();
    installed = await install(env, ns, { JOINGUARD_ALLOW_MACHINE_DELETE: 'true' });
    const deployment = installed.components.objects.find((o) => o.kind === 'Deployment') as Json;
    expect(deployment.spec.template.spec.containers[0].args).to.include('--allow-machine-delete=true');
    const admin = env.kubeConfig();
    await ensureStandInCrds(admin);
    expect((await raw(admin, 'POST', '/api/v1/namespaces', { metadata: { name: fleet } })).status).to.equal(201);
    await createReadyCluster(admin, fleet, CLUSTER, env.server, env.kubeconfigPath);
    await createMachineSet(admin, fleet, CLUSTER, POOL, 1);
    stuck = await until(
      'the MachineSet to create a Machine',
      60_000,
      async () => (await machinesOf(admin, fleet, POOL))[0],
    );
    await provisionInfrastructure(admin, fleet, stuck);
    await until('the Machine to reach phase Provisioned', 60_000, async () => {
      const m = (await machinesOf(admin, fleet, POOL)).find((x) => x.metadata.uid === stuck.metadata.uid);
      return m?.status?.phase === 'Provisioned' ? m : undefined;
    });
    await until('the Cluster to be observable (RemoteConnectionProbe=True)', 60_000, async () => {
      const c = JSON.parse((await raw(admin, 'GET', `${CAPI}/namespaces/${fleet}/clusters/${CLUSTER}`)).body) as Json;
      return (c.status?.conditions ?? []).some((x: Json) => x.type === 'RemoteConnectionProbe' && x.status === 'True')
        ? true
        : undefined;
    });
    const check = await raw(admin, 'POST', `/apis/joinguard.io/v1alpha1/namespaces/${fleet}/machinejoinchecks`, {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: { name: POOL },
      spec: {
        clusterName: CLUSTER,
        selector: { matchLabels: { pool: POOL } },
        joinTimeout: '15s',
        remediation: { strategy: 'Delete' },
      },
    });
    expect(check.status, check.body).to.equal(201);
  });

  after(async () => {
    await controller?.stop();
    if (env) await raw(env.kubeConfig(), 'DELETE', `${CAPI}/namespaces/${fleet}/clusters/${CLUSTER}`);
    await installed?.uninstall();
  });

  it('without --allow-machine-delete (the delete role granted all the same): no delete is attempted, Ready=False/MachineDeleteNotAllowed names the flag', async () => {
    const admin = env.kubeConfig();
    const off = await startJoinGuard(installed, ns, fleet, false, []);
    try {
      const ready = await until(
        'Ready=False/MachineDeleteNotAllowed and the stuck Machine held back',
        90_000,
        async () => {
          const c = JSON.parse(
            (await raw(admin, 'GET', `/apis/joinguard.io/v1alpha1/namespaces/${fleet}/machinejoinchecks/${POOL}`)).body,
          ) as Json;
          const r = ((c.status?.conditions ?? []) as Json[]).find((x) => x.type === 'Ready');
          return r?.reason === 'MachineDeleteNotAllowed' &&
            String(r.message).includes(`Held back: ${stuck.metadata.name}`)
            ? r
            : undefined;
        },
      );
      expect(ready.status).to.equal('False');
      expect(ready.message).to.contain('--allow-machine-delete').and.contain('JOINGUARD_ALLOW_MACHINE_DELETE=true');
      // Held back means past its deadline: a plan decided about it, and still no DELETE left the process.
      await new Promise((r) => setTimeout(r, 3_000));
      expect(await off.metrics.registry.metrics()).not.to.match(
        /rest_client_requests_total\{code="[0-9]+",method="DELETE"/,
      );
      expect((await raw(admin, 'GET', `${CAPI}/namespaces/${fleet}/machines/${stuck.metadata.name}`)).status).to.equal(
        200,
      );
      const c = JSON.parse(
        (await raw(admin, 'GET', `/apis/joinguard.io/v1alpha1/namespaces/${fleet}/machinejoinchecks/${POOL}`)).body,
      ) as Json;
      expect(c.status?.requests ?? []).to.deep.equal([]);
    } finally {
      await off.stop();
    }
  });

  it('deletes the stuck worker itself, and the MachineSet replaces it', async () => {
    const admin = env.kubeConfig();
    controller = await startJoinGuard(installed, ns, fleet, true, logged);
    await controller.ready();
    // It leads from a Lease in the add-on's namespace, where the shipped Role grants Leases; none in the watched one.
    const lease = JSON.parse(
      (await raw(admin, 'GET', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/joinguard-delete-test`)).body,
    ) as Json;
    expect(lease.spec?.holderIdentity).to.equal('delete-test-true');
    expect(
      (await raw(admin, 'GET', `/apis/coordination.k8s.io/v1/namespaces/${fleet}/leases/joinguard-delete-test`)).status,
    ).to.equal(404);
    await until('the stuck Machine to be gone', 120_000, async () =>
      (await raw(admin, 'GET', `${CAPI}/namespaces/${fleet}/machines/${stuck.metadata.name}`)).status === 404
        ? true
        : undefined,
    );
    const record = await until('status.remediations to record the Delete', 60_000, async () => {
      const c = JSON.parse(
        (await raw(admin, 'GET', `/apis/joinguard.io/v1alpha1/namespaces/${fleet}/machinejoinchecks/${POOL}`)).body,
      ) as Json;
      return ((c.status?.remediations ?? []) as Json[]).find((r) => r.uid === stuck.metadata.uid);
    });
    expect(record).to.deep.include({ machine: stuck.metadata.name, path: 'Delete', kind: 'JoinTimeout' });
    const replacement = await until('a replacement Machine', 60_000, async () =>
      (await machinesOf(admin, fleet, POOL)).find((m) => m.metadata.uid !== stuck.metadata.uid),
    );
    expect(replacement.metadata.ownerReferences?.[0]).to.deep.include({ kind: 'MachineSet', name: POOL });
  });

  it('the delete came from the ServiceAccount, which was refused nothing (no 403 in its requests or its log)', async () => {
    const text = await controller!.metrics.registry.metrics();
    expect(text).to.match(/rest_client_requests_total\{code="200",method="DELETE",host="[^"]+"\} [1-9]/);
    expect(text).not.to.match(/rest_client_requests_total\{code="403"/);
    const problems = logged
      .filter((l) => l.level === 'warn' || l.level === 'error')
      .map((l) => `${l.level}: ${l.message} ${l['err'] ?? l['error'] ?? ''}`);
    expect(problems.filter((p) => /\b403\b|forbidden/i.test(p))).to.deep.equal([]);
  });
});
