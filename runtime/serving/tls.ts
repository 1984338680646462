// Serving certificate from files, reloaded when they change on disk: cert-manager rotates the Secret, and
// the kubelet swaps the mounted files through a `..data` symlink, so the directory is watched rather than
// the files, and a slow poll covers filesystems where fs.watch says nothing. A half-written pair (new cert,
// old key) fails to load; the old pair keeps serving and the next change or poll retries.
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import { createHash } from 'node:crypto';

export interface KeyPair {
  cert: Buffer;
  key: Buffer;
}

export interface CertWatcherOptions {
  certFile: string;
  keyFile: string;
  /** Called with a pair that loaded and differs from the last one. */
  onChange: (pair: KeyPair) => void;
  onError?: (err: Error) => void;
  /** Poll interval in ms (default 10 s). */
  pollMs?: number;
}

/** Reads the pair and proves that key and certificate belong together (createSecureContext checks it). */
export async function loadKeyPair(certFile: string, keyFile: string): Promise<KeyPair> {
  const [cert, key] = await Promise.all([readFile(certFile), readFile(keyFile)]);
  createSecureContext({ cert, key });
  return { cert, key };
}

export class CertWatcher {
  private readonly watchers: FSWatcher[] = [];
  private timer?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private digest = '';
  private loading: Promise<void> = Promise.resolve();
  private stopped = false;

  private constructor(private readonly opts: CertWatcherOptions) {}

  /** Loads the pair once (failing if it cannot) and starts watching for changes. */
  static async start(opts: CertWatcherOptions): Promise<{ watcher: CertWatcher; pair: KeyPair }> {
    const w = new CertWatcher(opts);
    const pair = await loadKeyPair(opts.certFile, opts.keyFile);
    w.digest = digestOf(pair);
    for (const dir of new Set([dirname(opts.certFile), dirname(opts.keyFile)])) {
      try {
        const fw = watch(dir, { persistent: false }, () => w.schedule());
        fw.on('error', (e) => opts.onError?.(e));
        w.watchers.push(fw);
      } catch (e) {
        opts.onError?.(e as Error); // the poll still works
      }
    }
    w.timer = setInterval(() => w.schedule(), opts.pollMs ?? 10_000);
    w.timer.unref();
    return { watcher: w, pair };
  }

  /** Coalesces the burst of events one rotation makes (two files, a symlink swap) into one reload. */
  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.loading = this.loading.then(() => this.reload());
    }, 100);
    this.debounce.unref();
  }

  /** Reloads now; resolves when done. Exposed for tests and for a SIGHUP handler. */
  async reload(): Promise<void> {
    if (this.stopped) return;
    let pair: KeyPair;
    try {
      pair = await loadKeyPair(this.opts.certFile, this.opts.keyFile);
    } catch (e) {
      this.opts.onError?.(e as Error);
      return;
    }
    const d = digestOf(pair);
    if (d === this.digest) return;
    this.digest = d;
    this.opts.onChange(pair);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.debounce);
    for (const w of this.watchers) w.close();
    await this.loading;
  }
}

function digestOf(p: KeyPair): string {
  return createHash('sha256').update(p.cert).update('\0').update(p.key).digest('hex');
}
