// What the fault specs share: a fault proxy in front of the test apiserver, JoinGuard started behind it,
// its /readyz sampled and judged against what the proxy saw, Machine writes found in the proxy's record,
// MachineDeployments scaled, and the figures printed (test-only).
import fs from 'node:fs';
import http from 'node:http';
import { KubeConfig } from '@kubernetes/client-node';
import type { Kube } from '../sim/kube.js';
import { FaultProxy, upstreamFromKubeconfig, type ProxiedRequest } from '../support/fault-proxy.js';
import type { TestEnv } from '../support/testenv.js';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));
export const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/** A fault proxy in front of the test apiserver, as its admin (or the identity of `kubeconfigYaml`). */
export async function startProxy(env: TestEnv, kubeconfigYaml?: string): Promise<FaultProxy> {
  return FaultProxy.start(upstreamFromKubeconfig(kubeconfigYaml ?? fs.readFileSync(env.kubeconfigPath, 'utf8')));
}

/** A client-node KubeConfig whose server is the proxy (what startController takes today). */
export function kubeConfigOf(proxy: FaultProxy): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(proxy.kubeconfigYaml());
  return kc;
}

/** Prints one figure line of a spec (collected for the report from the test output). */
export function figure(spec: string, text: string): void {
  process.stderr.write(`[faults ${spec}] ${text}\n`);
}

export async function scaleDeployment(kube: Kube, namespace: string, name: string, replicas: number): Promise<void> {
  await kube.mergePatch(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/machinedeployments/${name}`, { spec: { replicas } });
}

/** Successful writes (not GETs) the proxied client made to one Machine or its status, oldest first. */
export function machineWrites(proxy: FaultProxy, namespace: string, name: string): ProxiedRequest[] {
  const path = new RegExp(`/namespaces/${namespace}/machines/${name}(/status)?$`);
  return proxy.find({ method: /^(PUT|PATCH|POST|DELETE)$/, path }).filter((r) => r.code >= 200 && r.code < 300);
}

export interface ReadyzSample {
  at: number;
  code: number;
  /** The longest any watched path had been without evidence of a current view (proxy's watchEvidence). */
  staleMs: number;
  stalePath: string;
}

/**
 * Polls JoinGuard's /readyz and, at each poll, how long each of its watched paths has gone without
 * evidence (watch bytes delivered, or a list answered) according to the proxy in front of it.
 */
export class ReadyzSampler {
  readonly samples: ReadyzSample[] = [];
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly port: number, private readonly proxy: FaultProxy, private readonly intervalMs = 250) {}

  start(): this {
    const tick = async () => {
      if (this.stopped) return;
      const code = await readyz(this.port);
      const at = Date.now();
      let staleMs = 0;
      let stalePath = '';
      for (const [path, t] of this.proxy.watchEvidence()) {
        if (at - t > staleMs) {
          staleMs = at - t;
          stalePath = path;
        }
      }
      this.samples.push({ at, code, staleMs, stalePath });
      this.timer = setTimeout(() => void tick(), this.intervalMs);
    };
    void tick();
    return this;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Samples that said ready while some watch had been without evidence longer than the bound. */
  readyWhileBlind(boundMs: number, from = 0, to = Infinity): ReadyzSample[] {
    return this.samples.filter((s) => s.at >= from && s.at <= to && s.code === 200 && s.staleMs > boundMs);
  }

  notReady(from = 0, to = Infinity): ReadyzSample[] {
    return this.samples.filter((s) => s.at >= from && s.at <= to && s.code !== 200);
  }

  describe(from = 0, to = Infinity): string {
    const inWindow = this.samples.filter((s) => s.at >= from && s.at <= to);
    const codes = new Map<number, number>();
    for (const s of inWindow) codes.set(s.code, (codes.get(s.code) ?? 0) + 1);
    const worst = inWindow.reduce((a, s) => (s.staleMs > a.staleMs ? s : a), { staleMs: 0, stalePath: '-', at: 0, code: 0 });
    return `/readyz samples: ${[...codes].map(([c, n]) => `${c || 'no answer'}×${n}`).join(', ') || 'none'}; ` +
      `longest without watch evidence ${secs(worst.staleMs)} (${worst.stalePath}, /readyz said ${worst.code || 'nothing'})`;
  }
}

function readyz(port: number): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/readyz', timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

/** One line about the proxied client's list/watch traffic since `since`: what a blind informer would not do. */
export function describeTraffic(proxy: FaultProxy, since: number): string {
  const reqs = proxy.find({ since, method: 'GET' });
  const watches = reqs.filter((r) => r.watch);
  const lists = reqs.filter((r) => !r.watch && proxy.watchEvidence().has(r.path));
  const last = (rs: ProxiedRequest[]) => (rs.length ? `last ${secs(Date.now() - rs.at(-1)!.at)} ago` : 'none');
  return `JoinGuard since then: ${lists.length} lists (${last(lists)}), ${watches.length} watches opened (${last(watches)})`;
}
