// Parent side of bench/run-controller.ts: compiles it with the controller the way the image is built
// (tsc to JavaScript, run by plain `node` with NODE_ENV=production: tsx alone adds ~60 MiB of RSS), forks
// it (one process, so /proc/<pid> is the controller), relays its milestones and samples its RSS and CPU.
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProcSampler } from './proc.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..');
// Under bench/runs (git-ignored) so that the compiled files resolve the repository's node_modules; one per
// run, so that a smoke test and a full run may overlap.
const buildDir = path.join(here, 'runs', `controller-${process.pid}`);

export function removeCompiledController(): void {
  fs.rmSync(buildDir, { recursive: true, force: true });
}

/** tsc of api/, controllers/ and run-controller.ts, tests and test helpers left out (as the Dockerfile). */
export function compileController(): string {
  fs.rmSync(buildDir, { recursive: true, force: true });
  fs.mkdirSync(buildDir, { recursive: true });
  const config = path.join(buildDir, 'tsconfig.json');
  const rel = (p: string) => path.relative(buildDir, path.join(root, p));
  fs.writeFileSync(config, JSON.stringify({
    extends: rel('tsconfig.json'),
    compilerOptions: { sourceMap: false, types: ['node'], outDir: 'dist', rootDir: rel('.') },
    include: [rel('api'), rel('controllers'), rel('bench/run-controller.ts')],
    exclude: [rel('**/*.test.ts'), rel('**/testing/**'), rel('node_modules')],
  }));
  execFileSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', config], { stdio: 'inherit' });
  const entry = path.join(buildDir, 'dist', 'bench', 'run-controller.js');
  if (!fs.existsSync(entry)) throw new Error(`tsc did not produce ${entry}`);
  return entry;
}

export interface ControllerMilestones {
  spawnedAt: number;
  startedAt?: number;
  readyAt?: number;
  fullReconcileAt?: number;
  checksReconciled?: number;
  watchRestarts?: Record<string, number>;
  /** process.memoryUsage() of the controller just before it stopped (bytes). */
  memory?: NodeJS.MemoryUsage;
}

export class ControllerProcess {
  readonly child: ChildProcess;
  readonly sampler: ProcSampler;
  readonly milestones: ControllerMilestones;
  private exited: Promise<number | null>;
  private fullWaiters: (() => void)[] = [];

  constructor(entry: string, kubeconfig: string, namespace: string, userAgent: string, env: Record<string, string> = {}) {
    this.milestones = { spawnedAt: Date.now() };
    this.child = fork(entry, [kubeconfig, namespace, userAgent], {
      execArgv: [],
      env: { ...process.env, NODE_OPTIONS: '', NODE_ENV: 'production', ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    this.child.on('message', (m: { type: string; at: number; checks?: number; watchRestarts?: Record<string, number>; memory?: NodeJS.MemoryUsage }) => {
      if (m.type === 'started') this.milestones.startedAt = m.at;
      if (m.type === 'ready') this.milestones.readyAt = m.at;
      if (m.type === 'fullReconcile') {
        this.milestones.fullReconcileAt = m.at;
        this.milestones.checksReconciled = m.checks;
        for (const w of this.fullWaiters.splice(0)) w();
      }
      if (m.type === 'stopped') {
        this.milestones.watchRestarts = m.watchRestarts;
        this.milestones.memory = m.memory;
      }
    });
    this.sampler = new ProcSampler(this.child.pid!, 500);
  }

  fullReconcile(timeoutMs: number): Promise<void> {
    if (this.milestones.fullReconcileAt !== undefined) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`JoinGuard did not reconcile every check within ${timeoutMs} ms`)), timeoutMs);
      this.fullWaiters.push(() => (clearTimeout(t), resolve()));
      void this.exited.then((code) => reject(new Error(`JoinGuard exited (${code}) before reconciling every check`)));
    });
  }

  /** Asks it to stop; SIGKILL after 10 s. The last sample is taken while it still runs. */
  async stop(): Promise<void> {
    this.sampler.take();
    this.sampler.stop();
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    if (this.child.connected) this.child.send({ type: 'stop' });
    else this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(t);
  }
}
