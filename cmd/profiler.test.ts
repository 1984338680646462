// --profiler-address: Node's CPU profile and heap snapshot over plain HTTP, one at a time. Unit tests against the
// real server in this process.
import { get } from 'node:http';
import { expect } from 'chai';
import { startProfiler, type Profiler } from './profiler.js';

function fetchText(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    }).on('error', reject);
  });
}

describe('profiler (--profiler-address)', function () {
  this.timeout(30_000);
  let p: Profiler;
  before(async () => {
    p = await startProfiler('127.0.0.1:0');
  });
  after(async () => p.stop());

  it('serves a CPU profile over the asked seconds, refusing a second one meanwhile', async () => {
    const running = fetchText(p.port, '/debug/pprof/profile?seconds=0.3');
    await new Promise((r) => setTimeout(r, 50));
    expect((await fetchText(p.port, '/debug/pprof/heap')).status).to.equal(409);
    const res = await running;
    expect(res.status).to.equal(200);
    const profile = JSON.parse(res.body) as { nodes: unknown[]; startTime: number; endTime: number };
    expect(profile.nodes.length).to.be.greaterThan(0);
    expect(profile.endTime - profile.startTime).to.be.at.least(250_000); // microseconds
  });

  it('serves a heap snapshot, an index, and refuses what it does not know', async () => {
    const heap = await fetchText(p.port, '/debug/pprof/heap');
    expect(heap.status).to.equal(200);
    expect((JSON.parse(heap.body) as { snapshot: { node_count: number } }).snapshot.node_count).to.be.greaterThan(1000);
    expect((await fetchText(p.port, '/debug/pprof/')).body).to.match(/profile\?seconds=N/);
    expect((await fetchText(p.port, '/debug/pprof/goroutine')).status).to.equal(404);
    expect((await fetchText(p.port, '/debug/pprof/profile?seconds=9999')).status).to.equal(400);
  });

  it('refuses an address that is not host:port', async () => {
    let err: Error | undefined;
    await startProfiler('localhost').catch((e: Error) => (err = e));
    expect(err?.message).to.match(/--profiler-address: "localhost" is not host:port/);
  });
});
