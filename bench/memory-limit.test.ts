// Unit test: quantities and where the cgroup goes (no system); then, where this host lets a memory cgroup be
// made, a real Node process inside one: V8 sizes its heap from the limit, as in the pod.
import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { deployedNodeOptions } from './controller-process.js';
import { cgroupParent, MemoryCgroup, quantityBytes } from './memory-limit.js';

describe('the bench’s memory limit (a cgroup as the pod has)', () => {
  it('reads Kubernetes memory quantities', () => {
    expect(quantityBytes('512Mi')).to.equal(536_870_912);
    expect(quantityBytes('1Gi')).to.equal(2 ** 30);
    expect(quantityBytes('256M')).to.equal(256e6);
    expect(quantityBytes('1048576')).to.equal(1_048_576);
    expect(() => quantityBytes('lots')).to.throw(/not a memory quantity: lots/);
  });

  it('puts the cgroup below the bench’s own: v1 memory first, else v2, else nowhere', () => {
    const v1 = '5:cpu,cpuacct:/\n4:memory:/process_api/abc\n0::/';
    expect(cgroupParent(v1, () => true)).to.deep.equal({ dir: '/sys/fs/cgroup/memory/process_api/abc', v: 1 });
    const v2 = '0::/user.slice/bench.scope';
    expect(cgroupParent(v2, (p) => p === '/sys/fs/cgroup/cgroup.controllers')).to.deep.equal({
      dir: '/sys/fs/cgroup/user.slice/bench.scope',
      v: 2,
    });
    expect(cgroupParent(v1, () => false)).to.equal(undefined);
  });

  it('runs Node inside the limit: V8’s heap is sized from it, not from the host', function () {
    const made = MemoryCgroup.create(`joinguard-bench-test-${process.pid}`, quantityBytes('512Mi'));
    if (!made.cgroup) this.skip(); // this host lets no cgroup be made (the bench then says so in its results)
    try {
      const script = "process.stdout.write(String(require('v8').getHeapStatistics().heap_size_limit))";
      const run = made.cgroup.wrap(process.execPath, ['-e', script]);
      const inside = Number(execFileSync(run.command, run.args, { encoding: 'utf8' }));
      const outside = Number(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }));
      expect(inside / 2 ** 20, 'heap limit inside 512Mi, MiB').to.be.at.most(384);
      expect(inside).to.be.lessThan(outside);
    } finally {
      made.cgroup.remove();
    }
  });

  it('gives V8 the same heap inside any limit up to 512Mi (its floor), half the limit above it', function () {
    const script = "process.stdout.write(String(require('v8').getHeapStatistics().heap_size_limit))";
    const flags = deployedNodeOptions().split(/\s+/).filter(Boolean);
    const heapIn = (limit: string) => {
      const made = MemoryCgroup.create(`joinguard-bench-test-${process.pid}-${limit}`, quantityBytes(limit));
      if (!made.cgroup) return undefined;
      try {
        const run = made.cgroup.wrap(process.execPath, [...flags, '-e', script]);
        return Number(execFileSync(run.command, run.args, { encoding: 'utf8' })) / 2 ** 20;
      } finally {
        made.cgroup.remove();
      }
    };
    const [a, b, c] = ['320Mi', '512Mi', '1Gi'].map(heapIn);
    if (a === undefined) this.skip();
    // The sizing premise "a lower limit gives V8 a smaller heap" is false below 512Mi (docs/install.md, Sizing).
    expect(a, 'heap limit inside 320Mi, MiB').to.equal(b);
    expect(c, 'heap limit inside 1Gi, MiB').to.be.greaterThan(b!);
  });
});
