// Free TCP ports on 127.0.0.1 for the test control plane.
//
// A port is found by binding port 0 and reading what the kernel picked, then closed again, so there is
// a short window in which someone else can take it. Several engineers share this machine, so callers
// retry a component whose log says its address is in use (see isAddressInUse).
import net from 'node:net';

const HOST = '127.0.0.1';

// Ports handed out by this process, so two components of one env never get the same port even if the
// kernel hands a just-closed port out twice.
const handedOut = new Set<number>();

function bindEphemeral(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: HOST, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** One free port on 127.0.0.1 that this process has not handed out before. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await bindEphemeral();
    if (port > 0 && !handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error('no free port found on 127.0.0.1 after 50 attempts');
}

/** Several distinct free ports on 127.0.0.1. */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await freePort());
  return ports;
}

/**
 * Whether nothing listens on the port: a listener on 127.0.0.1 or on all interfaces makes binding
 * 127.0.0.1:port fail with EADDRINUSE. Node sets SO_REUSEADDR, so sockets in TIME_WAIT do not count.
 */
export function isPortFree(port: number, host = HOST): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** Whether a component's log says it lost the race for one of its ports. */
export function isAddressInUse(logText: string): boolean {
  return /address already in use|EADDRINUSE|bind: address/i.test(logText);
}
