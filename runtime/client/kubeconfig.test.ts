// Kubeconfig and in-cluster loading (files in a temp dir, no apiserver), and the lean runtime: no static
// import path from the command to @kubernetes/client-node.
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { clusterAccessFromKubeconfig, inClusterAccess, loadClusterAccess, tokenFromFile } from './kubeconfig.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

const config = (o: { server?: string; cluster?: string; user?: string; current?: string } = {}) => `
apiVersion: v1
kind: Config
current-context: ${o.current ?? 'admin@one'}
clusters:
- name: one
  cluster:
    server: ${o.server ?? 'https://127.0.0.1:6443'}
${o.cluster ?? `    certificate-authority-data: ${b64('CA-ONE')}`}
- name: two
  cluster:
    server: http://127.0.0.1:8001
contexts:
- name: admin@one
  context: { cluster: one, user: admin }
- name: proxy
  context: { cluster: two }
users:
- name: admin
  user:
${o.user ?? `    client-certificate-data: ${b64('CERT')}\n    client-key-data: ${b64('KEY')}`}
`;

describe('kubeconfig', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-kubeconfig-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('current-context: server, CA, client certificate by name', () => {
    const a = clusterAccessFromKubeconfig(config());
    expect(a.server.href).to.equal('https://127.0.0.1:6443/');
    expect([a.ca?.toString(), a.cert?.toString(), a.key?.toString()]).to.deep.equal(['CA-ONE', 'CERT', 'KEY']);
    expect(a.token).to.equal(undefined);
    expect(a.source).to.equal('kubeconfig (context admin@one)');
  });

  it('another context, an http:// server and no user (the fault proxy)', () => {
    const a = clusterAccessFromKubeconfig(config(), 'proxy');
    expect(a.server.protocol).to.equal('http:');
    expect(a.cert).to.equal(undefined);
  });

  it('files relative to the kubeconfig, insecure-skip-tls-verify, tls-server-name, token', async () => {
    fs.writeFileSync(path.join(dir, 'ca.crt'), 'CA-FILE');
    const file = path.join(dir, 'config');
    fs.writeFileSync(
      file,
      config({
        cluster:
          '    certificate-authority: ca.crt\n    insecure-skip-tls-verify: true\n    tls-server-name: api.internal',
        user: '    token: abc',
      }),
    );
    const a = loadClusterAccess({ kubeconfigPath: file }, {});
    expect(a.ca?.toString()).to.equal('CA-FILE');
    expect(a.insecureSkipTLSVerify).to.equal(true);
    expect(a.tlsServerName).to.equal('api.internal');
    expect(await a.token!()).to.equal('abc');
  });

  it("tokenFile is re-read after client-go's period, and a failed read keeps the last token", async () => {
    const f = path.join(dir, 'token');
    fs.writeFileSync(f, 'first\n');
    let t = 0;
    const token = tokenFromFile(f, 50_000, () => t);
    expect(await token()).to.equal('first');
    fs.writeFileSync(f, 'second');
    t = 49_000;
    expect(await token()).to.equal('first');
    t = 50_000;
    expect(await token()).to.equal('second');
    fs.rmSync(f);
    t = 200_000;
    expect(await token()).to.equal('second');
  });

  it('$KUBECONFIG with several files: the first to name an entry wins; in-cluster only without it', () => {
    const a = path.join(dir, 'a');
    const b = path.join(dir, 'b');
    fs.writeFileSync(a, 'apiVersion: v1\nkind: Config\ncurrent-context: proxy\n');
    fs.writeFileSync(b, config());
    const access = loadClusterAccess(
      {},
      { KUBECONFIG: `${a}${path.delimiter}${b}`, KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
    );
    expect(access.server.href).to.equal('http://127.0.0.1:8001/');
  });

  it('in-cluster: server from KUBERNETES_SERVICE_HOST/PORT (IPv6 too), CA and a rotating token from the ServiceAccount folder', async () => {
    fs.writeFileSync(path.join(dir, 'token'), 'sa-token');
    fs.writeFileSync(path.join(dir, 'ca.crt'), 'SA-CA');
    const a = inClusterAccess({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, dir);
    expect(a.server.href).to.equal('https://[fd00::1]/');
    expect(a.ca?.toString()).to.equal('SA-CA');
    expect(await a.token!()).to.equal('sa-token');
    expect(() => inClusterAccess({}, dir)).to.throw(/not in a cluster/);
  });

  it('clear errors: unknown context, missing key, unsupported fields', () => {
    expect(() => clusterAccessFromKubeconfig(config(), 'nope')).to.throw(/no context named "nope"/);
    expect(() => clusterAccessFromKubeconfig(config({ user: `    client-certificate-data: ${b64('CERT')}` }))).to.throw(
      /both the certificate and its key/,
    );
    expect(() => clusterAccessFromKubeconfig(config({ user: '    username: admin\n    password: secret' }))).to.throw(
      /user field username is not supported/,
    );
    expect(() => clusterAccessFromKubeconfig('current-context: x\n')).to.throw(/no context named "x"/);
  });

  it('an exec plugin runs through client-node, loaded on the first request', async function () {
    // Loading client-node and starting a node process: 1.6 s alone, past 20 s once beside a property sweep and four
    // control planes (load 6-7). A bound on hanging, not on speed.
    this.timeout(60_000);
    const cred = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token: 'from-exec' },
    });
    const script = path.join(dir, 'cred.js');
    fs.writeFileSync(script, `process.stdout.write(${JSON.stringify(cred)})`);
    const user = `    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: ${process.execPath}\n      args: [${JSON.stringify(script)}]\n      interactiveMode: Never`;
    const a = clusterAccessFromKubeconfig(config({ user }));
    expect(await a.token!()).to.equal('from-exec');
  });
});

describe('the runtime import path', () => {
  it('has no static import of @kubernetes/client-node from cmd/joinguard.ts, nor from the webhook server it loads (issue 11: a lean process)', () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
    const seen = new Set<string>();
    const offenders: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const src = fs.readFileSync(file, 'utf8');
      // Static imports and re-exports that stay in the JS (not `import type`); dynamic import() is lazy by design.
      for (const m of src.matchAll(/^(?:import|export)\s+(?!type\s)[^;]*?from\s+'([^']+)'/gm)) {
        const spec = m[1]!;
        if (spec.startsWith('@kubernetes/client-node')) offenders.push(path.relative(root, file));
        if (spec.startsWith('.')) visit(path.resolve(path.dirname(file), spec.replace(/\.js$/, '.ts')));
      }
    };
    visit(path.join(root, 'cmd/joinguard.ts'));
    visit(path.join(root, 'webhooks/server.ts')); // imported by the command with --webhook-port
    expect(seen.size).to.be.above(20);
    expect(offenders).to.deep.equal([]);
  });
});
