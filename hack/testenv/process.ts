// One child process of the test control plane: started in its own process group, logging to a file,
// stopped with SIGTERM then SIGKILL, and waited for until nothing of its group is left.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { isAddressInUse } from './ports.js';

export interface ProcessSpec {
  /** Component name; also the log file's base name. */
  name: string;
  command: string;
  args: string[];
  logFile: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Whether any process of the group led by pgid is still there (zombies included). */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The state letter of /proc/<pid>/stat (R, S, T, Z, ...), '' when there is no such process. */
function procState(pid: number): string {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The state letter follows the parenthesised command name.
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return '';
  }
}

/** Whether a process with this pid exists and is not a zombie. */
export function pidAlive(pid: number): boolean {
  const state = procState(pid);
  return state !== '' && state !== 'Z' && state !== 'X';
}

/**
 * SIGSTOP or SIGCONT to a process group, resolved once its leader is seen stopped (or running again):
 * the kernel delivers the signal when the process is next scheduled, and on two busy cores a request
 * already in flight could still be answered in between.
 */
export async function pauseGroup(pgid: number, signal: 'SIGSTOP' | 'SIGCONT', timeoutMs = 5000): Promise<void> {
  signalGroup(pgid, signal);
  const done = () => (procState(pgid) === 'T') === (signal === 'SIGSTOP') || !pidAlive(pgid);
  for (const deadline = Date.now() + timeoutMs; !done(); await sleep(10)) {
    if (Date.now() > deadline)
      throw new Error(
        `process group ${pgid}: not ${signal === 'SIGSTOP' ? 'stopped' : 'running'} after ${timeoutMs}ms`,
      );
  }
}

export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}

export class ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly startedAt = Date.now();
  exitCode: number | null = null;
  exitSignal: NodeJS.Signals | null = null;
  /** Resolves when the process has exited (for any reason). */
  readonly exited: Promise<void>;
  private readonly child: ChildProcess;
  private stopping: Promise<void> | undefined;

  private constructor(spec: ProcessSpec, child: ChildProcess, exited: Promise<void>) {
    this.name = spec.name;
    this.logFile = spec.logFile;
    this.child = child;
    this.pid = child.pid ?? -1;
    this.exited = exited;
  }

  /** Starts the process; its stdout and stderr go to spec.logFile (appended). */
  static start(spec: ProcessSpec): ManagedProcess {
    const fd = fs.openSync(spec.logFile, 'a');
    fs.writeSync(fd, `# ${new Date().toISOString()} ${spec.command} ${spec.args.join(' ')}\n`);
    let child: ChildProcess;
    try {
      // detached: the child leads a new process group, so one signal reaches everything it forks.
      child = spawn(spec.command, spec.args, {
        cwd: spec.cwd,
        env: spec.env ?? process.env,
        detached: true,
        stdio: ['ignore', fd, fd],
      });
    } finally {
      fs.closeSync(fd);
    }
    if (child.pid === undefined) {
      throw new Error(`${spec.name}: could not start ${spec.command}`);
    }
    let onExit!: () => void;
    const exited = new Promise<void>((resolve) => (onExit = resolve));
    const proc = new ManagedProcess(spec, child, exited);
    child.once('exit', (code, signal) => {
      proc.exitCode = code;
      proc.exitSignal = signal;
      onExit();
    });
    child.once('error', () => onExit());
    // A forgotten env must not keep Node alive; the exit hook kills what is left (see cleanup.ts).
    child.unref();
    return proc;
  }

  get running(): boolean {
    return this.exitCode === null && this.exitSignal === null;
  }

  /** How the process ended, for error messages. */
  describeExit(): string {
    if (this.running) return 'running';
    return this.exitSignal ? `killed by ${this.exitSignal}` : `exited with code ${this.exitCode}`;
  }

  /** SIGTERM to the group, SIGKILL after graceMs, then waits until the group is empty. Idempotent. */
  stop(graceMs = 5000): Promise<void> {
    this.stopping ??= this.doStop(graceMs);
    return this.stopping;
  }

  private async doStop(graceMs: number): Promise<void> {
    if (this.pid <= 0) return;
    signalGroup(this.pid, 'SIGTERM');
    // A paused group (pause()) would hold SIGTERM pending forever; let it act on it.
    signalGroup(this.pid, 'SIGCONT');
    const termed = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!termed || groupAlive(this.pid)) signalGroup(this.pid, 'SIGKILL');
    await this.exited;
    for (let i = 0; i < 100 && groupAlive(this.pid); i++) {
      signalGroup(this.pid, 'SIGKILL');
      await sleep(20);
    }
  }

  /** SIGSTOP (pause) or SIGCONT (resume) to the whole group: it keeps its sockets but answers nothing. */
  async signal(signal: 'SIGSTOP' | 'SIGCONT'): Promise<void> {
    if (this.pid > 0 && this.running) await pauseGroup(this.pid, signal);
  }

  /** For process 'exit' hooks, which cannot wait: SIGKILL the whole group now. */
  killNow(): void {
    if (this.pid > 0) signalGroup(this.pid, 'SIGKILL');
  }

  /** Resident memory now and at its peak, in KiB, from /proc/<pid>/status (0 when gone). */
  memory(): { rssKiB: number; hwmKiB: number } {
    try {
      const status = fs.readFileSync(`/proc/${this.pid}/status`, 'utf8');
      const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
      return { rssKiB: field('VmRSS'), hwmKiB: field('VmHWM') };
    } catch {
      return { rssKiB: 0, hwmKiB: 0 };
    }
  }
}

/** The last `lines` lines of a log file ('' when it does not exist). Reads at most the last 256 KiB. */
export function tailFile(file: string, lines = 40): string {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return '';
  }
  try {
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, 256 * 1024);
    const buf = Buffer.alloc(length);
    fs.readSync(fd, buf, 0, length, size - length);
    const all = buf.toString('utf8').split('\n');
    if (all.at(-1) === '') all.pop();
    return all.slice(-lines).join('\n');
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Starts a component and waits for it, retrying with fresh ports when it lost the race for a port it
 * was given (its log says "address already in use"). attempt() picks ports, starts the process and
 * returns how to wait for readiness; a failed attempt's process is stopped before the next one.
 */
export async function launchWithRetry<T>(
  name: string,
  log: (line: string) => void,
  attempt: () => Promise<{ proc: ManagedProcess; wait: () => Promise<T> }>,
  tries = 3,
): Promise<T> {
  for (let i = 1; ; i++) {
    const { proc, wait } = await attempt();
    try {
      return await wait();
    } catch (err) {
      await proc.stop(2000);
      if (i < tries && isAddressInUse(tailFile(proc.logFile, 60))) {
        log(`${name}: one of its ports was taken meanwhile; retrying with new ports (${i}/${tries - 1})`);
        continue;
      }
      throw err;
    }
  }
}
