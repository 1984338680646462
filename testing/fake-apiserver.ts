// A FAKE: a small in-memory Kubernetes API server, shared by the benchmarks (bench/micro/) and the product tests
// that need a whole controller against an apiserver without a control plane (controllers/decision-gate.test.ts,
// controllers/capi-upgrade.test.ts); it lives in testing/ so that neither imports the other. HTTPS, the
// list/watch/get/create/update/patch/delete verbs of the resources JoinGuard reads and writes, with
// resourceVersions, preconditions (409), label selectors, paged lists, watch replay from a resourceVersion
// and bookmarks, WatchList (sendInitialEvents, unless `watchList` is off: then refused with 422 as by an apiserver
// whose WatchList feature gate is off). It exists so that JoinGuard's event path and its requests per mark can be measured at
// 10,000 Machines per Cluster in seconds, with objects captured from CAPI's real managers
// (testing/fixtures.json), and without an apiserver or CAPI sharing the 2 cores. Not a conformance
// fake: no field validation, no admission, no server-side apply.
import { randomUUID } from 'node:crypto';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  jsonPatch,
  KINDS,
  mergePatch,
  parse,
  readBody,
  selector,
  status,
  verbOf,
  type Json,
  type Kind,
  type Route,
} from './fake-protocol.js';

export { mergePatch, type Json, type Kind } from './fake-protocol.js';

const EVENT_LOG = 200_000;

interface Watcher {
  plural: string;
  namespace?: string;
  selector: (o: Json) => boolean;
  res: ServerResponse;
}

export class FakeApiserver {
  private rv = 1000;
  /** plural -> namespace/name -> object */
  private readonly store = new Map<string, Map<string, Json>>(KINDS.map((k) => [k.plural, new Map()]));
  private readonly log: { rv: number; plural: string; type: string; obj: Json }[] = [];
  private readonly watchers = new Set<Watcher>();
  private server?: https.Server;
  /** TCP connections open to the server now, and the most seen at once (the client's sockets). */
  connections = 0;
  peakConnections = 0;
  /** `verb resource[/subresource]` -> requests answered (watches counted as `watch <resource>`). */
  readonly counts = new Map<string, number>();
  inFlight = 0;
  lastRequestAt = 0;
  /** Added to every answer but watches: the round trip of a busy apiserver. */
  delayMs = 0;
  /** Serve watches with sendInitialEvents=true (kube-apiserver v1.34+: the WatchList gate is on by default). */
  watchList = true;
  /** A status to answer instead of serving (tests' faults), by resource and whether it is a watch. */
  fault?: (plural: string, watch: boolean) => number | undefined;
  /** Sees every write as it is answered (the micro-benchmark times marks with it). */
  onWrite?: (verb: string, resource: string, obj: Json) => void;

  constructor(private readonly tls: { cert: string; key: string }) {}

