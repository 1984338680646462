// The add-on's Deployment as users install it, on a real node: kubelet, containerd and runc, kube-proxy, and the
// control plane's kube-controller-manager and kube-scheduler (hack/testenv/node.ts, built by
// hack/testenv/node/build.sh from the apiserver's Kubernetes version). The image hack/image/build.sh builds is
// imported into containerd under the name the Deployment gives; the components are applied as clusterctl renders
// them, with real cert-manager, the webhook configurations included. Nothing of the pod is supplied by the test but the
// token's life (below): the kubelet mounts the projected ServiceAccount token and the Secret cert-manager issued, fills POD_NAMESPACE from the
// downward API and starts the container with the Deployment's security context; the pods reach the apiserver at the
// `kubernetes` Service and the apiserver calls the webhook through the add-on's Service (kube-proxy).
// One change to the Deployment, in this spec only: its ServiceAccount token is a projected volume of 600 s (the API's
// minimum) instead of admission's default, so the first token expires within the spec and the kubelet rotates it
// (docs/decisions/token-rotation-on-the-real-node.md).
// Needs root (the node's bridge and rules), podman and runc (.ci/run installs them), cert-manager's and the node's
// builds; JOINGUARD_IMAGE names a built image, else this spec builds one.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { startNode, type TestNode } from '../../hack/testenv/node.js';
import { conditionOf, waitFor } from '../support/cluster-view.js';
import { checksPath, describeCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';
import { CERT_MANAGER_START_TIMEOUT_MS } from '../support/cert-manager.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { DEFAULT_LEASE_NAME, LEADER_DEFAULTS } from '../../runtime/leader.js';
import { SERVICE_ACCOUNT_DIR } from '../../runtime/client/kubeconfig.js';
import type { K8sObject } from '../../manifests/render.js';
import { apply, applyComponents, raw, uninstallComponents, webhookServes, type Applied } from './install-env.js';
import { imageUnderTest, managerPod, podman } from './image-run.js';

const root = resolve(import.meta.dirname, '..', '..');
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
const log = (line: string) => process.stderr.write(`${line}\n`);
const CLUSTER = 'pods';
const SELECTOR = 'app.kubernetes.io/name=joinguard,app.kubernetes.io/component=controller-manager';
/** The API's minimum expirationSeconds; the kubelet replaces a token at 80 % of its life. */
const TOKEN_TTL_S = 600;
const TOKEN_VOLUME = 'token-600s';
/** The apiserver accepts a ServiceAccount JWT up to a minute past its exp (go-jose's default leeway). */
const EXPIRY_LEEWAY_S = 60;

/**
 * The pod's ServiceAccount token as admission would project it, but expiring in 600 s: the same three sources at the
 * same path. A 3607 s default token is issued for a year (--service-account-extend-token-expiration) and would never
 * expire within a spec.
 */
function shortToken(objects: K8sObject[]): void {
  const dep = objects.find((o) => o.kind === 'Deployment') as Json | undefined;
  if (!dep) throw new Error('the components have no Deployment');
  const pod = dep.spec.template.spec as Json;
  pod.automountServiceAccountToken = false;
  pod.volumes = [
    ...((pod.volumes as Json[] | undefined) ?? []),
    {
      name: TOKEN_VOLUME,
      projected: {
        sources: [
          { serviceAccountToken: { path: 'token', expirationSeconds: TOKEN_TTL_S } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          {
            downwardAPI: {
              items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }],
            },
          },
        ],
      },
    },
  ];
  for (const c of pod.containers as Json[])
    c.volumeMounts = [
      ...((c.volumeMounts as Json[] | undefined) ?? []),
      { name: TOKEN_VOLUME, mountPath: SERVICE_ACCOUNT_DIR, readOnly: true },
    ];
}

/** A JWT's claims (not verified: the apiserver's TokenReview says whether it is accepted). */
const claimsOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iat: number; exp: number };

