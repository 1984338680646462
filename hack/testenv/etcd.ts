// etcd for the test control plane: one member on 127.0.0.1, data in a throw-away folder, no fsync.
import fs from 'node:fs';
import path from 'node:path';
import { freePorts } from './ports.js';
import { launchWithRetry, ManagedProcess } from './process.js';
import { httpGet } from './kube-client.js';
import { waitFor } from './wait.js';

export interface Etcd {
  proc: ManagedProcess;
  clientUrl: string;
  clientPort: number;
  peerPort: number;
  dataDir: string;
}

export interface EtcdOptions {
  binDir: string;
  runDir: string;
  dataDir: string;
  log: (line: string) => void;
  timeoutMs?: number;
  /** Called with each started process (also for attempts that will be retried). */
  onStart?: (proc: ManagedProcess) => void;
  /**
   * dataDir holds a cleanly stopped member's data (a saved fleet, bench/fleet-cache.ts): kept, and started with
   * --force-new-cluster, which re-points the one member at this attempt's peer URL.
   */
  restored?: boolean;
}

export async function startEtcd(opts: EtcdOptions): Promise<Etcd> {
  return launchWithRetry('etcd', opts.log, async () => {
    const [clientPort, peerPort] = (await freePorts(2)) as [number, number];
    // A fresh member each attempt: a half-initialised data dir would pin the old peer URL.
    if (!opts.restored) {
      fs.rmSync(opts.dataDir, { recursive: true, force: true });
      fs.mkdirSync(opts.dataDir, { recursive: true, mode: 0o700 });
    }
    const clientUrl = `http://127.0.0.1:${clientPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const proc = ManagedProcess.start({
      name: 'etcd',
      command: path.join(opts.binDir, 'etcd'),
      args: [
        '--name=testenv',
        `--data-dir=${opts.dataDir}`,
        `--listen-client-urls=${clientUrl}`,
        `--advertise-client-urls=${clientUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=testenv=${peerUrl}`,
        '--initial-cluster-state=new',
        ...(opts.restored ? ['--force-new-cluster=true'] : []),
        // A test store: losing it on a crash is fine, waiting for the disk is not.
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ],
      logFile: path.join(opts.runDir, 'etcd.log'),
    });
    opts.onStart?.(proc);
    const wait = async (): Promise<Etcd> => {
      await waitFor(
        'etcd /health',
        async () => {
          const res = await httpGet(`${clientUrl}/health`);
          return res.status === 200 && res.body.includes('"true"');
        },
        {
          timeoutMs: opts.timeoutMs ?? 20_000,
          intervalMs: 100,
          abort: () => (proc.running ? undefined : `etcd ${proc.describeExit()}`),
        },
      );
      return { proc, clientUrl, clientPort, peerPort, dataDir: opts.dataDir };
    };
    return { proc, wait };
  });
}
