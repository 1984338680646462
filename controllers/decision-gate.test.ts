// The decision gate, through the whole controller (startController) against the in-memory apiserver shared with
// the benchmarks (a FAKE: testing/fake-apiserver.ts, CAPI objects captured from the real managers): after
// the MachineHealthCheck cache's list/watch failed, a Machine past its join deadline is NOT marked while that
// cache has not re-listed, even though the Machine cache is live — and is marked once it has.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { FakeApiserver } from '../testing/fake-apiserver.js';
import { makeTls } from '../testing/tls.js';
import { clusterName, joining, markOf, seed } from '../testing/world.js';
import { startController } from './manager.js';
import { capturingLogger, until } from '../runtime/testing/http-server.js';
import type { RunningController } from './options.js';

describe('decision gate (whole controller, fake apiserver)', function () {
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

  it('holds every decision while a cache it reads has not re-listed since its list/watch failed', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jg-gate-'));
    const tls = await makeTls(dir);
    api = new FakeApiserver(tls);
    const server = await api.start();
    seed(api, { clusters: 1, perCluster: 3, mhc: true, now: Date.now() });
    const marks: string[] = [];
    api.onWrite = (verb, resource, obj) => {
      const m = markOf(verb, resource, obj);
      if (m) marks.push(m);
    };
    const { logger, lines } = capturingLogger();
    jg = await startController({
      access: { server: new URL(server), ca: Buffer.from(tls.caPem) },
      capiApiVersion: 'v1beta2',
      logger,
      metricsBindAddress: '0',
      healthProbeBindAddress: '0',
      collectDefaultMetrics: false,
      watchLivenessMs: 30_000,
      userAgent: 'gate-test',
    });
    await jg.ready();

    // The MachineHealthCheck cache loses its watch and cannot list again; the Machine cache stays live.
    let mhcDown = true;
    let refused = 0;
    api.fault = (plural) => (mhcDown && plural === 'machinehealthchecks' ? (refused++, 500) : undefined);
    api.dropWatches('machinehealthchecks');
    await until('the MHC cache refused a list', () => refused > 0, 10_000);

    // A Machine past its join deadline arrives through the live Machine cache.
    const stuck = joining(clusterName(0), 0, Date.now() - 5_000);
    api.put('machines', stuck);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(marks, 'marked from a view the MHC cache had before its failure').to.deep.equal([]);
    expect(
      lines.some(
        (l) => l.message === 'Decisions held until every cache has re-listed' && l.informer === 'machinehealthchecks',
      ),
    ).to.equal(true);

    mhcDown = false;
    await until('the mark, once every cache re-listed', () => marks.includes(stuck.metadata.name), 15_000);
    expect(lines.some((l) => l.message === 'Every cache has re-listed; decisions resume')).to.equal(true);
  });
});
