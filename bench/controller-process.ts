// JoinGuard as deployed: the `joinguard` command compiled the way the image is (tsc of api, controllers,
// webhooks and cmd; plain `node`, NODE_ENV=production) and started with the Deployment's flags
// (--leader-elect with its default lease timings, diagnostics, probes, the webhook server), in a process of its
// own so that /proc gives its own RSS and CPU. Milestones come from outside: /readyz for the caches,
// the apiserver for the first reconcile (bench/watch.ts CheckWatcher).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { track, untrack } from '../hack/testenv/cleanup.js';
import { httpGet, type Json } from '../hack/testenv/kube-client.js';
import { freePort } from '../hack/testenv/ports.js';
import { ManagedProcess, tailFile } from '../hack/testenv/process.js';
import { CpuCgroup, enterCgroups, millicores, type CpuThrottling } from './cpu-limit.js';
import { MemoryCgroup, quantityBytes } from './memory-limit.js';
import { ProcSampler } from './proc.js';
import { scrape, type Sample } from './prom.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, '..');
// Under bench/runs (git-ignored) so that the compiled files resolve the repository's node_modules; one per
// bench process, so that a smoke test and a full run may overlap.
const buildDir = path.join(here, 'runs', `controller-${process.pid}`);
export const JOINGUARD_LEASE_NAMESPACE = 'joinguard-system';

export function removeCompiledController(): void {
  fs.rmSync(buildDir, { recursive: true, force: true });
}

/** tsc of what the image ships (tests and test helpers left out, as the Dockerfile), plus `extra` entries. */
export function compileController(extra: string[] = []): string {
  fs.rmSync(buildDir, { recursive: true, force: true });
  fs.mkdirSync(buildDir, { recursive: true });
  const config = path.join(buildDir, 'tsconfig.json');
  const rel = (p: string) => path.relative(buildDir, path.join(root, p));
  fs.writeFileSync(
    config,
    JSON.stringify({
      extends: rel('tsconfig.json'),
      compilerOptions: { sourceMap: false, types: ['node'], outDir: 'dist', rootDir: rel('.') },
      include: [rel('api'), rel('controllers'), rel('webhooks'), rel('cmd'), ...extra.map(rel)],
      exclude: [rel('**/*.test.ts'), rel('**/testing/**'), rel('node_modules')],
    }),
  );
  execFileSync(path.join(root, 'node_modules', '.bin', 'tsc'), ['-p', config], { stdio: 'inherit' });
  const entry = compiled('cmd/joinguard.ts');
  if (!fs.existsSync(entry)) throw new Error(`tsc did not produce ${entry}`);
  return buildDir;
}

/** Where tsc put the JavaScript of a source file of the repository. */
export function compiled(source: string): string {
  return path.join(buildDir, 'dist', source.replace(/\.ts$/, '.js'));
}

export interface JoinGuardStart {
  kubeconfig: string;
  webhookCertDir: string;
  logFile: string;
  /**
   * Node and V8 flags before the script, as an image's ENTRYPOINT would put them ('' = Node's defaults), after
   * optional `NAME=value` words for the process's environment, as a shell prefix (`MALLOC_ARENA_MAX=2
   * --max-semi-space-size=2`): see runtimeSetting.
   */
  nodeOptions: string;
  /** Flags beyond the Deployment's (e.g. --connection-grace for the smoke size). */
  extraFlags?: string[];
  /** The test env's pgid file: its watchdog then also stops JoinGuard if the bench is killed. */
  pgidFile?: string;
  /** The process's label in /proc samples (default `joinguard`; a shard's process is `joinguard-<shard>`). */
  label?: string;
  /** Its memory limit (a quantity; default the Deployment's `limits.memory`; '' = none). */
  memoryLimit?: string;
  /** A CPU quota (a quantity, e.g. the Deployment's `requests.cpu`; default none): bench/cpu-limit.ts. */
  cpuLimit?: string;
}

/** `resources.requests.cpu` of the Deployment's `manager` container. */
export function deployedCpuRequest(): string {
  return String(managerContainer()?.resources?.requests?.cpu ?? '');
}

