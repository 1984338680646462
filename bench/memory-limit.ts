// The Deployment's memory limit, given to the bench's JoinGuard as the pod has it: a memory cgroup of its own
// (cgroup v1 or v2, below the bench's own) that the process enters before Node starts. Node sizes V8's heap from
// the cgroup's limit at start: 262 MiB inside any limit up to 512Mi (V8's floor, measured here with
// --max-semi-space-size=2: 128Mi to 512Mi alike), half the limit above it (768Mi: 390 MiB); on the bench's host
// without a limit V8 sizes for 23.5 GiB and lets garbage grow to several times the live heap before a major GC —
// resident memory the pod would not have (issue 18: heap total 46 -> 84-137 MiB during the marks). What the cgroup
// charges (memory.peak, v1 memory.max_usage_in_bytes) is read beside the process's own VmHWM: the kernel's OOM
// killer acts on the former.
import fs from 'node:fs';
import path from 'node:path';

/** A Kubernetes memory quantity (`512Mi`, `1G`, `268435456`) in bytes. */
export function quantityBytes(q: string): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q.trim());
  if (!m) throw new Error(`not a memory quantity: ${q}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Math.round(Number(m[1]) * (m[2] ? unit[m[2] as keyof typeof unit] : 1));
}

/**
 * Where a new memory cgroup goes, from /proc/self/cgroup: below the bench's own memory cgroup, v1 (`N:memory:/p`,
 * mounted at /sys/fs/cgroup/memory) first, else v2 (`0::/p`); undefined when neither is there to write.
 */
export function cgroupParent(
  procSelfCgroup: string,
  exists: (p: string) => boolean,
): { dir: string; v: 1 | 2 } | undefined {
  const lines = procSelfCgroup.split('\n');
  const v1 = lines.map((l) => /^\d+:([^:]*):(.*)$/.exec(l)).find((m) => m?.[1]?.split(',').includes('memory'));
  if (v1 && exists('/sys/fs/cgroup/memory')) return { dir: path.join('/sys/fs/cgroup/memory', v1[2]!), v: 1 };
  const v2 = lines.map((l) => /^0::(.*)$/.exec(l)).find(Boolean);
  if (v2 && exists('/sys/fs/cgroup/cgroup.controllers')) return { dir: path.join('/sys/fs/cgroup', v2[1]!), v: 2 };
  return undefined;
}

export class MemoryCgroup {
  private constructor(
    readonly dir: string,
    private readonly v: 1 | 2 = 2,
  ) {}

  /** A cgroup of its own with this limit, or undefined (and why) where cgroups cannot be written. */
  static create(name: string, bytes: number): { cgroup?: MemoryCgroup; why?: string } {
    try {
      const parent = cgroupParent(fs.readFileSync('/proc/self/cgroup', 'utf8'), fs.existsSync);
      if (!parent) return { why: 'no memory cgroup to write (neither v1 nor v2 mounted)' };
      const dir = path.join(parent.dir, name);
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, parent.v === 1 ? 'memory.limit_in_bytes' : 'memory.max'), String(bytes));
      return { cgroup: new MemoryCgroup(dir, parent.v) };
    } catch (e) {
      return { why: `memory cgroup not made: ${(e as Error).message}` };
    }
  }

  /** The command run inside the cgroup: a shell enters it, then becomes the command (same pid). */
  wrap(command: string, args: string[]): { command: string; args: string[] } {
    const procs = path.join(this.dir, 'cgroup.procs');
    return { command: '/bin/sh', args: ['-c', `echo $$ > '${procs}' && exec "$0" "$@"`, command, ...args] };
  }

  get procsFile(): string {
    return path.join(this.dir, 'cgroup.procs');
  }

  /** The most memory the cgroup was charged since it was made (bytes), undefined where the kernel does not say. */
  peakBytes(): number | undefined {
    try {
      const file = this.v === 1 ? 'memory.max_usage_in_bytes' : 'memory.peak';
      const n = Number(fs.readFileSync(path.join(this.dir, file), 'utf8').trim());
      return Number.isFinite(n) ? n : undefined;
    } catch {
      return undefined;
    }
  }

  /** Removed once its process is gone (a cgroup with a process in it cannot be). */
  remove(): void {
    try {
      fs.rmdirSync(this.dir);
    } catch {
      // still in use or already gone: the parent's cleanup takes it
    }
  }
}