  async start(): Promise<string> {
    this.server = https.createServer(
      { cert: this.tls.cert, key: this.tls.key },
      (req, res) => void this.handle(req, res),
    );
    this.server.on('connection', (sock) => {
      this.peakConnections = Math.max(this.peakConnections, ++this.connections);
      sock.once('close', () => this.connections--);
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    const addr = this.server.address();
    return `https://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  }

  async stop(): Promise<void> {
    for (const w of this.watchers) w.res.destroy();
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
  }

  // ---- the world, changed directly (what CAPI's controllers would write) ----

  /** Ends every open watch of a resource as a dropped connection does. */
  dropWatches(plural: string): void {
    for (const w of this.watchers) if (w.plural === plural) w.res.destroy();
  }

  objects(plural: string): Map<string, Json> {
    return this.store.get(plural)!;
  }

  /** Creates or replaces an object without a request: a new resourceVersion and a watch event. */
  put(plural: string, obj: Json): Json {
    const key = `${obj.metadata.namespace ?? ''}/${obj.metadata.name}`;
    const old = this.store.get(plural)!.get(key);
    obj.metadata.uid ??= old?.metadata?.uid ?? randomUUID();
    obj.metadata.creationTimestamp ??= old?.metadata?.creationTimestamp ?? new Date().toISOString();
    return this.commit(plural, key, obj, old ? 'MODIFIED' : 'ADDED');
  }

  /** Deletes an object without a request (a watch event DELETED); false when there is none. */
  remove(plural: string, namespace: string, name: string): boolean {
    const key = `${namespace}/${name}`;
    const cur = this.store.get(plural)!.get(key);
    if (!cur) return false;
    this.commit(plural, key, cur, 'DELETED');
    return true;
  }

  private commit(plural: string, key: string, obj: Json, type: 'ADDED' | 'MODIFIED' | 'DELETED'): Json {
    const rv = ++this.rv;
    obj.metadata.resourceVersion = String(rv);
    if (type === 'DELETED') this.store.get(plural)!.delete(key);
    else this.store.get(plural)!.set(key, obj);
    this.log.push({ rv, plural, type, obj });
    if (this.log.length > EVENT_LOG) this.log.splice(0, this.log.length - EVENT_LOG);
    // Serialized once, and only when a watch takes it (seeding 100,000 objects has no watch to feed).
    let line: string | undefined;
    for (const w of this.watchers)
      if (
        w.plural === plural &&
        (w.namespace === undefined || w.namespace === obj.metadata.namespace) &&
        w.selector(obj)
      )
        w.res.write((line ??= `${JSON.stringify({ type, object: obj })}\n`));
    return obj;
  }

  // ---- HTTP ----

  private count(k: string): void {
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://x');
    const q = url.searchParams;
    const route = parse(url.pathname);
    const body = await readBody(req);
    this.lastRequestAt = Date.now();
    const send = (code: number, obj: Json) => {
      res.writeHead(code, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(obj));
    };
    if (route.discovery) return send(200, route.discovery);
    const kind = route.kind;
    if (!kind) return send(404, status(404, 'NotFound', `no route ${url.pathname}`));
    const resource = `${kind.plural}${route.sub ? `/${route.sub}` : ''}`;
    const faulted = this.fault?.(kind.plural, req.method === 'GET' && q.get('watch') !== null);
    if (faulted !== undefined) return send(faulted, status(faulted, 'InternalError', `injected: ${faulted}`));
    if (req.method === 'GET' && q.get('watch')) {
      this.count(`watch ${resource}`);
      return this.watch(kind, route.namespace, q, res);
    }
    const verb = verbOf(req.method ?? 'GET', route.name);
    this.count(`${verb} ${resource}`);
    this.inFlight++;
    try {
      if (this.delayMs > 0) await new Promise((r) => setTimeout(r, this.delayMs));
      const [code, out] = this.serve(verb, kind, route, q, body, req.headers['content-type'] ?? '');
      if (code < 300 && verb !== 'get' && verb !== 'list') this.onWrite?.(verb, resource, out);
      send(code, out);
    } finally {
      this.inFlight--;
      this.lastRequestAt = Date.now();
    }
  }

  private serve(
    verb: string,
    kind: Kind,
    r: Route,
    q: URLSearchParams,
    body: Json | undefined,
    contentType: string,
  ): [number, Json] {
    const objs = this.store.get(kind.plural)!;
    const key = `${r.namespace ?? ''}/${r.name}`;
    const cur = r.name === undefined ? undefined : objs.get(key);
    const apiVersion = kind.group ? `${kind.group}/${kind.version}` : kind.version;
    const notFound = () => [404, status(404, 'NotFound', `${kind.plural} "${r.name}" not found`)] as [number, Json];
    const conflict = () =>
      [
        409,
        status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${kind.plural} "${r.name}": the object has been modified; please apply your changes to the latest version and try again`,
        ),
      ] as [number, Json];
    switch (verb) {
      case 'list': {
        // Pages as the apiserver serves them (limit/continue): the client parses one page at a time.
        const sel = selector(q.get('labelSelector'));
        const all = [...objs.values()].filter(
          (o) => (r.namespace === undefined || o.metadata.namespace === r.namespace) && sel(o),
        );
        const [from, rv] = (q.get('continue') ?? `0:${this.rv}`).split(':').map(Number) as [number, number];
        const limit = Number(q.get('limit')) || all.length;
        const items = all.slice(from, from + limit);
        const more = from + limit < all.length;
        return [
          200,
          {
            apiVersion,
            kind: `${kind.kind}List`,
            metadata: { resourceVersion: String(rv), ...(more ? { continue: `${from + limit}:${rv}` } : {}) },
            items,
          },
        ];
      }
      case 'get':
        return cur ? [200, cur] : notFound();
      case 'create': {
        const obj = { apiVersion, kind: kind.kind, ...body } as Json;
        obj.metadata = { ...obj.metadata, namespace: r.namespace };
        if (!obj.metadata.name) obj.metadata.name = `${obj.metadata.generateName ?? ''}${randomUUID().slice(0, 5)}`;
        const k = `${r.namespace ?? ''}/${obj.metadata.name}`;
        if (objs.has(k))
          return [409, status(409, 'AlreadyExists', `${kind.plural} "${obj.metadata.name}" already exists`)];
        obj.metadata.uid = randomUUID();
        obj.metadata.creationTimestamp = new Date().toISOString();
        return [201, this.commit(kind.plural, k, obj, 'ADDED')];
      }
      case 'update': {
        if (!cur) return notFound();
        if (body?.metadata?.resourceVersion && body.metadata.resourceVersion !== cur.metadata.resourceVersion)
          return conflict();
        const next =
          r.sub === 'status'
            ? { ...cur, status: body?.status }
            : {
                ...body,
                status: cur.status,
                metadata: {
                  ...body?.metadata,
                  uid: cur.metadata.uid,
                  creationTimestamp: cur.metadata.creationTimestamp,
                },
              };
        return [200, this.commit(kind.plural, key, structuredClone(next), 'MODIFIED')];
      }
      case 'patch': {
        if (!cur) return notFound();
        let next: Json;
        if (contentType.startsWith('application/json-patch')) {
          const patched = jsonPatch(structuredClone(cur), body as unknown as Json[]);
          if (!patched) return [422, status(422, 'Invalid', 'the test operation failed')];
          next = patched;
        } else {
          if (body?.metadata?.resourceVersion && body.metadata.resourceVersion !== cur.metadata.resourceVersion)
            return conflict();
          next = mergePatch(structuredClone(cur), body ?? {});
        }
        // /status changes only status; the object itself never changes status.
        next = r.sub === 'status' ? { ...cur, status: next.status } : { ...next, status: cur.status };
        next.metadata = { ...next.metadata, resourceVersion: cur.metadata.resourceVersion };
        return [200, this.commit(kind.plural, key, next, 'MODIFIED')];
      }
      case 'delete': {
        if (!cur) return notFound();
        const pre = body?.preconditions ?? {};
        if (
          (pre.uid && pre.uid !== cur.metadata.uid) ||
          (pre.resourceVersion && pre.resourceVersion !== cur.metadata.resourceVersion)
        )
          return conflict();
        this.commit(kind.plural, key, cur, 'DELETED');
        return [200, status(200, 'Success', 'deleted')];
      }
    }
    return [405, status(405, 'MethodNotAllowed', verb)];
  }

