// The informer against a FAKE apiserver (a plain node:http server, no Kubernetes): a watch ends on any end
// of its response, once; silent and hung streams are bounded; health(); parse once (transform/same/upsert);
// paged lists (these tests, unless they say WatchList) and WatchList with its fallback; the back-off after
// failures (Retry-After, 410 storms); the view's currency. The real kube-apiserver restarts, silenced watches,
// 429 and 410 storms are in e2e/faults.
import { expect } from 'chai';
import { Informer } from './informer.js';
import { RestClient, type Json } from '../client/rest.js';
import {
  capturingLogger,
  list,
  obj,
  serve,
  sleep,
  until,
  watchEvents,
  type Handler,
  type TestServer,
} from '../testing/http-server.js';
import type { InformerEvent, InformerOptions } from './informer-options.js';

const THINGS = { group: '', version: 'v1', plural: 'things', namespaced: true };

describe('Informer (fake apiserver)', function () {
  this.timeout(15_000);
  let server: TestServer | undefined;
  let informer: Informer<any> | undefined;
  let rest: RestClient | undefined;
  afterEach(async () => {
    informer?.stop();
    rest?.close();
    await server?.close();
    informer = rest = server = undefined;
  });

  /** Starts an informer against `handler`; its events land in `events`. */
  async function start<T = Json>(handler: Handler, o: Partial<InformerOptions<T>> = {}) {
    server = await serve(handler);
    rest = new RestClient(server.access, { userAgent: 'test', qps: 0 });
    const events: { type: InformerEvent; obj: T; old?: T }[] = [];
    const restarts: string[] = [];
    const { logger, lines } = capturingLogger();
    const inf = new Informer<T>({
      rest,
      resource: THINGS,
      name: 'things',
      log: logger,
      livenessMs: 5_000,
      onEvent: (type, o2, old) => events.push({ type, obj: o2, ...(old ? { old } : {}) }),
      onRestart: (why) => restarts.push(why),
      watchList: false,
      ...o,
    });
    informer = inf;
    inf.start();
    return {
      inf,
      events,
      restarts,
      lines,
      watches: () => server!.requests.filter((r) => r.url.searchParams.get('watch') === 'true'),
    };
  }

  // The reproduction of issue 10 finding 1: on Node 24 a readline interface over this response never closes.
  it('ends a watch whose socket is destroyed mid-stream, once, and watches again', async () => {
    let watch = 0;
    const { events, restarts } = await start((req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [obj('a', '9')])));
      watch++;
      if (watch === 1) {
        watchEvents(res, [{ type: 'MODIFIED', object: obj('a', '11') }]);
        setTimeout(() => req.socket.destroy(), 50); // apiserver killed, connection reset
      } else watchEvents(res, [{ type: 'ADDED', object: obj('b', '12') }]);
    });
    await until('b, from the second watch', () => events.find((e) => e.obj.metadata.name === 'b'));
    expect(restarts).to.have.length(1);
    expect(events.map((e) => `${e.type} ${e.obj.metadata.name}`)).to.deep.equal(['add a', 'update a', 'add b']);
  });

  it('aborts a watch that stays silent past the liveness bound and re-lists at once, then watches again', async () => {
    let watch = 0;
    let lists = 0;
    const { events, restarts, lines } = await start(
      (_req, res, url) => {
        if (url.searchParams.get('watch') !== 'true')
          return void res.end(JSON.stringify(list(String(10 + lists++), lists > 1 ? [obj('a', '11')] : [])));
        if (++watch === 1) return void res.writeHead(200).flushHeaders(); // open, then nothing at all
        watchEvents(res, [{ type: 'ADDED', object: obj('b', '12') }]);
      },
      { livenessMs: 300 },
    );
    await until('b, after the silent watch', () => events.find((e) => e.obj.metadata.name === 'b'));
    expect(restarts).to.have.length(1);
    expect(restarts[0]).to.match(/silent for 300 ms; re-listing/);
    expect(lists, 'the silent watch is followed by a list, not only a re-watch').to.equal(2);
    expect(
      events.map((e) => `${e.type} ${e.obj.metadata.name}`),
      'what the list showed came first',
    ).to.deep.equal(['add a', 'add b']);
    expect(lines.some((l) => l.message === 'list/watch restarting' && /silent/.test(l.reason))).to.equal(true);
  });

  it('health(): a watch answered 200 and then silent is not live; a list answered is', async () => {
    let lists = 0;
    const { inf, restarts } = await start(
      (_req, res, url) => {
        if (url.searchParams.get('watch') !== 'true') {
          if (++lists === 1) return void res.end(JSON.stringify(list('10', [])));
          return; // later lists hang (up to their timeout)
        }
        res.writeHead(200).flushHeaders(); // every watch: open, then nothing
      },
      { livenessMs: 400, listTimeoutMs: 3_000 },
    );
    await inf.synced;
    await until('not ok: the watches answer 200 but nothing comes, the list hangs', () => !inf.health().ok, 2_500);
    await until('the silent watch restarted', () => restarts.length > 0);
    expect(restarts[0]).to.match(/re-listing/);
  });

  it('bounds a watch whose response headers never come by the liveness bound', async () => {
    let watch = 0;
    const { events, restarts } = await start(
      (_req, res, url) => {
        if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
        if (++watch === 1) return; // never answers
        watchEvents(res, [{ type: 'ADDED', object: obj('b', '12') }]);
      },
      { livenessMs: 300 },
    );
    await until('b', () => events.find((e) => e.obj.metadata.name === 'b'));
    expect(restarts).to.have.length(1);
  });

  it('bounds a hung LIST by its request timeout', async () => {
    let lists = 0;
    const { inf } = await start(
      (_req, res, url) => {
        if (url.searchParams.get('watch') === 'true') return void watchEvents(res, []);
        if (++lists === 1) return; // hangs
        res.end(JSON.stringify(list('10', [obj('a', '9')])));
      },
      { listTimeoutMs: 200 },
    );
    await inf.synced;
    expect(lists).to.equal(2);
    expect(inf.store.size).to.equal(1);
  });

  it('treats an ERROR 410 as expired: re-lists at once, without back-off', async () => {
    let lists = 0;
    const listedAt: number[] = [];
    const { restarts, watches } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') === 'true') {
        if (watches().length === 1)
          return void watchEvents(res, [
            { type: 'ERROR', object: { kind: 'Status', code: 410, message: 'too old resource version' } },
          ]);
        return void watchEvents(res, []);
      }
      lists++;
      listedAt.push(Date.now());
      res.end(JSON.stringify(list(String(10 + lists), [])));
    });
    await until('the second list', () => lists === 2);
    expect(listedAt[1]! - listedAt[0]!).to.be.below(400); // the first back-off step would be >= 500 ms
    expect(restarts).to.deep.equal(['expired: too old resource version']);
    await until('the watch from the new list', () => watches().length === 2);
    expect(watches()[1]!.url.searchParams.get('resourceVersion')).to.equal('12');
  });

  it('re-watches from the last resourceVersion when the server ends the watch, without counting a restart', async () => {
    const { inf, watches } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
      if (watches().length > 1) return void watchEvents(res, []);
      watchEvents(res, [
        { type: 'ADDED', object: obj('a', '11') },
        { type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } },
      ]);
      res.end(); // the server's timeoutSeconds
    });
    await until('the second watch', () => watches().length === 2);
    expect(watches()[1]!.url.searchParams.get('resourceVersion')).to.equal('15');
    expect(watches()[0]!.url.searchParams.get('allowWatchBookmarks')).to.equal('true');
    expect(inf.restarts).to.equal(0);
  });

  it('backs off when a watch ends at once with nothing in it (client-go: very short watch)', async () => {
    const { restarts, watches } = await start(
      (_req, res, url) => {
        if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
        res.writeHead(200).end();
      },
      { random: () => 0.5 },
    );
    await until('a restart', () => restarts.length === 1);
    const before = watches().length;
    await sleep(500);
    expect(watches().length).to.equal(before); // waiting 750 ms before the next sync
    expect(restarts[0]).to.match(/very short watch/);
  });

  it('health(): not ok while it has had no live watch for longer than livenessMs, ok again once watching', async () => {
    let down = true;
    const { inf } = await start(
      (req, res, url) => {
        if (down) return void req.socket.destroy();
        if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
        watchEvents(res, []);
      },
      { livenessMs: 400 },
    );
    expect(inf.health().ok).to.equal(true);
    await until('not ok', () => !inf.health().ok, 3_000);
    expect(inf.health().why).to.match(/informer things: no live watch for \d+ s/);
    down = false;
    await inf.synced;
    await until('ok again', () => inf.health().ok, 5_000);
  });

  it('parse once: keeps the transformed value, emits nothing for a `same` update, upsert keeps only newer versions', async () => {
    type Model = { name: string; phase: string };
    const { inf, events, watches } = await start<Model>(
      (_req, res, url) => {
        if (url.searchParams.get('watch') !== 'true')
          return void res.end(JSON.stringify(list('10', [obj('a', '9', { status: { phase: 'Pending', noise: 1 } })])));
        if (watches().length > 1) return void watchEvents(res, []);
        watchEvents(res, [
          { type: 'MODIFIED', object: obj('a', '11', { status: { phase: 'Pending', noise: 2 } }) }, // same facts
          { type: 'MODIFIED', object: obj('a', '12', { status: { phase: 'Running' } }) },
        ]);
      },
      {
        transform: (raw) => ({ name: raw.metadata.name, phase: raw.status?.phase }),
        same: (x, y) => x.phase === y.phase,
      },
    );
    await until('the Running update', () => events.length === 2);
    expect(events).to.deep.equal([
      { type: 'add', obj: { name: 'a', phase: 'Pending' } },
      { type: 'update', obj: { name: 'a', phase: 'Running' }, old: { name: 'a', phase: 'Pending' } },
    ]);
    expect(inf.store.get('ns/a')).to.deep.equal({ name: 'a', phase: 'Running' });
    inf.upsert(obj('a', '11', { status: { phase: 'Old' } }));
    expect(inf.store.get('ns/a')!.phase).to.equal('Running');
    inf.upsert(obj('a', '20', { status: { phase: 'Fresh' } }));
    expect(inf.store.get('ns/a')!.phase).to.equal('Fresh');
    inf.upsert(obj('new', '21', { status: { phase: 'Created' } }));
    expect(inf.store.get('ns/new')!.phase).to.equal('Created');
  });

  it('by default caches the JSON without managedFields', async () => {
    const { inf } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [obj('a', '9')])));
      watchEvents(res, []);
    });
    await inf.synced;
    expect(inf.store.get('ns/a')!.metadata).to.deep.equal({ name: 'a', namespace: 'ns', resourceVersion: '9' });
  });

  it('re-list after a restart emits what changed while it was blind (delete, update), nothing for the unchanged', async () => {
    let lists = 0;
    const { events, watches } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') === 'true') {
        if (watches().length === 1)
          return void watchEvents(res, [{ type: 'ERROR', object: { code: 410, message: 'gone' } }]);
        return void watchEvents(res, []);
      }
      lists++;
      res.end(
        JSON.stringify(
          lists === 1
            ? list('10', [obj('a', '1'), obj('b', '2'), obj('c', '3')])
            : list('20', [obj('a', '1'), obj('b', '15')]),
        ),
      );
    });
    await until('the second list', () => lists === 2 && events.length === 5);
    expect(events.map((e) => `${e.type} ${e.obj.metadata.name}`)).to.deep.equal([
      'add a',
      'add b',
      'add c',
      'delete c',
      'update b',
    ]);
  });

  // ---- WatchList, and its fallback to paged lists ----

  const isWatchList = (url: URL) => url.searchParams.get('sendInitialEvents') === 'true';
  const endOfInitial = (rv: string) => ({
    type: 'BOOKMARK',
    object: {
      kind: 'Thing',
      apiVersion: 'v1',
      metadata: { resourceVersion: rv, annotations: { 'k8s.io/initial-events-end': 'true' } },
    },
  });
  const lists = () => server!.requests.filter((r) => r.url.searchParams.get('watch') !== 'true');

  it('WatchList: one watch syncs the view (no LIST), synced only at the end of the initial events, then watches on', async () => {
    let stream: import('node:http').ServerResponse | undefined;
    const { inf, events, watches } = await start(
      (_req, res, url) => {
        if (!isWatchList(url)) return void res.writeHead(500).end();
        stream = res;
        watchEvents(res, [
          { type: 'ADDED', object: obj('a', '5') },
          { type: 'ADDED', object: obj('b', '6') },
        ]);
      },
      { watchList: true },
    );
    await until('the WatchList stream', () => stream);
    await sleep(100);
    expect([inf.hasSynced, inf.current, inf.store.size], 'nothing before the end of the initial events').to.deep.equal([
      false,
      false,
      0,
    ]);
    watchEvents(stream!, [endOfInitial('20'), { type: 'MODIFIED', object: obj('a', '21', { spec: { x: 1 } }) }]);
    await inf.synced;
    await until('the update after the initial events', () => events.length === 3);
    expect(events.map((e) => `${e.type} ${e.obj.metadata.name}`)).to.deep.equal(['add a', 'add b', 'update a']);
    expect(inf.store.get('ns/a')!.metadata.managedFields, 'dropped before parsing').to.equal(undefined);
    const q = watches()[0]!.url.searchParams;
    expect([
      q.get('resourceVersionMatch'),
      q.get('allowWatchBookmarks'),
      q.get('resourceVersion'),
      lists().length,
    ]).to.deep.equal(['NotOlderThan', 'true', null, 0]);
    expect([inf.current, inf.syncs.watchList, inf.syncs.list]).to.deep.equal([true, 1, 0]);
  });

  it('WatchList: after a failure the next WatchList (from the last resourceVersion) replaces the view and says what changed', async () => {
    const { events, watches } = await start(
      (req, res, url) => {
        if (!isWatchList(url)) return void res.writeHead(500).end();
        if (watches().length === 1) {
          watchEvents(res, [
            { type: 'ADDED', object: obj('a', '5') },
            { type: 'ADDED', object: obj('b', '6') },
            endOfInitial('20'),
          ]);
          setTimeout(() => req.socket.destroy(), 50);
        } else watchEvents(res, [{ type: 'ADDED', object: obj('a', '25') }, endOfInitial('30')]);
      },
      { watchList: true },
    );
    await until('the second sync', () => events.length === 4);
    expect(events.map((e) => `${e.type} ${e.obj.metadata.name}`)).to.deep.equal([
      'add a',
      'add b',
      'delete b',
      'update a',
    ]);
    expect(watches()[1]!.url.searchParams.get('resourceVersion')).to.equal('20');
    expect(isWatchList(watches()[1]!.url)).to.equal(true);
  });

  it('fallback: an apiserver that refuses WatchList (422) is listed in pages, and never asked for WatchList again', async () => {
    const { inf, events, lines } = await start(
      (req, res, url) => {
        if (isWatchList(url))
          return void res.writeHead(422, { 'Content-Type': 'application/json' }).end(
            JSON.stringify({
              kind: 'Status',
              code: 422,
              message: 'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
            }),
          );
        if (url.searchParams.get('watch') !== 'true') {
          const page =
            url.searchParams.get('continue') === null
              ? list('10', [obj('a', '9')], 'next')
              : list('10', [obj('b', '8')]);
          return void res.end(JSON.stringify(page));
        }
        watchEvents(res, [{ type: 'ADDED', object: obj('c', '11') }]);
        setTimeout(() => req.socket.destroy(), 30); // every plain watch fails: the informer syncs again and again
      },
      { watchList: true },
    );
    await inf.synced;
    await until('three syncs', () => inf.syncs.list >= 3);
    expect(
      server!.requests.filter((r) => isWatchList(r.url)),
      'asked once',
    ).to.have.length(1);
    expect(inf.syncs.watchList).to.equal(0);
    expect(events.slice(0, 3).map((e) => `${e.type} ${e.obj.metadata.name}`)).to.deep.equal([
      'add a',
      'add b',
      'add c',
    ]);
    expect(lines.filter((l) => /does not serve WatchList/.test(l.message))).to.have.length(1);
  });

  it('fallback: a watch that ignores sendInitialEvents (a bookmark before their end) is listed instead', async () => {
    const { inf } = await start(
      (_req, res, url) => {
        if (isWatchList(url))
          return void watchEvents(res, [{ type: 'BOOKMARK', object: { metadata: { resourceVersion: '3' } } }]);
        if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [obj('a', '9')])));
        watchEvents(res, []);
      },
      { watchList: true },
    );
    await inf.synced;
    expect([inf.syncs.watchList, inf.syncs.list, inf.store.size]).to.deep.equal([0, 1, 1]);
  });

  it('after a silent watch the sync is a LIST (the path silences WatchList too); WatchList again after other failures', async () => {
    let plain = 0;
    const { inf, watches } = await start(
      (req, res, url) => {
        if (isWatchList(url)) {
          watchEvents(res, [{ type: 'ADDED', object: obj('a', '5') }, endOfInitial('20')]);
          if (watches().length === 1) return; // then silent
          return void setTimeout(() => req.socket.destroy(), 30);
        }
        if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('21', [obj('a', '5')])));
        if (++plain === 1) setTimeout(() => req.socket.destroy(), 30); // reset: not silence
        watchEvents(res, []);
      },
      { watchList: true, livenessMs: 300 },
    );
    await until('a WatchList after the reset', () => watches().filter((w) => isWatchList(w.url)).length === 2);
    const kinds = server!.requests.map((r) =>
      isWatchList(r.url) ? 'watchlist' : r.url.searchParams.get('watch') === 'true' ? 'watch' : 'list',
    );
    expect(kinds.slice(0, 4)).to.deep.equal(['watchlist', 'list', 'watch', 'watchlist']);
    expect(inf.syncs.list).to.equal(1);
  });

  // ---- after failures: Retry-After, 410 storms, the view's currency ----

  it('429 with Retry-After: 1 is retried about every second, and the view is current within ~1 s of the end of the throttling', async () => {
    const throttledUntil = Date.now() + 2_500;
    const attempts: number[] = [];
    const { inf } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') attempts.push(Date.now());
      if (Date.now() < throttledUntil)
        return void res
          .writeHead(429, { 'Retry-After': '1', 'Content-Type': 'application/json' })
          .end(JSON.stringify({ kind: 'Status', code: 429, message: 'storage is (re)initializing' }));
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
      watchEvents(res, []);
    });
    await inf.synced;
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
    expect(Math.min(...gaps), `gaps ${gaps}`).to.be.at.least(950);
    expect(Math.max(...gaps), `gaps ${gaps}: Retry-After, not a growing back-off`).to.be.below(1_400);
    expect(Date.now() - throttledUntil).to.be.below(1_400);
    expect(inf.current).to.equal(true);
  });

  it('a 410 storm: the first re-list at once, the next ones backing off (not one per answer); live again within 4 s of its end', async () => {
    const stormUntil = Date.now() + 3_000;
    let listed = 0;
    const { inf } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') {
        listed++;
        return void res.end(JSON.stringify(list(String(10 + listed), [obj('a', '9')])));
      }
      if (Date.now() < stormUntil)
        return void watchEvents(res, [
          { type: 'ERROR', object: { kind: 'Status', code: 410, message: 'too old resource version' } },
        ]);
      watchEvents(res, []);
    });
    await inf.synced;
    await sleep(stormUntil - Date.now());
    const duringStorm = listed;
    expect(duringStorm, 'lists during a 3 s storm').to.be.within(3, 8);
    await until(
      'a watch after the storm',
      () =>
        server!.requests.some(
          (r) =>
            r.url.searchParams.get('watch') === 'true' &&
            r.url.searchParams.get('resourceVersion') !== null &&
            Date.now() >= stormUntil &&
            inf.current,
        ),
      4_500,
    );
  });

  it('current: false from a failure until the next sync completes; the server ending a watch keeps it current', async () => {
    const changes: boolean[] = [];
    let watch = 0;
    let lists2 = 0;
    const { inf } = await start(
      (req, res, url) => {
        if (url.searchParams.get('watch') !== 'true') {
          if (++lists2 === 2) return void setTimeout(() => res.end(JSON.stringify(list('30', []))), 300);
          return void res.end(JSON.stringify(list('10', [])));
        }
        watch++;
        if (watch === 1)
          return void res
            .writeHead(200)
            .end(JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '11' } } }) + '\n'); // the server's timeout
        if (watch === 2) return void setTimeout(() => req.socket.destroy(), 300);
        watchEvents(res, []);
      },
      { onCurrent: (c) => changes.push(c) },
    );
    await until('the second list', () => lists2 === 2);
    expect(inf.current, 'while the re-list is in flight').to.equal(false);
    await until('current again', () => inf.current);
    expect(changes).to.deep.equal([true, false, true]);
  });

  it('health(): not ok while no sync completes for longer than livenessMs, though bytes flow (a first page, then a failure)', async () => {
    let broken = false;
    const { inf } = await start(
      (req, res, url) => {
        if (url.searchParams.get('watch') === 'true') {
          if (!broken) return void setTimeout(() => ((broken = true), req.socket.destroy()), 100); // the watch fails: re-list
          return void watchEvents(res, []);
        }
        if (!broken || url.searchParams.get('continue') === null)
          return void res.end(JSON.stringify(list('10', [obj('a', '9')], broken ? 'next' : undefined)));
        res.writeHead(500).end(); // the second page never comes while broken
      },
      { livenessMs: 1_500 },
    );
    await inf.synced;
    await until(
      'not ok for being behind',
      () => !inf.health().ok && /not re-listed/.test(inf.health().why ?? ''),
      8_000,
    );
    expect(inf.current).to.equal(false);
  });
});
