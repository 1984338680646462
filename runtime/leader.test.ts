// Leader election against a FAKE apiserver (a plain node:http server holding one Lease with resourceVersion
// checks): renewals bounded by the renew deadline, the loss, a SIGSTOP-like jump of the monotonic clock,
// and no write through the gated client after the loss. Two real replicas under SIGSTOP are in e2e/faults.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LeaderElector, podNamespace, type LeaderOptions } from './leader.js';
import { RestClient, WritesForbiddenError, type Json } from './client/rest.js';
import { capturingLogger, schemaWith, sendJson, serve, sleep, until, type TestServer } from './testing/http-server.js';

const LEASE = '/apis/coordination.k8s.io/v1/namespaces/ns/leases/joinguard-leader';
const TIMING = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };

/** One Lease; `onPut` may hang or fail a PUT instead of applying it. */
class FakeLeases {
  lease?: Json;
  rv = 1;
  hung = 0;
  openHung = 0;
  onPut?: (body: Json) => 'apply' | 'hang' | 500;
  /** Arrival times (performance.now) of writes to /things. */
  readonly writesAt: number[] = [];

  handler = (
    req: import('node:http').IncomingMessage,
    res: import('node:http').ServerResponse,
    url: URL,
    body: string,
  ) => {
    if (url.pathname === '/things') {
      this.writesAt.push(performance.now());
      return sendJson(res, 201, {});
    }
    if (url.pathname === LEASE && req.method === 'GET')
      return this.lease ? sendJson(res, 200, this.lease) : sendJson(res, 404, { message: 'not found' });
    if (url.pathname === LEASE.replace('/joinguard-leader', '') && req.method === 'POST') {
      if (this.lease) return sendJson(res, 409, { message: 'exists' });
      return sendJson(res, 201, this.store(JSON.parse(body)));
    }
    if (url.pathname === LEASE && req.method === 'PUT') {
      const next = JSON.parse(body) as Json;
      const what = this.onPut?.(next) ?? 'apply';
      if (what === 'hang') {
        this.hung++;
        this.openHung++;
        req.socket.once('close', () => this.openHung--);
        return;
      }
      if (what === 500) return sendJson(res, 500, { message: 'etcd timeout' });
      if (next.metadata?.resourceVersion !== this.lease?.metadata?.resourceVersion)
        return sendJson(res, 409, { message: 'the object has been modified' });
      return sendJson(res, 200, this.store(next));
    }
    sendJson(res, 404, { message: `no ${url.pathname}` });
  };

  store(l: Json): Json {
    this.lease = {
      ...l,
      metadata: { ...l.metadata, name: 'joinguard-leader', namespace: 'ns', resourceVersion: String(++this.rv) },
    };
    return this.lease;
  }

  /** Another candidate renewing the Lease (its record changes each time). */
  otherRenews(holder = 'other'): void {
    this.store({
      ...(this.lease ?? { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: {} }),
      spec: {
        holderIdentity: holder,
        leaseDurationSeconds: 3,
        acquireTime: new Date().toISOString(),
        renewTime: new Date().toISOString(),
        leaseTransitions: 1,
      },
    });
  }
}