/** `resources.limits.memory` of the Deployment's `manager` container. */
export function deployedMemoryLimit(): string {
  return String(managerContainer()?.resources?.limits?.memory ?? '');
}

/** NODE_OPTIONS of the Deployment's `manager` container (manifests/manager/manager.yaml): the bench's default. */
export function deployedNodeOptions(): string {
  return managerContainer()?.env?.find((e: Json) => e.name === 'NODE_OPTIONS')?.value ?? '';
}

function managerContainer(): Json | undefined {
  const docs = YAML.parseAllDocuments(
    fs.readFileSync(path.join(root, 'manifests', 'manager', 'manager.yaml'), 'utf8'),
  ).map((d) => d.toJS() as Json);
  return docs
    .find((d) => d?.kind === 'Deployment')
    ?.spec.template.spec.containers.find((x: Json) => x.name === 'manager');
}

/** The environment variables the Deployment sets for the allocator (glibc's malloc), and only those. */
const MALLOC_ENV = /^(MALLOC_[A-Z_]+_?|GLIBC_TUNABLES)$/;

/**
 * The Deployment's `manager` container as the bench runs it: its allocator variables as `NAME=value` words (in the
 * manifest's order), then its NODE_OPTIONS. The bench's default setting (`--node-options`).
 */
export function deployedRuntime(): string {
  const words = Object.entries(deployedMallocEnv()).map(([k, v]) => `${k}=${v}`);
  return [...words, deployedNodeOptions()].filter(Boolean).join(' ');
}

/** The allocator variables of the Deployment's `manager` container (literal values). */
export function deployedMallocEnv(): Record<string, string> {
  const env = (managerContainer()?.env ?? []) as { name: string; value?: string }[];
  return Object.fromEntries(env.filter((e) => MALLOC_ENV.test(e.name)).map((e) => [e.name, e.value ?? '']));
}

/**
 * A setting as the bench writes it, split: leading `NAME=value` words are the environment, the rest are Node
 * flags. Allocator variables the bench itself inherited are never passed on: only the setting decides them.
 */
export function runtimeSetting(setting: string): { env: Record<string, string>; flags: string[] } {
  const env: Record<string, string> = {};
  const words = setting.split(/\s+/).filter(Boolean);
  let i = 0;
  for (; i < words.length; i++) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(words[i]!);
    if (!m) break;
    env[m[1]!] = m[2]!;
  }
  return { env, flags: words.slice(i) };
}

export class JoinGuardProcess {
  readonly spawnedAt = Date.now();
  readyAt?: number;
  readonly proc: ManagedProcess;
  readonly sampler: ProcSampler;
  readonly metricsUrl: string;
  private readonly healthUrl: string;
  private readonly tracked = { stop: () => this.stop(), killNow: () => this.proc.killNow() };
  /** The memory limit it ran under, as the results say it ('512Mi', or none and why). */
  memoryLimit = 'none';
  /** The CPU quota it ran under ('50m', or none and why). */
  cpuLimit = 'none';
  /** What its memory cgroup was charged at most (MiB) and how its CPU cgroup throttled it, read when it stops. */
  memoryPeakMiB?: number;
  throttling?: CpuThrottling;
  private cgroup?: MemoryCgroup;
  private cpuCgroup?: CpuCgroup;

  private constructor(proc: ManagedProcess, metricsPort: number, healthPort: number, label = 'joinguard') {
    this.proc = proc;
    this.metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    this.healthUrl = `http://127.0.0.1:${healthPort}`;
    this.sampler = new ProcSampler(proc.pid, 500, label);
    track(this.tracked);
  }

