// npm run testenv -- up|down|env|status
//
// `up` builds what is missing, then starts the test control plane in a detached supervisor process that
// outlives the command, and prints the kubeconfig path on its last line. `down` stops it, leaving
// nothing running. State lives in <cache>/testenv-state.json (cache: $JOINGUARD_CACHE, else
// ~/.cache/joinguard, the same folder build.sh uses).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { VersionApi } from '@kubernetes/client-node';
import { attachTestEnv, deadComponents, readDescriptor } from './attach.js';
import { httpGet } from './kube-client.js';
import { groupAlive, pidAlive, tailFile } from './process.js';
import { ensureBuilt, startTestEnv } from './testenv.js';
import { capiReleaseFromEnv, CAPI_RELEASE_NAMES, type CapiRelease } from './capi-releases.js';

const cacheDir =
  process.env.JOINGUARD_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'joinguard');
const stateFile = path.join(cacheDir, 'testenv-state.json');
const runDir = path.join(cacheDir, 'testenv-run');
const supervisorLog = path.join(cacheDir, 'testenv-supervisor.log');
const cliFile = fileURLToPath(import.meta.url);
const UP_TIMEOUT_MS = 180_000;

interface State {
  status: 'starting' | 'ready' | 'failed';
  supervisorPid: number;
  runDir: string;
  startedAt: string;
  kubeconfigPath?: string;
  server?: string;
  startupSeconds?: number;
  error?: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const err = (line: string) => process.stderr.write(`${line}\n`);

function readState(): State | undefined {
  try {
    return JSON.parse(fs.readFileSync(stateFile, 'utf8')) as State;
  } catch {
    return undefined;
  }
}

function writeState(state: State): void {
  fs.mkdirSync(cacheDir, { recursive: true });
  fs.writeFileSync(`${stateFile}.tmp`, JSON.stringify(state, null, 2));
  fs.renameSync(`${stateFile}.tmp`, stateFile);
}

/** Alive and really our supervisor (a recycled pid runs something else). */
function supervisorAlive(pid: number): boolean {
  if (!pidAlive(pid)) return false;
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('supervise');
  } catch {
    return false;
  }
}

function usage(kubeconfigPath: string): string {
  return [
    'Use it:',
    `  export KUBECONFIG=${kubeconfigPath}          # kubectl, client-node's loadFromDefault()`,
    `  export JOINGUARD_TESTENV_KUBECONFIG=${kubeconfigPath}   # e2e specs reuse it instead of starting their own`,
    'Stop it: npm run testenv -- down',
  ].join('\n');
}

/** Copies lines the supervisor appends to its log onto stderr, while `up` waits. */
function follow(file: string): () => void {
  let offset = fs.existsSync(file) ? fs.statSync(file).size : 0;
  const timer = setInterval(() => {
    try {
      const size = fs.statSync(file).size;
      if (size <= offset) return;
      const fd = fs.openSync(file, 'r');
      const buf = Buffer.alloc(size - offset);
      fs.readSync(fd, buf, 0, buf.length, offset);
      fs.closeSync(fd);
      offset = size;
      process.stderr.write(buf.toString('utf8'));
    } catch {
      // Not there yet.
    }
  }, 200);
  return () => clearInterval(timer);
}

