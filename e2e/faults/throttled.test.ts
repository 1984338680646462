// Fault injection (issue 16 §1.5, issue 18 Deliver 2) on the real kube-apiserver v1.36, JoinGuard behind a
// fault proxy, judged from the proxy's record of its requests:
// (w) the apiserver serves WatchList: every cache syncs by one watch with sendInitialEvents, no LIST;
// (c) throttled: every request answered 429 "storage is (re)initializing" with Retry-After: 1 for 25 s (as a
//     starting apiserver answers), open watches dropped: every informer is live again within 5 s of the end;
// (d) a 410 storm: an apiserver without WatchList (the proxy refuses sendInitialEvents with 422, as the gate
//     off does) answering every watch 410 Gone for 20 s: the informers re-list with back-off, not once per answer
//     (before: ~48 full Machine lists a second), and watch again within 5 s of the end.
import { expect } from 'chai';
import { startController } from '../../controllers/manager.js';
import { silentLogger } from '../../runtime/logger.js';
import type { FaultProxy, ProxiedRequest } from '../support/fault-proxy.js';
import { installJoinGuardCrd } from '../support/joinguard.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { accessThrough, figure, secs, sleep, startProxy } from './harness.js';
import type { RunningController } from '../../controllers/options.js';

const THROTTLE_MS = 25_000;
const STORM_MS = 20_000;
/** Every informer live within this of the end of a fault (the issue's bound). */
const LIVE_BOUND_MS = 5_000;