  static async start(o: JoinGuardStart): Promise<JoinGuardProcess> {
    const [metricsPort, healthPort, webhookPort] = [await freePort(), await freePort(), await freePort()];
    const setting = runtimeSetting(o.nodeOptions);
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !MALLOC_ENV.test(k)));
    const limit = o.memoryLimit ?? deployedMemoryLimit();
    const name = `joinguard-bench-${process.pid}-${o.label ?? 'joinguard'}`;
    const made = limit ? MemoryCgroup.create(name, quantityBytes(limit)) : { why: 'none asked' };
    const cpu = o.cpuLimit ? CpuCgroup.create(name, millicores(o.cpuLimit)) : { why: 'none asked' };
    const procs = [made.cgroup?.procsFile, cpu.cgroup?.procsFile].filter((f): f is string => f !== undefined);
    const run = (command: string, args: string[]) => enterCgroups(procs, command, args);
    const proc = ManagedProcess.start({
      name: o.label ?? 'joinguard',
      ...run(process.execPath, [
        ...setting.flags,
        compiled('cmd/joinguard.ts'),
        `--kubeconfig=${o.kubeconfig}`,
        '--leader-elect=true',
        // Plain HTTP, as the bench serves CAPI's: the scrapes then cost no TokenReview or SubjectAccessReview.
        `--diagnostics-address=127.0.0.1:${metricsPort}`,
        '--insecure-diagnostics=true',
        `--health-addr=127.0.0.1:${healthPort}`,
        `--webhook-port=${webhookPort}`,
        `--webhook-cert-dir=${o.webhookCertDir}`,
        ...(o.extraFlags ?? []),
      ]),
      env: {
        ...inherited,
        ...setting.env,
        NODE_ENV: 'production',
        NODE_OPTIONS: '',
        POD_NAMESPACE: JOINGUARD_LEASE_NAMESPACE,
      },
      logFile: o.logFile,
    });
    if (o.pgidFile) fs.appendFileSync(o.pgidFile, `${proc.pid}\n`);
    const p = new JoinGuardProcess(proc, metricsPort, healthPort, o.label);
    p.cgroup = made.cgroup;
    p.cpuCgroup = cpu.cgroup;
    p.memoryLimit = made.cgroup ? limit : `none (${made.why})`;
    p.cpuLimit = cpu.cgroup ? o.cpuLimit! : `none (${cpu.why})`;
    return p;
  }

  /** Polls /readyz (caches synced) every 100 ms: readyAt is within 100 ms of the truth. */
  async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await httpGet(`${this.healthUrl}/readyz`, 1000)).status !== 200) {
      if (!this.proc.running)
        throw new Error(`JoinGuard ${this.proc.describeExit()}:\n${tailFile(this.proc.logFile, 30)}`);
      if (Date.now() > deadline)
        throw new Error(`JoinGuard not ready after ${timeoutMs} ms:\n${tailFile(this.proc.logFile, 30)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    this.readyAt = Date.now();
  }

  metrics(): Promise<Sample[] | undefined> {
    return scrape(this.metricsUrl);
  }

  /** Whether it holds the Lease now (leader_election_master_status), undefined when it does not answer. */
  async isLeader(): Promise<boolean | undefined> {
    const m = await scrape(this.metricsUrl, 2000);
    return m && m.some((x) => x.name === 'leader_election_master_status' && x.value === 1);
  }

  /** SIGKILL, as a node lost or an OOM kill ends a pod: no Lease handed back. */
  async kill(): Promise<void> {
    this.sampler.take();
    this.proc.killNow();
    await this.proc.exited;
    await this.stop();
  }

  /** SIGTERM (JoinGuard hands its Lease back), SIGKILL after 10 s. The last sample is taken while it runs. */
  async stop(): Promise<void> {
    this.sampler.take();
    this.sampler.stop();
    await this.proc.stop(10_000);
    const peak = this.cgroup?.peakBytes();
    if (peak !== undefined) this.memoryPeakMiB = Math.round((peak / 2 ** 20) * 10) / 10;
    this.throttling = this.cpuCgroup?.throttling() ?? this.throttling;
    this.cgroup?.remove();
    this.cpuCgroup?.remove();
    untrack(this.tracked);
  }

  /** Log lines written (at the default verbosity, as deployed). */
  logLines(): number {
    try {
      return fs
        .readFileSync(this.proc.logFile, 'utf8')
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('# ')).length;
    } catch {
      return 0;
    }
  }
}
