// The image, started as the Deployment starts it: the image hack/image/build.sh builds from the Dockerfile (podman,
// local stand-in bases), run with the Deployment's user, read-only root, capabilities, memory limit, env and args
// (image-run.ts reads them from the rendered components), under the add-on's ServiceAccount, against the local
// control plane with CAPI's real managers and the simulation. The add-on is applied as clusterctl renders it
// (install-env.ts's applyComponents), with real cert-manager: it issues the serving certificate into the Secret the
// Deployment mounts, which is mounted into the container as the kubelet mounts it (secret-volume.ts), and cainjector
// injects its CA; the apiserver calls the container's published webhook port through the add-on's Service. It
// answers --version, takes the Lease, serves the webhook and /metrics from cert-manager's certificate, marks a worker
// that never joins, and stops on SIGTERM with exit 0 and the Lease handed back. Needs podman and runc (.ci/run
// installs them) and cert-manager's build; JOINGUARD_IMAGE names a built image, else this spec builds one.
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { DEFAULT_LEASE_NAME } from '../../runtime/leader.js';
import { freePorts } from '../../hack/testenv/ports.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { conditionOf, waitFor } from '../support/cluster-view.js';
import { checksPath, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';
import { CERT_MANAGER_START_TIMEOUT_MS, getCertManager } from '../support/cert-manager.js';
import {
  applyComponents,
  mountServingCert,
  raw,
  serveWebhooks,
  serviceAccountKubeConfig,
  uninstallComponents,
  webhookServes,
  type Applied,
} from './install-env.js';
import type { SecretVolume } from './secret-volume.js';
import { imageUnderTest, logsOf, managerPod, podman, runArguments, stateOf, ULIMITS, type PodOf } from './image-run.js';

const CLUSTER = 'img';
const root = resolve(import.meta.dirname, '..', '..');
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;

/** GET over HTTPS with a bearer token, trusting the test CA: status and body. */
function get(
  url: string,
  o: { ca?: string; servername?: string; token?: string } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    const req = https.request(
      url,
      {
        ca: o.ca,
        servername: o.servername,
        headers: o.token ? { Authorization: `Bearer ${o.token}` } : {},
        timeout: 5_000,
      },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => done({ status: res.statusCode ?? 0, body }));
        res.on('error', fail);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${url}: no answer in 5 s`)));
    req.on('error', fail);
    req.end();
  });
}
const getHttp = async (url: string) => {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: await res.text() };
};

describe('the image, started as the Deployment runs it (podman, runc)', function () {
  this.timeout(300_000);
  const s = useScenario({
    prefix: 'jg-image-fleet',
    cluster: CLUSTER,
    checkName: 'workers',
    workers: [{ name: 'md', replicas: 1, labels: { pool: 'workers' } }],
    createClusterFirst: false,
  });
  const ns = `jg-image-${process.pid}`;
  const name = `joinguard-image-${process.pid}`;
  const podName = `joinguard-controller-manager-${process.pid}`;
  const times: Record<string, number> = {};
  let applied: Applied | undefined;
  let kube: KubeClient | undefined;
  let servingCert: SecretVolume | undefined;
  let dir: string;
  let image: string;
  let pod: PodOf;
  let ports: { webhook: number; health: number; metrics: number };
  let started = false;
  const seen = async () =>
    `${await s.seen()()}\ncontainer log (last 25 lines):\n${(await logsOf(name)).split('\n').slice(-25).join('\n')}`;

  before(async function () {
    this.timeout(900_000 + CERT_MANAGER_START_TIMEOUT_MS);
    // The cluster first, so that its workload connection's 2m grace (--connection-grace, the Deployment leaves it
    // at its default) runs while the image builds and starts. Its one worker never joins.
    s.sim.policy.neverJoin({ namespace: s.namespace, cluster: CLUSTER, role: 'worker' }, { limit: 1 });
    await s.createCluster();

    let t = Date.now();
    image = await imageUnderTest((l) => process.stderr.write(`${l}\n`));
    times['image (build or given)'] = Date.now() - t;

    // The add-on's objects as clusterctl renders them, cert-manager running (its Issuer and Certificate applied and
    // issued); the webhook configurations wait until the container is started.
    t = Date.now();
    await getCertManager();
    times['cert-manager (build or cached, start)'] = Date.now() - t;
    t = Date.now();
    const admin = s.env.kubeConfig();
    applied = await applyComponents(s.env, ns);
    pod = managerPod(applied.components.objects);
    const [webhook, health, metrics] = await freePorts(3);
    ports = { webhook: webhook!, health: health!, metrics: metrics! };

    // What the kubelet would mount: the ServiceAccount's token, CA and namespace; the Secret cert-manager issued into
    // (its files 0644, a Secret volume's defaultMode: uid 65532 reads the key), followed across renewals.
    dir = mkdtempSync(join(tmpdir(), 'joinguard-image-'));
    const saDir = join(dir, 'serviceaccount');
    mkdirSync(saDir);
    const sa = await serviceAccountKubeConfig(admin, ns, 'joinguard-controller-manager');
    writeFileSync(join(saDir, 'token'), sa.getCurrentUser()!.token!);
    writeFileSync(join(saDir, 'ca.crt'), s.env.caCertPem);
    writeFileSync(join(saDir, 'namespace'), ns);
    kube = s.env.kube();
    servingCert = await mountServingCert(kube, applied, join(dir, 'serving-certs'));
    const certDir = servingCert.dir;
    const args = runArguments(pod, {
      name,
      podName,
      namespace: ns,
      image,
      apiserverPort: Number(new URL(s.env.server).port),
      serviceAccountDir: saDir,
      webhookCertDir: certDir,
      ports: { 9443: ports.webhook, 9440: ports.health, 8443: ports.metrics },
    });
    times['install'] = Date.now() - t;
    t = Date.now();
    await podman(args);
    started = true;
    times['podman run'] = Date.now() - t;
    // The apiserver calls the container's published port through the add-on's Service (routed to 127.0.0.1).
    await serveWebhooks(admin, applied, ports.webhook);
  });

  after(async function () {
    this.timeout(120_000);
    try {
      // Webhooks first: with failurePolicy Fail they would refuse every later check write of the run.
      if (applied) await uninstallComponents(s.env.kubeConfig(), applied);
    } finally {
      if (started) await podman(['rm', '--force', '--time', '5', name]).catch(() => undefined);
      await servingCert?.stop();
      kube?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
      process.stderr.write(`[image] times (ms): ${JSON.stringify(times)}\n`);
    }
  });

  it('starts nothing it could not start as the Deployment says: an unknown mount or env source is refused', () => {
    const o = {
      name,
      podName,
      namespace: ns,
      image,
      apiserverPort: 1,
      serviceAccountDir: '/sa',
      webhookCertDir: '/certs',
      ports: { 9443: 1, 9440: 2, 8443: 3 },
    };
    expect(runArguments(pod, o)).to.include.members(['--read-only', '--cap-drop', 'ALL', 'no-new-privileges']);
    const extraMount = structuredClone(pod);
    extraMount.pod.volumes.push({ name: 'cfg', configMap: { name: 'x' } });
    extraMount.container.volumeMounts.push({ name: 'cfg', mountPath: '/etc/jg' });
    expect(() => runArguments(extraMount, o)).to.throw('volume cfg at /etc/jg: not supplied here');
    const secretEnv = structuredClone(pod);
    secretEnv.container.env.push({ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } });
    expect(() => runArguments(secretEnv, o)).to.throw(/env TOKEN: its source is not supplied here/);
  });

  it("answers --version with the version line, as the Deployment's user on a read-only root", async () => {
    const user = `${pod.pod.securityContext.runAsUser}:${pod.pod.securityContext.runAsGroup}`;
    const { stdout } = await podman(['run', '--rm', ...ULIMITS, '--read-only', '--user', user, image, '--version']);
    const cfg = JSON.parse((await podman(['image', 'inspect', '--format', '{{json .Config}}', image])).stdout) as Json;
    const labels = cfg.Labels as Record<string, string>;
    expect(stdout).to.equal(`Version: v${version} (git commit: ${labels['org.opencontainers.image.revision']})\n`);
    expect(labels['org.opencontainers.image.version']).to.equal(`v${version}`);
    // The Deployment names the image the script builds (ghcr.io/joinguard/joinguard:v<package.json version>); the
    // image's own user and entry point are the Deployment's and the Dockerfile's.
    expect(pod.container.image).to.equal(`ghcr.io/joinguard/joinguard:v${version}`);
    expect(cfg.User).to.equal(user);
    expect(cfg.Entrypoint).to.deep.equal(['/nodejs/bin/node', '/app/dist/cmd/joinguard.js']);
  });

  it('starts: ready on /readyz, the version line first, and the Lease joinguard-leader taken by this pod', async () => {
    const t = Date.now();
    await waitFor(
      'the container ready on /readyz',
      async () => (await getHttp(`http://127.0.0.1:${ports.health}/readyz`)).status === 200,
      {
        timeoutMs: 90_000,
        describe: seen,
        intervalMs: 500,
      },
    );
    times['ready after podman run'] = Date.now() - t;
    const log = await logsOf(name);
    expect(log.split('\n')[0]).to.match(/^I\d{4} .*\] "Version: v\d+\.\d+\.\d+ \(git commit: [0-9a-f]*\)"/);
    const lease = await s.kube.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${DEFAULT_LEASE_NAME}`);
    expect(lease?.spec?.holderIdentity, log).to.match(new RegExp(`^${podName}_[0-9a-f]{8}$`));
    expect((await stateOf(name)).Running).to.equal(true);
  });

  it("serves the webhook with cert-manager's certificate, called through the Service: a check that selects nothing is refused through it", async () => {
    const admin = s.env.kubeConfig();
    // cainjector writes the caBundle once the configurations exist: the apiserver's call fails (failurePolicy Fail)
    // until then, or while the container serves no certificate the bundle's CA signed.
    await waitFor(
      'the apiserver calling the webhook through the Service (CA injected by cainjector)',
      () => webhookServes(admin, ns),
      { timeoutMs: 60_000, describe: seen, intervalMs: 250 },
    );
    const res = await raw(admin, 'POST', checksPath(s.namespace), {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: { name: 'selects-nothing' },
      spec: { clusterName: CLUSTER, selector: { matchLabels: { 'cluster.x-k8s.io/cluster-name': 'another' } } },
    });
    expect(res.status, res.body).to.equal(422);
    const message = (JSON.parse(res.body) as { message: string }).message;
    expect(message).to.match(/^admission webhook "validation\.machinejoincheck\.joinguard\.io" denied the request/);
    expect(message).to.include('spec.clusterName is "img"');
  });

  it('serves /metrics over HTTPS to the metrics reader, and refuses a token without the grant', async () => {
    const admin = s.env.kubeConfig();
    const reader = (await serviceAccountKubeConfig(admin, ns, 'joinguard-metrics-reader')).getCurrentUser()!.token!;
    const other = (await serviceAccountKubeConfig(admin, ns, 'joinguard-controller-manager')).getCurrentUser()!.token!;
    const url = `https://127.0.0.1:${ports.metrics}/metrics`;
    // Served with the webhook's certificate (cert-manager's, from the mounted Secret): verified against the CA in the
    // Secret for the one name the Certificate gives, the webhook Service's.
    const tls = {
      ca: readFileSync(join(servingCert!.dir, 'ca.crt'), 'utf8'),
      servername: `joinguard-webhook-service.${ns}.svc`,
    };
    const ok = await get(url, { ...tls, token: reader });
    expect(ok.status).to.equal(200);
    const buildInfo = ok.body.split('\n').find((l) => l.startsWith('joinguard_build_info{'));
    expect(buildInfo, ok.body.slice(0, 2000)).to.include(`version="v${version}"`);
    expect((await get(url, { ...tls, token: other })).status).to.equal(403);
  });

  it('marks the worker that never joins for its MachineSet (HealthCheckSucceeded=False/JoinTimeout)', async () => {
    const admin = s.env.kubeConfig();
    const created = await raw(admin, 'POST', checksPath(s.namespace), {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: { name: 'workers' },
      spec: { clusterName: CLUSTER, selector: { matchLabels: { pool: 'workers' } }, joinTimeout: '10s' },
    });
    expect(created.status, created.body).to.equal(201);
    const t = Date.now();
    const marked = await waitFor(
      'a worker marked HealthCheckSucceeded=False',
      async () => (await s.workers()).find((m) => conditionOf(m, 'HealthCheckSucceeded')?.status === 'False'),
      { timeoutMs: 240_000, describe: seen, intervalMs: 1_000 },
    );
    times['mark after the check'] = Date.now() - t;
    expect(conditionOf(marked, 'HealthCheckSucceeded')).to.deep.include({ status: 'False', reason: 'JoinTimeout' });
    const check = await s.check();
    const rec = check.status?.remediations?.find((r) => r.uid === marked.metadata.uid);
    expect(rec, describeCheck(check)).to.include({ path: 'OwnerRemediated', kind: 'JoinTimeout' });
  });

  it('stops on SIGTERM within the grace period: exit 0, the Lease handed back', async () => {
    const t = Date.now();
    await podman(['stop', '--time', String(pod.pod.terminationGracePeriodSeconds ?? 30), name], 60_000);
    times['stop'] = Date.now() - t;
    const state = await stateOf(name);
    const log = await logsOf(name);
    expect(state.ExitCode, log.split('\n').slice(-20).join('\n')).to.equal(0);
    // Well inside the grace period: podman's SIGKILL (after it) would have made the exit code 137.
    expect(times['stop']).to.be.below(20_000);
    expect(log).to.match(/"Stopping" signal="SIGTERM"/);
    expect(log).to.match(/"Released the leader Lease"/);
    const lease = await s.kube.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${DEFAULT_LEASE_NAME}`);
    expect(lease?.spec?.holderIdentity).to.equal(undefined);
  });
});
