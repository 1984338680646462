// --watch-filter selects server-side: the caches' lists and watches of Clusters, Machines and checks carry the
// label selector cluster.x-k8s.io/watch-filter=<value>, so a shard lists only its own objects; MachineHealthChecks,
// KubeadmControlPlanes and KubeadmConfigs are not filtered. Against a FAKE apiserver that answers every list
// empty and records the queries (runtime/testing/http-server.ts).
import { expect } from 'chai';
import { Caches } from './joincheck/world/cache.js';
import { RestClient } from '../runtime/client/rest.js';
import {
  capturingLogger,
  closedAfterEach,
  sendJson,
  serve,
  until,
  watchEvents,
} from '../runtime/testing/http-server.js';

describe('--watch-filter (caches, fake apiserver)', function () {
  this.timeout(10_000);
  const keep = closedAfterEach();

  async function selectors(watchFilter?: string): Promise<Record<string, string[]>> {
    const server = keep(
      await serve((_req, res, url) => {
        if (url.searchParams.get('watch') === 'true') {
          if (url.searchParams.get('sendInitialEvents') === 'true')
            return void watchEvents(res, [
              {
                type: 'BOOKMARK',
                object: { metadata: { resourceVersion: '5', annotations: { 'k8s.io/initial-events-end': 'true' } } },
              },
            ]);
          return void watchEvents(res, []);
        }
        sendJson(res, 200, { metadata: { resourceVersion: '5' }, items: [] });
      }),
    );
    const rest = keep(new RestClient(server.access, { userAgent: 'test', qps: 0 }));
    const caches = new Caches({
      rest,
      apiVersion: 'v1beta2',
      kubeadm: { controlPlane: true, bootstrap: true },
      ...(watchFilter !== undefined ? { watchFilter } : {}),
      log: capturingLogger().logger,
      livenessMs: 30_000,
      enqueue: () => undefined,
    });
    keep({ close: () => caches.stop() });
    caches.start();
    await caches.synced();
    await until(
      'every watch open',
      () => server.requests.filter((r) => r.url.searchParams.get('watch') === 'true').length >= 6,
    );
    const out: Record<string, string[]> = {};
    for (const r of server.requests) {
      const plural = r.url.pathname.split('/').at(-1)!;
      (out[plural] ??= []).push(r.url.searchParams.get('labelSelector') ?? '');
    }
    return out;
  }

  it("lists and watches only the shard's Clusters, Machines and checks", async () => {
    const s = await selectors('shard-a');
    for (const plural of ['clusters', 'machines', 'machinejoinchecks'])
      expect(new Set(s[plural]), plural).to.deep.equal(new Set(['cluster.x-k8s.io/watch-filter=shard-a']));
    expect(new Set(s['machinehealthchecks'])).to.deep.equal(new Set(['']));
    expect(new Set(s['kubeadmcontrolplanes'])).to.deep.equal(new Set(['']));
    expect(new Set(s['kubeadmconfigs'])).to.deep.equal(new Set(['cluster.x-k8s.io/control-plane']));
  });

  it("without --watch-filter: no selector but the control-plane configs'", async () => {
    const s = await selectors();
    for (const plural of ['clusters', 'machines', 'machinejoinchecks', 'machinehealthchecks'])
      expect(new Set(s[plural]), plural).to.deep.equal(new Set(['']));
  });
});