  private watch(kind: Kind, namespace: string | undefined, q: URLSearchParams, res: ServerResponse): void {
    const apiVersion = kind.group ? `${kind.group}/${kind.version}` : kind.version;
    if (q.get('sendInitialEvents') === 'true') {
      if (!this.watchList) {
        res.writeHead(422, { 'Content-Type': 'application/json' });
        res.end(
          JSON.stringify(
            status(
              422,
              'Invalid',
              'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
            ),
          ),
        );
        return;
      }
      // The state now (NotOlderThan any resourceVersion asked), each object an ADDED event, then the bookmark
      // that ends the initial events; the watch goes on from there.
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      const sel = selector(q.get('labelSelector'));
      for (const o of this.store.get(kind.plural)!.values()) {
        if ((namespace === undefined || o.metadata.namespace === namespace) && sel(o))
          res.write(`${JSON.stringify({ type: 'ADDED', object: o })}\n`);
      }
      res.write(
        `${JSON.stringify({ type: 'BOOKMARK', object: { apiVersion, kind: kind.kind, metadata: { resourceVersion: String(this.rv), annotations: { 'k8s.io/initial-events-end': 'true' } } } })}\n`,
      );
      q.set('resourceVersion', String(this.rv));
    } else res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    const from = Number(q.get('resourceVersion') || this.rv);
    if (this.log.length > 0 && from < this.log[0]!.rv - 1) {
      res.end(`${JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', 'too old resource version') })}\n`);
      return;
    }
    const w: Watcher = {
      plural: kind.plural,
      ...(namespace !== undefined ? { namespace } : {}),
      selector: selector(q.get('labelSelector')),
      res,
    };
    for (const e of this.log) {
      if (
        e.rv > from &&
        e.plural === w.plural &&
        (namespace === undefined || e.obj.metadata.namespace === namespace) &&
        w.selector(e.obj)
      )
        res.write(`${JSON.stringify({ type: e.type, object: e.obj })}\n`);
    }
    this.watchers.add(w);
    const bookmark =
      q.get('allowWatchBookmarks') === 'true' || q.get('allowWatchBookmarks') === '1'
        ? setInterval(
            () =>
              res.write(
                `${JSON.stringify({ type: 'BOOKMARK', object: { apiVersion, kind: kind.kind, metadata: { resourceVersion: String(this.rv) } } })}\n`,
              ),
            60_000,
          )
        : undefined;
    const end = setTimeout(() => res.end(), Number(q.get('timeoutSeconds') || 1800) * 1000);
    res.on('close', () => {
      this.watchers.delete(w);
      clearInterval(bookmark);
      clearTimeout(end);
    });
  }
}
