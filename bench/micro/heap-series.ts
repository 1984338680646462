// The heap run's per-second series of one JoinGuard process: where its RSS sits (bench/proc.ts reads /proc), the
// V8 heap and external memory from its metrics, its TLS sockets and the in-memory apiserver's connections; and the
// summary of one phase of it (the marks).
import fs from 'node:fs';
import type { JoinGuardProcess } from '../controller-process.js';
import { residentParts, statusKiB } from '../proc.js';
import { sum } from '../prom.js';
import { round } from '../stats.js';
import type { Json } from '../../testing/fake-apiserver.js';

export interface Point {
  t: number;
  phase: string;
  rssMiB: number;
  anonMiB: number;
  fileMiB: number;
  /** Resident in anonymous rw mappings of exactly 256 KiB at a 256 KiB boundary: V8's pages, whether counted or not. */
  pageMappingsMiB?: number;
  /** glibc's main heap ([heap], grown by brk). */
  mainHeapMiB?: number;
  heapUsedMiB?: number;
  heapTotalMiB?: number;
  codeMiB?: number;
  /** Committed size of each V8 space (new, old, code, large_object, ...). */
  spacesMiB?: Record<string, number>;
  externalMiB?: number;
  tlsSockets?: number;
  connections: number;
}

/** A phase's first and last sample, its highest, and the connections opened before and in it. */
export interface DuringPhase {
  atStart?: Point;
  atEnd?: Point;
  peakRssMiB: number;
  peakAnonMiB: number;
  peakHeapTotalMiB: number;
  peakExternalMiB: number;
  peakTlsSockets: number;
  peakConnectionsBefore: number;
  peakConnections: number;
}

const mib = (bytes: number) => round(bytes / 2 ** 20, 1)!;
const kibToMib = (kib: number | undefined) => round((kib ?? 0) / 1024, 1)!;

export class HeapSeries {
  readonly points: Point[] = [];
  phase = 'start';
  private sampling = false;
  private readonly timer: NodeJS.Timeout;
  private phaseStart?: { at?: Point; connections: number };

  constructor(
    private readonly jg: JoinGuardProcess,
    private readonly connections: () => { now: number; peak: number },
  ) {
    this.timer = setInterval(() => void this.sample(), 1000);
  }

  async sample(): Promise<void> {
    if (this.sampling) return;
    this.sampling = true;
    try {
      const pid = this.jg.proc.pid;
      const st = statusKiB(pid);
      const parts = residentParts(pid);
      const m = await this.jg.metrics();
      const v = (name: string, where: Record<string, string> = {}) => (m ? sum(m, name, where) : undefined);
      this.points.push({
        t: round((Date.now() - this.jg.spawnedAt) / 1000, 1)!,
        phase: this.phase,
        rssMiB: kibToMib(st.VmRSS),
        anonMiB: kibToMib(st.RssAnon),
        fileMiB: kibToMib(st.RssFile),
        ...(parts && { pageMappingsMiB: kibToMib(parts.pageMappingsKiB), mainHeapMiB: kibToMib(parts.mainHeapKiB) }),
        heapUsedMiB: m && mib(v('nodejs_heap_size_used_bytes')!),
        heapTotalMiB: m && mib(v('nodejs_heap_size_total_bytes')!),
        codeMiB: m && mib(v('nodejs_heap_space_size_used_bytes', { space: 'code' })!),
        spacesMiB:
          m &&
          Object.fromEntries(
            m
              .filter((x) => x.name === 'nodejs_heap_space_size_total_bytes')
              .map((x) => [x.labels.space ?? '', mib(x.value)]),
          ),
        externalMiB: m && mib(v('nodejs_external_memory_bytes')!),
        tlsSockets: v('nodejs_active_handles', { type: 'TLSSocket' }),
        connections: this.connections().now,
      });
    } finally {
      this.sampling = false;
    }
  }

  /** Starts a phase with a sample of its own, so that the phase has a first point. */
  async begin(phase: string): Promise<void> {
    this.phase = phase;
    await this.sample();
    this.phaseStart = { at: this.points.at(-1), connections: this.connections().peak };
  }

  /** Ends the current phase with a sample and sums it up. */
  async end(next: string): Promise<DuringPhase> {
    await this.sample();
    const atEnd = this.points.at(-1);
    const inPhase = this.points.filter((p) => p.phase === this.phase);
    const max = (f: (p: Point) => number | undefined) => Math.max(...inPhase.map((p) => f(p) ?? 0));
    this.phase = next;
    return {
      atStart: this.phaseStart?.at,
      atEnd,
      peakRssMiB: max((p) => p.rssMiB),
      peakAnonMiB: max((p) => p.anonMiB),
      peakHeapTotalMiB: max((p) => p.heapTotalMiB),
      peakExternalMiB: max((p) => p.externalMiB),
      peakTlsSockets: max((p) => p.tlsSockets),
      peakConnectionsBefore: this.phaseStart?.connections ?? 0,
      peakConnections: max((p) => p.connections),
    };
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** memory-probe.cjs's lines, their time from JoinGuard's spawn as the series'. */
export function readProbe(file: string, spawnedAt: number): Json[] {
  try {
    return fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Json)
      .map((x) => ({ ...x, t: round((x.at - spawnedAt) / 1000, 1) }));
  } catch {
    return [];
  }
}
