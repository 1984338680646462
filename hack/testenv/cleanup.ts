// Leaves nothing running when the process that started a test env goes away.
//
// Three layers, because tests get interrupted in every possible way:
// - process 'exit' (normal end, process.exit, an uncaught error): SIGKILL every group now, remove dirs;
// - SIGINT, SIGTERM, SIGHUP: a graceful stop of every env, then exit with 128+signal;
// - SIGKILL of Node itself runs no code at all: a small watchdog shell, in its own process group,
//   polls the parent pid and cleans up the groups listed in a file once the parent is gone.
import fs from 'node:fs';
import { ManagedProcess } from './process.js';

export interface Stoppable {
  stop(): Promise<void>;
  /** Synchronous last resort for the 'exit' hook. */
  killNow(): void;
}

const live = new Set<Stoppable>();
const SIGNALS = { SIGINT: 2, SIGTERM: 15, SIGHUP: 1 } as const;
type HandledSignal = keyof typeof SIGNALS;
let exitHookInstalled = false;
let signalHandler: ((signal: HandledSignal) => void) | undefined;

function onExit(): void {
  for (const env of live) env.killNow();
}

function installHooks(): void {
  if (!exitHookInstalled) {
    process.on('exit', onExit);
    exitHookInstalled = true;
  }
  if (signalHandler) return;
  let received = 0;
  signalHandler = (signal: HandledSignal) => {
    received++;
    if (received > 1) {
      onExit();
      process.exit(128 + SIGNALS[signal]);
    }
    const all = [...live].map((env) => env.stop().catch(() => undefined));
    const deadline = new Promise((resolve) => setTimeout(resolve, 15_000).unref());
    void Promise.race([Promise.all(all), deadline]).finally(() => process.exit(128 + SIGNALS[signal]));
  };
  for (const signal of Object.keys(SIGNALS) as HandledSignal[]) process.on(signal, signalHandler);
}

function removeSignalHooks(): void {
  if (!signalHandler) return;
  for (const signal of Object.keys(SIGNALS) as HandledSignal[]) process.off(signal, signalHandler);
  signalHandler = undefined;
}

/** Registers a running env; the hooks are in place only while at least one env is live. */
export function track(env: Stoppable): void {
  live.add(env);
  installHooks();
}

export function untrack(env: Stoppable): void {
  live.delete(env);
  // Our signal handlers change what Ctrl-C means; drop them when there is nothing left to stop.
  if (live.size === 0) removeSignalHooks();
}

const WATCHDOG_SCRIPT = `
parent="$1"; pgids="$2"; shift 2
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
groups="$(cat "$pgids" 2>/dev/null)"
echo "$(date -u +%FT%TZ) parent $parent is gone; stopping process groups: $groups"
for g in $groups; do kill -TERM -- "-$g" 2>/dev/null; kill -CONT -- "-$g" 2>/dev/null; done
for i in 1 2 3 4 5 6 7 8 9 10; do
  alive=""
  for g in $groups; do kill -0 -- "-$g" 2>/dev/null && alive=1; done
  [ -z "$alive" ] && break
  sleep 0.5
done
for g in $groups; do kill -KILL -- "-$g" 2>/dev/null; done
rm -rf -- "$@"
`;

/**
 * Starts the watchdog for the current process. pgidFile lists the process groups to stop, one per line;
 * keep it current with writePgids. removeDirs are deleted after the groups are gone.
 */
export function startWatchdog(pgidFile: string, removeDirs: string[], logFile: string): ManagedProcess {
  return ManagedProcess.start({
    name: 'watchdog',
    command: '/bin/bash',
    args: ['-c', WATCHDOG_SCRIPT, 'testenv-watchdog', String(process.pid), pgidFile, ...removeDirs],
    logFile,
  });
}

export function writePgids(pgidFile: string, pgids: number[]): void {
  fs.writeFileSync(`${pgidFile}.tmp`, pgids.map((p) => `${p}\n`).join(''));
  fs.renameSync(`${pgidFile}.tmp`, pgidFile);
}
