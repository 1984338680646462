// The diagnostics endpoint: HTTPS with the self-signed certificate, --tls-min-version/--tls-cipher-suites, and
// controller-runtime's TokenReview/SubjectAccessReview filter with its caches and retries. Unit tests against a
// fake apiserver (a function answering the reviews); e2e/operate/metrics.test.ts does it against the real one.
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import tls from 'node:tls';
import { expect } from 'chai';
import { Registry, Counter } from 'prom-client';
import { DelegatingAuth } from './diagnostics-auth.js';
import { silentLogger } from '../logger.js';
import { startDiagnosticsServer, type BoundServer } from './servers.js';
import { selfSignedCertificate, servingTls } from './serving-tls.js';

type Json = Record<string, any>;

/** A fake apiserver: tokens -> users, and the (user, verb path) pairs RBAC allows. */
function fakeApiserver() {
  const calls: string[] = [];
  const users: Record<string, string> = {
    'reader-token': 'system:serviceaccount:mon:prometheus',
    'nobody-token': 'system:serviceaccount:mon:nobody',
  };
  const allowed = new Set([
    'system:serviceaccount:mon:prometheus get /metrics',
    'system:serviceaccount:mon:prometheus put /debug/flags/v',
  ]);
  let failures = 0;
  const post = async (path: string, body: Json): Promise<Json> => {
    calls.push(`${path.split('/').pop()} ${body.spec.token ?? body.spec.user}`);
    if (failures > 0) {
      failures--;
      throw Object.assign(new Error('no answer'), { code: 0 });
    }
    if (path.endsWith('/tokenreviews')) {
      const u = users[body.spec.token];
      return {
        status: u
          ? { authenticated: true, user: { username: u, groups: ['system:serviceaccounts'] } }
          : { authenticated: false },
      };
    }
    const s = body.spec;
    expect(s.groups).to.include('system:authenticated');
    return {
      status: { allowed: allowed.has(`${s.user} ${s.nonResourceAttributes.verb} ${s.nonResourceAttributes.path}`) },
    };
  };
  return { post, calls, failNext: (n: number) => (failures = n) };
}

