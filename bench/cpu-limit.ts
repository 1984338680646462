// The Deployment's CPU request, enforced on the bench's JoinGuard as the worst case a pod meets: a CPU cgroup of its
// own whose CFS quota is the request (50m: 5 ms of CPU per 100 ms period), entered before Node starts, as
// memory-limit.ts enters the memory cgroup. A request is a weight, not a cap: under a node's full contention the pod
// gets about its request, and a quota at the request is that, made exact and repeatable. cgroup v1 (`cpu`
// controller, cpu.cfs_quota_us) or v2 (cpu.max); cpu.stat tells how often and how long it was throttled.
import fs from 'node:fs';
import path from 'node:path';

/** A Kubernetes CPU quantity (`50m`, `0.5`, `2`) in millicores. */
export function millicores(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(m)?$/.exec(q.trim());
  if (!m) throw new Error(`not a CPU quantity: ${q}`);
  return Math.round(m[2] ? Number(m[1]) : Number(m[1]) * 1000);
}

/** Where a new CPU cgroup goes, from /proc/self/cgroup: below the bench's own, v1 (`N:cpu…:/p`) first, else v2. */
export function cpuCgroupParent(
  procSelfCgroup: string,
  exists: (p: string) => boolean,
): { dir: string; v: 1 | 2 } | undefined {
  const lines = procSelfCgroup.split('\n');
  const v1 = lines.map((l) => /^\d+:([^:]*):(.*)$/.exec(l)).find((m) => m?.[1]?.split(',').includes('cpu'));
  if (v1 && exists('/sys/fs/cgroup/cpu/cpu.cfs_quota_us'))
    return { dir: path.join('/sys/fs/cgroup/cpu', v1[2]!), v: 1 };
  const v2 = lines.map((l) => /^0::(.*)$/.exec(l)).find(Boolean);
  if (v2 && exists('/sys/fs/cgroup/cgroup.controllers')) return { dir: path.join('/sys/fs/cgroup', v2[1]!), v: 2 };
  return undefined;
}

export interface CpuThrottling {
  /** CFS periods in which the cgroup ran, and in how many it used up its quota. */
  periods: number;
  throttledPeriods: number;
  throttledS: number;
}

/** cpu.stat of either version: v1 nr_periods/nr_throttled/throttled_time (ns), v2 …/throttled_usec. */
export function readThrottling(text: string): CpuThrottling {
  const f = (k: string) => Number(new RegExp(`^${k} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  const ns = text.includes('throttled_usec') ? f('throttled_usec') * 1000 : f('throttled_time');
  return { periods: f('nr_periods'), throttledPeriods: f('nr_throttled'), throttledS: Math.round(ns / 1e6) / 1000 };
}

export class CpuCgroup {
  private constructor(
    readonly dir: string,
    readonly v: 1 | 2,
  ) {}

  /** A cgroup of its own with a quota of `milli` millicores per 100 ms period, or undefined (and why). */
  static create(name: string, milli: number): { cgroup?: CpuCgroup; why?: string } {
    try {
      const parent = cpuCgroupParent(fs.readFileSync('/proc/self/cgroup', 'utf8'), fs.existsSync);
      if (!parent) return { why: 'no CPU cgroup to write (neither v1 cpu nor v2 mounted)' };
      const dir = path.join(parent.dir, name);
      fs.mkdirSync(dir, { recursive: true });
      const period = 100_000;
      const quota = Math.max(1000, Math.round((period * milli) / 1000));
      if (parent.v === 1) {
        fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(period));
        fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quota));
      } else fs.writeFileSync(path.join(dir, 'cpu.max'), `${quota} ${period}`);
      return { cgroup: new CpuCgroup(dir, parent.v) };
    } catch (e) {
      return { why: `CPU cgroup not made: ${(e as Error).message}` };
    }
  }

  get procsFile(): string {
    return path.join(this.dir, 'cgroup.procs');
  }

  throttling(): CpuThrottling | undefined {
    try {
      return readThrottling(fs.readFileSync(path.join(this.dir, 'cpu.stat'), 'utf8'));
    } catch {
      return undefined;
    }
  }

  remove(): void {
    try {
      fs.rmdirSync(this.dir);
    } catch {
      // still in use or already gone
    }
  }
}

/** The command run inside every cgroup named (their cgroup.procs files): a shell enters them, then becomes it. */
export function enterCgroups(
  procsFiles: string[],
  command: string,
  args: string[],
): { command: string; args: string[] } {
  if (procsFiles.length === 0) return { command, args };
  const enter = procsFiles.map((f) => `echo $$ > '${f}'`).join(' && ');
  return { command: '/bin/sh', args: ['-c', `${enter} && exec "$0" "$@"`, command, ...args] };
}