describe('LeaderElector (fake apiserver)', function () {
  this.timeout(15_000);
  let server: TestServer | undefined;
  let fake: FakeLeases;
  let rest: RestClient | undefined;
  let elector: LeaderElector | undefined;
  const timers: NodeJS.Timeout[] = [];
  afterEach(async () => {
    for (const t of timers) clearInterval(t);
    await elector?.stop();
    rest?.close();
    await server?.close();
    elector = rest = server = undefined;
  });

  async function start(o: Partial<LeaderOptions> = {}) {
    fake = new FakeLeases();
    server = await serve(fake.handler);
    rest = new RestClient(server.access, { userAgent: 'test/leader-election' });
    const lost: number[] = [];
    const status: boolean[] = [];
    const { logger, lines } = capturingLogger();
    elector = new LeaderElector({
      rest,
      namespace: 'ns',
      name: 'joinguard-leader',
      identity: 'me',
      log: logger,
      ...TIMING,
      onLost: () => lost.push(performance.now()),
      onStatus: (l) => status.push(l),
      ...o,
    });
    return { e: elector, lost, status, lines };
  }

  it("finds the pod's namespace as controller-runtime does: $POD_NAMESPACE, else the ServiceAccount's namespace file", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-sa-'));
    try {
      expect(podNamespace({}, dir)).to.equal(undefined);
      fs.writeFileSync(path.join(dir, 'namespace'), 'joinguard-system\n');
      expect(podNamespace({}, dir)).to.equal('joinguard-system');
      expect(podNamespace({ POD_NAMESPACE: 'shard-a' }, dir)).to.equal('shard-a');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it("refuses client-go's invalid timings", () => {
    const log = capturingLogger().logger;
    const base = { rest: {} as RestClient, namespace: 'ns', name: 'l', identity: 'me', log, onLost: () => undefined };
    expect(() => new LeaderElector({ ...base, leaseDurationMs: 10_000, renewDeadlineMs: 10_000 })).to.throw(
      /lease duration must be greater/,
    );
    expect(() => new LeaderElector({ ...base, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 })).to.throw(
      /1.2 x the retry period/,
    );
  });

  it("acquires, then renews with one PUT per retry period (client-go's fast path)", async () => {
    const { e, status } = await start();
    e.start();
    await e.leading$;
    expect(e.canWrite()).to.equal(true);
    // client-go's NewLeaderElector reports 0 at once: a standby that never led is seen as one.
    expect(status).to.deep.equal([false, true]);
    expect(fake.lease!.spec).to.include({ holderIdentity: 'me', leaseDurationSeconds: 3, leaseTransitions: 0 });
    const before = server!.requests.length;
    await sleep(1_000);
    const renewals = server!.requests.slice(before);
    expect(renewals.length).to.be.within(2, 4);
    expect(renewals.every((r) => r.method === 'PUT')).to.equal(true);
  });

  it('renew timeout: hung PUTs are aborted within the renew deadline; loss once; canWrite false before onLost', async () => {
    const { e, lost, status, lines } = await start();
    e.start();
    await e.leading$;
    const gateClosed: number[] = [];
    timers.push(setInterval(() => !e.canWrite() && gateClosed.length === 0 && gateClosed.push(performance.now()), 5));
    fake.onPut = () => 'hang';
    const lastSuccess = performance.now();
    await until('the loss', () => lost.length > 0, 6_000);
    // A round starts one retry period after the last success and ends at its renew deadline.
    expect(lost[0]! - lastSuccess).to.be.within(
      TIMING.renewDeadlineMs,
      TIMING.retryPeriodMs + TIMING.renewDeadlineMs + 1_000,
    );
    expect(gateClosed[0]).to.be.below(lost[0]!);
    expect(fake.hung).to.be.at.least(1);
    await until('every hung request aborted by the client', () => fake.openHung === 0, 500);
    await sleep(TIMING.retryPeriodMs * 2);
    expect(lost).to.have.length(1);
    expect(status).to.deep.equal([false, true, false]);
    expect(e.canWrite()).to.equal(false);
    expect(
      lines.some(
        (l) =>
          l.level === 'error' &&
          l.message === 'Lost the leader Lease' &&
          /the lease was not renewed within the renew deadline/.test(String(l['err'])),
      ),
    ).to.equal(true);
  });

  it('loses when another candidate holds the Lease (409, then its fresh record); never leads again', async () => {
    const { e, lost } = await start();
    e.start();
    await e.leading$;
    fake.otherRenews();
    timers.push(setInterval(() => fake.otherRenews(), 200));
    await until('the loss', () => lost.length > 0, 6_000);
    expect(e.canWrite()).to.equal(false);
    expect(e.isLeader).to.equal(false);
    const n = server!.requests.length;
    await sleep(800);
    expect(server!.requests.length).to.equal(n); // stopped campaigning: the process exits
  });

  it('SIGSTOP-like: a jump of the monotonic clock past the renew deadline forbids writes before any timer runs', async () => {
    let jump = 0;
    const { e } = await start({ monotonic: () => performance.now() + jump });
    e.start();
    await e.leading$;
    expect(e.canWrite()).to.equal(true);
    jump = TIMING.renewDeadlineMs + 1; // the process was stopped this long; no timer has fired yet
    expect(e.canWrite()).to.equal(false);
  });

  it('a deposed leader never writes its identity over a Lease it read with another holder (found by the failover spec)', async () => {
    const { e, lost } = await start();
    e.start();
    await e.leading$;
    // While this one was frozen another replica took the Lease; it renews once, then goes quiet (its Lease stays
    // valid for 3 s), so the resourceVersion this one reads stays current.
    let taken = false;
    const afterTaken: Json[] = [];
    fake.onPut = (body) => {
      if (taken && body.spec?.holderIdentity === 'me') afterTaken.push(body);
      if (!taken) {
        taken = true;
        fake.otherRenews();
      }
      return 'apply';
    };
    await until('the loss', () => lost.length > 0, 8_000);
    expect(fake.lease?.spec?.holderIdentity).to.equal('other');
    expect(afterTaken, 'PUTs naming this replica after another took the Lease').to.have.length.at.most(1);
    expect(afterTaken.every((b) => b.metadata.resourceVersion !== fake.lease?.metadata?.resourceVersion)).to.equal(
      true,
    );
    expect(e.canWrite()).to.equal(false);
  });

  it('no write goes through the gated client after the gate closes, also writes queued or in flight', async () => {
    const { e, lost } = await start();
    const gated = new RestClient(server!.access, { userAgent: 'test', writeGate: () => e.canWrite() });
    try {
      e.start();
      await e.leading$;
      let forbiddenAt: number | undefined;
      timers.push(
        setInterval(() => {
          gated.post('/things', {}).catch((err: Error) => {
            if (err instanceof WritesForbiddenError) forbiddenAt ??= performance.now();
          });
        }, 10),
      );
      fake.onPut = () => 500;
      await until('the loss', () => lost.length > 0, 6_000);
      await sleep(200);
      expect(forbiddenAt).to.be.a('number');
      expect(forbiddenAt).to.be.below(lost[0]!);
      expect(fake.writesAt.length).to.be.above(10);
      expect(fake.writesAt.filter((t) => t > forbiddenAt!)).to.deep.equal([]);
    } finally {
      gated.close();
    }
  });

  it('takes a Lease whose holder stopped renewing only a lease duration after it saw the record change', async () => {
    const { e } = await start();
    // Timed from the last renewal itself: the elector cannot have seen a change before it was made (timing it from
    // clearInterval instead let a loaded machine's late tick put the last change up to 200 ms earlier).
    let lastChange = performance.now();
    const renew = () => {
      fake.otherRenews('old-leader');
      lastChange = performance.now();
    };
    renew();
    const renewing = setInterval(renew, 200);
    timers.push(renewing);
    e.start();
    await sleep(1_000);
    expect(e.isLeader).to.equal(false);
    clearInterval(renewing);
    await e.leading$;
    expect(performance.now() - lastChange).to.be.at.least(TIMING.leaseDurationMs - 100);
    expect(fake.lease!.spec).to.include({ holderIdentity: 'me', leaseTransitions: 2 });
  });

  it('stop() hands the Lease back while leading', async () => {
    const { e } = await start();
    e.start();
    await e.leading$;
    await e.stop();
    expect(fake.lease!.spec.holderIdentity).to.equal(undefined);
    expect(fake.lease!.spec.leaseDurationSeconds).to.equal(1);
  });

  it('stop() after a loss writes nothing', async () => {
    const { e, lost } = await start();
    e.start();
    await e.leading$;
    fake.onPut = () => 500;
    await until('the loss', () => lost.length > 0, 6_000);
    const n = server!.requests.length;
    await e.stop();
    expect(server!.requests.length).to.equal(n);
  });
});

describe('the joinguard command on a lost Lease (fake apiserver, real process)', function () {
  this.timeout(60_000);
  let server: TestServer | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await server?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    server = dir = undefined;
  });

  it('exits 1 promptly, without waiting for a reconcile stuck on a request, and writes nothing more', async () => {
    const leases = new FakeLeases();
    let lostFrom: number | undefined;
    const writes: { at: number; method: string; path: string }[] = [];
    const check = {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: { name: 'c', namespace: 'ns', uid: 'u1', resourceVersion: '5', generation: 1 },
      spec: { clusterName: 'cl', selector: {} },
    };
    server = await serve((req, res, url, body) => {
      if (url.pathname.includes('/leases')) {
        if (req.method === 'PUT' && lostFrom === undefined && leases.lease) lostFrom = performance.now();
        if (req.method === 'PUT') return sendJson(res, 500, { message: 'etcd timeout' }); // the lease cannot be renewed
        return leases.handler(req, res, url, body);
      }
      if (req.method !== 'GET') {
        writes.push({ at: performance.now(), method: req.method!, path: url.pathname });
        return; // a write in flight that never ends: the reconcile holding it would never finish
      }
      if (url.pathname === '/apis/cluster.x-k8s.io')
        return sendJson(res, 200, { versions: [{ groupVersion: 'cluster.x-k8s.io/v1beta2', version: 'v1beta2' }] });
      if (
        url.pathname.startsWith('/apis/controlplane') ||
        url.pathname.startsWith('/apis/bootstrap') ||
        url.pathname.startsWith('/apis/clusterctl')
      )
        return sendJson(res, 404, {});
      if (url.pathname === '/openapi/v3/apis/cluster.x-k8s.io/v1beta2')
        return sendJson(res, 200, schemaWith('v1beta2', ['Machine:status.deletion.waitForPreDrainHookStartTime']));
      if (url.searchParams.get('sendInitialEvents') === 'true')
        return sendJson(res, 422, {
          message: 'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
        });
      if (url.searchParams.get('watch') === 'true') return void res.writeHead(200).flushHeaders();
      const items = url.pathname.endsWith('/machinejoinchecks') ? [check] : [];
      sendJson(res, 200, { metadata: { resourceVersion: '10' }, items });
    });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-leader-'));
    const kubeconfig = path.join(dir, 'config');
    fs.writeFileSync(
      kubeconfig,
      `apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: s, cluster: {server: '${server.access.server.href}'}}]\ncontexts: [{name: c, context: {cluster: s}}]\n`,
    );
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'cmd/joinguard.ts',
        `--kubeconfig=${kubeconfig}`,
        '--namespace=ns',
        '--leader-elect',
        '--diagnostics-address=0',
        '--webhook-port=0',
        '--health-addr=0',
      ],
      { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, POD_NAMESPACE: 'ns' } },
    );
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    const exitedAt = performance.now();
    expect(code, out).to.equal(1);
    expect(lostFrom, out).to.be.a('number');
    // Defaults 15 s / 10 s / 2 s: the round that fails ends 10 s after it began; then the process is gone (a
    // graceful stop would wait out the hung write's 30 s timeout).
    expect(exitedAt - lostFrom!, out).to.be.below(10_000 + 2_000 + 5_000);
    expect(writes.length, out).to.be.above(0); // the reconcile's status write, left hanging
    expect(
      writes.filter((w) => w.at > lostFrom! + 10_000),
      out,
    ).to.deep.equal([]);
    expect(out).to.match(/Lost the leader Lease/);
  });
});
