// Admission of MachineJoinChecks by the real kube-apiserver, with the shared table of bad checks
// (api/v1alpha1/testdata/bad-checks.ts). First the CRD alone, no webhook: every row the table says the
// apiserver or the schema refuses is refused naming its field, and every row it gives to the webhook is
// admitted (dry run), so each layer is proven to be the one that refuses. Then with the add-on's validating
// webhook installed (pointed at the webhook server run here, lookups under the add-on's ServiceAccount): every
// row is refused naming its field. Requests ask for strict field validation, as kubectl does.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BAD_CHECKS,
  CP,
  CPN,
  EXISTING_CHECKS,
  EXISTING_MACHINE,
  MD,
  type BadCheck,
} from '../../api/v1alpha1/testdata/bad-checks.js';
import { discoverCapi } from '../../runtime/client/discovery.js';
import { loadClusterAccess } from '../../runtime/client/kubeconfig.js';
import { RestClient } from '../../runtime/client/rest.js';
import { issueServingCert } from '../../hack/testenv/certs.js';
import { objectsOf, renderProviderFiles, type K8sObject } from '../../manifests/render.js';
import { startWebhookServer, type WebhookServer } from '../../webhooks/server.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import {
  apply,
  install,
  pathOf,
  pointedAt,
  raw,
  waitEstablished,
  type Installed,
  type RawResponse,
} from './install-env.js';
import { CERT_MANAGER_START_TIMEOUT_MS } from '../support/cert-manager.js';

type Json = Record<string, any>;
const expr = (key: string, operator: string, values?: string[]) => ({
  matchExpressions: [{ key, operator, ...(values ? { values } : {}) }],
});
const STRICT = 'fieldValidation=Strict';

