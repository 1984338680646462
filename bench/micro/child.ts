// The controller process of the micro-benchmark (bench/micro/run-controller.ts, forked) seen from the
// parent: its milestones, its CPU time on request (µs, from inside: /proc's 10 ms ticks are too coarse for
// one event), its live heap after full GCs, and its RSS from /proc.
import { fork, type ChildProcess } from 'node:child_process';
import { compiled } from '../controller-process.js';
import { sampleProc } from '../proc.js';

export interface HeapReport {
  heap: { used_heap_size: number; total_heap_size: number; heap_size_limit: number };
  memory: NodeJS.MemoryUsage;
}

export class ControllerChild {
  readonly child: ChildProcess;
  readonly spawnedAt = Date.now();
  readyAt?: number;
  fullReconcileAt?: number;
  private readonly waiting = new Map<string, ((m: any) => void)[]>();

  constructor(kubeconfig: string, execArgv: string[]) {
    this.child = fork(compiled('bench/micro/run-controller.ts'), [kubeconfig], {
      execArgv: ['--expose-gc', ...execArgv],
      env: { ...process.env, NODE_OPTIONS: '', NODE_ENV: 'production' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (m: { type: string; at?: number }) => {
      if (m.type === 'ready') this.readyAt = m.at;
      if (m.type === 'fullReconcile') this.fullReconcileAt = m.at;
      for (const f of this.waiting.get(m.type)?.splice(0) ?? []) f(m);
    });
  }

  private next<T>(type: string, ask?: Record<string, unknown>): Promise<T> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`controller did not answer ${type}`)), 600_000);
      const list = this.waiting.get(type) ?? [];
      list.push((m) => (clearTimeout(t), resolve(m as T)));
      this.waiting.set(type, list);
      if (ask) this.child.send(ask);
    });
  }

  async fullReconcile(): Promise<void> {
    if (this.fullReconcileAt === undefined) await this.next('fullReconcile');
  }

  /** CPU time (user + system) in µs. */
  async cpuUs(): Promise<number> {
    const m = await this.next<{ cpu: NodeJS.CpuUsage }>('cpu', { type: 'cpu' });
    return m.cpu.user + m.cpu.system;
  }

  heap(): Promise<HeapReport> {
    return this.next<HeapReport>('heap', { type: 'heap' });
  }

  peakRssKiB(): number {
    return sampleProc(this.child.pid!)?.hwmKiB ?? 0;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once('exit', r));
    this.child.send({ type: 'stop' });
    const t = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(t);
  }
}
