// The in-memory sharded run at a smoke size (`bench/bench.ts --shards`, bench/micro/shards.ts): a fleet of 400
// Machines in 2 shards, each shard's JoinGuard as deployed with --watch-filter against the in-memory apiserver, and
// one point of the per-shard cost curve. What it must hold at any size: each shard lists its own Machines (and the
// whole fleet's MHCs, KCPs and control-plane configs), marks every stuck Machine of its own, survives its memory limit.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const here = path.dirname(fileURLToPath(import.meta.url));

describe('bench --shards (smoke size, in-memory apiserver)', function () {
  this.timeout(180_000);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-shards-smoke-'));
  const out = path.join(dir, 'results.json');
  let r: any;

  before(async () => {
    // An existing results file keeps its other keys: only sharded100k is written.
    fs.writeFileSync(out, JSON.stringify({ summary: { kept: true } }));
    let stderr = '';
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        path.join(here, 'bench.ts'),
        '--shards',
        '--machines',
        '400',
        '--shard-count',
        '2',
        '--curve',
        '4',
        '--out',
        out,
      ],
      { cwd: path.join(here, '..'), stdio: ['ignore', 'ignore', 'pipe'] },
    );
    child.stderr.on('data', (d) => (stderr += String(d)));
    const code = await new Promise<number | null>((res) => child.once('exit', res));
    expect(code, `bench --shards failed:\n${stderr.slice(-4000)}`).to.equal(0);
    r = JSON.parse(fs.readFileSync(out, 'utf8'));
  });

  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('measures every shard: its own Machines listed and marked, under the memory limit', () => {
    const s = r.sharded100k;
    expect(r.summary, 'the rest of the results file kept').to.deep.equal({ kept: true });
    // 400 Machines at 100 per Cluster: 4 Clusters, each with 2 MHCs, a KCP and 3 control-plane KubeadmConfigs,
    // which every shard lists whatever its share.
    expect(s.unfilteredPerShard).to.deep.equal({
      machineHealthChecks: 8,
      kubeadmControlPlanes: 4,
      controlPlaneKubeadmConfigs: 12,
    });
    expect(s.shards.map((x: any) => x.shard)).to.deep.equal(['shard-00', 'shard-01']);
    for (const x of s.shards) {
      expect(x.machines, x.shard).to.equal(200);
      expect(x.survived, `${x.shard}: ${x.exit}`).to.equal(true);
      expect(x.marks.marked, `${x.shard}: stuck Machines marked`).to.equal(x.marks.stuck);
      expect(x.firstReconcileS).to.be.a('number');
      expect(x.peakRssMiB).to.be.a('number');
      expect(x.memoryLimit).to.match(/^(\d+Mi|none \()/);
    }
  });

  it('draws the per-shard cost curve from the same fleet split into other counts', () => {
    const c = r.sharded100k.curve;
    expect(c.map((x: any) => [x.shards, x.machines])).to.deep.equal([
      [4, 100],
      [2, 200],
    ]);
  });
});
