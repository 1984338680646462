// Unit test: CPU quantities, where the CPU cgroup goes and what cpu.stat says (no system); then, where this host lets a
// CPU cgroup be made, a busy Node process inside one at 50m: it gets about 5 % of a core.
import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import { cpuCgroupParent, CpuCgroup, enterCgroups, millicores, readThrottling } from './cpu-limit.js';

describe('the bench’s CPU limit (a quota at the Deployment’s request)', () => {
  it('reads Kubernetes CPU quantities', () => {
    expect(millicores('50m')).to.equal(50);
    expect(millicores('0.5')).to.equal(500);
    expect(millicores('2')).to.equal(2000);
    expect(() => millicores('fast')).to.throw(/not a CPU quantity: fast/);
  });

  it('puts the cgroup below the bench’s own: v1 cpu first, else v2, else nowhere', () => {
    const v1 = '2:cpuacct:/\n1:cpu:/process_api/x\n0::/';
    expect(cpuCgroupParent(v1, () => true)).to.deep.equal({ dir: '/sys/fs/cgroup/cpu/process_api/x', v: 1 });
    expect(cpuCgroupParent('0::/user.slice', (p) => p === '/sys/fs/cgroup/cgroup.controllers')).to.deep.equal({
      dir: '/sys/fs/cgroup/user.slice',
      v: 2,
    });
    expect(cpuCgroupParent(v1, () => false)).to.equal(undefined);
  });

  it('reads throttling from cpu.stat of either version', () => {
    expect(readThrottling('nr_periods 40\nnr_throttled 39\nthrottled_time 3626563814\n')).to.deep.equal({
      periods: 40,
      throttledPeriods: 39,
      throttledS: 3.627,
    });
    expect(readThrottling('usage_usec 1\nnr_periods 10\nnr_throttled 2\nthrottled_usec 500000\n')).to.deep.equal({
      periods: 10,
      throttledPeriods: 2,
      throttledS: 0.5,
    });
  });

  it('enters every cgroup named before the command runs, and runs the command itself without one', () => {
    expect(enterCgroups([], 'node', ['-v'])).to.deep.equal({ command: 'node', args: ['-v'] });
    const w = enterCgroups(['/a/cgroup.procs', '/b/cgroup.procs'], 'node', ['-v']);
    expect(w.args[1]).to.equal(`echo $$ > '/a/cgroup.procs' && echo $$ > '/b/cgroup.procs' && exec "$0" "$@"`);
  });

  it('holds a busy process to its quota', function () {
    const made = CpuCgroup.create(`joinguard-bench-test-${process.pid}`, 50);
    if (!made.cgroup) this.skip(); // this host lets no cgroup be made (the bench then says so in its results)
    try {
      const busy =
        'const t=Date.now();let x=0;while(Date.now()-t<1500)x++;const u=process.cpuUsage();process.stdout.write(String(u.user+u.system))';
      const run = enterCgroups([made.cgroup.procsFile], process.execPath, ['-e', busy]);
      const cpuUs = Number(execFileSync(run.command, run.args, { encoding: 'utf8' }));
      // 1.5 s of wall at 50m is 75 ms of CPU; Node's own start adds some, unthrottled it would be ~1,500 ms.
      expect(cpuUs / 1000, 'CPU ms used in 1.5 s').to.be.below(600);
      expect(made.cgroup.throttling()!.throttledPeriods).to.be.greaterThan(0);
    } finally {
      made.cgroup.remove();
    }
  });
});