async function up(release: CapiRelease): Promise<number> {
  const current = readState();
  if (current && supervisorAlive(current.supervisorPid)) {
    if (current.status === 'ready' && current.kubeconfigPath) {
      err(`Test control plane already running (supervisor pid ${current.supervisorPid}).`);
      err(usage(current.kubeconfigPath));
      console.log(current.kubeconfigPath);
      return 0;
    }
    err(
      `A test control plane is ${current.status} (supervisor pid ${current.supervisorPid}); run \`npm run testenv -- down\` first.`,
    );
    return 1;
  }
  if (current) fs.rmSync(stateFile, { force: true });

  const binDir = await ensureBuilt(err, release);
  fs.rmSync(runDir, { recursive: true, force: true });
  fs.mkdirSync(runDir, { recursive: true });
  fs.mkdirSync(cacheDir, { recursive: true });
  fs.writeFileSync(supervisorLog, '');
  const logFd = fs.openSync(supervisorLog, 'a');
  // process.execArgv carries tsx's loader flags, so the supervisor runs this same file the same way.
  const child = spawn(process.execPath, [...process.execArgv, cliFile, 'supervise', binDir, release], {
    detached: true,
    stdio: ['ignore', logFd, logFd],
    cwd: process.cwd(),
    env: { ...process.env, JOINGUARD_TESTENV_KUBECONFIG: '' },
  });
  fs.closeSync(logFd);
  child.unref();
  const pid = child.pid ?? -1;
  writeState({ status: 'starting', supervisorPid: pid, runDir, startedAt: new Date().toISOString() });

  const stopFollowing = follow(supervisorLog);
  const deadline = Date.now() + UP_TIMEOUT_MS;
  try {
    for (;;) {
      await sleep(200);
      const state = readState();
      if (state?.status === 'ready' && state.kubeconfigPath) {
        stopFollowing();
        err(
          `\nTest control plane is up in ${state.startupSeconds?.toFixed(1)}s: ${state.server} (supervisor pid ${pid}, logs ${runDir}/*.log).`,
        );
        err(usage(state.kubeconfigPath));
        console.log(state.kubeconfigPath);
        return 0;
      }
      if (state?.status === 'failed' || !supervisorAlive(pid) || Date.now() > deadline) {
        stopFollowing();
        err(
          `\nThe test control plane did not start: ${state?.error ?? (supervisorAlive(pid) ? 'timed out' : 'the supervisor exited')}`,
        );
        err(`--- ${supervisorLog} (tail) ---\n${tailFile(supervisorLog, 30)}`);
        await down(true);
        return 1;
      }
    }
  } finally {
    stopFollowing();
  }
}

/** The detached process that owns the env; SIGTERM (from `down`) makes cleanup.ts stop it and exit. */
async function supervise(binDir: string, capiRelease: CapiRelease): Promise<number> {
  const startedAt = new Date().toISOString();
  const t0 = Date.now();
  const log = (line: string) => console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);
  process.on('exit', () => {
    // A failed state stays for `up` to report; `up` and `down` clear stale state.
    const state = readState();
    if (state?.supervisorPid === process.pid && state.status !== 'failed') fs.rmSync(stateFile, { force: true });
  });
  try {
    const env = await startTestEnv({ runDir, binDir, log, capiRelease });
    writeState({
      status: 'ready',
      supervisorPid: process.pid,
      runDir,
      startedAt,
      kubeconfigPath: env.kubeconfigPath,
      server: env.server,
      startupSeconds: (Date.now() - t0) / 1000,
    });
    // Say when a component dies; `status` reports it too. The env stays as it is until `down`.
    const reported = new Set<string>();
    setInterval(() => {
      for (const name of env.components) {
        if (!reported.has(name) && !pidAlive(env.pids[name]!)) {
          reported.add(name);
          log(`[testenv] ${name} exited; last lines of its log:\n${env.logTail(name, 20)}`);
        }
      }
    }, 5000);
    return -1; // keep running
  } catch (e) {
    writeState({
      status: 'failed',
      supervisorPid: process.pid,
      runDir,
      startedAt,
      error: (e as Error).message.split('\n')[0],
    });
    log(`[testenv] start failed: ${(e as Error).message}`);
    return 1;
  }
}

async function down(quiet = false): Promise<number> {
  const state = readState();
  if (!state) {
    if (!quiet) err('No test control plane is running.');
    return 0;
  }
  const t0 = Date.now();
  const pids = readDescriptor(state.runDir)?.pids ?? {};
  if (supervisorAlive(state.supervisorPid)) {
    process.kill(state.supervisorPid, 'SIGTERM');
    for (let i = 0; i < 150 && supervisorAlive(state.supervisorPid); i++) await sleep(200);
    if (supervisorAlive(state.supervisorPid)) process.kill(state.supervisorPid, 'SIGKILL');
  }
  // Whatever the supervisor could not stop (it was killed, or hung): kill the groups directly.
  for (const pid of Object.values(pids)) if (groupAlive(pid)) process.kill(-pid, 'SIGKILL');
  for (let i = 0; i < 50 && Object.values(pids).some(groupAlive); i++) await sleep(100);
  fs.rmSync(stateFile, { force: true });
  const left = Object.entries(pids)
    .filter(([, pid]) => groupAlive(pid))
    .map(([n]) => n);
  if (left.length) {
    err(`Could not stop: ${left.join(', ')}`);
    return 1;
  }
  if (!quiet)
    err(
      `Test control plane stopped in ${((Date.now() - t0) / 1000).toFixed(1)}s; nothing left running. Logs stay in ${state.runDir}.`,
    );
  return 0;
}

