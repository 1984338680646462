// The add-on's webhook with real cert-manager (controller, webhook and cainjector built from cert-manager's module,
// hack/testenv/cert-manager/): cert-manager issues the serving certificate into the Secret the Deployment mounts,
// cainjector writes its CA into the ValidatingWebhookConfiguration (cert-manager.io/inject-ca-from), JoinGuard's
// webhook serves that certificate, the apiserver calls it through the add-on's Service and refuses a bad check;
// then a forced renewal (what `cmctl renew` does: the Certificate's Issuing condition set to True) is issued,
// injected and served without a restart, checked on the webhook's own TLS handshake.
import { X509Certificate } from 'node:crypto';
import { connect } from 'node:tls';
import { expect } from 'chai';
import { BAD_CHECKS } from '../../api/v1alpha1/testdata/bad-checks.js';
import { CERT_MANAGER_WEBHOOK } from '../../hack/testenv/cert-manager.js';
import { waitFor } from '../../hack/testenv/wait.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { install, raw, servingCertSecret, type Installed } from './install-env.js';
import { CERT_MANAGER_START_TIMEOUT_MS } from '../support/cert-manager.js';

type Json = Record<string, any>;
const CERTIFICATE = 'joinguard-serving-cert';
const VWC =
  '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/joinguard-validating-webhook-configuration';
const JOINGUARD_WEBHOOK = 'validation.machinejoincheck.joinguard.io';
/** A check only the webhook refuses (the schema admits it): a refusal naming it came through the webhook call. */
const BAD = BAD_CHECKS.find((r) => r.name === 'matchLabels of another Cluster')!;

