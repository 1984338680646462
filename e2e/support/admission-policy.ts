// A real validating admission webhook for e2e specs (test-only): an HTTPS server on 127.0.0.1 with a serving
// certificate from the test control plane's CA, registered with the kube-apiserver as a
// ValidatingWebhookConfiguration, deciding each AdmissionReview with the spec's function — the shape of a policy
// engine (Kyverno, Gatekeeper) that refuses one user's writes to some objects. Also: a client identity of its
// own for a controller, so that such a policy can tell its writes apart. stop() removes both.
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { issueCert, issueServingCert } from '../../hack/testenv/certs.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import type { TestEnv } from './testenv.js';

const CONFIGS = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations';

export interface AdmissionCall {
  at: number;
  user: string;
  operation: string;
  /** `machines` or `machines/status`. */
  resource: string;
  name: string;
  allowed: boolean;
}

export interface PolicyOptions {
  name: string;
  /** Which writes reach the webhook: admissionregistration rules, and optional object and namespace selectors. */
  rules: Json[];
  objectSelector?: Json;
  namespaceSelector?: Json;
  /** The decision: undefined allows, a string refuses with that message. */
  decide(request: Json): string | undefined;
}

export class AdmissionPolicy {
  readonly calls: AdmissionCall[] = [];

  private constructor(
    private readonly server: https.Server,
    private readonly kube: KubeClient,
    readonly configName: string,
    private readonly dir: string,
  ) {}

  static async start(env: TestEnv, kube: KubeClient, o: PolicyOptions): Promise<AdmissionPolicy> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-policy-'));
    const pair = await issueServingCert(env.caCertFile, env.caKeyFile, dir);
    const server = https.createServer({ cert: fs.readFileSync(pair.certFile), key: fs.readFileSync(pair.keyFile) });
    const policy = new AdmissionPolicy(server, kube, o.name, dir);
    server.on('request', (req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const review = JSON.parse(body) as Json;
        const r = review.request ?? {};
        const refusal = o.decide(r);
        policy.calls.push({
          at: Date.now(),
          user: r.userInfo?.username ?? '',
          operation: r.operation,
          resource: `${r.resource?.resource}${r.subResource ? `/${r.subResource}` : ''}`,
          name: r.name,
          allowed: refusal === undefined,
        });
        const response =
          refusal === undefined
            ? { uid: r.uid, allowed: true }
            : { uid: r.uid, allowed: false, status: { code: 422, reason: 'Invalid', message: refusal } };
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response }));
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    await kube.create(CONFIGS, {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: o.name },
      webhooks: [
        {
          name: `${o.name}.policy.example.com`,
          clientConfig: {
            url: `https://127.0.0.1:${port}/validate`,
            caBundle: Buffer.from(env.caCertPem).toString('base64'),
          },
          rules: o.rules,
          ...(o.objectSelector ? { objectSelector: o.objectSelector } : {}),
          ...(o.namespaceSelector ? { namespaceSelector: o.namespaceSelector } : {}),
          failurePolicy: 'Fail',
          sideEffects: 'None',
          admissionReviewVersions: ['v1'],
          timeoutSeconds: 5,
        },
      ],
    });
    return policy;
  }

  refusals(user?: string): AdmissionCall[] {
    return this.calls.filter((c) => !c.allowed && (user === undefined || c.user === user));
  }

  async stop(): Promise<void> {
    await this.kube.delete(`${CONFIGS}/${this.configName}`).catch(() => false);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A kubeconfig straight to the test apiserver as user `name` (group system:masters), its own client certificate. */
export async function kubeconfigAs(env: TestEnv, name: string): Promise<string> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-user-'));
  try {
    const pair = await issueCert(
      { certFile: env.caCertFile, keyFile: env.caKeyFile },
      { commonName: name, organization: 'system:masters', usage: 'client' },
      path.join(dir, 'u.crt'),
      path.join(dir, 'u.key'),
    );
    const b64 = (f: string) => fs.readFileSync(f).toString('base64');
    return [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: ${name}`,
      '  cluster:',
      `    server: ${env.server}`,
      `    certificate-authority-data: ${Buffer.from(env.caCertPem).toString('base64')}`,
      'users:',
      `- name: ${name}`,
      '  user:',
      `    client-certificate-data: ${b64(pair.certFile)}`,
      `    client-key-data: ${b64(pair.keyFile)}`,
      'contexts:',
      `- name: ${name}`,
      '  context:',
      `    cluster: ${name}`,
      `    user: ${name}`,
      `current-context: ${name}`,
      '',
    ].join('\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
