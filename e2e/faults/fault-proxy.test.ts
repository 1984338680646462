// Unit tests of the fault proxy (e2e/support/fault-proxy.ts). The upstream here is a FAKE: a plain
// node:http server standing in for the kube-apiserver, so every fault can be checked byte by byte
// without a control plane.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { FaultProxy, upstreamFromKubeconfig } from '../support/fault-proxy.js';

interface Answer {
  code: number;
  body: string;
  ended: 'end' | 'aborted';
}

/** The fake apiserver: answers JSON, and streams a watch line every 30 ms on `?watch=true`. */
class FakeApiserver {
  readonly seen: string[] = [];
  readonly streams = new Set<http.ServerResponse>();
  private readonly server = http.createServer((req, res) => {
    this.seen.push(`${req.method} ${req.url}`);
    req.resume();
    if (req.url?.includes('watch=true')) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      this.streams.add(res);
      let n = 0;
      const t = setInterval(() => res.write(`{"type":"MODIFIED","object":{"n":${n++}}}\n`), 30);
      res.on('close', () => {
        clearInterval(t);
        this.streams.delete(res);
      });
      return;
    }
    res
      .writeHead(200, { 'Content-Type': 'application/json' })
      .end(JSON.stringify({ kind: 'List', items: [], path: req.url }));
  });

  async start(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Kills every open stream mid-body (as a killed apiserver does). */
  abortStreams(): void {
    for (const s of this.streams) s.socket?.destroy();
  }

  stop(): Promise<void> {
    return new Promise((r) => {
      this.server.close(() => r());
      this.server.closeAllConnections();
    });
  }
}

const agent = new http.Agent({ keepAlive: false });

function call(
  base: string,
  method: string,
  path: string,
  o: { body?: string; timeoutMs?: number; ua?: string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      {
        method,
        agent,
        headers: { 'User-Agent': o.ua ?? 'unit/1.0', ...(o.body ? { 'Content-Type': 'application/json' } : {}) },
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ code: res.statusCode ?? 0, body, ended: 'end' }));
        res.on('aborted', () => resolve({ code: res.statusCode ?? 0, body, ended: 'aborted' }));
      },
    );
    if (o.timeoutMs) req.setTimeout(o.timeoutMs, () => req.destroy(new Error('client timeout')));
    req.on('error', reject);
    req.end(o.body);
  });
}