describe('faults (w, c, d): WatchList, a throttled apiserver, a 410 storm', function () {
  this.timeout(240_000);
  const ns = `jg-thr-${process.pid}`;
  let env: TestEnv;
  let proxy: FaultProxy | undefined;
  let jg: RunningController | undefined;

  before(async function () {
    this.timeout(120_000);
    env = await getTestEnv();
    await installJoinGuardCrd(env.kube());
    await env.kube().create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  });

  afterEach(async function () {
    this.timeout(60_000);
    await jg?.stop();
    await proxy?.stop();
    jg = proxy = undefined;
  });

  /** JoinGuard behind a new proxy (rules first: they apply from its first request), watching every cache. */
  async function start(setup: (p: FaultProxy) => void = () => undefined): Promise<{ p: FaultProxy; paths: string[] }> {
    const p = await startProxy(env);
    proxy = p;
    setup(p);
    jg = await startController({
      access: accessThrough(p),
      namespace: ns,
      logger: silentLogger(),
      metricsBindAddress: '0',
      healthProbeBindAddress: '0',
      collectDefaultMetrics: false,
      watchLivenessMs: 60_000,
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>(
      (_, reject) =>
        (timer = setTimeout(
          () =>
            reject(
              new Error(
                `not ready within 60 s; last requests: ${p.requests
                  .slice(-10)
                  .map((r) => `${r.method} ${r.path}${r.query} ${r.code}`)
                  .join('; ')}`,
              ),
            ),
          60_000,
        )),
    );
    await Promise.race([jg.ready(), late]).finally(() => clearTimeout(timer));
    const paths = [...new Set(p.find({ watch: true }).map((r) => r.path))];
    expect(paths.length, 'one watched path per cache').to.be.at.least(6);
    return { p, paths };
  }

  /** When each path was live again after `t`: a LIST answered, or a watch answered 200. */
  function liveAfter(p: FaultProxy, paths: string[], t: number): Map<string, number | undefined> {
    const live = (r: ProxiedRequest) => r.code === 200 && r.answeredAt !== undefined && r.answeredAt >= t;
    return new Map(
      paths.map((path) => [
        path,
        p.find({ method: 'GET', path: new RegExp(`^${path}$`), since: t }).find(live)?.answeredAt,
      ]),
    );
  }

  const short = (path: string) => path.split('/').at(-1)!;

  it('(w) the real kube-apiserver v1.36 serves WatchList: every cache synced by one watch, without a LIST', async () => {
    const { p, paths } = await start();
    const lists = p.find({ method: 'GET', watch: false }).filter((r) => paths.includes(r.path));
    const watchLists = p.find({ watch: true }).filter((r) => /sendInitialEvents=true/.test(r.query));
    figure(
      'w',
      `${paths.length} caches; ${watchLists.length} WatchList requests (${watchLists.filter((r) => r.code === 200).length} answered 200), ${lists.length} LISTs`,
    );
    expect(lists.map((r) => r.path)).to.deep.equal([]);
    expect(new Set(watchLists.filter((r) => r.code === 200).map((r) => r.path))).to.deep.equal(new Set(paths));
  });

  it('(c) 429 with Retry-After: 1 on every request for 25 s: every informer live within 5 s of the end', async () => {
    const { p, paths } = await start();
    const from = Date.now();
    const until = from + THROTTLE_MS;
    const rule = p.addRule({
      method: 'GET',
      from,
      until,
      fault: { status: 429, reason: 'TooManyRequests', message: 'storage is (re)initializing', retryAfterS: 1 },
    });
    p.dropStreams();
    await sleep(until - Date.now() + LIVE_BOUND_MS + 2_000);
    const live = liveAfter(p, paths, until);
    const late = [...live].filter(([, t]) => t === undefined || t - until > LIVE_BOUND_MS);
    const perInformer = paths.map(
      (path) =>
        p.find({ path: new RegExp(`^${path}$`), since: from }).filter((r) => r.code === 429 && r.at < until).length,
    );
    figure(
      'c',
      `throttled ${secs(THROTTLE_MS)} (${rule.matched.length} answers 429, ${Math.min(...perInformer)}-${Math.max(...perInformer)} per informer: one every ${secs(THROTTLE_MS / Math.max(1, Math.min(...perInformer)))}-${secs(THROTTLE_MS / Math.max(1, Math.max(...perInformer)))}); ` +
        `live after its end: ${[...live].map(([path, t]) => `${short(path)} ${t === undefined ? 'never' : secs(t - until)}`).join(', ')}`,
    );
    expect(late.map(([path]) => path)).to.deep.equal([]);
  });

  it('(d) without WatchList, every watch answered 410 for 20 s: re-lists back off, watches again within 5 s of the end', async () => {
    const { p, paths } = await start((px) =>
      px.addRule({
        watch: true,
        query: /sendInitialEvents=true/,
        fault: {
          status: 422,
          reason: 'Invalid',
          message:
            'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
        },
      }),
    );
    const from = Date.now();
    const until = from + STORM_MS;
    p.addRule({
      watch: true,
      from,
      until,
      fault: { status: 410, reason: 'Expired', message: 'too old resource version' },
    });
    p.dropStreams();
    await sleep(until - Date.now() + LIVE_BOUND_MS + 2_000);
    const machines = paths.find((x) => x.endsWith('/machines'))!;
    const listsIn = (path: string) =>
      p.find({ method: 'GET', watch: false, path: new RegExp(`^${path}$`), since: from }).filter((r) => r.at < until)
        .length;
    const machineLists = listsIn(machines);
    const watchedAgain = new Map(
      paths.map((path) => [
        path,
        p.find({ watch: true, path: new RegExp(`^${path}$`), since: until }).find((r) => r.code === 200)?.answeredAt,
      ]),
    );
    figure(
      'd',
      `410 storm ${secs(STORM_MS)}: Machine LISTs ${machineLists} (${(machineLists / (STORM_MS / 1000)).toFixed(2)}/s; before the back-off ~48/s), all caches ${paths.reduce((n, x) => n + listsIn(x), 0)}; ` +
        `watching again after its end: ${[...watchedAgain].map(([path, t]) => `${short(path)} ${t === undefined ? 'never' : secs(t - until)}`).join(', ')}`,
    );
    expect(machineLists / (STORM_MS / 1000), 'Machine LISTs a second during the storm').to.be.below(1.5);
    expect(
      [...watchedAgain].filter(([, t]) => t === undefined || t - until > LIVE_BOUND_MS).map(([path]) => path),
    ).to.deep.equal([]);
  });
});