function request(
  port: number,
  o: {
    path?: string;
    token?: string;
    method?: string;
    body?: string;
    minVersion?: tls.SecureVersion;
    maxVersion?: tls.SecureVersion;
    ciphers?: string;
  },
): Promise<{ code: number; body: string; cipher?: string; protocol?: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: o.path ?? '/metrics',
        method: o.method ?? 'GET',
        rejectUnauthorized: false,
        agent: false,
        ...(o.token ? { headers: { Authorization: `Bearer ${o.token}` } } : {}),
        ...(o.maxVersion ? { maxVersion: o.maxVersion } : {}),
        ...(o.ciphers ? { ciphers: o.ciphers } : {}),
      },
      (res) => {
        const socket = res.socket as tls.TLSSocket;
        const cipher = socket.getCipher?.()?.name;
        const protocol = socket.getProtocol?.() ?? undefined;
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () =>
          resolve({
            code: res.statusCode ?? 0,
            body,
            ...(cipher ? { cipher } : {}),
            ...(protocol ? { protocol } : {}),
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

describe('diagnostics: serving certificate and TLS options', () => {
  it('makes a self-signed serving certificate for localhost and 127.0.0.1 that TLS accepts', () => {
    const p = selfSignedCertificate({
      host: 'localhost',
      ips: ['127.0.0.1', '::1'],
      dnsNames: ['joinguard-metrics.joinguard-system.svc'],
    });
    const x = new X509Certificate(p.cert);
    expect(x.subject).to.equal('CN=localhost');
    expect(x.subjectAltName).to.equal(
      'DNS:localhost, DNS:joinguard-metrics.joinguard-system.svc, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1',
    );
    expect(x.verify(x.publicKey)).to.equal(true);
    expect(x.ca).to.equal(false);
    expect(x.keyUsage ?? []).to.deep.equal(['1.3.6.1.5.5.7.3.1']); // Node lists extended key usage here
    const days = (Date.parse(x.validTo) - Date.parse(x.validFrom)) / 86_400_000;
    expect(days).to.equal(365);
    expect(x.checkHost('localhost')).to.equal('localhost');
    expect(x.checkIP('127.0.0.1')).to.equal('127.0.0.1');
    tls.createSecureContext(p);
  });

  it("maps Go's cipher suite names to OpenSSL's, keeping TLS 1.3 on as Go does", () => {
    expect(servingTls('VersionTLS13', [])).to.deep.equal({ minVersion: 'TLSv1.3' });
    expect(servingTls('', ['TLS_AES_128_GCM_SHA256', 'TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256']).ciphers).to.equal(
      'TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:ECDHE-ECDSA-AES128-GCM-SHA256',
    );
    expect(() => servingTls('VersionTLS12', ['TLS_NOPE'])).to.throw(/cipher suite TLS_NOPE not supported/);
  });

  it('serves with the chosen minimum version and TLS 1.2 suites', async () => {
    const log = silentLogger();
    const registry = new Registry();
    const only13 = await startDiagnosticsServer({
      addr: { host: '127.0.0.1', port: 0 },
      registry,
      log,
      secure: true,
      auth: new DelegatingAuth({ post: async () => ({}) }),
      tls: servingTls('VersionTLS13', []),
    });
    const picked = await startDiagnosticsServer({
      addr: { host: '127.0.0.1', port: 0 },
      registry,
      log,
      secure: true,
      auth: new DelegatingAuth({ post: async () => ({}) }),
      tls: servingTls('VersionTLS12', ['TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384']),
    });
    try {
      await request(only13.port, { maxVersion: 'TLSv1.2' }).then(
        () => expect.fail('a TLS 1.2 client was served'),
        (e: Error) => expect(e.message).to.match(/protocol version|alert/i),
      );
      expect((await request(only13.port, {})).protocol).to.equal('TLSv1.3');
      expect((await request(picked.port, { maxVersion: 'TLSv1.2' })).cipher).to.equal('ECDHE-ECDSA-AES256-GCM-SHA384');
    } finally {
      await only13.close();
      await picked.close();
    }
  });
});

describe('diagnostics: TokenReview and SubjectAccessReview, as controller-runtime filters /metrics', () => {
  let server: (BoundServer & { secure: boolean }) | undefined;
  let now = 1_000_000;
  let api: ReturnType<typeof fakeApiserver>;
  let verbosity: number | undefined;
  const registry = new Registry();
  new Counter({
    name: 'controller_runtime_reconcile_total',
    help: 'x',
    labelNames: ['controller', 'result'],
    registers: [registry],
  }).inc({ controller: 'machinejoincheck', result: 'success' });

  beforeEach(async () => {
    api = fakeApiserver();
    verbosity = undefined;
    const auth = new DelegatingAuth({ post: api.post, now: () => now, retryBaseMs: 1 });
    server = await startDiagnosticsServer({
      addr: { host: '127.0.0.1', port: 0 },
      registry,
      log: silentLogger(),
      secure: true,
      auth,
      setVerbosity: (v) => (verbosity = v),
    });
  });
  afterEach(async () => {
    await server?.close();
  });

  it('401 without a token or with one the apiserver does not know, 403 without the permission, 200 with it', async () => {
    const port = server!.port;
    expect(await request(port, {})).to.include({ code: 401, body: 'Unauthorized\n' });
    expect(await request(port, { token: 'forged' })).to.include({ code: 401 });
    expect(await request(port, { token: 'nobody-token' })).to.include({
      code: 403,
      body: 'Authorization denied for user system:serviceaccount:mon:nobody\n',
    });
    const ok = await request(port, { token: 'reader-token' });
    expect(ok.code).to.equal(200);
    expect(ok.body).to.include('controller_runtime_reconcile_total{controller="machinejoincheck",result="success"} 1');
    expect(await request(port, { path: '/nothing' })).to.include({ code: 404 });
  });

  it('caches a token for 1 minute, an allow for 5 minutes and a deny for 30 seconds', async () => {
    const port = server!.port;
    await request(port, { token: 'reader-token' });
    await request(port, { token: 'nobody-token' });
    expect(api.calls).to.have.length(4);
    now += 29_000;
    await request(port, { token: 'reader-token' });
    await request(port, { token: 'nobody-token' });
    expect(api.calls).to.have.length(4);
    now += 2_000; // 31 s: the deny expired, the token and the allow did not
    await request(port, { token: 'reader-token' });
    await request(port, { token: 'nobody-token' });
    expect(api.calls.slice(4)).to.deep.equal(['subjectaccessreviews system:serviceaccount:mon:nobody']);
    now += 30_000; // 61 s: both tokens expired; the allow holds for 5 minutes
    await request(port, { token: 'reader-token' });
    expect(api.calls.slice(5)).to.deep.equal(['tokenreviews reader-token']);
  });

  it('retries a review the apiserver did not answer, 5 times in all, and caches no error', async () => {
    const port = server!.port;
    api.failNext(4);
    expect((await request(port, { token: 'reader-token' })).code).to.equal(200);
    expect(api.calls.filter((c) => c.startsWith('tokenreviews'))).to.have.length(5);
    api.failNext(5);
    const r = await request(port, { token: 'nobody-token' });
    expect(r).to.include({ code: 500, body: 'Authentication failed\n' });
    expect((await request(port, { token: 'nobody-token' })).code).to.equal(403);
  });

  it('PUT /debug/flags/v changes the verbosity for a caller allowed to put it', async () => {
    const port = server!.port;
    expect(
      (await request(port, { path: '/debug/flags/v', method: 'PUT', body: '4', token: 'nobody-token' })).code,
    ).to.equal(403);
    const r = await request(port, { path: '/debug/flags/v', method: 'PUT', body: '4', token: 'reader-token' });
    expect(r).to.include({ code: 200, body: 'successfully set klog.logging.verbosity to 4' });
    expect(verbosity).to.equal(4);
  });
});

describe('diagnostics: --insecure-diagnostics', () => {
  it('serves /metrics over plain HTTP without authentication', async () => {
    const registry = new Registry();
    const s = await startDiagnosticsServer({
      addr: { host: '127.0.0.1', port: 0 },
      registry,
      log: silentLogger(),
      secure: false,
    });
    try {
      const res = await fetch(`http://127.0.0.1:${s.port}/metrics`);
      expect(res.status).to.equal(200);
      expect((await fetch(`http://127.0.0.1:${s.port}/debug/flags/v`, { method: 'PUT', body: '5' })).status).to.equal(
        404,
      );
    } finally {
      await s.close();
    }
  });
});
