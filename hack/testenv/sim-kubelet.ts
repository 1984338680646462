// sim-kubelet (hack/testenv/sim-kubelet, test-only): the kubelet endpoint of the simulation's Nodes and the
// etcd members of its control planes, which KubeadmControlPlane reaches by port-forward through the
// apiserver. It binds a port of its own choosing on 127.0.0.1 and writes it to a file (no port race); the
// simulation points every Node's `status.daemonEndpoints.kubeletEndpoint.Port` at it.
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { ManagedProcess } from './process.js';
import { waitFor } from './wait.js';

export interface SimKubelet {
  proc: ManagedProcess;
  port: number;
}

export interface SimKubeletOptions {
  binDir: string;
  runDir: string;
  kubeconfigPath: string;
  timeoutMs?: number;
  onStart?: (proc: ManagedProcess) => void;
}

/** The apiserver dials kubelets at this address type only: the sim's Hostname addresses do not resolve. */
export const KUBELET_ADDRESS_FLAGS = ['--kubelet-preferred-address-types=InternalIP'];

function healthz(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    // Self-signed, as the apiserver accepts it (no --kubelet-certificate-authority).
    const req = https.get(
      { host: '127.0.0.1', port, path: '/healthz', rejectUnauthorized: false, timeout: 2000 },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
}

export async function startSimKubelet(o: SimKubeletOptions): Promise<SimKubelet> {
  const portFile = path.join(o.runDir, 'sim-kubelet.port');
  fs.rmSync(portFile, { force: true });
  const proc = ManagedProcess.start({
    name: 'sim-kubelet',
    command: path.join(o.binDir, 'sim-kubelet'),
    args: [`--kubeconfig=${o.kubeconfigPath}`, '--bind-address=127.0.0.1', '--port=0', `--port-file=${portFile}`],
    logFile: path.join(o.runDir, 'sim-kubelet.log'),
  });
  o.onStart?.(proc);
  const abort = () => (proc.running ? undefined : `sim-kubelet ${proc.describeExit()}`);
  const port = await waitFor(
    'sim-kubelet port file',
    async () => {
      const text = fs.existsSync(portFile) ? fs.readFileSync(portFile, 'utf8').trim() : '';
      return text ? Number(text) : undefined;
    },
    { timeoutMs: o.timeoutMs ?? 20_000, intervalMs: 50, abort },
  );
  await waitFor('sim-kubelet /healthz', () => healthz(port), { timeoutMs: 10_000, intervalMs: 100, abort });
  return { proc, port };
}
