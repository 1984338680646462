// CAPI's managers' logs kept beside each run (issue 37: they exited in three 1,000-Machine runs and no log was
// kept). testenv writes <runDir>/<manager>.log and removes the run dir on stop; the bench copies each one's last
// MANAGER_LOG_TAIL bytes into the run's output folder, headed by whether the manager still ran and, if it had
// exited, when the bench first saw it gone (its own last lines say why: Go writes the fatal error to stderr).
import fs from 'node:fs';
import path from 'node:path';

export const MANAGERS = ['capi-core', 'capi-kubeadm-bootstrap', 'capi-kubeadm-control-plane'] as const;
export const MANAGER_LOG_TAIL = 64 * 1024;

/** The last `max` bytes of a file, cut at a line start; '' when it does not exist. */
export function tailBytes(file: string, max = MANAGER_LOG_TAIL): { text: string; cut: number } {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return { text: '', cut: 0 };
  }
  try {
    const size = fs.fstatSync(fd).size;
    const from = Math.max(0, size - max);
    const buf = Buffer.alloc(size - from);
    fs.readSync(fd, buf, 0, buf.length, from);
    let text = buf.toString('utf8');
    if (from > 0) text = text.slice(text.indexOf('\n') + 1);
    return { text, cut: size - Buffer.byteLength(text) };
  } finally {
    fs.closeSync(fd);
  }
}

export function header(manager: string, exitedAt: number | undefined, cut: number, at = Date.now()): string {
  const state = exitedAt
    ? `EXITED: first seen gone at ${new Date(exitedAt).toISOString()} (the last lines below say why)`
    : `running when the bench stopped it at ${new Date(at).toISOString()}`;
  return `# ${manager}: ${state}; ${cut ? `first ${cut} bytes cut` : 'whole log'}\n`;
}

const alive = (pid: number) => {
  try {
    return process.kill(pid, 0);
  } catch {
    return false;
  }
};

/** Notes when each manager's process goes away (checked every second), then writes the kept logs. */
export class ManagerLogs {
  readonly exitedAt: Partial<Record<string, number>> = {};
  private timer: NodeJS.Timeout;

  constructor(
    private runDir: string,
    private pids: Record<string, number>,
  ) {
    this.timer = setInterval(() => this.check(), 1000);
    this.timer.unref();
  }

  check(): void {
    for (const m of MANAGERS) {
      const pid = this.pids[m];
      if (pid !== undefined && this.exitedAt[m] === undefined && !alive(pid)) this.exitedAt[m] = Date.now();
    }
  }

  /** Before the env stops (a manager stopped by it is not an exit): one file per manager in outDir. */
  keep(outDir: string): string[] {
    this.check();
    clearInterval(this.timer);
    fs.mkdirSync(outDir, { recursive: true });
    return MANAGERS.map((m) => {
      const { text, cut } = tailBytes(path.join(this.runDir, `${m}.log`));
      const file = path.join(outDir, `${m}.log`);
      fs.writeFileSync(file, header(m, this.exitedAt[m], cut) + text);
      return file;
    });
  }
}