function env(): number {
  const state = readState();
  if (state?.status !== 'ready' || !state.kubeconfigPath || !supervisorAlive(state.supervisorPid)) {
    err('No test control plane is running; start one with `npm run testenv -- up`.');
    return 1;
  }
  console.log(`export KUBECONFIG=${state.kubeconfigPath}`);
  console.log(`export JOINGUARD_TESTENV_KUBECONFIG=${state.kubeconfigPath}`);
  return 0;
}

async function status(): Promise<number> {
  const state = readState();
  if (!state) {
    console.log('not running');
    return 1;
  }
  const alive = supervisorAlive(state.supervisorPid);
  console.log(
    `supervisor   pid ${state.supervisorPid} ${alive ? 'running' : 'GONE'} (${state.status}, since ${state.startedAt})`,
  );
  const d = readDescriptor(state.runDir);
  if (!alive || !d || !state.kubeconfigPath) return alive ? 2 : 1;
  const dead = new Set(deadComponents(d));
  for (const [name, pid] of Object.entries(d.pids)) {
    const health = d.healthUrls[name]
      ? ` readyz ${(await httpGet(`${d.healthUrls[name]}/readyz`)).status || 'unreachable'}`
      : '';
    console.log(`${name.padEnd(27)} pid ${pid} ${dead.has(name) ? 'GONE' : 'running'}${health}`);
  }
  // eslint-disable-next-line no-useless-assignment -- the value if the try below throws
  let version = 'unreachable';
  try {
    const te = attachTestEnv(state.kubeconfigPath);
    version = (await te.kubeConfig().makeApiClient(VersionApi).getCode()).gitVersion;
    const m = te.memory();
    console.log(
      `memory       VmRSS ${(m.rssKiB / 1024).toFixed(0)} MiB, peak (sum of VmHWM) ${(m.hwmKiB / 1024).toFixed(0)} MiB`,
    );
  } catch (e) {
    version = `unreachable (${(e as Error).message.split('\n')[0]})`;
  }
  console.log(`apiserver    ${d.server} ${version}`);
  console.log(`capi         ${d.capiVersion} (${d.capiApiVersion})`);
  console.log(`kubeconfig   ${state.kubeconfigPath}`);
  console.log(
    `ports        ${Object.entries(d.ports)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')}`,
  );
  return dead.size === 0 && !version.startsWith('unreachable') ? 0 : 2;
}

async function main(): Promise<void> {
  const [cmd, arg, arg2] = process.argv.slice(2);
  // `up --capi v1.10` (or JOINGUARD_CAPI_RELEASE) picks the CAPI release.
  const release = cmd === 'up' && arg === '--capi' ? arg2 : capiReleaseFromEnv();
  if (!(CAPI_RELEASE_NAMES as readonly (string | undefined)[]).includes(release)) {
    err(`unknown CAPI release ${release}; known: ${CAPI_RELEASE_NAMES.join(', ')}`);
    process.exit(2);
  }
  let code: number;
  switch (cmd) {
    case 'up':
      code = await up(release as CapiRelease);
      break;
    case 'down':
      code = await down();
      break;
    case 'env':
      code = env();
      break;
    case 'status':
      code = await status();
      break;
    case 'supervise':
      code = await supervise(arg ?? '', (arg2 ?? 'v1.14') as CapiRelease);
      break;
    default:
      err(`usage: npm run testenv -- up [--capi ${CAPI_RELEASE_NAMES.join('|')}]|down|env|status`);
      code = 2;
  }
  if (code >= 0) process.exit(code);
}

await main();
