// The add-on's release files on a real apiserver, the way clusterctl installs them: clusterctl's variable
// substitution (clusterctl itself when hack/testenv/build.sh built it, else its rules), clusterctl's own
// reading of a local repository, and a server-side apply of every object.
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { renderProviderFiles, type K8sObject } from '../../manifests/render.js';
import { findClusterctl } from '../../manifests/clusterctl.js';
import { skipOrFail } from '../../hack/testing/inputs.js';
import { substitute } from '../../manifests/substitute.js';
import { install, pathOf, raw, type Installed } from './install-env.js';
import { CERT_MANAGER_START_TIMEOUT_MS } from '../support/cert-manager.js';

const run = promisify(execFile);
type Json = Record<string, any>;

describe('install: the add-on components on the test control plane', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let installed: Installed;
  const ns = `jg-install-${process.pid}`;

  before(async function () {
    this.timeout(CERT_MANAGER_START_TIMEOUT_MS);
    env = await getTestEnv();
    installed = await install(env, ns, { JOINGUARD_LOG_VERBOSITY: '4' });
    console.log(
      `      (variables substituted by ${installed.components.via === 'clusterctl' ? 'clusterctl generate yaml' : "manifests/substitute.ts (clusterctl's rules; no clusterctl binary found)"})`,
    );
  });
  after(async () => {
    await installed?.uninstall();
  });

  it('substitutes both forms: ${VAR:=default} falls back, a set variable wins, into every namespaced object', () => {
    const objs = installed.components.objects as Json[];
    expect(objs.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).to.deep.equal([ns]);
    const d = objs.find((o) => o.kind === 'Deployment')!;
    expect(d.metadata.namespace).to.equal(ns);
    expect(d.spec.template.spec.containers[0].args).to.include.members([
      '--v=4',
      '--leader-elect=true',
      '--workload-node-check=false',
    ]);
    expect(installed.components.text).not.to.include('${');
  });

  it('refuses, like clusterctl, a ${VAR} without default that is not set', async () => {
    // clusterctl's own behaviour on this is pinned in manifests/substitute.test.ts.
    const { components } = await renderProviderFiles('0.1.0');
    const withRequired = components.replace('--v=${JOINGUARD_LOG_VERBOSITY:=2}', '--v=${JOINGUARD_REQUIRED_LEVEL}');
    let err: Error | undefined;
    try {
      substitute(withRequired, {});
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).to.match(/value for variables \[JOINGUARD_REQUIRED_LEVEL\] is not set/);
    expect(substitute(withRequired, { JOINGUARD_REQUIRED_LEVEL: '2' })).to.include('--v=2');
  });

  it('every object was accepted by the apiserver (server-side apply)', async () => {
    const admin = env.kubeConfig();
    for (const o of installed.components.objects as Json[]) {
      const path = await pathOf(admin, o as K8sObject);
      const res = await raw(admin, 'GET', path);
      expect(res.status, `${o.kind} ${o.metadata.name}: ${res.body.slice(0, 200)}`).to.equal(200);
    }
  });

  it('the Deployment meets the restricted Pod Security level its Namespace enforces (no warning)', async () => {
    const admin = env.kubeConfig();
    const d = installed.components.objects.find((o) => o.kind === 'Deployment')!;
    const res = await raw(
      admin,
      'PATCH',
      `/apis/apps/v1/namespaces/${ns}/deployments/${d.metadata.name}?fieldManager=clusterctl&force=true`,
      JSON.stringify(d),
      'application/apply-patch+yaml',
    );
    expect(res.status, res.body.slice(0, 300)).to.equal(200);
    expect(res.warnings).to.deep.equal([]);
  });

  it('clusterctl reads out/ as a local repository: generate provider --addon joinguard (--target-namespace)', async function () {
    const clusterctl = await findClusterctl();
    if (!clusterctl) skipOrFail(this, 'no clusterctl (hack/testenv/build.sh builds it with v1.14)');
    const { components, metadata } = await renderProviderFiles('0.1.0');
    const dir = await mkdtemp(join(tmpdir(), 'joinguard-repo-'));
    try {
      const repo = join(dir, 'addon-joinguard', 'v0.1.0');
      await mkdir(repo, { recursive: true });
      await writeFile(join(repo, 'addon-components.yaml'), components);
      await writeFile(join(repo, 'metadata.yaml'), metadata);
      const config = join(dir, 'clusterctl.yaml');
      await writeFile(
        config,
        `providers:\n  - name: joinguard\n    url: file://${repo}/addon-components.yaml\n    type: AddonProvider\n`,
      );
      const cc = (args: string[]) =>
        run(clusterctl, args, {
          env: {
            PATH: process.env['PATH'] ?? '',
            HOME: dir,
            XDG_CONFIG_HOME: join(dir, 'xdg'),
            CLUSTERCTL_DISABLE_VERSIONCHECK: 'true',
          },
          maxBuffer: 64 << 20,
        });
      const described = await cc([
        'generate',
        'provider',
        '--addon',
        'joinguard:v0.1.0',
        '--config',
        config,
        '--describe',
      ]);
      expect(described.stdout)
        .to.match(/Type:\s+AddonProvider/)
        .and.match(/ghcr\.io\/joinguard\/joinguard:v0\.1\.0/);
      const out = await cc([
        'generate',
        'provider',
        '--addon',
        'joinguard',
        '--config',
        config,
        '--target-namespace',
        'jg-moved',
      ]);
      const objs = parseAllDocuments(out.stdout)
        .map((d) => d.toJS() as Json)
        .filter(Boolean);
      expect(objs.filter((o) => o.kind === 'Namespace').map((o) => o.metadata.name)).to.deep.equal(['jg-moved']);
      for (const o of objs)
        expect(o.metadata.labels?.['cluster.x-k8s.io/provider'], `${o.kind} ${o.metadata.name}`).to.equal(
          'addon-joinguard',
        );
      const webhook = objs.find((o) => o.kind === 'ValidatingWebhookConfiguration')!;
      expect(webhook.metadata.annotations['cert-manager.io/inject-ca-from']).to.equal(
        'jg-moved/joinguard-serving-cert',
      );
      expect(webhook.webhooks[0].clientConfig.service.namespace).to.equal('jg-moved');
      const cert = objs.find((o) => o.kind === 'Certificate')!;
      expect(cert.spec.dnsNames).to.include('joinguard-webhook-service.jg-moved.svc');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