describe('install: the serving certificate from real cert-manager', function () {
  // cert-manager's first build takes minutes (cached after); its start and an issuance take seconds.
  this.timeout(180_000);
  let env: TestEnv;
  let installed: Installed;
  const ns = `jg-cert-manager-${process.pid}`;
  const get = async (path: string): Promise<Json> => {
    const res = await raw(env.kubeConfig(), 'GET', path);
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${res.body.slice(0, 300)}`);
    return JSON.parse(res.body) as Json;
  };
  const certificatePath = () => `/apis/cert-manager.io/v1/namespaces/${ns}/certificates/${CERTIFICATE}`;
  const secret = () => get(`/api/v1/namespaces/${ns}/secrets/${installed.servingCert.secret}`);
  const pemOf = (s: Json, key: string) => Buffer.from(s.data[key] as string, 'base64').toString('utf8');
  const serialOf = (s: Json) => new X509Certificate(pemOf(s, 'tls.crt')).serialNumber;
  const caBundle = async () => ((await get(VWC)).webhooks as Json[]).map((w) => w.clientConfig.caBundle as string);
  /** The serial of the certificate JoinGuard's webhook presents, verified as the apiserver verifies it. */
  const servedSerial = (caPem: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const socket = connect(
        {
          host: '127.0.0.1',
          port: installed.webhook.port,
          servername: `joinguard-webhook-service.${ns}.svc`,
          ca: caPem,
        },
        () => {
          const serial = socket.getPeerX509Certificate()?.serialNumber ?? '';
          socket.end();
          resolve(serial);
        },
      );
      socket.on('error', reject);
    });
  const createBad = () =>
    raw(
      env.kubeConfig(),
      'POST',
      `/apis/joinguard.io/v1alpha1/namespaces/${ns}/machinejoinchecks?fieldValidation=Strict`,
      {
        apiVersion: 'joinguard.io/v1alpha1',
        kind: 'MachineJoinCheck',
        metadata: { name: 'bad-other-cluster' },
        spec: BAD.spec,
      },
    );
  const refusedThroughWebhook = async () => {
    const res = await createBad();
    return (
      res.status === 422 && JSON.parse(res.body).message.includes(`admission webhook "${JOINGUARD_WEBHOOK}" denied`)
    );
  };

  before(async function () {
    this.timeout(CERT_MANAGER_START_TIMEOUT_MS);
    env = await getTestEnv();
    installed = await install(env, ns);
  });
  after(async () => {
    await installed?.uninstall();
  });

  it(`runs cert-manager v1.21.2 (the tool module's pin), whose own webhook judges cert-manager objects`, async () => {
    expect(installed.certManager.version).to.equal('v1.21.2');
    // A Certificate shorter than an hour: cert-manager's webhook refuses it, called by the apiserver.
    const res = await raw(
      env.kubeConfig(),
      'POST',
      `/apis/cert-manager.io/v1/namespaces/${ns}/certificates?dryRun=All`,
      {
        apiVersion: 'cert-manager.io/v1',
        kind: 'Certificate',
        metadata: { name: 'too-short' },
        spec: {
          secretName: 'too-short',
          duration: '30m',
          dnsNames: ['a.example'],
          issuerRef: { kind: 'Issuer', name: 'joinguard-selfsigned-issuer' },
        },
      },
    );
    expect(res.status, res.body).to.equal(403); // cert-manager's webhook answers a refusal with Forbidden
    expect(JSON.parse(res.body).message)
      .to.include(`admission webhook "${CERT_MANAGER_WEBHOOK}" denied the request`)
      .and.match(/spec\.duration/);
  });

  it('cert-manager issued the serving certificate into the Secret the Deployment mounts', async () => {
    const cert = await get(certificatePath());
    expect((cert.status.conditions as Json[]).find((c) => c.type === 'Ready')?.status).to.equal('True');
    expect(cert.spec.secretName).to.equal(servingCertSecret(installed.components.objects));
    const s = await secret();
    expect(s.metadata.annotations['cert-manager.io/certificate-name']).to.equal(CERTIFICATE);
    const x509 = new X509Certificate(pemOf(s, 'tls.crt'));
    expect(x509.subjectAltName).to.include(`DNS:joinguard-webhook-service.${ns}.svc`);
    // The self-signed Issuer: the certificate is its own CA, and ca.crt holds it.
    expect(x509.issuer).to.equal(x509.subject);
    expect(pemOf(s, 'ca.crt')).to.equal(pemOf(s, 'tls.crt'));
  });

  it('cainjector wrote the Certificate’s CA into the ValidatingWebhookConfiguration (inject-ca-from)', async () => {
    const vwc = await get(VWC);
    expect(vwc.metadata.annotations['cert-manager.io/inject-ca-from']).to.equal(`${ns}/${CERTIFICATE}`);
    expect(await caBundle()).to.deep.equal([(await secret()).data['ca.crt']]);
    // Written by cainjector's field manager, not by the apply of the rendered configuration.
    const writers = (vwc.metadata.managedFields as Json[])
      .filter((f) => JSON.stringify(f.fieldsV1 ?? {}).includes('"f:caBundle"'))
      .map((f) => f.manager as string);
    expect(writers).to.deep.equal(['cert-manager-cainjector']);
  });

  it('JoinGuard’s webhook serves that certificate, and the apiserver calls it to refuse a bad check', async () => {
    const s = await secret();
    expect(await servedSerial(pemOf(s, 'ca.crt'))).to.equal(serialOf(s));
    const res = await createBad();
    expect(res.status, res.body).to.equal(422);
    expect(JSON.parse(res.body).message)
      .to.include(`admission webhook "${JOINGUARD_WEBHOOK}" denied the request`)
      .and.include(BAD.field)
      .and.match(BAD.says!);
  });

  it('a forced renewal (Issuing=True, as `cmctl renew`) is issued, injected and served without a restart', async () => {
    const before = await secret();
    const oldSerial = serialOf(before);
    const port = installed.webhook.port;
    const cert = await get(certificatePath());
    const revision = cert.status.revision as number;
    // What cmctl renew writes: the Issuing condition, True, reason ManuallyTriggered, through the status subresource.
    const conditions = [
      ...((cert.status.conditions ?? []) as Json[]).filter((c) => c.type !== 'Issuing'),
      {
        type: 'Issuing',
        status: 'True',
        reason: 'ManuallyTriggered',
        message: 'Certificate re-issuance manually triggered',
        lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
        observedGeneration: cert.metadata.generation,
      },
    ];
    const t0 = Date.now();
    const put = await raw(env.kubeConfig(), 'PUT', `${certificatePath()}/status`, {
      ...cert,
      status: { ...cert.status, conditions },
    });
    expect(put.status, put.body).to.equal(200);

    const renewed = await waitFor('a new certificate in the Secret', async () => {
      const s = await secret();
      return serialOf(s) !== oldSerial ? s : undefined;
    });
    const issuedMs = Date.now() - t0;
    const newSerial = serialOf(renewed);
    await waitFor(
      'the webhook serving the new certificate',
      async () => (await servedSerial(pemOf(renewed, 'ca.crt'))) === newSerial,
      {
        timeoutMs: 30_000,
      },
    );
    const servedMs = Date.now() - t0;
    // cainjector appends the new CA to the bundle and drops only expired ones: until the old certificate expires
    // the apiserver trusts both, so a webhook still serving the old files (the kubelet syncs a Secret volume within
    // about a minute) keeps being called while the new one is already trusted.
    const serialsOf = (b64: string) =>
      Buffer.from(b64, 'base64')
        .toString('utf8')
        .split(/(?=-----BEGIN CERTIFICATE-----)/)
        .map((pem) => new X509Certificate(pem).serialNumber);
    const bundle = await waitFor(
      'cainjector adding the new CA to the caBundle',
      async () => {
        const [b] = await caBundle();
        return b && serialsOf(b).includes(newSerial) ? serialsOf(b) : undefined;
      },
      {
        timeoutMs: 30_000,
        describe: async () => `caBundle serials ${JSON.stringify((await caBundle()).map(serialsOf))}`,
      },
    );
    expect(bundle).to.have.members([oldSerial, newSerial]);
    await waitFor('the apiserver refusing the bad check through the webhook again', refusedThroughWebhook, {
      timeoutMs: 30_000,
    });
    console.log(
      `      (renewal: issued ${(issuedMs / 1000).toFixed(1)} s, served ${(servedMs / 1000).toFixed(1)} s, refused through the webhook ${((Date.now() - t0) / 1000).toFixed(1)} s after Issuing=True)`,
    );
    expect((await get(certificatePath())).status.revision).to.equal(revision + 1);
    const mib = (kib: number) => (kib / 1024).toFixed(0);
    console.log(
      `      (cert-manager peak RSS: ${Object.entries(installed.certManager.memory())
        .map(([c, m]) => `${c} ${mib(m.hwmKiB)} MiB`)
        .join(', ')})`,
    );
    // The same server, on the same port: the watcher reloaded the rotated files (runtime/serving/tls.ts).
    expect(installed.webhook.port).to.equal(port);
    expect(installed.servingCert.written.length).to.be.at.least(2);
  });
});