describe('the Deployment as users install it, on a real node (kubelet, containerd, runc)', function () {
  this.timeout(300_000);
  // The shared env as a real node needs it, asked for before useScenario's hook asks for it plainly.
  before(async function () {
    this.timeout(300_000);
    await getTestEnv({ realNode: true });
  });
  const s = useScenario({
    prefix: 'jg-pods-fleet',
    cluster: CLUSTER,
    checkName: 'workers',
    // `late` is scaled to one after the first token expired: its Machine never joins either.
    workers: [
      { name: 'md', replicas: 1, labels: { pool: 'workers' } },
      { name: 'late', replicas: 0, labels: { pool: 'workers' } },
    ],
    createClusterFirst: false,
  });
  const ns = `jg-pods-${process.pid}`;
  const times: Record<string, number> = {};
  let env: TestEnv;
  let kube: KubeClient;
  let node: TestNode | undefined;
  let applied: Applied | undefined;
  let dir: string | undefined;
  /** Each first pod's token as the kubelet first wrote it, read when the pod was Ready. */
  const firstTokens = new Map<string, { file: string; token: string }>();
  const pods = async () =>
    ((await kube.get(`/api/v1/namespaces/${ns}/pods?labelSelector=${encodeURIComponent(SELECTOR)}`))?.items ??
      []) as Json[];
  const seen = async () =>
    `pods:\n${(await pods())
      .map(
        (p) =>
          `  ${p.metadata.name} ${p.spec.nodeName ?? '-'} ${p.status.phase} ${JSON.stringify(p.status.containerStatuses?.[0]?.state ?? {})}`,
      )
      .join('\n')}\nkubelet.log (tail):\n${node?.logTail('kubelet', 15) ?? ''}`;

  before(async function () {
    this.timeout(1_200_000 + CERT_MANAGER_START_TIMEOUT_MS);
    // The cluster first, so that its workload connection's grace (--connection-grace, left at its default) runs
    // while the node starts. Its one worker never joins.
    s.sim.policy.neverJoin({ namespace: s.namespace, cluster: CLUSTER, role: 'worker' }, { limit: 1 });
    await s.createCluster();
    let t = Date.now();
    env = await getTestEnv({ realNode: true });
    kube = env.kube();
    times['control plane'] = Date.now() - t;
    t = Date.now();
    node = await startNode({ env, log });
    times['node (build or cached, start, Ready)'] = Date.now() - t;

    // The image under the Deployment's name in the CRI's store: the kubelet finds it there (IfNotPresent) and
    // pulls nothing.
    t = Date.now();
    const image = await imageUnderTest(log);
    dir = mkdtempSync(join(tmpdir(), 'joinguard-pods-'));
    const archive = join(dir, 'image.tar');
    await podman(['save', '--format', 'oci-archive', '--output', archive, image], 300_000);
    await node.importImage(archive, `ghcr.io/joinguard/joinguard:v${version}`);
    times['image (build or given, import)'] = Date.now() - t;

    t = Date.now();
    applied = await applyComponents(env, ns, {}, shortToken);
    times['install'] = Date.now() - t;
  });

  after(async function () {
    this.timeout(180_000);
    try {
      // Webhooks first (failurePolicy Fail); uninstallComponents deletes them with the cluster-scoped RBAC.
      if (applied) await uninstallComponents(env.kubeConfig(), applied);
      // The Deployment's pods go with it (kube-controller-manager's garbage collector), before the node stops.
      await kube?.send('DELETE', `/apis/apps/v1/namespaces/${ns}/deployments/joinguard-controller-manager`);
      await waitFor('the pods gone', async () => (await pods()).length === 0, { timeoutMs: 90_000 }).catch((e: Error) =>
        log(`[pods] ${e.message}`),
      );
    } finally {
      await node?.stop();
      kube?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
      log(`[pods] times (ms): ${JSON.stringify(times)}`);
    }
  });

  const leaseHolder = async () =>
    (await kube.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${DEFAULT_LEASE_NAME}`))?.spec
      ?.holderIdentity as string | undefined;
  const ready = (p: Json) =>
    p.status.phase === 'Running' &&
    !p.metadata.deletionTimestamp &&
    (p.status.conditions as Json[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True') === true;

  it('schedules both replicas onto the node and starts them from the imported image: Running and Ready', async () => {
    const t = Date.now();
    const running = await waitFor(
      'two pods Running and Ready on the node',
      async () => {
        const list = (await pods()).filter((p) => ready(p) && p.spec.nodeName === node!.name);
        return list.length === 2 ? list : undefined;
      },
      { timeoutMs: 180_000, intervalMs: 1_000, describe: seen },
    );
    times['two pods Ready'] = Date.now() - t;
    // The token file as the kubelet keeps it on the node (the image has no shell to read it inside).
    for (const p of running) {
      const file = join(
        node!.runDir,
        'kubelet',
        'pods',
        p.metadata.uid as string,
        'volumes',
        'kubernetes.io~projected',
        TOKEN_VOLUME,
        'token',
      );
      expect(existsSync(file), file).to.equal(true);
      firstTokens.set(p.metadata.name as string, { file, token: readFileSync(file, 'utf8').trim() });
    }
    for (const p of running) {
      const status = (p.status.containerStatuses as Json[]).find((c) => c.name === 'manager')!;
      expect(status.image).to.equal(`ghcr.io/joinguard/joinguard:v${version}`);
      expect(status.restartCount, JSON.stringify(status)).to.equal(0);
    }
  });

  it('runs the container as the Deployment says: its user, read-only root, the token and Secret mounted, POD_NAMESPACE', async () => {
    const [pod] = (await pods()).filter(ready);
    expect(pod, await seen()).to.not.equal(undefined);
    const spec = managerPod(applied!.components.objects);
    // The projected token volume is this spec's (600 s), not admission's kube-api-access-* (automount off).
    const volumes = pod!.spec.volumes as Json[];
    expect(
      volumes.some((v) => String(v.name).startsWith('kube-api-access-')),
      JSON.stringify(volumes),
    ).to.equal(false);
    const tokenVolume = volumes.find((v) => v.name === TOKEN_VOLUME);
    expect(tokenVolume?.projected?.sources?.[0]?.serviceAccountToken, JSON.stringify(volumes)).to.deep.equal({
      path: 'token',
      expirationSeconds: TOKEN_TTL_S,
    });
    // What the container process is: containerd's view of it (user, read-only root, capabilities, env, mounts).
    const id = String((pod!.status.containerStatuses as Json[])[0]!.containerID).replace(/^containerd:\/\//, '');
    const oci = (JSON.parse(await node!.ctr(['containers', 'info', id])) as Json).Spec as Json;
    expect(oci.process.user).to.include({
      uid: spec.pod.securityContext.runAsUser,
      gid: spec.pod.securityContext.runAsGroup,
    });
    expect(oci.root.readonly).to.equal(true);
    expect(oci.process.capabilities?.effective ?? []).to.deep.equal([]);
    expect(oci.process.noNewPrivileges).to.equal(true);
    expect(oci.process.env).to.include(`POD_NAMESPACE=${ns}`);
    const mounts = (oci.mounts as Json[]).map((m) => m.destination as string);
    expect(mounts).to.include.members([
      '/var/run/secrets/kubernetes.io/serviceaccount',
      '/tmp/k8s-webhook-server/serving-certs',
      '/tmp',
    ]);
  });

  it('talks to the apiserver in-cluster (the projected token, the Service address): one pod takes the Lease', async () => {
    const names = (await pods()).filter(ready).map((p) => p.metadata.name as string);
    const holder = await waitFor('the Lease held', leaseHolder, { timeoutMs: 60_000, describe: seen });
    expect(names, holder).to.include(holder.replace(/_[0-9a-f]{8}$/, ''));
  });

  it("serves the webhook from the mounted Secret: the apiserver calls it through the add-on's Service", async () => {
    const admin = env.kubeConfig();
    // As rendered: the configurations name the add-on's Service; cainjector injects cert-manager's CA.
    for (const o of applied!.webhookConfigs) await apply(admin, o);
    await waitFor('the apiserver calling the webhook (CA injected by cainjector)', () => webhookServes(admin, ns), {
      timeoutMs: 60_000,
      intervalMs: 500,
      describe: seen,
    });
  });

  it('marks the worker that never joins for its MachineSet (HealthCheckSucceeded=False/JoinTimeout)', async () => {
    const created = await raw(env.kubeConfig(), 'POST', checksPath(s.namespace), {
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
      { timeoutMs: 240_000, describe: async () => `${await s.seen()()}\n${await seen()}`, intervalMs: 1_000 },
    );
    times['mark after the check'] = Date.now() - t;
    expect(conditionOf(marked, 'HealthCheckSucceeded')).to.deep.include({ status: 'False', reason: 'JoinTimeout' });
    const check = await s.check();
    const rec = check.status?.remediations?.find((r) => r.uid === marked.metadata.uid);
    expect(rec, describeCheck(check)).to.include({ path: 'OwnerRemediated', kind: 'JoinTimeout' });
  });

  it("keeps its requests authorised past its first token's expiry: the kubelet rotates it, the leader renews, a Machine stuck after it is marked", async function () {
    // The clock started when the pods started (the token's iat): the tests above ran inside the wait.
    this.timeout((TOKEN_TTL_S + EXPIRY_LEEWAY_S) * 1000 + 300_000);
    const holder = await waitFor('the Lease held', leaseHolder, { timeoutMs: 60_000, describe: seen });
    const leader = holder.replace(/_[0-9a-f]{8}$/, '');
    const first = firstTokens.get(leader);
    expect(first, `${holder} is not one of the first pods: ${[...firstTokens.keys()].join(', ')}`).to.not.equal(
      undefined,
    );
    const claims = claimsOf(first!.token);
    expect(claims.exp - claims.iat, JSON.stringify(claims)).to.equal(TOKEN_TTL_S);
    // Past the expiry and the apiserver's leeway, with a margin for a renewal to land after it.
    const deadAt = (claims.exp + EXPIRY_LEEWAY_S) * 1000;
    let rotatedAt: number | undefined;
    const holders = new Set<string>();
    while (Date.now() < deadAt + 20_000) {
      const now = readFileSync(first!.file, 'utf8').trim();
      if (rotatedAt === undefined && now !== first!.token) rotatedAt = Date.now();
      holders.add((await leaseHolder()) ?? '<none>');
      await new Promise((r) => setTimeout(r, 5_000));
    }
    expect(rotatedAt, 'the kubelet never replaced the token file').to.not.equal(undefined);
    times['token rotated (s after iat)'] = Math.round(rotatedAt! / 1000 - claims.iat);
    const second = claimsOf(readFileSync(first!.file, 'utf8').trim());
    expect(second.iat, JSON.stringify({ first: claims, second })).to.be.above(claims.iat);
    // The first token is dead: the apiserver no longer accepts it, so whatever the pods did since used another.
    const review = await kube.request('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: first!.token },
    });
    expect(review.status?.authenticated ?? false, JSON.stringify(review.status)).to.equal(false);
    // The leader kept the Lease throughout and renews it still (a write with the new token).
    expect([...holders], 'the Lease changed hands or lapsed').to.deep.equal([holder]);
    const lease = await kube.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${DEFAULT_LEASE_NAME}`);
    expect(lease?.spec?.holderIdentity).to.equal(holder);
    expect(Date.parse(lease?.spec?.renewTime as string), JSON.stringify(lease?.spec)).to.be.above(deadAt);
    for (const p of (await pods()).filter(ready)) {
      const status = (p.status.containerStatuses as Json[]).find((c) => c.name === 'manager')!;
      expect(status.restartCount, JSON.stringify(status)).to.equal(0);
    }
    // A Machine created now is seen (the informers' watches) and marked (writes), all with the rotated token.
    s.sim.policy.neverJoin((m) => m.namespace === s.namespace && m.machineName.startsWith(`${CLUSTER}-late-`));
    await s.kube.mergePatch(s.capi.path('MachineDeployment', s.namespace, `${CLUSTER}-late`), {
      spec: { replicas: 1 },
    });
    const t = Date.now();
    const marked = await waitFor(
      'the late worker marked HealthCheckSucceeded=False',
      async () =>
        (await s.workers()).find(
          (m) =>
            String(m.metadata.name).startsWith(`${CLUSTER}-late-`) &&
            conditionOf(m, 'HealthCheckSucceeded')?.status === 'False',
        ),
      { timeoutMs: 180_000, describe: async () => `${await s.seen()()}\n${await seen()}`, intervalMs: 1_000 },
    );
    times['late mark after scale-up'] = Date.now() - t;
    expect(Date.parse(marked.metadata.creationTimestamp as string)).to.be.above(deadAt - 1_000);
    expect(conditionOf(marked, 'HealthCheckSucceeded')).to.deep.include({ status: 'False', reason: 'JoinTimeout' });
  });

  it('hands the Lease over when the leader pod is deleted, and the Deployment brings a new pod', async () => {
    const before = (await leaseHolder())!;
    const leader = before.replace(/_[0-9a-f]{8}$/, '');
    const t = Date.now();
    // Deleted as an operator would (the kubelet stops it with SIGTERM: it hands the Lease back as it goes).
    const del = await kube.send('DELETE', `/api/v1/namespaces/${ns}/pods/${leader}`);
    expect(del.status, del.body).to.equal(200);
    const next = await waitFor(
      'another pod leading',
      async () => {
        const h = await leaseHolder();
        return h && !h.startsWith(`${leader}_`) ? h : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, describe: seen },
    );
    times['Lease taken over'] = Date.now() - t;
    // Within the Lease's bound (15 s) plus the retry period: a handed-back Lease is taken at the next try.
    expect(Date.now() - t, next).to.be.below(LEADER_DEFAULTS.leaseDurationMs + LEADER_DEFAULTS.retryPeriodMs);
    await waitFor(
      'two pods Ready again, the deleted one gone',
      async () => {
        const list = (await pods()).filter(ready);
        return list.length === 2 && !list.some((p) => p.metadata.name === leader);
      },
      { timeoutMs: 120_000, intervalMs: 1_000, describe: seen },
    );
    times['replacement Ready'] = Date.now() - t;
  });

  it('rolls to a second tag with never more than a Lease duration without a leader', async () => {
    const second = `ghcr.io/joinguard/joinguard:v${version}-second`;
    // The same image under a second name: a new pod template, so a rolling update (maxSurge 25%: one new pod first).
    await node!.ctr(['images', 'tag', '--force', `ghcr.io/joinguard/joinguard:v${version}`, second]);
    // The Lease polled every 250 ms during the rollout: the longest stretch seen with no holder.
    let stop = false;
    let since: number | undefined;
    let longest = 0;
    const holders = new Set<string>();
    const watch = (async () => {
      while (!stop) {
        const h = await leaseHolder().catch(() => 'unknown');
        const now = Date.now();
        if (h) {
          holders.add(h);
          if (since !== undefined) longest = Math.max(longest, now - since);
          since = undefined;
        } else since ??= now;
        await new Promise((r) => setTimeout(r, 250));
      }
    })();
    const t = Date.now();
    try {
      const res = await kube.send(
        'PATCH',
        `/apis/apps/v1/namespaces/${ns}/deployments/joinguard-controller-manager`,
        { spec: { template: { spec: { containers: [{ name: 'manager', image: second }] } } } },
        'application/strategic-merge-patch+json',
      );
      expect(res.status, res.body).to.equal(200);
      await waitFor(
        'two pods Ready on the second tag, none left on the first',
        async () => {
          const all = await pods();
          const image = (p: Json) => (p.spec.containers as Json[]).find((c) => c.name === 'manager')!.image as string;
          return all.length === 2 && all.every((p) => ready(p) && image(p) === second);
        },
        { timeoutMs: 180_000, intervalMs: 1_000, describe: seen },
      );
      times['rollout'] = Date.now() - t;
      // A leader at the end, one of the new pods.
      const holder = await waitFor('the Lease held after the rollout', leaseHolder, { timeoutMs: 30_000 });
      const names = (await pods()).map((p) => p.metadata.name as string);
      expect(names, holder).to.include(holder.replace(/_[0-9a-f]{8}$/, ''));
    } finally {
      stop = true;
      await watch;
    }
    if (since !== undefined) longest = Math.max(longest, Date.now() - since);
    times['longest without a leader'] = longest;
    expect(longest, [...holders].join(', ')).to.be.below(LEADER_DEFAULTS.leaseDurationMs);
  });
});
