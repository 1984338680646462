// The REST client against a FAKE apiserver (a plain node:http server): the write gate, the token bucket,
// the per-request hook's labels, timeouts that bound the whole exchange, bearer tokens.
import dc from 'node:diagnostics_channel';
import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import {
  ApiError,
  REQUEST_SOCKETS,
  RestClient,
  retryAfterOf,
  WritesForbiddenError,
  type RequestRecord,
} from './rest.js';
import { closedAfterEach, sendJson, serve, type TestServer } from '../testing/http-server.js';
import { TokenBucket } from './token-bucket.js';

describe('RestClient (fake apiserver)', function () {
  this.timeout(10_000);
  const keep = closedAfterEach();
  let server: TestServer;
  let rest: RestClient;

  it('write gate: a refused write is not sent; GETs pass', async () => {
    let open = true;
    server = keep(await serve((_req, res) => sendJson(res, 200, { ok: true })));
    rest = keep(new RestClient(server.access, { userAgent: 'test', writeGate: () => open }));
    await rest.put('/api/v1/things/a', {});
    open = false;
    for (const write of [
      () => rest.put('/api/v1/things/a', {}),
      () => rest.post('/api/v1/things', {}),
      () => rest.mergePatch('/api/v1/things/a', {}),
      () => rest.deleteWithPreconditions('/api/v1/things/a', 'u', '1'),
    ]) {
      const e = await write().then(
        () => undefined,
        (err: Error) => err,
      );
      expect(e).to.be.instanceOf(WritesForbiddenError);
    }
    await rest.get('/api/v1/things/a');
    expect(server.requests.map((r) => r.method)).to.deep.equal(['PUT', 'GET']);
  });

  it('write gate: checked after the rate-limit wait, so leadership lost while queued stops the write', async () => {
    let open = true;
    server = keep(await serve((_req, res) => sendJson(res, 200, {})));
    rest = keep(new RestClient(server.access, { userAgent: 'test', qps: 5, burst: 1, writeGate: () => open }));
    await rest.get('/a'); // takes the only token
    const queued = rest.put('/a', {}).then(
      () => undefined,
      (e: Error) => e,
    ); // waits ~200 ms for a token
    setTimeout(() => (open = false), 50);
    expect(await queued).to.be.instanceOf(WritesForbiddenError);
    expect(server.requests).to.have.length(1);
  });

  it('token bucket: full at start (burst), then qps', () => {
    let t = 0;
    const b = new TokenBucket(10, 3, () => t);
    expect([b.take(), b.take(), b.take()]).to.deep.equal([0, 0, 0]);
    expect(b.take()).to.be.closeTo(100, 1e-9); // one token every 100 ms
    expect(b.take()).to.be.closeTo(200, 1e-9); // queued behind the previous one
    t = 1_000;
    expect(b.take()).to.equal(0); // refilled (but never above the burst)
    expect(b.take()).to.equal(0);
  });

  it('rate limits requests at qps after the burst', async () => {
    server = keep(await serve((_req, res) => sendJson(res, 200, {})));
    rest = keep(new RestClient(server.access, { userAgent: 'test', qps: 20, burst: 2 }));
    const t0 = performance.now();
    await Promise.all(Array.from({ length: 6 }, () => rest.get('/x')));
    expect(performance.now() - t0).to.be.at.least(190); // 4 beyond the burst at 20/s: >= 200 ms
  });

  it('onRequest: method, host, the status as a string, "<error>" when no answer came', async () => {
    const seen: RequestRecord[] = [];
    server = keep(
      await serve((req, res) =>
        req.url === '/reset' ? req.socket.destroy() : sendJson(res, req.url === '/missing' ? 404 : 200, {}),
      ),
    );
    rest = keep(new RestClient(server.access, { userAgent: 'test', onRequest: (r) => seen.push(r) }));
    await rest.get('/ok');
    await rest.get('/missing').catch(() => undefined);
    await rest.get('/reset').catch(() => undefined);
    expect(seen.map((r) => [r.method, r.host, r.code])).to.deep.equal([
      ['GET', server.access.server.host, '200'],
      ['GET', server.access.server.host, '404'],
      ['GET', server.access.server.host, '<error>'],
    ]);
    expect(seen.every((r) => r.seconds >= 0 && r.seconds < 5)).to.equal(true);
  });

  it('a request timeout bounds the whole exchange, also a body that trickles', async () => {
    server = keep(
      await serve((_req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        const t = setInterval(() => res.write(' '), 20); // never idle, never done
        res.on('close', () => clearInterval(t));
      }),
    );
    rest = keep(new RestClient(server.access, { userAgent: 'test' }));
    const t0 = performance.now();
    const e = await rest.get('/slow', undefined, { timeoutMs: 200 }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(e).to.be.instanceOf(ApiError);
    expect((e as ApiError).code).to.equal(0);
    expect(e!.message).to.match(/no answer within 200 ms/);
    expect(performance.now() - t0).to.be.below(1_000);
  });

  it('a caller signal aborts a request in flight', async () => {
    server = keep(await serve(() => undefined)); // never answers
    rest = keep(new RestClient(server.access, { userAgent: 'test' }));
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('renew deadline passed')), 50);
    const e = await rest.get('/hang', undefined, { signal: ac.signal }).then(
      () => undefined,
      (err: Error) => err,
    );
    expect(e!.message).to.match(/renew deadline passed/);
  });

  it('watches hold connections of their own: as many open streams as the pool has sockets leave requests unqueued', async () => {
    server = keep(
      await serve((req, res) => {
        if (req.url?.startsWith('/watch')) return void res.writeHead(200).write('\n'); // a stream that stays open
        sendJson(res, 200, { ok: true });
      }),
    );
    rest = keep(new RestClient(server.access, { userAgent: 'test', qps: 0 }));
    const ac = new AbortController();
    const streams = await Promise.all(
      Array.from({ length: REQUEST_SOCKETS }, (_, i) =>
        rest.open('GET', `/watch/${i}`, { signal: ac.signal, stream: true }),
      ),
    );
    expect(streams).to.have.length(REQUEST_SOCKETS);
    const answer = await rest.get('/apis/x', undefined, { timeoutMs: 2000 });
    expect(answer).to.deep.equal({ ok: true });
    ac.abort(new Error('test over'));
  });

  it('a response cut mid-body is an error, not a hang', async () => {
    server = keep(
      await serve((req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': 1000 });
        res.write('{"items": [');
        setTimeout(() => req.socket.destroy(), 20);
      }),
    );
    rest = keep(new RestClient(server.access, { userAgent: 'test' }));
    const e = await rest.get('/cut').then(
      () => undefined,
      (err: Error) => err,
    );
    expect(e).to.be.instanceOf(ApiError);
  });

  it('sends the bearer token of the access, asked for on every request (it may rotate)', async () => {
    const tokens = ['one', 'two'];
    const seen: (string | undefined)[] = [];
    server = keep(
      await serve((req, res) => {
        seen.push(req.headers.authorization);
        sendJson(res, 200, {});
      }),
    );
    rest = keep(new RestClient({ ...server.access, token: async () => tokens.shift() }, { userAgent: 'jg-test' }));
    await rest.get('/a');
    await rest.get('/b');
    expect(seen).to.deep.equal(['Bearer one', 'Bearer two']);
  });

  it('non-2xx answers throw ApiError with the Status message', async () => {
    server = keep(
      await serve((_req, res) => sendJson(res, 409, { kind: 'Status', message: 'the object has been modified' })),
    );
    rest = keep(new RestClient(server.access, { userAgent: 'test' }));
    const e = (await rest.put('/a', {}).catch((err: Error) => err)) as ApiError;
    expect([e.code, e.reason]).to.deep.equal([409, 'the object has been modified']);
  });

  // Issue 18: a listener left on the request's timeout signal held the request, the response and every chunk
  // of the page until the timeout fired (60 s for a LIST page): nothing of a finished request may stay reachable.
  it('keeps nothing of a finished request alive (no listener left on a timeout signal)', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const requests: WeakRef<object>[] = [];
    const onStart = (m: unknown) => requests.push(new WeakRef((m as { request: object }).request));
    dc.subscribe('http.client.request.start', onStart);
    try {
      const page = { items: Array.from({ length: 500 }, (_, i) => ({ name: `m${i}`, pad: 'x'.repeat(200) })) };
      server = keep(await serve((_req, res) => sendJson(res, 200, page)));
      rest = keep(new RestClient(server.access, { userAgent: 'test', qps: 0, timeoutMs: 60_000 }));
      const ac = new AbortController(); // a caller's long-lived signal, as the leader elector's
      for (let i = 0; i < 3; i++) await rest.get('/apis/x/v1/things', { limit: 500 });
      await rest.get('/apis/x/v1/things', undefined, { signal: ac.signal });
      expect(requests).to.have.length(4);
      // Sockets and their last request are let go a few ticks after the answer, later on a loaded machine: look
      // again for up to 3 s (the leak held them until the 60 s timeout fired).
      let alive = requests;
      for (const until = Date.now() + 3_000; alive.length > 0 && Date.now() < until;) {
        await new Promise((r) => setTimeout(r, 50));
        gc();
        gc();
        alive = requests.filter((r) => r.deref() !== undefined);
      }
      expect(alive, 'requests still reachable 3 s after they ended').to.have.length(0);
    } finally {
      dc.unsubscribe('http.client.request.start', onStart);
    }
  });

  describe('answers that say when to come back (client-go checkWait)', () => {
    /** Answers `codes` in turn (then 200), each with the given Retry-After. */
    const scripted =
      (codes: number[], retryAfter?: string) => (_req: unknown, res: import('node:http').ServerResponse) => {
        const code = codes.shift() ?? 200;
        if (code === 200) return sendJson(res, 200, { ok: true });
        const body = JSON.stringify({
          kind: 'Status',
          code,
          message: code === 429 ? 'storage is (re)initializing' : 'unavailable',
        });
        res
          .writeHead(code, {
            'Content-Type': 'application/json',
            ...(retryAfter !== undefined ? { 'Retry-After': retryAfter } : {}),
          })
          .end(body);
      };

    it('retryAfterOf: 429 and 5xx with whole seconds; nothing else', () => {
      expect([
        retryAfterOf(429, '1'),
        retryAfterOf(503, '3'),
        retryAfterOf(500, '0'),
        retryAfterOf(429, [' 2 ']),
      ]).to.deep.equal([1, 3, 0, 2]);
      expect([
        retryAfterOf(429, undefined),
        retryAfterOf(409, '1'),
        retryAfterOf(404, '1'),
        retryAfterOf(429, 'Wed, 21 Oct 2015 07:28:00 GMT'),
        retryAfterOf(503, '-1'),
      ]).to.deep.equal([undefined, undefined, undefined, undefined, undefined]);
    });

    it('a 429 with Retry-After is sent again after that time, and succeeds', async () => {
      server = keep(await serve(scripted([429], '1')));
      const seen: string[] = [];
      rest = keep(new RestClient(server.access, { userAgent: 'test', onRequest: (r) => seen.push(r.code) }));
      const t0 = performance.now();
      expect(await rest.get('/a')).to.deep.equal({ ok: true });
      expect(performance.now() - t0).to.be.within(950, 3_000);
      expect(seen, 'each attempt is a request for the metrics').to.deep.equal(['429', '200']);
    });

    it('5xx is retried only with Retry-After; 429 without it is an error at once', async () => {
      server = keep(await serve(scripted([503, 500], '0')));
      rest = keep(new RestClient(server.access, { userAgent: 'test' }));
      expect(await rest.get('/a')).to.deep.equal({ ok: true });
      expect(server.requests).to.have.length(3);
      await server.close();
      server = keep(await serve(scripted([429, 500])));
      rest = keep(new RestClient(server.access, { userAgent: 'test' }));
      const e = (await rest.get('/a').catch((err: Error) => err)) as ApiError;
      expect([e.code, e.retryAfterS, server.requests.length]).to.deep.equal([429, undefined, 1]);
    });

    it('retries are bounded (maxRetries, or 0 for one request); the last answer is the error, with its Retry-After', async () => {
      server = keep(await serve(scripted([429, 429, 429, 429, 429], '0')));
      rest = keep(new RestClient(server.access, { userAgent: 'test', maxRetries: 2 }));
      const e = (await rest.get('/a').catch((err: Error) => err)) as ApiError;
      expect([e.code, e.retryAfterS, e.reason, server.requests.length]).to.deep.equal([
        429,
        0,
        'storage is (re)initializing',
        3,
      ]);
      const once = (await rest.get('/b', undefined, { retries: 0 }).catch((err: Error) => err)) as ApiError;
      expect([once.code, server.requests.length]).to.deep.equal([429, 4]);
    });

    it('a write waiting to be retried passes the write gate again: leadership lost meanwhile, nothing more is sent', async () => {
      let open = true;
      server = keep(await serve(scripted([429], '1')));
      rest = keep(new RestClient(server.access, { userAgent: 'test', writeGate: () => open }));
      const write = rest.mergePatch('/apis/x/v1/things/a', { metadata: {} }).then(
        () => undefined,
        (e: Error) => e,
      );
      setTimeout(() => (open = false), 300);
      expect(await write).to.be.instanceOf(WritesForbiddenError);
      expect(server.requests.map((r) => r.method)).to.deep.equal(['PATCH']);
    });

    it('the whole-request timeout bounds the waits too', async () => {
      server = keep(await serve(scripted([429, 429, 429], '5')));
      rest = keep(new RestClient(server.access, { userAgent: 'test' }));
      const t0 = performance.now();
      const e = (await rest.get('/a', undefined, { timeoutMs: 300 }).catch((err: Error) => err)) as ApiError;
      expect(performance.now() - t0).to.be.below(2_000);
      expect(e).to.be.instanceOf(ApiError);
      expect(server.requests).to.have.length(1);
    });
  });

  it('hands every 299 warning of an answer to onWarning (several headers, several per header)', async () => {
    server = keep(
      await serve((_req, res) => {
        res.setHeader('Warning', [
          '299 - "cluster.x-k8s.io/v1beta1 Machine is deprecated; use cluster.x-k8s.io/v1beta2 Machine"',
          '299 - "unknown field \\"spec.x\\"", 299 - "second, with a comma"',
        ]);
        sendJson(res, 200, {});
      }),
    );
    const warnings: string[] = [];
    rest = keep(new RestClient(server.access, { userAgent: 'test', onWarning: (w) => warnings.push(w) }));
    await rest.get('/a');
    expect(warnings).to.deep.equal([
      'cluster.x-k8s.io/v1beta1 Machine is deprecated; use cluster.x-k8s.io/v1beta2 Machine',
      'unknown field "spec.x"',
      'second, with a comma',
    ]);
  });
});
