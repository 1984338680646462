// A CAPI upgrade under a running controller (issue 16 §1.5): discovery runs again every period; when the release
// changes the controller stops — workers finish, the Lease is handed back — and tells the command, which exits
// for its Deployment to start it again. Through startController against the in-memory (shared with bench/)
// apiserver (a FAKE: testing/fake-apiserver.ts) whose clusterctl inventory says which release is installed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { FakeApiserver } from '../testing/fake-apiserver.js';
import { makeTls } from '../testing/tls.js';
import { seed } from '../testing/world.js';
import { startController } from './manager.js';
import type { CapiVersionInfo } from '../runtime/client/discovery.js';
import { CapiRediscovery, capiChange } from '../runtime/client/rediscovery.js';
import { ApiError } from '../runtime/client/rest.js';
import { capturingLogger, sleep, until } from '../runtime/testing/http-server.js';
import type { RunningController } from './options.js';

describe('CAPI upgrade under a running controller', function () {
  this.timeout(60_000);
  let api: FakeApiserver | undefined;
  let jg: RunningController | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await jg?.stop();
    await api?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    jg = api = dir = undefined;
  });

  it('capiChange: the API version, the release, the kubeadm providers; nothing else', () => {
    const base: CapiVersionInfo = {
      apiVersion: 'v1beta2',
      served: ['v1beta1', 'v1beta2'],
      minor: 13,
      version: 'v1.13.6',
      source: 'inventory',
      kubeadmControlPlane: true,
      kubeadmBootstrap: true,
    };
    expect(capiChange(base, { ...base })).to.equal(undefined);
    expect(capiChange(base, { ...base, source: 'schema', served: ['v1beta2'] })).to.equal(undefined);
    expect(capiChange(base, { ...base, minor: 14, version: 'v1.14.2' })).to.equal('release v1.13.6 -> v1.14.2');
    expect(capiChange(base, { ...base, version: 'v1.13.7' })).to.equal('release v1.13.6 -> v1.13.7');
    expect(
      capiChange(
        { ...base, apiVersion: 'v1beta1', minor: 10, version: 'v1.10.10' },
        { ...base, minor: 11, version: 'v1.11.5' },
      ),
    ).to.equal('API version v1beta1 -> v1beta2, release v1.10.10 -> v1.11.5');
    expect(capiChange(base, { ...base, kubeadmControlPlane: false })).to.equal('KubeadmControlPlane no longer served');
  });

  it('an apiserver that does not answer is no change; CAPI gone or refused is one', async () => {
    const base: CapiVersionInfo = {
      apiVersion: 'v1beta2',
      served: ['v1beta2'],
      minor: 14,
      source: 'schema',
      kubeadmControlPlane: true,
      kubeadmBootstrap: true,
    };
    const answers: (CapiVersionInfo | Error)[] = [
      new ApiError(0, 'GET', '/apis/cluster.x-k8s.io', 'connect ECONNREFUSED'),
      new ApiError(503, 'GET', '/apis', 'unavailable'),
      base,
      new Error('CAPI is not installed: the API group cluster.x-k8s.io is not served'),
    ];
    const changes: string[] = [];
    const r = new CapiRediscovery({
      discover: async () => {
        const a = answers.shift()!;
        if (a instanceof Error) throw a;
        return a;
      },
      initial: base,
      periodMs: 60_000,
      log: capturingLogger().logger,
      onChange: (why) => changes.push(why),
    });
    for (let i = 0; i < 3; i++) await r.checkNow();
    expect(changes).to.deep.equal([]);
    await r.checkNow();
    expect(changes).to.deep.equal(['CAPI is not installed: the API group cluster.x-k8s.io is not served']);
    r.stop();
  });

  it('stops, hands the Lease back and tells the command when the release changes; not before', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-upgrade-'));
    const tls = await makeTls(dir);
    api = new FakeApiserver(tls);
    const server = await api.start();
    seed(api, { clusters: 1, perCluster: 2, mhc: false, now: Date.now() });
    const { logger, lines } = capturingLogger();
    let changed: string | undefined;
    jg = await startController({
      access: { server: new URL(server), ca: Buffer.from(tls.caPem) },
      logger,
      metricsBindAddress: '0',
      healthProbeBindAddress: '0',
      collectDefaultMetrics: false,
      userAgent: 'upgrade-test',
      leaderElect: true,
      leaderElectionNamespace: 'joinguard-system',
      identity: 'me',
      capiRediscoveryMs: 300,
      onCapiChanged: (why) => (changed = why),
    });
    await jg.ready();
    const lease = () => api!.objects('leases').get('joinguard-system/joinguard-leader');
    expect(lease()?.spec?.holderIdentity).to.equal('me');
    await sleep(1_000); // three periods: the same release, nothing happens
    expect(changed).to.equal(undefined);

    // clusterctl upgrade apply: the inventory now says v1.15.0.
    const provider = structuredClone(api.objects('providers').get('capi-system/cluster-api')!);
    provider.version = 'v1.15.0';
    api.put('providers', provider);
    await until('the controller told the command', () => changed, 5_000);
    expect(changed).to.equal('release v1.14.2 -> v1.15.0');
    expect(lease()?.spec?.holderIdentity, 'the Lease handed back before the exit').to.equal(undefined);
    expect(
      lines.some(
        (l) =>
          l.message === 'The CAPI release changed: stopping to restart with it' &&
          l.change === 'release v1.14.2 -> v1.15.0',
      ),
    ).to.equal(true);
    expect(lines.some((l) => l.message === 'Stopped')).to.equal(true);
  });
});
