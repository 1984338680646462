// Resident memory and CPU time of a process, from /proc (Linux): what the process itself costs, without
// the tools around it. CPU is utime + stime in clock ticks (USER_HZ, 100 on Linux).
import fs from 'node:fs';

export interface ProcSample {
  at: number;
  rssKiB: number;
  hwmKiB: number;
  cpuSeconds: number;
}

const CLK_TCK = 100;

/** /proc/<pid>/status's `Name: N kB` lines, in KiB ({} once the process is gone). */
export function statusKiB(pid: number): Record<string, number> {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    return Object.fromEntries([...text.matchAll(/^(\w+):\s+(\d+) kB/gm)].map((m) => [m[1]!, Number(m[2])]));
  } catch {
    return {};
  }
}

export function sampleProc(pid: number): ProcSample | undefined {
  try {
    const status = statusKiB(pid);
    if (status.VmRSS === undefined) return undefined;
    const kib = (key: string) => status[key] ?? 0;
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at ")"; utime and stime are 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return { at: Date.now(), rssKiB: kib('VmRSS'), hwmKiB: kib('VmHWM'), cpuSeconds: ticks / CLK_TCK };
  } catch {
    return undefined;
  }
}

/** Columns of ProcSampler's series: seconds since the first sample, then KiB and CPU seconds. */
export const SERIES_COLUMNS = ['s', 'rssKiB', 'mainHeapKiB', 'anonKiB', 'fileKiB', 'cpuSeconds'];
const SERIES_EVERY_MS = 5000;

/**
 * Samples a process every intervalMs and keeps the peak RSS it saw (VmHWM is the kernel's own peak), and every 5 s
 * a row of where its memory sits (when it grows, and in what).
 */
export class ProcSampler {
  last?: ProcSample;
  peakRssKiB = 0;
  private readonly series: number[][] = [];
  /** Every sample's time and RSS: the peak within any window of a long run (VmHWM is the process's whole life). */
  private readonly rss: [number, number][] = [];
  private first?: number;
  private lastRow = -Infinity;
  private timer?: NodeJS.Timeout;

  constructor(
    readonly pid: number,
    intervalMs = 1000,
    readonly label = String(pid),
  ) {
    this.take();
    this.timer = setInterval(() => this.take(), intervalMs);
    this.timer.unref();
  }

  take(): ProcSample | undefined {
    const s = sampleProc(this.pid);
    if (s) {
      this.last = s;
      this.peakRssKiB = Math.max(this.peakRssKiB, s.rssKiB);
      this.rss.push([s.at, s.rssKiB]);
      this.first ??= s.at;
      if (s.at - this.lastRow >= SERIES_EVERY_MS) {
        const p = residentParts(this.pid);
        if (p) {
          this.lastRow = s.at;
          const t = Math.round((s.at - this.first) / 100) / 10;
          this.series.push([t, s.rssKiB, p.mainHeapKiB, p.anonKiB, p.fileKiB, s.cpuSeconds]);
        }
      }
    }
    return s;
  }

  /** The highest RSS sampled in [from, to] (KiB), undefined when no sample fell in it. */
  peakBetween(from: number, to: number): number | undefined {
    let peak: number | undefined;
    for (const [at, kib] of this.rss) if (at >= from && at <= to) peak = Math.max(peak ?? 0, kib);
    return peak;
  }

  seriesTable(): { columns: string[]; rows: number[][] } {
    return { columns: SERIES_COLUMNS, rows: this.series };
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** Where a process's resident memory sits, in KiB (Linux): glibc's main heap (`[heap]`, grown by brk), all
 * anonymous memory (V8's heap, thread arenas, mmap'd buffers and the main heap), file pages (the binary), and the
 * anonymous rw mappings of exactly 256 KiB at a 256 KiB boundary (V8 maps its regular pages one by one). */
export interface ResidentParts {
  mainHeapKiB: number;
  anonKiB: number;
  fileKiB: number;
  pageMappingsKiB: number;
}

export function residentParts(pid: number): ResidentParts | undefined {
  const status = statusKiB(pid);
  let smaps: string;
  try {
    smaps = fs.readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return undefined;
  }
  let mainHeapKiB = 0;
  let pageMappingsKiB = 0;
  let kind: 'heap' | 'page' | undefined;
  for (const line of smaps.split('\n')) {
    // A mapping's header starts with its address range; its fields follow as `Name: value kB`.
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (m) {
      const start = parseInt(m[1]!, 16);
      const size = parseInt(m[2]!, 16) - start;
      const name = m[4]!.trim();
      const page = name === '' && m[3] === 'rw-p' && size === 256 * 1024 && start % (256 * 1024) === 0;
      kind = name === '[heap]' ? 'heap' : page ? 'page' : undefined;
    } else if (kind && line.startsWith('Rss:')) {
      const kib = Number(/(\d+)/.exec(line)?.[1] ?? 0);
      if (kind === 'heap') mainHeapKiB += kib;
      else pageMappingsKiB += kib;
    }
  }
  return { mainHeapKiB, anonKiB: status.RssAnon ?? 0, fileKiB: status.RssFile ?? 0, pageMappingsKiB };
}