describe('install: admission of MachineJoinChecks by the real kube-apiserver', function () {
  this.timeout(180_000);
  let env: TestEnv;
  let installed: Installed | undefined;
  const ns = `jg-admission-${process.pid}`;
  const path = `/apis/joinguard.io/v1alpha1/namespaces/${ns}/machinejoinchecks`;
  const mjc = (name: string, spec: unknown, extra: Json = {}, metadata: Json = {}) => ({
    apiVersion: 'joinguard.io/v1alpha1',
    kind: 'MachineJoinCheck',
    metadata: { name, ...metadata },
    spec,
    ...extra,
  });
  const create = (name: string, spec: Json, dryRun = false) =>
    raw(env.kubeConfig(), 'POST', `${path}?${STRICT}${dryRun ? '&dryRun=All' : ''}`, mjc(name, spec));

  /** The row's request: a create, or an update (PUT of the whole spec) of an existing check. */
  async function attempt(row: BadCheck, index: number, dryRun: boolean): Promise<RawResponse> {
    const q = `?${STRICT}${dryRun ? '&dryRun=All' : ''}`;
    if (row.update) {
      const current = JSON.parse((await raw(env.kubeConfig(), 'GET', `${path}/${row.update}`)).body) as Json;
      return raw(env.kubeConfig(), 'PUT', `${path}/${row.update}${q}`, { ...current, spec: row.spec });
    }
    return raw(env.kubeConfig(), 'POST', `${path}${q}`, mjc(row.objectName ?? `bad-${index}`, row.spec, row.extra));
  }

  function expectRefused(row: BadCheck, res: RawResponse): void {
    const body = JSON.parse(res.body) as { code: number; reason: string; message: string };
    expect(res.status, res.body).to.equal(row.code ?? 422);
    expect(body.reason).to.equal(row.code === 400 ? 'BadRequest' : 'Invalid');
    expect(body.message, body.message).to.include(row.field);
    if (row.says) expect(body.message).to.match(row.says);
  }

  before(async () => {
    env = await getTestEnv();
    const admin = env.kubeConfig();
    const leftover = await raw(
      admin,
      'GET',
      '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/joinguard-validating-webhook-configuration',
    );
    expect(
      leftover.status,
      'a JoinGuard webhook configuration left by another spec would judge the CRD-alone phase',
    ).to.equal(404);
    const { components } = await renderProviderFiles('0.1.0');
    const crd = objectsOf(components, {}).find((o) => o.kind === 'CustomResourceDefinition')!;
    await apply(admin, crd);
    await waitEstablished(admin, crd.metadata.name);
    await apply(admin, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    // The world the overlap rows meet: existing checks and a Machine that breaks CAPI's label conventions.
    for (const c of EXISTING_CHECKS) {
      const res = await create(c.name, c.spec);
      expect(res.status, `${c.name}: ${res.body}`).to.equal(201);
    }
    const m = await raw(admin, 'POST', `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: { name: EXISTING_MACHINE.name, labels: EXISTING_MACHINE.labels },
      spec: {
        clusterName: 'c1',
        bootstrap: { dataSecretName: 'odd-bootstrap' },
        infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'FakeMachine', name: 'odd' },
      },
    });
    expect(m.status, m.body).to.equal(201);
  });
  after(async () => {
    await installed?.uninstall();
  });

  it(`has at least 78 bad checks in its table (${BAD_CHECKS.length})`, () => {
    expect(BAD_CHECKS.length).to.be.at.least(78);
  });

  describe('the CRD alone (schema and CEL, no webhook)', () => {
    BAD_CHECKS.forEach((row, i) => {
      if (row.refusedBy === 'webhook') {
        it(`admits (the webhook's to refuse): ${row.name}`, async () => {
          const res = await attempt(row, i, true);
          expect(res.status, res.body).to.be.oneOf([200, 201]);
        });
      } else {
        it(`refuses: ${row.name} (${row.field})`, async () => expectRefused(row, await attempt(row, i, true)));
      }
    });

    it('stores a minimal check with every default of the schema, and no label', async () => {
      const res = await create(
        'defaults-only',
        { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-defaults' } } },
        true,
      );
      expect(res.status, res.body).to.equal(201);
      const stored = JSON.parse(res.body) as Json;
      expect(stored.metadata.labels).to.equal(undefined);
      expect(stored.spec).to.deep.include({
        joinTimeout: '20m',
        maxInFlight: 1,
        neverJoinedLimit: 3,
        firstControlPlane: 'Remediate',
        dryRun: false,
        paused: false,
      });
      expect(stored.spec.remediation).to.deep.equal({ strategy: 'Auto', maxPerOwner: 5, window: '24h' });
      expect(stored.spec.suspicion).to.deep.equal({
        consecutiveJoinFailures: 2,
        probeInterval: '30m',
        maxProbeInterval: '8h',
      });
      expect(stored.spec).not.to.have.property('provisionTimeout');
    });

    it('admits the bounds themselves: 8760h, 1, 100%, 2147483647, a 63-character Cluster name with dots', async () => {
      const res = await create(
        'bounds',
        {
          clusterName: `a.${'b'.repeat(59)}.c`,
          selector: { matchLabels: { [MD]: 'md-bounds' } },
          joinTimeout: '8760h',
          provisionTimeout: '525600m',
          maxInFlight: '100%',
          remediation: { maxPerOwner: 2147483647, window: '8760h' },
          suspicion: { consecutiveJoinFailures: 2147483647, probeInterval: '1ns', maxProbeInterval: '8760h' },
          neverJoinedLimit: 0,
        },
        true,
      );
      expect(res.status, res.body).to.equal(201);
    });
  });

  describe('with the validating webhook installed', () => {
    before(async function () {
      this.timeout(CERT_MANAGER_START_TIMEOUT_MS);
      installed = await install(env, ns);
    });

    BAD_CHECKS.forEach((row, i) => {
      it(`refuses: ${row.name} (${row.field})`, async () => expectRefused(row, await attempt(row, i, false)));
    });

    it('admits a minimal check, defaulted by the schema, with no warning', async () => {
      const res = await create('workers-md-1', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-1' } } });
      expect(res.status, res.body).to.equal(201);
      expect(res.warnings).to.deep.equal([]);
      const stored = JSON.parse(res.body) as Json;
      expect(stored.metadata.labels).to.equal(undefined);
      expect(stored.spec.remediation).to.deep.equal({ strategy: 'Auto', maxPerOwner: 5, window: '24h' });
    });

    it('admits a joinTimeout under 2m with a warning', async () => {
      const res = await create('quick', {
        clusterName: 'c1',
        selector: { matchLabels: { [MD]: 'md-2' } },
        joinTimeout: '90s',
      });
      expect(res.status, res.body).to.equal(201);
      expect(res.warnings.join('\n'))
        .to.match(/joinTimeout/)
        .and.match(/2m/);
    });

    it('admits MachineCondition on this CAPI (v1.14), warning only if discovery cannot tell the minor', async () => {
      const rest = new RestClient(loadClusterAccess({ kubeconfigPath: env.kubeconfigPath }), {
        userAgent: 'joinguard-e2e',
      });
      const found = (await discoverCapi(rest)) as { minor?: number };
      rest.close();
      const res = await create('mc', {
        clusterName: 'c1',
        selector: { matchLabels: { [MD]: 'md-mc' } },
        remediation: { strategy: 'MachineCondition' },
      });
      expect(res.status, res.body).to.equal(201);
      if (found.minor !== undefined) {
        expect(found.minor).to.be.at.least(12);
        expect(res.warnings).to.deep.equal([]);
      } else {
        expect(res.warnings).to.have.length(1);
        expect(res.warnings[0]).to.match(
          /^spec\.remediation\.strategy: MachineCondition needs CAPI v1\.12 or later, and the CAPI release of this management cluster is not known/,
        );
      }
    });

    it('admits with a warning a check that a MachineHealthCheck with an unset node startup timeout also selects', async () => {
      const admin = env.kubeConfig();
      const mhcPath = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machinehealthchecks`;
      const mhc = (name: string, selector: Json, checks: Json) =>
        raw(admin, 'POST', mhcPath, {
          apiVersion: 'cluster.x-k8s.io/v1beta2',
          kind: 'MachineHealthCheck',
          metadata: { name },
          spec: { clusterName: 'c1', selector, checks },
        });
      const unhealthy = { unhealthyNodeConditions: [{ type: 'Ready', status: 'Unknown', timeoutSeconds: 300 }] };
      for (const r of [
        await mhc('md-3-default', { matchLabels: { [MD]: 'md-3' } }, unhealthy),
        await mhc('md-4-off', { matchLabels: { [MD]: 'md-4' } }, { ...unhealthy, nodeStartupTimeoutSeconds: 0 }),
      ])
        expect(r.status, r.body).to.equal(201);

      const warned = await create('md-3', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-3' } } });
      expect(warned.status, warned.body).to.equal(201);
      expect(warned.warnings).to.have.length(1);
      // CAPI's own MHC defaulting has written 600 into the unset timeout.
      expect(warned.warnings[0]).to.match(
        /MachineHealthCheck "md-3-default" also selects these Machines.*600s \(CAPI's default\).*set its nodeStartupTimeout explicitly to 0/,
      );

      const quiet = await create('md-4', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-4' } } });
      expect(quiet.status, quiet.body).to.equal(201);
      expect(quiet.warnings).to.deep.equal([]);
    });

    it('admits a control-plane check next to worker checks (CAPI ownership labels keep them apart)', async () => {
      const res = await create('cp-kcp-2', {
        clusterName: 'c1',
        selector: { matchLabels: { [CPN]: 'kcp-2' }, ...expr(CP, 'Exists') },
      });
      expect(res.status, res.body).to.equal(201);
    });

    it('admits a metadata-only update (resume annotation) without judging the spec again', async () => {
      const res = await raw(
        env.kubeConfig(),
        'PATCH',
        `${path}/workers-md-0`,
        JSON.stringify({ metadata: { annotations: { 'joinguard.io/resume': '1' } } }),
        'application/merge-patch+json',
      );
      expect(res.status, res.body).to.equal(200);
    });

    it('lets the controller write status without the webhooks (the /status subresource is not sent to them)', async () => {
      // A whole-status update with the read resourceVersion, as the controller writes it, under its identity.
      const current = JSON.parse((await raw(env.kubeConfig(), 'GET', `${path}/workers-md-0`)).body) as Json;
      const res = await raw(installed!.sa, 'PUT', `${path}/workers-md-0/status`, {
        ...current,
        status: { expectedMachines: 0 },
      });
      expect(res.status, res.body).to.equal(200);
      expect(res.warnings).to.deep.equal([]);
    });
  });

  describe('while the webhook is down (failurePolicy Fail)', () => {
    // The shipped configuration, pointed at a port nothing listens on, judging only checks labelled for it.
    const LABEL = 'joinguard.io/e2e-webhook';
    let config: K8sObject | undefined;
    const check = `${path}/down-1`;
    const patch = (body: Json) =>
      raw(env.kubeConfig(), 'PATCH', check, JSON.stringify(body), 'application/merge-patch+json');

    before(async () => {
      const res = await create('down-1', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-down' } } });
      expect(res.status, res.body).to.equal(201);
      const { components } = await renderProviderFiles('0.1.0');
      const original = objectsOf(components, { JOINGUARD_NAMESPACE: ns }).find(
        (o) => o.kind === 'ValidatingWebhookConfiguration',
      )!;
      const c = pointedAt(original, 'https://127.0.0.1:1', env.caCertPem) as K8sObject & { webhooks: Json[] };
      c.metadata = { name: `joinguard-e2e-down-${process.pid}` };
      for (const w of c.webhooks) w['objectSelector'] = { matchLabels: { [LABEL]: 'down' } };
      config = c;
      await apply(env.kubeConfig(), c);
    });
    after(async () => {
      if (config) await raw(env.kubeConfig(), 'DELETE', await pathOf(env.kubeConfig(), config));
    });

    it('passes a metadata-only update without calling it: a label, then joinguard.io/resume', async () => {
      const labelled = await patch({ metadata: { labels: { [LABEL]: 'down' } } });
      expect(labelled.status, labelled.body).to.equal(200);
      const resumed = await patch({ metadata: { annotations: { 'joinguard.io/resume': 'after-outage' } } });
      expect(resumed.status, resumed.body).to.equal(200);
    });

    it('refuses a spec change and a create, saying the webhook could not be called', async () => {
      const changed = await patch({ spec: { joinTimeout: '30m' } });
      expect(changed.status, changed.body).to.equal(500);
      expect(JSON.parse(changed.body).message).to.match(
        /failed calling webhook "validation\.machinejoincheck\.joinguard\.io"/,
      );
      const created = await raw(
        env.kubeConfig(),
        'POST',
        `${path}?${STRICT}`,
        mjc(
          'down-2',
          { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-down-2' } } },
          {},
          { labels: { [LABEL]: 'down' } },
        ),
      );
      expect(created.status, created.body).to.equal(500);
    });
  });

  describe('on a CAPI release before v1.12 (the webhook server told so by its discovery)', () => {
    // A second webhook server whose discovery answers v1.10, behind a configuration that judges only checks
    // labelled for it: the real apiserver's refusal path with a release this control plane does not run.
    const LABEL = 'joinguard.io/e2e-capi';
    let server: WebhookServer | undefined;
    let config: K8sObject | undefined;
    let dir: string | undefined;

    before(async () => {
      const admin = env.kubeConfig();
      dir = await mkdtemp(join(tmpdir(), 'joinguard-admission-'));
      const pair = await issueServingCert(env.caCertFile, env.caKeyFile, dir);
      server = await startWebhookServer({
        port: 0,
        host: '127.0.0.1',
        certFile: pair.certFile,
        keyFile: pair.keyFile,
        discoverCapi: async () => ({
          apiVersion: 'v1beta1',
          minor: 10,
          version: 'v1.10.10',
          source: 'a test stand-in',
        }),
        lookups: {
          checks: async () => [],
          machineHealthChecks: async () => ({ objects: [], version: 'v1beta1' }),
          machines: async () => [],
        },
      });
      const { components } = await renderProviderFiles('0.1.0');
      const original = objectsOf(components, { JOINGUARD_NAMESPACE: ns }).find(
        (o) => o.kind === 'ValidatingWebhookConfiguration',
      )!;
      const c = pointedAt(original, `https://127.0.0.1:${server.port}`, env.caCertPem) as K8sObject & {
        webhooks: Json[];
      };
      c.metadata = { name: `joinguard-e2e-capi-v1-10-${process.pid}` };
      for (const w of c.webhooks) w['objectSelector'] = { matchLabels: { [LABEL]: 'v1.10' } };
      config = c;
      await apply(admin, c);
    });
    after(async () => {
      if (config) await raw(env.kubeConfig(), 'DELETE', await pathOf(env.kubeConfig(), config));
      await server?.stop();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    const createThere = (name: string, strategy: string) =>
      raw(
        env.kubeConfig(),
        'POST',
        `${path}?${STRICT}&dryRun=All`,
        mjc(
          name,
          { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-old' } }, remediation: { strategy } },
          {},
          { labels: { [LABEL]: 'v1.10' } },
        ),
      );

    it('refuses MachineCondition naming spec.remediation.strategy, the release and what is accepted', async () => {
      const res = await createThere('mc-old', 'MachineCondition');
      expect(res.status, res.body).to.equal(422);
      expect(JSON.parse(res.body).message).to.match(
        /spec\.remediation\.strategy: MachineCondition needs CAPI v1\.12 or later .*runs CAPI v1\.10\.10: use Auto or OwnerRemediated.*\(CAPI found from a test stand-in\)/,
      );
    });

    it('admits OwnerRemediated there', async () => {
      const res = await createThere('or-old', 'OwnerRemediated');
      expect(res.status, res.body).to.equal(201);
    });
  });
});
