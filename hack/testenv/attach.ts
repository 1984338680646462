// A TestEnv for a control plane that runs already (started by `npm run testenv -- up`), found from its
// kubeconfig: startTestEnv writes a descriptor next to the kubeconfig in the run dir.
import fs from 'node:fs';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient } from './kube-client.js';
import { pauseGroup, pidAlive, tailFile } from './process.js';
import type { TestEnv, TestEnvComponent } from './env-interface.js';
import type { CapiRelease } from './capi-releases.js';

export const DESCRIPTOR_FILE = 'testenv.json';

/** What startTestEnv writes to <runDir>/testenv.json once the env is ready. */
export interface TestEnvDescriptor {
  server: string;
  kubeconfigPath: string;
  runDir: string;
  caCertFile: string;
  caKeyFile: string;
  components: string[];
  ports: Record<string, number>;
  pids: Record<string, number>;
  healthUrls: Record<string, string>;
  /** Folder of the binaries and crds/. */
  binDir: string;
  capiRelease: CapiRelease;
  capiVersion: string;
  capiApiVersion: 'v1beta2' | 'v1beta1';
  /** The process that started the env (the CLI's supervisor, or a test run). */
  ownerPid: number;
}

function memoryOfPid(pid: number): { rssKiB: number; hwmKiB: number } {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
    return { rssKiB: field('VmRSS'), hwmKiB: field('VmHWM') };
  } catch {
    return { rssKiB: 0, hwmKiB: 0 };
  }
}

/** The TestEnv view of a descriptor; stop() does nothing (whoever started the env stops it). */
export function attachedTestEnv(d: TestEnvDescriptor, caCertPem: string, caKeyPem: string): TestEnv {
  return {
    server: d.server,
    kubeconfigPath: d.kubeconfigPath,
    runDir: d.runDir,
    caCertPem,
    caKeyPem,
    caCertFile: d.caCertFile,
    caKeyFile: d.caKeyFile,
    components: [...d.components],
    ports: { ...d.ports },
    pids: { ...d.pids },
    healthUrls: { ...d.healthUrls },
    binDir: d.binDir,
    capiRelease: d.capiRelease,
    capiVersion: d.capiVersion,
    capiApiVersion: d.capiApiVersion,
    owned: false,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromFile(d.kubeconfigPath);
      return kc;
    },
    kube: () => KubeClient.fromKubeconfigFile(d.kubeconfigPath),
    logTail(component: string, lines = 40) {
      return tailFile(path.join(d.runDir, `${component}.log`), lines);
    },
    memory() {
      const byComponent: Record<string, { rssKiB: number; hwmKiB: number }> = {};
      let rssKiB = 0;
      let hwmKiB = 0;
      for (const [name, pid] of Object.entries(d.pids)) {
        const m = memoryOfPid(pid);
        byComponent[name] = m;
        rssKiB += m.rssKiB;
        hwmKiB += m.hwmKiB;
      }
      return { rssKiB, hwmKiB, byComponent };
    },
    async stop() {
      // Not ours to stop.
    },
    async restartApiserver() {
      throw new Error(
        'restartApiserver: this env was started by another process (attached); it cannot restart its apiserver',
      );
    },
    async upgradeCapi() {
      throw new Error(
        'upgradeCapi: this env was started by another process (attached); it cannot replace its managers',
      );
    },
    pause: (component: TestEnvComponent) => pauseGroup(pidOf(d, component), 'SIGSTOP'),
    resume: (component: TestEnvComponent) => pauseGroup(pidOf(d, component), 'SIGCONT'),
  };
}

function pidOf(d: TestEnvDescriptor, component: string): number {
  const pid = d.pids[component];
  if (!pid) throw new Error(`no component ${component} in this test env (${Object.keys(d.pids).join(', ')})`);
  return pid;
}

export function readDescriptor(runDir: string): TestEnvDescriptor | undefined {
  try {
    return JSON.parse(fs.readFileSync(path.join(runDir, DESCRIPTOR_FILE), 'utf8')) as TestEnvDescriptor;
  } catch {
    return undefined;
  }
}

/** Components of a descriptor whose process is gone. */
export function deadComponents(d: TestEnvDescriptor): string[] {
  return Object.entries(d.pids)
    .filter(([, pid]) => !pidAlive(pid))
    .map(([name]) => name);
}

/** Attaches to the env whose kubeconfig (written by startTestEnv) is at kubeconfigPath. */
export function attachTestEnv(kubeconfigPath: string): TestEnv {
  const runDir = path.dirname(path.resolve(kubeconfigPath));
  const d = readDescriptor(runDir);
  if (!d) {
    throw new Error(
      `${kubeconfigPath}: no ${DESCRIPTOR_FILE} beside it; point JOINGUARD_TESTENV_KUBECONFIG at the kubeconfig ` +
        'printed by `npm run testenv -- up`',
    );
  }
  const dead = deadComponents(d);
  if (dead.length)
    throw new Error(`test env at ${runDir} is not running (${dead.join(', ')} gone); run \`npm run testenv -- up\``);
  return attachedTestEnv(d, fs.readFileSync(d.caCertFile, 'utf8'), fs.readFileSync(d.caKeyFile, 'utf8'));
}
