// The saved fleet's pure parts (bench/fleet-cache.ts, bench/manager-logs.ts): its key, when a saved one is used,
// the stuck Machines' flip schedule, the kept log tails. No apiserver; files in a temp folder.
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { burstFleet, fleetShape, parkedMachines, parkedPools, parkedTags, stuckMachines } from './fleet.js';
import { machine } from './fleet-objects.js';
import {
  cacheRoot,
  fleetCache,
  fleetKey,
  flipSchedule,
  readMeta,
  save,
  sourcesHash,
  stagingDir,
  usable,
  type FleetMeta,
} from './fleet-cache.js';
import { REST_TIMEOUT_S } from './fleet-objects.js';
import { header, tailBytes } from './manager-logs.js';

describe('bench fleet cache', () => {
  it('keys a fleet by its shape, the CAPI version and the sources hash, each changing the key', () => {
    const k = fleetKey(fleetShape(200), 'v1.14.2', 'abc');
    expect(k).to.equal('m200-c2x3-r184-s10-shard-a.shard-b_capi-v1.14.2_abc');
    expect(fleetKey(fleetShape(300), 'v1.14.2', 'abc')).to.not.equal(k);
    expect(fleetKey(fleetShape(200), 'v1.13.6', 'abc')).to.not.equal(k);
    expect(fleetKey(fleetShape(200), 'v1.14.2', 'abd')).to.not.equal(k);
    expect(fleetKey({ ...fleetShape(200), shards: [] }, 'v1.14.2', 'abc')).to.not.equal(k);
  });

  it('hashes the sources in order, and a moved boundary between two texts is another hash', () => {
    expect(sourcesHash(['a', 'b'])).to.equal(sourcesHash(['a', 'b']));
    expect(sourcesHash(['a', 'b'])).to.not.equal(sourcesHash(['b', 'a']));
    expect(sourcesHash(['ab', ''])).to.not.equal(sourcesHash(['a', 'b']));
    expect(sourcesHash(['x'])).to.match(/^[0-9a-f]{12}$/);
  });

  it('uses a saved fleet of the same key while younger than half the resting timeout', () => {
    const meta: FleetMeta = { key: 'k', builtAt: 1_000_000, buildS: 1, bytes: 1 };
    const half = (REST_TIMEOUT_S * 1000) / 2;
    expect(usable(meta, 'k', meta.builtAt)).to.equal(true);
    expect(usable(meta, 'k', meta.builtAt + 3 * 24 * 3600 * 1000), 'days old').to.equal(true);
    expect(usable(meta, 'k', meta.builtAt + half - 1)).to.equal(true);
    expect(usable(meta, 'k', meta.builtAt + half), 'half the timeout old').to.equal(false);
    expect(usable(meta, 'other', meta.builtAt)).to.equal(false);
    expect(usable(undefined, 'k', meta.builtAt)).to.equal(false);
    expect(usable(meta, 'k', meta.builtAt - 1), 'built in the future: a clock moved').to.equal(false);
    expect(usable(meta, 'k', meta.builtAt + 13 * 3600 * 1000, 24 * 3600), '24h pools: 12 h at most').to.equal(false);
  });

  it('takes JOINGUARD_CACHE, else ~/.cache/joinguard', () => {
    expect(cacheRoot({ JOINGUARD_CACHE: '/x' })).to.equal('/x');
    expect(cacheRoot({})).to.equal(path.join(os.homedir(), '.cache', 'joinguard'));
  });

  it('saves a staged folder into place with its meta, and reads no meta without data', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-cache-test-'));
    try {
      const c = fleetCache('k1', root);
      expect(readMeta(c)).to.equal(undefined);
      const st = stagingDir(c);
      fs.mkdirSync(path.join(st, 'etcd-data', 'member'), { recursive: true });
      fs.writeFileSync(path.join(st, 'etcd-data', 'member', 'db'), 'x'.repeat(10));
      const m = save(c, st, { key: 'k1', builtAt: 5, buildS: 2 });
      expect(m.bytes).to.equal(10);
      expect(readMeta(c)).to.deep.equal(m);
      expect(fs.existsSync(st), 'staging renamed').to.equal(false);
      fs.rmSync(c.dataDir, { recursive: true });
      expect(readMeta(c), 'meta without data').to.equal(undefined);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('bench stuck Machines flip schedule', () => {
  it('spreads n flips evenly over the spread, first at the start, last at its end', () => {
    expect(flipSchedule(5, 1000, 400)).to.deep.equal([1000, 1100, 1200, 1300, 1400]);
    expect(flipSchedule(3, 0, 1000)).to.deep.equal([0, 500, 1000]);
  });

  it('flips at once with no spread or one Machine, and none for none', () => {
    expect(flipSchedule(3, 7, 0)).to.deep.equal([7, 7, 7]);
    expect(flipSchedule(1, 7, 60_000)).to.deep.equal([7]);
    expect(flipSchedule(0, 7, 60_000)).to.deep.equal([]);
  });

  it('never goes back in time', () => {
    const s = flipSchedule(500, 0, 1000);
    for (let i = 1; i < s.length; i++) expect(s[i]!).to.be.at.least(s[i - 1]!);
  });
});

describe('bench parked stuck Machines', () => {
  it("parks the stuck Machines of the phases run by runStandard and of the replicas' two events, not the burst's", () => {
    const plan = ['joinguard', 'mhc', 'burst', 'replicas'].map((kind, i) => ({ kind, tag: `p0${i + 1}` }));
    expect(parkedTags(plan)).to.deep.equal(['p01', 'p02', 'p04f', 'p04r']);
    const shape = fleetShape(200);
    const parked = parkedMachines(shape, ['p01', 'p02']);
    expect(parked.map((m) => m.name)).to.deep.equal(
      [...stuckMachines(shape, 'p01'), ...stuckMachines(shape, 'p02')].map((m) => m.name),
    );
    expect(parked.every((m) => m.parked && m.pool.endsWith('-watch'))).to.equal(true);
  });

  it("parks a host phase's Machines for its own pool (`-long`), owned by the paused `-watch` but the first", () => {
    const plan = [
      { kind: 'mhc-long', tag: 'p01', pool: 'long' },
      { kind: 'joinguard', tag: 'p02' },
    ];
    const parked = parkedMachines(fleetShape(200), parkedTags(plan), parkedPools(plan));
    const long = parked.filter((m) => m.name.includes('-long-p01-'));
    expect(long).to.have.length(10);
    expect(long.every((m) => m.pool === `${m.cluster}-long`)).to.equal(true);
    expect(long.map((m) => m.owner)).to.deep.equal([
      `${long[0]!.cluster}-live`,
      ...long.slice(1).map((m) => `${m.cluster}-watch`),
    ]);
    expect(parked.filter((m) => m.name.includes('-watch-p02-'))).to.have.length(10);
  });

  it("saves the first burst's Clusters, after the fleet's, and its Machines (Provisioned, not parked)", () => {
    const shape = fleetShape(200);
    const plan = ['joinguard', 'burst'].map((kind, i) => ({ kind, tag: `p0${i + 1}` }));
    const b = burstFleet(shape, plan, 150);
    expect(b.clusters).to.deep.equal(['c0002', 'c0003']);
    expect(b.machines).to.have.length(150);
    expect(
      b.machines.every((m) => !m.parked && m.pool === `${m.cluster}-watch` && b.clusters.includes(m.cluster)),
    ).to.equal(true);
    expect(burstFleet(shape, plan.slice(0, 1), 150).machines).to.deep.equal([]);
  });

  it('labels a parked Machine into the pool no check or MHC selects, its pool kept for the flip', () => {
    const [m] = parkedMachines(fleetShape(200), ['p01']);
    expect(machine(m!, 'uid').metadata.labels.pool).to.equal(`${m!.cluster}-parked`);
    expect(machine({ ...m!, parked: false }, 'uid').metadata.labels.pool).to.equal(`${m!.cluster}-watch`);
  });
});

describe("bench CAPI managers' kept logs", () => {
  it('keeps the last bytes from a line start, and says how much was cut', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'manager-logs-test-'));
    try {
      const f = path.join(dir, 'm.log');
      fs.writeFileSync(f, 'line one\nline two\nline three\n');
      expect(tailBytes(f, 1000)).to.deep.equal({ text: 'line one\nline two\nline three\n', cut: 0 });
      const t = tailBytes(f, 15);
      expect(t.text).to.equal('line three\n');
      expect(t.cut).to.equal(18);
      expect(tailBytes(path.join(dir, 'none.log'))).to.deep.equal({ text: '', cut: 0 });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('heads the file with the exit when the manager had exited', () => {
    expect(header('capi-core', 0, 0, 0)).to.contain('running when the bench stopped it');
    expect(header('capi-core', Date.parse('2026-12-07T00:00:00Z'), 5)).to.contain(
      'EXITED: first seen gone at 2026-12-07T00:00:00.000Z',
    );
    expect(header('capi-core', undefined, 5)).to.contain('first 5 bytes cut');
  });
});
