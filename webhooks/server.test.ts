// The HTTPS admission server: AdmissionReview in, AdmissionReview out, over TLS that follows rotated files.
import { mkdtemp, rm, copyFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { expect } from 'chai';
import type { LabelSelectorModel, MachineHealthCheckFacts } from '../api/capi/model.js';
import { startWebhookServer, VALIDATE_PATH, type WebhookServer } from './server.js';
import type { SpecRules } from './validate.js';
import type { Lookups } from './lookups.js';
import { selfSigned } from '../runtime/testing/test-certs.js';
import { RuntimeMetrics } from '../runtime/metrics.js';

const rules: SpecRules = {
  validateSpec: (spec) =>
    (spec as { joinTimeout?: string }).joinTimeout === 'bad'
      ? [{ field: 'spec.joinTimeout', message: 'must be a duration such as 20m' }]
      : [],
  warnings: () => [],
  matches: (_s: LabelSelectorModel | undefined) => false,
  readMachineHealthCheck: (o) => o as MachineHealthCheckFacts,
  strategyCapiProblem: (_s, capi) => (capi.minor !== undefined && capi.minor < 12 ? 'needs v1.12' : undefined),
  strategyMinCapiMinor: (s) => (s === 'MachineCondition' ? 12 : undefined),
};

function post(port: number, path: string, body: unknown, method = 'POST'): Promise<{ status: number; json: any }> {
  const data = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method,
        rejectUnauthorized: false,
        headers: { 'Content-Type': 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString() || 'null') }),
        );
      },
    );
    req.on('error', reject);
    req.end(method === 'POST' ? data : undefined);
  });
}

function servedSubject(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(s.getPeerX509Certificate()!.subject);
      s.end();
    });
    s.on('error', reject);
  });
}

const review = (operation: string, object: unknown, oldObject?: unknown) => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'uid-1', operation, namespace: 'ns', name: 'x', object, oldObject },
});
const check = (spec: Record<string, unknown>) => ({
  apiVersion: 'joinguard.io/v1alpha1',
  kind: 'MachineJoinCheck',
  metadata: { name: 'x', namespace: 'ns' },
  spec,
});

describe('webhooks/server', function () {
  this.timeout(20_000);
  let dir: string;
  let server: WebhookServer;
  let lookupsFail = false;
  const lookups: Lookups = {
    checks: async () => (lookupsFail ? Promise.reject(new Error('apiserver down')) : []),
    machineHealthChecks: async () => ({ objects: [], version: 'v1beta2' }),
    machines: async () => [],
  };

  const metrics = new RuntimeMetrics({ processMetrics: false });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'joinguard-webhook-'));
    const one = await selfSigned(dir, 'one');
    await copyFile(one.cert, join(dir, 'tls.crt'));
    await copyFile(one.key, join(dir, 'tls.key'));
    server = await startWebhookServer({
      port: 0,
      host: '127.0.0.1',
      certFile: join(dir, 'tls.crt'),
      keyFile: join(dir, 'tls.key'),
      rules,
      lookups,
      certPollMs: 200,
      metrics,
    });
  });
  after(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('validates: a refusal is 422 Invalid with one cause per field', async () => {
    const res = await post(
      server.port,
      VALIDATE_PATH,
      review('CREATE', check({ clusterName: 'c1', selector: {}, joinTimeout: 'bad' })),
    );
    const r = res.json.response;
    expect(r.allowed).to.equal(false);
    expect(r.status.code).to.equal(422);
    expect(r.status.reason).to.equal('Invalid');
    expect(r.status.message).to.equal(
      'MachineJoinCheck.joinguard.io "x" is invalid: spec.joinTimeout: must be a duration such as 20m',
    );
    expect(r.status.details.causes).to.deep.equal([
      { reason: 'FieldValueInvalid', message: 'must be a duration such as 20m', field: 'spec.joinTimeout' },
    ]);
  });

  it('validates: admits a good check, and DELETE without looking', async () => {
    expect(
      (await post(server.port, VALIDATE_PATH, review('CREATE', check({ clusterName: 'c1', selector: {} })))).json
        .response.allowed,
    ).to.equal(true);
    expect(
      (await post(server.port, VALIDATE_PATH, review('DELETE', undefined, check({})))).json.response.allowed,
    ).to.equal(true);
  });

  it('a failed lookup refuses with 500, so the user retries', async () => {
    lookupsFail = true;
    try {
      const r = (await post(server.port, VALIDATE_PATH, review('CREATE', check({ clusterName: 'c1', selector: {} }))))
        .json.response;
      expect(r.allowed).to.equal(false);
      expect(r.status.code).to.equal(500);
      expect(r.status.message).to.match(/apiserver down; try again/);
    } finally {
      lookupsFail = false;
    }
  });

  it('answers 400 to a non-review, 404 to other paths, 405 to GET, 200 on /healthz', async () => {
    expect((await post(server.port, VALIDATE_PATH, '{"kind":"Pod"}')).status).to.equal(400);
    expect((await post(server.port, VALIDATE_PATH, 'not json')).status).to.equal(400);
    // No mutating webhook: the CRD schema defaults every field (docs/decisions/admission-without-a-mutating-webhook.md).
    expect(
      (await post(server.port, '/mutate-joinguard-io-v1alpha1-machinejoincheck', review('CREATE', {}))).status,
    ).to.equal(404);
    expect((await post(server.port, VALIDATE_PATH, '', 'GET')).status).to.equal(405);
    expect((await post(server.port, '/healthz', '', 'GET')).status).to.equal(200);
  });

  it('serves a rotated certificate on new connections without a restart', async () => {
    expect(await servedSubject(server.port)).to.equal('CN=one');
    const two = await selfSigned(dir, 'two');
    // Key first, then cert: in between, the pair does not match and must not be served.
    await copyFile(two.key, join(dir, 'tls.key'));
    await copyFile(two.cert, join(dir, 'tls.crt'));
    const end = Date.now() + 5000;
    let subject = '';
    while (Date.now() < end && (subject = await servedSubject(server.port)) !== 'CN=two')
      await new Promise((r) => setTimeout(r, 100));
    expect(subject).to.equal('CN=two');
  });
  it("counts admission requests in controller-runtime's webhook families (by code), not the health endpoints", async () => {
    const count = async (code: string) => {
      const m = new RegExp(
        `^controller_runtime_webhook_requests_total\\{webhook="${VALIDATE_PATH}",code="${code}"\\} (\\d+)$`,
        'm',
      ).exec(await metrics.registry.metrics());
      return m ? Number(m[1]) : undefined;
    };
    const before200 = (await count('200'))!;
    const before400 = (await count('400')) ?? 0;
    expect(before200).to.be.a('number');
    await post(server.port, VALIDATE_PATH, review('CREATE', check({ clusterName: 'c1', selector: {} })));
    await post(server.port, VALIDATE_PATH, '{not json');
    await post(server.port, '/healthz', '', 'GET');
    await new Promise((r) => setTimeout(r, 50));
    expect(await count('200')).to.equal(before200 + 1);
    expect(await count('400')).to.equal(before400 + 1);
    expect(await metrics.registry.metrics()).to.include(
      `controller_runtime_webhook_requests_in_flight{webhook="${VALIDATE_PATH}"} 0`,
    );
  });
});
