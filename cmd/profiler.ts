// --profiler-address: what CAPI's pprof endpoint is for, in Node's formats. Plain HTTP without authentication,
// as controller-runtime's PprofBindAddress serves it, so bind it to localhost and reach it with
// `kubectl port-forward`:
//   GET /debug/pprof/                    the index
//   GET /debug/pprof/profile?seconds=N   a CPU profile over N seconds (default 30, at most 300): a .cpuprofile
//                                        (Chrome DevTools, speedscope)
//   GET /debug/pprof/heap                a heap snapshot: a .heapsnapshot (Chrome DevTools). Writing it stops
//                                        the process for a while and needs memory near the heap's size.
// One profile at a time: a second request while one runs gets 409.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Session } from 'node:inspector/promises';
import { getHeapSnapshot } from 'node:v8';
import { pipeline } from 'node:stream/promises';

export interface Profiler {
  port: number;
  stop(): Promise<void>;
}

const INDEX = `JoinGuard profiler
/debug/pprof/profile?seconds=N   CPU profile over N seconds (default 30, max 300): .cpuprofile for Chrome DevTools
/debug/pprof/heap                heap snapshot: .heapsnapshot for Chrome DevTools (pauses the process while written)
`;

/** Starts the profiler on `host:port` (port 0 picks one). */
export async function startProfiler(address: string): Promise<Profiler> {
  const { host, port } = hostPort(address);
  const server: Server = createServer(profiles());
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const a = server.address();
  return {
    port: typeof a === 'object' && a ? a.port : port,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  const host = i > 0 ? address.slice(0, i) : '0.0.0.0';
  const port = Number(address.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--profiler-address: ${JSON.stringify(address)} is not host:port`);
  return { host, port };
}

/** The index, the heap snapshot and the CPU profile, one profile at a time. */
function profiles(): (req: IncomingMessage, res: ServerResponse) => void {
  let busy = false;
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://profiler');
    const fail = (code: number, text: string) => {
      res.writeHead(code, { 'Content-Type': 'text/plain' });
      res.end(`${text}\n`);
    };
    if (req.method !== 'GET') return fail(405, 'GET only');
    if (url.pathname === '/debug/pprof/' || url.pathname === '/debug/pprof') return fail(200, INDEX.trimEnd());
    if (url.pathname !== '/debug/pprof/profile' && url.pathname !== '/debug/pprof/heap')
      return fail(404, `no profile at ${url.pathname}`);
    if (busy) return fail(409, 'a profile is being taken; try again when it is done');
    busy = true;
    const done = () => (busy = false);
    if (url.pathname === '/debug/pprof/heap') {
      res.writeHead(200, {
        'Content-Type': 'application/json',
        'Content-Disposition': 'attachment; filename="joinguard.heapsnapshot"',
      });
      pipeline(getHeapSnapshot(), res).then(done, done);
      return;
    }
    const seconds = Number(url.searchParams.get('seconds') ?? '30');
    if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 300) {
      done();
      return fail(400, 'seconds must be between 0 and 300');
    }
    cpuProfile(seconds * 1000).then(
      (profile) => {
        res.writeHead(200, {
          'Content-Type': 'application/json',
          'Content-Disposition': 'attachment; filename="joinguard.cpuprofile"',
        });
        res.end(profile);
        done();
      },
      (e: Error) => {
        fail(500, `CPU profile failed: ${e.message}`);
        done();
      },
    );
  };
}

async function cpuProfile(ms: number): Promise<string> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
    await new Promise((r) => setTimeout(r, ms));
    const { profile } = await session.post('Profiler.stop');
    return JSON.stringify(profile);
  } finally {
    session.disconnect();
  }
}
