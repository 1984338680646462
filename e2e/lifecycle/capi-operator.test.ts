// JoinGuard installed by the Cluster API Operator (sigs.k8s.io/cluster-api-operator v0.29.0, its real manager built by
// hack/testenv/capi-operator/build.sh) through an AddonProvider, on the local control plane, air-gapped as
// docs/install.md shows: the release's files in a ConfigMap, the variables in a Secret.
//
// What is a stand-in, and why:
// - The operator installs add-ons only once its CoreProvider is Ready, i.e. once the Deployment it installed for
//   CAPI is Available. CAPI runs here as the control plane's own processes, not as pods, and nothing runs pods (no
//   kube-controller-manager, no kubelet): the CoreProvider installs a stub release (a Namespace and a Deployment)
//   from a ConfigMap, and the test marks Deployments Available, as their controller would.
// - The operator's webhook server binds every interface, with no flag to change it: the operator runs in a network
//   namespace of its own (unshare), reaching the kube-apiserver through a Unix socket relayed to 127.0.0.1.
//
// Not a stand-in: real cert-manager runs (e2e/support/cert-manager.ts), as on a management cluster the operator
// installs into. The Issuer and Certificate the operator applies are admitted by cert-manager's webhook and issued
// into the Secret the Deployment mounts, and cainjector fills the webhook configuration the operator installed: the
// names the operator's own substitution wrote (not clusterctl's) are checked as a cluster checks them.
import { spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { parseDuration } from '../../api/v1alpha1/duration.js';
import { parseFlags } from '../../cmd/flags.js';
import { issueServingCert } from '../../hack/testenv/certs.js';
import { waitFor as waitUntil } from '../../hack/testenv/wait.js';
import { MANIFESTS_DIR, objectsOf, renderProviderFiles, type K8sObject } from '../../manifests/render.js';
import { CERT_MANAGER_START_TIMEOUT_MS, getCertManager } from '../support/cert-manager.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { apply, raw, servingCertSecret, waitEstablished } from '../install/install-env.js';

type Json = Record<string, any>;
const BUILD = resolve(MANIFESTS_DIR, '..', 'hack', 'testenv', 'capi-operator', 'build.sh');
const OP = '/apis/operator.cluster.x-k8s.io/v1alpha2';
const NS = 'joinguard-system';
const VWC =
  '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/joinguard-validating-webhook-configuration';

function buildOperator(): Promise<string> {
  return new Promise((ok, fail) => {
    const child = spawn('bash', [BUILD], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => process.stderr.write(c));
    child.on('error', fail);
    child.on('close', (code) =>
      code === 0 ? ok(out.trim().split('\n').at(-1)!) : fail(new Error(`${BUILD} exited ${code}`)),
    );
  });
}

/** Inside the operator's network namespace: 127.0.0.1:<apiserver port> relayed to a Unix socket, then the operator. */
const INNER = `
import net from 'node:net';
import { spawn } from 'node:child_process';
const [port, sock, bin, ...args] = process.argv.slice(2);
const relay = net.createServer((c) => {
  const u = net.connect(sock);
  c.pipe(u).pipe(c);
  c.on('error', () => u.destroy());
  u.on('error', () => c.destroy());
});
relay.listen(Number(port), '127.0.0.1', () => {
  const op = spawn(bin, args, { stdio: 'inherit' });
  for (const s of ['SIGTERM', 'SIGINT']) process.on(s, () => op.kill(s));
  op.on('exit', (code) => process.exit(code ?? 1));
});
`;

/** The Unix socket outside: each connection relayed to the kube-apiserver on 127.0.0.1. */
function socketRelay(path: string, port: number): Promise<Server> {
  const open = new Set<Socket>();
  const server = createServer((c) => {
    const u = connect(port, '127.0.0.1');
    open.add(c).add(u);
    c.pipe(u).pipe(c);
    const close = () => (c.destroy(), u.destroy(), open.delete(c), open.delete(u));
    c.on('error', close).on('close', close);
    u.on('error', close).on('close', close);
  });
  server.on('close', () => open.forEach((s) => s.destroy()));
  return new Promise((ok) => server.listen(path, () => ok(server)));
}

async function waitFor<T>(what: string, f: () => Promise<T | undefined | false>, ms: number, log = ''): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${log ? `\n${log}` : ''}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

const condition = (o: Json | undefined, type: string) =>
  ((o?.status?.conditions ?? []) as Json[]).find((c) => c.type === type);

describe("lifecycle: the Cluster API Operator installs JoinGuard through an AddonProvider (the operator's real manager)", function () {
  this.timeout(15 * 60_000);
  let env: TestEnv;
  let dir: string;
  let operator: ChildProcess | undefined;
  let relay: Server | undefined;
  const logFile = () => join(dir, 'operator.log');
  const tail = async () => (await readFile(logFile(), 'utf8').catch(() => '')).split('\n').slice(-40).join('\n');
  const get = async (path: string): Promise<Json | undefined> => {
    const r = await raw(env.kubeConfig(), 'GET', path);
    return r.status === 200 ? (JSON.parse(r.body) as Json) : undefined;
  };
  /** Marks a Deployment Available, as the Deployment controller would once its pods are ready. */
  const available = async (ns: string, name: string) => {
    const path = `/apis/apps/v1/namespaces/${ns}/deployments/${name}/status`;
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const status = {
      conditions: [
        {
          type: 'Available',
          status: 'True',
          reason: 'MinimumReplicasAvailable',
          lastUpdateTime: now,
          lastTransitionTime: now,
        },
      ],
    };
    const r = await raw(env.kubeConfig(), 'PATCH', path, JSON.stringify({ status }), 'application/merge-patch+json');
    expect(r.status, r.body).to.equal(200);
  };

  before(async function () {
    this.timeout(15 * 60_000 + CERT_MANAGER_START_TIMEOUT_MS);
    const bin = await buildOperator();
    env = await getTestEnv();
    await getCertManager();
    const admin = env.kubeConfig();
    dir = await mkdtemp(join(tmpdir(), 'joinguard-capi-operator-'));
    // The operator's CRDs.
    for (const f of await readdir(join(bin, 'crds'))) {
      for (const d of parseAllDocuments(await readFile(join(bin, 'crds', f), 'utf8'))) {
        const crd = d.toJS() as K8sObject;
        await apply(admin, crd);
        await waitEstablished(admin, crd.metadata.name);
      }
    }
    // The operator: its own network namespace, the apiserver through the relay, its webhook's certificate.
    const port = Number(new URL(env.server).port);
    relay = await socketRelay(join(dir, 'apiserver.sock'), port);
    await writeFile(join(dir, 'inner.mjs'), INNER);
    await issueServingCert(env.caCertFile, env.caKeyFile, join(dir, 'certs'));
    const args = [
      `--kubeconfig=${env.kubeconfigPath}`,
      '--health-addr=127.0.0.1:9440',
      '--diagnostics-address=127.0.0.1:8443',
      '--insecure-diagnostics',
      '--webhook-port=9443',
      `--webhook-cert-dir=${join(dir, 'certs')}`,
      '--v=2',
    ];
    const log = createWriteStream(logFile());
    operator = spawn(
      'unshare',
      ['--net', '--fork', '--kill-child=SIGTERM', '--', 'sh', '-c', 'ip link set lo up && exec "$0" "$@"'].concat([
        process.execPath,
        join(dir, 'inner.mjs'),
        String(port),
        join(dir, 'apiserver.sock'),
        join(bin, 'capi-operator'),
        ...args,
      ]),
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    operator.stdout!.pipe(log);
    operator.stderr!.pipe(log);
  });

  after(async () => {
    if (operator && operator.exitCode === null) {
      const gone = new Promise((r) => operator!.once('exit', r));
      operator.kill('SIGTERM');
      await Promise.race([gone, new Promise((r) => setTimeout(r, 10_000))]);
      if (operator.exitCode === null) operator.kill('SIGKILL');
    }
    await new Promise((r) => (relay ? relay.close(r) : r(undefined)));
    // The webhook configuration the operator installed: no JoinGuard serves it here, and with failurePolicy Fail it
    // would refuse every later check write of the run.
    if (env) await raw(env.kubeConfig(), 'DELETE', VWC).catch(() => undefined);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('a stand-in CoreProvider from a ConfigMap becomes Ready once its Deployment is Available', async () => {
    const admin = env.kubeConfig();
    for (const ns of ['capi-system', NS])
      expect((await raw(admin, 'POST', '/api/v1/namespaces', { metadata: { name: ns } })).status).to.be.oneOf([
        201, 409,
      ]);
    const stub = [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'capi-system' } },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'capi-controller-manager', namespace: 'capi-system' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'capi-stand-in' } },
          template: {
            metadata: { labels: { app: 'capi-stand-in' } },
            spec: {
              containers: [{ name: 'manager', image: 'registry.k8s.io/cluster-api/cluster-api-controller:v1.14.2' }],
            },
          },
        },
      },
    ];
    await apply(admin, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'v1.14.2', namespace: 'capi-system', labels: { 'provider-components': 'cluster-api' } },
      data: {
        components: stub.map((o) => JSON.stringify(o)).join('\n---\n'),
        metadata:
          'apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n  - major: 1\n    minor: 14\n    contract: v1beta2\n',
      },
    });
    await apply(admin, {
      apiVersion: 'operator.cluster.x-k8s.io/v1alpha2',
      kind: 'CoreProvider',
      metadata: { name: 'cluster-api', namespace: 'capi-system' },
      spec: {
        version: 'v1.14.2',
        fetchConfig: { selector: { matchLabels: { 'provider-components': 'cluster-api' } } },
      },
    });
    await waitFor(
      'the stand-in Deployment, installed by the operator',
      () => get('/apis/apps/v1/namespaces/capi-system/deployments/capi-controller-manager'),
      180_000,
      await tail(),
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}\n${await tail()}`);
    });
    await available('capi-system', 'capi-controller-manager');
    await waitFor(
      'CoreProvider Ready',
      async () =>
        condition(await get(`${OP}/namespaces/capi-system/coreproviders/cluster-api`), 'Ready')?.status === 'True',
      120_000,
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}\n${await tail()}`);
    });
  });

  it("an AddonProvider installs JoinGuard's release from a ConfigMap, with the variables of its Secret", async () => {
    const admin = env.kubeConfig();
    const files = await renderProviderFiles('0.1.0');
    await apply(admin, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'v0.1.0', namespace: NS, labels: { 'provider-components': 'joinguard' } },
      data: { components: files.components, metadata: files.metadata },
    });
    await apply(admin, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'joinguard-variables', namespace: NS },
      stringData: { JOINGUARD_LOGGING_FORMAT: 'json', JOINGUARD_ALLOW_MACHINE_DELETE: 'true' },
    });
    await apply(admin, {
      apiVersion: 'operator.cluster.x-k8s.io/v1alpha2',
      kind: 'AddonProvider',
      metadata: { name: 'joinguard', namespace: NS },
      spec: {
        version: 'v0.1.0',
        // The namespace too: the operator's defaulting webhook, which would fill it in, is not registered here.
        configSecret: { name: 'joinguard-variables', namespace: NS },
        fetchConfig: { selector: { matchLabels: { 'provider-components': 'joinguard' } } },
      },
    });
    const deployment = await waitFor(
      "JoinGuard's Deployment, installed by the operator",
      () => get(`/apis/apps/v1/namespaces/${NS}/deployments/joinguard-controller-manager`),
      180_000,
    ).catch(async (e: Error) => {
      throw new Error(`${e.message}\n${await tail()}`);
    });
    const manager = (deployment.spec.template.spec.containers as Json[]).find((c) => c.name === 'manager')!;
    expect(manager.image).to.equal('ghcr.io/joinguard/joinguard:v0.1.0');
    const flags = parseFlags(manager.args as string[], parseDuration);
    expect([flags.loggingFormat, flags.allowMachineDelete, flags.workloadNodeCheck]).to.deep.equal([
      'json',
      true,
      false,
    ]);
    // The variable's other half: the binding to the Machine delete role.
    const binding = await get('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/joinguard-machine-delete');
    expect(binding?.roleRef?.name).to.equal('joinguard-machine-delete-true');
    expect(await get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machinejoinchecks.joinguard.io')).to
      .exist;
    // cert-manager issued the operator-applied Certificate into the Secret the Deployment mounts, and cainjector put
    // its CA into the webhook configuration the operator installed.
    const objects = objectsOf(files.components, {});
    const secret = await waitUntil(
      'the serving certificate issued by cert-manager',
      async () => {
        const s = await get(`/api/v1/namespaces/${NS}/secrets/${servingCertSecret(objects)}`);
        return s?.data?.['tls.crt'] && s;
      },
      { timeoutMs: 60_000, intervalMs: 250, describe: tail },
    );
    expect(new X509Certificate(Buffer.from(secret.data['tls.crt'], 'base64')).subjectAltName).to.include(
      `DNS:joinguard-webhook-service.${NS}.svc`,
    );
    const bundles = await waitUntil(
      'the caBundle injected by cainjector',
      async () => {
        const b = (((await get(VWC))?.webhooks ?? []) as Json[]).map((w) => w.clientConfig?.caBundle as string);
        return b.length > 0 && b.every((x) => x) && b;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(bundles).to.deep.equal(bundles.map(() => secret.data['ca.crt']));
    const p = await waitFor(
      'AddonProvider ProviderInstalled, with its installedVersion',
      async () => {
        // The operator writes the two in separate requests of one reconcile (CAPI's patch helper sends the
        // conditions first, then the rest of the status), so a read can fall between them.
        const o = await get(`${OP}/namespaces/${NS}/addonproviders/joinguard`);
        return condition(o, 'ProviderInstalled')?.status === 'True' && o?.status?.installedVersion !== undefined && o;
      },
      120_000,
    );
    expect(p.status.installedVersion).to.equal('v0.1.0');
    await available(NS, 'joinguard-controller-manager');
    await waitFor(
      'AddonProvider Ready (its Deployment Available)',
      async () => condition(await get(`${OP}/namespaces/${NS}/addonproviders/joinguard`), 'Ready')?.status === 'True',
      120_000,
    );
  });
});
