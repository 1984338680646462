// The metrics endpoint and the health probes, each on its own address like controller-runtime's
// `--metrics-bind-address` and `--health-probe-bind-address`. `0` turns a server off; port 0 picks one.
import http from 'node:http';
import type { Registry } from 'prom-client';

export interface ProbeState {
  /** Liveness: the process loop is alive and no informer is wedged. */
  healthy(): { ok: boolean; why?: string };
  /** Readiness: caches synced (and, with leader election, either leading or a healthy standby). */
  ready(): { ok: boolean; why?: string };
}

export interface BoundServer {
  port: number;
  close(): Promise<void>;
}

export function parseBindAddress(flag: string, value: string): { host: string; port: number } | undefined {
  if (value === '0') return undefined;
  const m = /^(.*):(\d+)$/.exec(value);
  if (!m) throw new Error(`${flag}: ${JSON.stringify(value)} is not host:port, :port or 0`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`${flag}: port ${port} is out of range`);
  const host = m[1] === '' ? '0.0.0.0' : m[1]!.replace(/^\[(.*)\]$/, '$1');
  return { host, port };
}

function listen(server: http.Server, host: string, port: number): Promise<BoundServer> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const a = server.address();
      resolve({
        port: typeof a === 'object' && a ? a.port : port,
        close: () =>
          new Promise<void>((r) => {
            server.close(() => r());
            server.closeAllConnections();
          }),
      });
    });
  });
}

export function startMetricsServer(addr: { host: string; port: number }, registry: Registry): Promise<BoundServer> {
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
      (e: Error) => res.writeHead(500).end(e.message),
    );
  });
  return listen(server, addr.host, addr.port);
}

export function startProbeServer(addr: { host: string; port: number }, state: ProbeState): Promise<BoundServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const probe = path === '/healthz' ? state.healthy() : path === '/readyz' ? state.ready() : undefined;
    if (!probe || req.method !== 'GET') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(probe.ok ? 200 : 503, { 'Content-Type': 'text/plain' }).end(probe.ok ? 'ok\n' : `${probe.why ?? 'not ready'}\n`);
  });
  return listen(server, addr.host, addr.port);
}
