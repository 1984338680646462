// A replica of the real `joinguard` command in its own process (test-only), with its output kept for
// failure messages, SIGSTOP/SIGCONT to freeze and thaw it, and how and when it exited.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface ReplicaExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  at: number;
}

export class Replica {
  readonly output: string[] = [];
  readonly exited: Promise<ReplicaExit>;
  exit?: ReplicaExit;
  private readonly child: ChildProcess;

  constructor(
    readonly name: string,
    args: string[],
    env: NodeJS.ProcessEnv = {},
  ) {
    this.child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'cmd/joinguard.ts'), ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    const keep = (b: Buffer) => {
      this.output.push(...b.toString().split('\n').filter(Boolean));
      if (this.output.length > 4000) this.output.splice(0, 1000);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
    this.exited = new Promise((resolve) =>
      this.child.on('exit', (code, signal) => resolve((this.exit = { code, signal, at: Date.now() }))),
    );
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** Freezes the process (SIGSTOP): no timer, no socket read, no write, until resume(). */
  pause(): void {
    if (this.running) process.kill(this.pid, 'SIGSTOP');
  }

  resume(): void {
    if (this.running) process.kill(this.pid, 'SIGCONT');
  }

  /** SIGCONT then SIGTERM, SIGKILL after graceMs; resolves with the exit. */
  async stop(graceMs = 10_000): Promise<ReplicaExit> {
    if (this.running) {
      this.resume();
      this.child.kill('SIGTERM');
      const t = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
      await this.exited;
      clearTimeout(t);
    }
    return this.exited;
  }

  /** The output lines that contain `text`, or the last n lines. */
  grep(text: string): string[] {
    return this.output.filter((l) => l.includes(text));
  }

  tail(n = 15): string {
    return `${this.name} (pid ${this.pid}${this.exit ? `, exited ${this.exit.code ?? this.exit.signal}` : ''}):\n${this.output.slice(-n).join('\n')}`;
  }
}