/** Opens a watch and collects its lines until close() (or the stream ends). */
function openWatch(base: string, path = '/apis/x/v1/things') {
  const lines: string[] = [];
  let status = 0;
  let ended: 'open' | 'end' | 'aborted' = 'open';
  const req = http.request(`${base}${path}?watch=true`, { agent }, (res) => {
    status = res.statusCode ?? 0;
    res.on('data', (c: Buffer) => lines.push(...c.toString().split('\n').filter(Boolean)));
    res.on('end', () => (ended = 'end'));
    res.on('aborted', () => (ended = 'aborted'));
    res.on('error', () => undefined);
  });
  req.on('error', () => (ended = 'aborted'));
  req.end();
  return { lines, status: () => status, ended: () => ended, close: () => req.destroy() };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fault proxy (against a fake apiserver)', function () {
  this.timeout(10_000);
  let fake: FakeApiserver;
  let proxy: FaultProxy;

  beforeEach(async () => {
    fake = new FakeApiserver();
    proxy = await FaultProxy.start({ server: await fake.start() });
  });
  afterEach(async () => {
    await proxy.stop();
    await fake.stop();
  });

  it('forwards and records method, path, code and User-Agent', async () => {
    const a = await call(proxy.url, 'GET', '/api/v1/pods?limit=5', { ua: 'joinguard-a/0.1' });
    expect(a.code).to.equal(200);
    expect(JSON.parse(a.body).path).to.equal('/api/v1/pods?limit=5');
    expect(proxy.requests).to.have.length(1);
    expect(proxy.requests[0]).to.include({
      method: 'GET',
      path: '/api/v1/pods',
      query: '?limit=5',
      code: 200,
      userAgent: 'joinguard-a/0.1',
      watch: false,
      end: 'complete',
    });
  });

  it('answers a Kubernetes Status (500, then 409 matched on the body) without forwarding, as many times as asked', async () => {
    const r500 = proxy.addRule({ method: 'PATCH', path: /\/machines\/m1\/status$/, times: 1, fault: { status: 500 } });
    const first = await call(proxy.url, 'PATCH', '/apis/c/v1/machines/m1/status', { body: '{}' });
    expect(first.code).to.equal(500);
    expect(JSON.parse(first.body)).to.include({
      kind: 'Status',
      status: 'Failure',
      code: 500,
      reason: 'InternalError',
    });
    expect((await call(proxy.url, 'PATCH', '/apis/c/v1/machines/m1/status', { body: '{}' })).code).to.equal(200);
    expect(r500.matched).to.have.length(1);
    expect(fake.seen).to.deep.equal(['PATCH /apis/c/v1/machines/m1/status']);

    proxy.addRule({ method: /^(PUT|PATCH)$/, body: /"HealthCheckSucceeded"/, fault: { status: 409 } });
    expect((await call(proxy.url, 'PUT', '/apis/c/v1/machines/m2/status', { body: '{"type":"Other"}' })).code).to.equal(
      200,
    );
    const conflict = await call(proxy.url, 'PUT', '/apis/c/v1/machines/m2/status', {
      body: '{"type":"HealthCheckSucceeded"}',
    });
    expect(conflict.code).to.equal(409);
    expect(JSON.parse(conflict.body).reason).to.equal('Conflict');
    expect(proxy.requests.map((r) => r.fault ?? '-')).to.deep.equal(['status 500', '-', '-', 'status 409']);
  });

  it('answers a Status with Retry-After when asked; matches on the query; drops open streams on demand', async () => {
    proxy.addRule({ query: /sendInitialEvents=true/, fault: { status: 429, retryAfterS: 1 } });
    const refused = await new Promise<http.IncomingMessage>((resolve) =>
      http.get(
        `${proxy.url}/apis/x/v1/things?watch=true&sendInitialEvents=true`,
        { agent },
        (res) => (res.resume(), resolve(res)),
      ),
    );
    expect([refused.statusCode, refused.headers['retry-after']]).to.deep.equal([429, '1']);
    const w = openWatch(proxy.url);
    await sleep(100);
    expect(w.status()).to.equal(200);
    proxy.dropStreams();
    await sleep(100);
    expect(w.ended()).to.equal('aborted');
    expect(proxy.requests.at(-1)!.end).to.equal('upstream-aborted');
  });

  it('holds a request until the client gives up', async () => {
    proxy.addRule({ path: /slow/, fault: 'hold' });
    const err = await call(proxy.url, 'GET', '/slow', { timeoutMs: 200 }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).to.equal('client timeout');
    await sleep(20);
    expect(proxy.requests[0]).to.include({ fault: 'hold', code: 0, end: 'client-closed' });
    expect(fake.seen).to.deep.equal([]);
  });

  it('resets the connection', async () => {
    proxy.addRule({ path: /boom/, fault: 'reset' });
    const err = await call(proxy.url, 'GET', '/boom').then(
      () => undefined,
      (e: NodeJS.ErrnoException) => e,
    );
    expect(err?.code).to.equal('ECONNRESET');
    expect(proxy.requests[0]).to.include({ fault: 'reset', end: 'reset' });
  });

  it('silences open and new watches: the connection stays open, nothing is forwarded, other requests pass', async () => {
    const w = openWatch(proxy.url);
    await sleep(150);
    expect(w.lines.length).to.be.at.least(2);
    const rule = proxy.addRule({ watch: true, fault: 'silence' });
    await sleep(50);
    const before = w.lines.length;
    const w2 = openWatch(proxy.url, '/apis/x/v1/others');
    await sleep(300);
    expect(w.lines.length, 'lines after the silence').to.be.at.most(before);
    expect(w.ended()).to.equal('open');
    expect(w2.status()).to.equal(200);
    expect(w2.lines).to.deep.equal([]);
    expect(w2.ended()).to.equal('open');
    expect((await call(proxy.url, 'GET', '/apis/x/v1/things')).code).to.equal(200);
    expect(rule.matched.map((r) => r.path)).to.deep.equal(['/apis/x/v1/things', '/apis/x/v1/others']);
    // Only a list answered since: the watched path's last evidence is that list, not the silent stream; a
    // watch silenced from its start is no evidence at all.
    const evidence = proxy.watchEvidence();
    expect(evidence.get('/apis/x/v1/things')).to.equal(proxy.requests.at(-1)!.endedAt);
    expect(evidence.get('/apis/x/v1/others')).to.equal(0);
    rule.remove();
    const w3 = openWatch(proxy.url, '/apis/x/v1/others');
    await sleep(100);
    expect(proxy.watchEvidence().get('/apis/x/v1/others'), 'a watch opened (200) and forwarded').to.be.greaterThan(0);
    w3.close();
    w.close();
    w2.close();
  });

  it('ends a stream abruptly when the upstream dies mid-stream, and resets new connections while it is down', async () => {
    const w = openWatch(proxy.url);
    await sleep(100);
    fake.abortStreams();
    await sleep(50);
    expect(w.ended()).to.equal('aborted');
    expect(proxy.requests[0]!.end).to.equal('upstream-aborted');
    await fake.stop();
    const err = await call(proxy.url, 'GET', '/api/v1/pods').then(
      () => undefined,
      (e: NodeJS.ErrnoException) => e,
    );
    expect(err?.code).to.be.oneOf(['ECONNRESET', 'EPIPE']);
    expect(proxy.requests[1]).to.include({ end: 'upstream-unreachable', code: 0 });
    fake = new FakeApiserver(); // afterEach stops a server that never started: harmless
    await fake.start();
  });

  it('applies a rule only inside its window, and calls onMatch before forwarding', async () => {
    const now = Date.now();
    proxy.addRule({ path: /late/, from: now + 200, fault: { status: 503 } });
    proxy.addRule({ path: /early/, until: now - 1, fault: { status: 503 } });
    expect((await call(proxy.url, 'GET', '/late')).code).to.equal(200);
    expect((await call(proxy.url, 'GET', '/early')).code).to.equal(200);
    await sleep(250);
    expect((await call(proxy.url, 'GET', '/late')).code).to.equal(503);

    let seenAtHook: string[] = [];
    proxy.addRule({ path: /hooked/, fault: 'pass', onMatch: () => (seenAtHook = [...fake.seen]) });
    expect((await call(proxy.url, 'GET', '/hooked')).code).to.equal(200);
    expect(seenAtHook).to.not.include('GET /hooked');
    expect(fake.seen).to.include('GET /hooked');
  });
});

describe('upstreamFromKubeconfig', () => {
  it('reads the server, CA, client certificate and token of the current context', () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const up = upstreamFromKubeconfig(
      [
        'apiVersion: v1',
        'kind: Config',
        'current-context: b',
        'clusters:',
        '- name: c',
        '  cluster:',
        '    server: https://127.0.0.1:6443',
        `    certificate-authority-data: ${b64('CA')}`,
        'users:',
        '- name: u',
        '  user:',
        `    client-certificate-data: ${b64('CERT')}`,
        `    client-key-data: ${b64('KEY')}`,
        '    token: t0k',
        'contexts:',
        '- name: a',
        '  context: { cluster: none, user: none }',
        '- name: b',
        '  context: { cluster: c, user: u }',
      ].join('\n'),
    );
    expect(up.server).to.equal('https://127.0.0.1:6443');
    expect(String(up.ca)).to.equal('CA');
    expect(String(up.cert)).to.equal('CERT');
    expect(String(up.key)).to.equal('KEY');
    expect(up.token).to.equal('t0k');
  });
});
