// The test control plane itself: versions, CAPI CRDs, managers, conversion and admission webhooks,
// and that stopping it leaves nothing behind. Runs against the shared env of getTestEnv().
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ApiextensionsV1Api, ApiException, CoreV1Api, CustomObjectsApi, VersionApi } from '@kubernetes/client-node';
import { getTestEnv, stopTestEnv, type TestEnv } from '../support/testenv.js';
import { stopSim } from '../support/shared-sim.js';
import { startTestEnv } from '../../hack/testenv/testenv.js';
import { groupAlive, pidAlive } from '../../hack/testenv/process.js';
import { isPortFree } from '../../hack/testenv/ports.js';
import { readCrds } from '../../hack/testenv/crds.js';
import { issueCert } from '../../hack/testenv/certs.js';
import { KubeClient } from '../../hack/testenv/kube-client.js';

const MANAGERS = ['capi-core', 'capi-kubeadm-bootstrap', 'capi-kubeadm-control-plane'];
const CLUSTER_GROUP = 'cluster.x-k8s.io';

function hasKubectl(): boolean {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function expectRejected(p: Promise<unknown>): Promise<ApiException<unknown>> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiException) return err;
    throw err;
  }
  throw new Error('expected the API call to be refused');
}

describe('test control plane (hack/testenv)', function () {
  let env: TestEnv;
  const ns = `testenv-stack-${process.pid}`;

  before(async function () {
    this.timeout(180_000);
    env = await getTestEnv();
    await env
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: ns } } });
  });

  it('serves Kubernetes v1.36.3 to @kubernetes/client-node', async function () {
    const version = await env.kubeConfig().makeApiClient(VersionApi).getCode();
    expect(version.gitVersion).to.equal('v1.36.3');
    expect(env.server).to.match(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('works with kubectl through the written kubeconfig', function () {
    if (!hasKubectl()) this.skip();
    const out = execFileSync('kubectl', ['--kubeconfig', env.kubeconfigPath, 'get', '--raw', '/version'], {
      encoding: 'utf8',
    });
    expect(JSON.parse(out).gitVersion).to.equal('v1.36.3');
  });

  it('has every CAPI CRD established, its conversion webhook at its manager on 127.0.0.1', async function () {
    const wanted = readCrds(path.join(env.binDir, 'crds')).map((c) => c.metadata.name as string);
    expect(wanted).to.have.length.greaterThan(10);
    const list = await env.kubeConfig().makeApiClient(ApiextensionsV1Api).listCustomResourceDefinition();
    const byName = new Map(list.items.map((c) => [c.metadata!.name!, c]));
    const owner = (group: string) =>
      group === 'bootstrap.cluster.x-k8s.io'
        ? 'capi-kubeadm-bootstrap'
        : group === 'controlplane.cluster.x-k8s.io'
          ? 'capi-kubeadm-control-plane'
          : 'capi-core';
    for (const name of wanted) {
      const crd = byName.get(name);
      expect(crd, name).to.not.equal(undefined);
      const established = crd!.status?.conditions?.find((c) => c.type === 'Established');
      expect(established?.status, `${name} Established`).to.equal('True');
      expect(crd!.spec.conversion?.strategy, name).to.equal('Webhook');
      expect(crd!.spec.conversion?.webhook?.clientConfig?.url, name).to.equal(
        `https://127.0.0.1:${env.ports[`${owner(crd!.spec.group)}-webhook`]}/convert`,
      );
    }
  });

  it('runs the three CAPI managers, healthy and ready', async function () {
    expect(env.components).to.include.members(['etcd', 'kube-apiserver', 'sim-kubelet', ...MANAGERS]);
    for (const m of MANAGERS) {
      for (const probe of ['healthz', 'readyz']) {
        const res = await fetch(`${env.healthUrls[m]}/${probe}`);
        expect(res.status, `${m} /${probe}: ${env.logTail(m, 20)}`).to.equal(200);
      }
    }
  });

  it('reads a v1beta2 Cluster through v1beta1 (conversion webhook)', async function () {
    const api = env.kubeConfig().makeApiClient(CustomObjectsApi);
    const name = 'conversion-probe';
    await api.createNamespacedCustomObject({
      group: CLUSTER_GROUP,
      version: 'v1beta2',
      namespace: ns,
      plural: 'clusters',
      body: {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Cluster',
        metadata: { name },
        spec: { controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name } },
      },
    });
    const old = await api.getNamespacedCustomObject({
      group: CLUSTER_GROUP,
      version: 'v1beta1',
      namespace: ns,
      plural: 'clusters',
      name,
    });
    expect(old.apiVersion).to.equal('cluster.x-k8s.io/v1beta1');
    // v1beta1 has apiVersion refs; the version comes from the KCP CRD's contract label.
    expect(old.spec.controlPlaneRef).to.include({
      apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
      kind: 'KubeadmControlPlane',
      name,
    });
    await api.deleteNamespacedCustomObject({
      group: CLUSTER_GROUP,
      version: 'v1beta2',
      namespace: ns,
      plural: 'clusters',
      name,
    });
  });

  it('refuses an invalid Cluster in CAPI validating webhook (admission wiring)', async function () {
    const api = env.kubeConfig().makeApiClient(CustomObjectsApi);
    const err = await expectRejected(
      api.createNamespacedCustomObject({
        group: CLUSTER_GROUP,
        version: 'v1beta2',
        namespace: ns,
        plural: 'clusters',
        // Valid for the CRD schema (spec must not be empty); only the webhook knows that a ref is missing.
        body: {
          apiVersion: 'cluster.x-k8s.io/v1beta2',
          kind: 'Cluster',
          metadata: { name: 'no-refs' },
          spec: { clusterNetwork: { serviceDomain: 'cluster.local' } },
        },
      }),
    );
    expect(err.code).to.equal(422);
    // client-node hands the Status over as its JSON text.
    const status = (typeof err.body === 'string' ? JSON.parse(err.body) : err.body) as { message: string };
    expect(status.message).to.contain('admission webhook "validation.cluster.cluster.x-k8s.io" denied the request');
    expect(status.message).to.contain(
      'one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set',
    );
  });

  it('admits a client cert signed by caKeyPem as admin (what KCP-generated kubeconfigs use)', async function () {
    const dir = fs.mkdtempSync(path.join(env.runDir, 'ca-probe-'));
    const keyFile = path.join(dir, 'client.key');
    fs.writeFileSync(path.join(dir, 'ca.crt'), env.caCertPem);
    fs.writeFileSync(path.join(dir, 'ca.key'), env.caKeyPem, { mode: 0o600 });
    const pair = await issueCert(
      { certFile: path.join(dir, 'ca.crt'), keyFile: path.join(dir, 'ca.key') },
      { commonName: 'kubernetes-admin', organization: 'system:masters', usage: 'client' },
      path.join(dir, 'client.crt'),
      keyFile,
    );
    const rest = new KubeClient({
      server: env.server,
      caPem: env.caCertPem,
      certPem: fs.readFileSync(pair.certFile, 'utf8'),
      keyPem: fs.readFileSync(keyFile, 'utf8'),
    });
    try {
      const res = await rest.send('GET', '/api/v1/namespaces/kube-system/secrets');
      expect(res.status, res.body.slice(0, 200)).to.equal(200);
    } finally {
      rest.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports the memory of the running stack', function () {
    const m = env.memory();
    process.stderr.write(
      `[testenv] memory: VmRSS ${(m.rssKiB / 1024).toFixed(0)} MiB, VmHWM ${(m.hwmKiB / 1024).toFixed(0)} MiB: ` +
        `${Object.entries(m.byComponent)
          .map(([c, v]) => `${c} ${(v.hwmKiB / 1024).toFixed(0)}`)
          .join(', ')}\n`,
    );
    expect(m.rssKiB).to.be.greaterThan(0);
  });

  it('restartApiserver keeps etcd, port and certificates; pause/resume hangs and frees a component; the audit log blocks', async function () {
    this.timeout(120_000);
    // Its own small env (no CAPI), so the shared one's managers are not disturbed.
    const own = await startTestEnv({
      capi: false,
      audit: {
        policy:
          'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: ["RequestReceived"]\nrules:\n  - level: Metadata\n',
      },
    });
    const rest = new KubeClient({ server: own.server, caPem: own.caCertPem }); // anonymous
    const admin = own.kubeConfig().makeApiClient(CoreV1Api);
    try {
      await admin.createNamespacedConfigMap({
        namespace: 'default',
        body: { metadata: { name: 'survives-restart' }, data: { a: '1' } },
      });
      const oldPid = own.pids['kube-apiserver']!;
      const restarted = own.restartApiserver({ downMs: 1500 });
      // While it is down, connections are refused.
      await new Promise((r) => setTimeout(r, 1200));
      const during = await rest.send('GET', '/readyz').then(
        (r) => r.status,
        () => 0,
      );
      await restarted;
      expect(during, 'the apiserver answered while down').to.equal(0);
      expect(own.pids['kube-apiserver']).to.not.equal(oldPid);
      expect(pidAlive(oldPid)).to.equal(false);
      // Same URL, same kubeconfig, same etcd data.
      const cm = await own
        .kubeConfig()
        .makeApiClient(CoreV1Api)
        .readNamespacedConfigMap({ namespace: 'default', name: 'survives-restart' });
      expect(cm.data).to.deep.equal({ a: '1' });

      await own.pause('kube-apiserver');
      const hung = await rest.send('GET', '/readyz', undefined, 'application/json', 1000).then(
        (r) => r.status,
        (e: Error) => e.message,
      );
      expect(String(hung)).to.contain('timed out');
      await own.resume('kube-apiserver');
      expect((await rest.send('GET', '/readyz')).status).to.equal(200); // anonymous may read /readyz
    } finally {
      rest.close();
      await own.pause('etcd'); // stop() must still end a paused component
      const pids = Object.values(own.pids);
      const auditLog = fs.readFileSync(own.auditLog!, 'utf8');
      await own.stop();
      for (const pid of pids) expect(groupAlive(pid), `process group ${pid} not empty`).to.equal(false);
      // Blocking mode writes each event before the answer: the create above is there.
      expect(auditLog).to.contain('"verb":"create"').and.contain('survives-restart');
    }
  });

  // Last: stops the shared env (a later getTestEnv() starts a fresh one); an attached env is not ours,
  // so a separate instance is started and stopped instead.
  it('stop() leaves no process alive, no port held and no run dir', async function () {
    this.timeout(180_000);
    const target = env.owned ? env : await startTestEnv({ log: (l) => process.stderr.write(`${l}\n`) });
    const pids = Object.values(target.pids);
    const ports = Object.values(target.ports);
    expect(pids).to.have.length(6); // etcd, kube-apiserver, sim-kubelet, CAPI's three managers
    expect(ports).to.have.length(10);
    for (const port of ports) expect(await isPortFree(port), `port ${port} in use before stop`).to.equal(false);
    const started = Date.now();
    if (env.owned) {
      await stopSim(); // bound to this env
      await stopTestEnv();
    } else await target.stop();
    process.stderr.write(`[testenv] stop() took ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
    for (const pid of pids) {
      expect(pidAlive(pid), `pid ${pid} alive`).to.equal(false);
      expect(groupAlive(pid), `process group ${pid} not empty`).to.equal(false);
    }
    for (const port of ports) expect(await isPortFree(port), `port ${port} still held`).to.equal(true);
    expect(fs.existsSync(target.runDir)).to.equal(false);
  });
});
