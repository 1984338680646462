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

export function sampleProc(pid: number): ProcSample | undefined {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
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

  seriesTable(): { columns: string[]; rows: number[][] } {
    return { columns: SERIES_COLUMNS, rows: this.series };
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** Where a process's resident memory sits, in KiB (Linux): glibc's main heap (`[heap]`, grown by brk), all
 * anonymous memory (V8's heap, thread arenas, mmap'd buffers and the main heap) and file pages (the binary). */
export interface ResidentParts {
  mainHeapKiB: number;
  anonKiB: number;
  fileKiB: number;
}

export function residentParts(pid: number): ResidentParts | undefined {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0);
    let mainHeapKiB = 0;
    let inHeap = false;
    for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
      // A mapping's header starts with its address range; its fields follow as `Name: value kB`.
      if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inHeap = line.trimEnd().endsWith('[heap]');
      else if (inHeap && line.startsWith('Rss:')) mainHeapKiB += Number(/(\d+)/.exec(line)?.[1] ?? 0);
    }
    return { mainHeapKiB, anonKiB: kib('RssAnon'), fileKiB: kib('RssFile') };
  } catch {
    return undefined;
  }
}
