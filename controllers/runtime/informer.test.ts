// The informer against a FAKE apiserver (a plain node:http server, no Kubernetes): a watch ends on any end
// of its response, once; silent and hung streams are bounded; health(); parse once (transform/same/upsert).
// The real kube-apiserver restarts and silenced watches are in e2e/faults.
import { expect } from 'chai';
import { Informer, type InformerEvent, type InformerOptions } from './informer.js';
import { RestClient, type Json } from './rest.js';
import { capturingLogger, list, obj, serve, sleep, until, watchEvents, type Handler, type TestServer } from './testing/http-server.js';

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
      rest, resource: THINGS, name: 'things', log: logger, livenessMs: 5_000,
      onEvent: (type, o2, old) => events.push({ type, obj: o2, ...(old ? { old } : {}) }),
      onRestart: (why) => restarts.push(why),
      ...o,
    });
    informer = inf;
    inf.start();
    return { inf, events, restarts, lines, watches: () => server!.requests.filter((r) => r.url.searchParams.get('watch') === 'true') };
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
    const { events, restarts, lines } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list(String(10 + lists++), lists > 1 ? [obj('a', '11')] : [])));
      if (++watch === 1) return void res.writeHead(200).flushHeaders(); // open, then nothing at all
      watchEvents(res, [{ type: 'ADDED', object: obj('b', '12') }]);
    }, { livenessMs: 300 });
    await until('b, after the silent watch', () => events.find((e) => e.obj.metadata.name === 'b'));
    expect(restarts).to.have.length(1);
    expect(restarts[0]).to.match(/silent for 300 ms; re-listing/);
    expect(lists, 'the silent watch is followed by a list, not only a re-watch').to.equal(2);
    expect(events.map((e) => `${e.type} ${e.obj.metadata.name}`), 'what the list showed came first').to.deep.equal(['add a', 'add b']);
    expect(lines.some((l) => l.message === 'list/watch restarting' && /silent/.test(l.reason))).to.equal(true);
  });

  it('health(): a watch answered 200 and then silent is not live; a list answered is', async () => {
    let lists = 0;
    const { inf, restarts } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') {
        if (++lists === 1) return void res.end(JSON.stringify(list('10', [])));
        return; // later lists hang (up to their timeout)
      }
      res.writeHead(200).flushHeaders(); // every watch: open, then nothing
    }, { livenessMs: 400, listTimeoutMs: 3_000 });
    await inf.synced;
    await until('not ok: the watches answer 200 but nothing comes, the list hangs', () => !inf.health().ok, 2_500);
    expect(restarts[0]).to.match(/re-listing/);
  });

  it('bounds a watch whose response headers never come by the liveness bound', async () => {
    let watch = 0;
    const { events, restarts } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
      if (++watch === 1) return; // never answers
      watchEvents(res, [{ type: 'ADDED', object: obj('b', '12') }]);
    }, { livenessMs: 300 });
    await until('b', () => events.find((e) => e.obj.metadata.name === 'b'));
    expect(restarts).to.have.length(1);
  });

  it('bounds a hung LIST by its request timeout', async () => {
    let lists = 0;
    const { inf } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') === 'true') return void watchEvents(res, []);
      if (++lists === 1) return; // hangs
      res.end(JSON.stringify(list('10', [obj('a', '9')])));
    }, { listTimeoutMs: 200 });
    await inf.synced;
    expect(lists).to.equal(2);
    expect(inf.store.size).to.equal(1);
  });

  it('treats an ERROR 410 as expired: re-lists at once, without back-off', async () => {
    let lists = 0;
    const listedAt: number[] = [];
    const { restarts, watches } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') === 'true') {
        if (watches().length === 1) return void watchEvents(res, [{ type: 'ERROR', object: { kind: 'Status', code: 410, message: 'too old resource version' } }]);
        return void watchEvents(res, []);
      }
      lists++;
      listedAt.push(Date.now());
      res.end(JSON.stringify(list(String(10 + lists), [])));
    });
    await until('the second list', () => lists === 2);
    expect(listedAt[1]! - listedAt[0]!).to.be.below(400); // the first back-off step would be >= 800 ms
    expect(restarts).to.deep.equal(['expired: too old resource version']);
    await until('the watch from the new list', () => watches().length === 2);
    expect(watches()[1]!.url.searchParams.get('resourceVersion')).to.equal('12');
  });

  it('re-watches from the last resourceVersion when the server ends the watch, without counting a restart', async () => {
    const { inf, watches } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
      if (watches().length > 1) return void watchEvents(res, []);
      watchEvents(res, [{ type: 'ADDED', object: obj('a', '11') }, { type: 'BOOKMARK', object: { metadata: { resourceVersion: '15' } } }]);
      res.end(); // the server's timeoutSeconds
    });
    await until('the second watch', () => watches().length === 2);
    expect(watches()[1]!.url.searchParams.get('resourceVersion')).to.equal('15');
    expect(watches()[0]!.url.searchParams.get('allowWatchBookmarks')).to.equal('true');
    expect(inf.restarts).to.equal(0);
  });

  it('backs off when a watch ends at once with nothing in it (client-go: very short watch)', async () => {
    const { restarts, watches } = await start((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
      res.writeHead(200).end();
    });
    await until('a restart', () => restarts.length === 1);
    const before = watches().length;
    await sleep(500);
    expect(watches().length).to.equal(before); // waiting >= 800 ms before the next watch
    expect(restarts[0]).to.match(/very short watch/);
  });

  it('health(): not ok while it has had no live watch for longer than livenessMs, ok again once watching', async () => {
    let down = true;
    const { inf } = await start((req, res, url) => {
      if (down) return void req.socket.destroy();
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [])));
      watchEvents(res, []);
    }, { livenessMs: 400 });
    expect(inf.health().ok).to.equal(true);
    await until('not ok', () => !inf.health().ok, 3_000);
    expect(inf.health().why).to.match(/informer things: no live watch for \d+ s/);
    down = false;
    await inf.synced;
    await until('ok again', () => inf.health().ok, 5_000);
  });

  it('parse once: keeps the transformed value, emits nothing for a `same` update, upsert keeps only newer versions', async () => {
    type Model = { name: string; phase: string };
    const { inf, events, watches } = await start<Model>((_req, res, url) => {
      if (url.searchParams.get('watch') !== 'true') return void res.end(JSON.stringify(list('10', [obj('a', '9', { status: { phase: 'Pending', noise: 1 } })])));
      if (watches().length > 1) return void watchEvents(res, []);
      watchEvents(res, [
        { type: 'MODIFIED', object: obj('a', '11', { status: { phase: 'Pending', noise: 2 } }) }, // same facts
        { type: 'MODIFIED', object: obj('a', '12', { status: { phase: 'Running' } }) },
      ]);
    }, {
      transform: (raw) => ({ name: raw.metadata.name, phase: raw.status?.phase }),
      same: (x, y) => x.phase === y.phase,
    });
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
        if (watches().length === 1) return void watchEvents(res, [{ type: 'ERROR', object: { code: 410, message: 'gone' } }]);
        return void watchEvents(res, []);
      }
      lists++;
      res.end(JSON.stringify(lists === 1 ? list('10', [obj('a', '1'), obj('b', '2'), obj('c', '3')]) : list('20', [obj('a', '1'), obj('b', '15')])));
    });
    await until('the second list', () => lists === 2 && events.length === 5);
    expect(events.map((e) => `${e.type} ${e.obj.metadata.name}`)).to.deep.equal(['add a', 'add b', 'add c', 'delete c', 'update b']);
  });
});
