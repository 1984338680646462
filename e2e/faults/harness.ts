// What the fault specs share: a fault proxy in front of the test apiserver, JoinGuard started behind it,
// its /readyz sampled and judged against what the proxy saw, Machine writes found in the proxy's record,
// MachineDeployments scaled, and the figures printed (test-only).
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { clusterAccessFromKubeconfig, type ClusterAccess } from '../../runtime/client/kubeconfig.js';
import type { KubeClient as Kube } from '../../hack/testenv/kube-client.js';
import { FaultProxy, upstreamFromKubeconfig, type ProxiedRequest } from '../support/fault-proxy.js';
import { useScenario, type Scenario, type ScenarioOptions } from '../support/scenario.js';
import type { TestEnv } from '../support/testenv.js';
import { MachineHistory } from './machine-history.js';
import type { ControllerOptions } from '../../controllers/options.js';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));
export const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;

/** A fault proxy in front of the test apiserver, as its admin (or the identity of `kubeconfigYaml`). */
export async function startProxy(env: TestEnv, kubeconfigYaml?: string): Promise<FaultProxy> {
  return FaultProxy.start(upstreamFromKubeconfig(kubeconfigYaml ?? fs.readFileSync(env.kubeconfigPath, 'utf8')));
}

/** JoinGuard's access to the apiserver through the proxy. */
export function accessThrough(proxy: FaultProxy): ClusterAccess {
  return clusterAccessFromKubeconfig(proxy.kubeconfigYaml());
}

export interface FaultScenario {
  s: Scenario;
  proxy?: FaultProxy;
  history?: MachineHistory;
  /** What a failing wait prints: the scenario's account and JoinGuard's traffic through the proxy. */
  seen: () => Promise<string>;
  /** JoinGuard in this process behind a new fault proxy (the previous one, if any, stopped first). */
  startBehindProxy(extra?: Partial<ControllerOptions>): Promise<FaultProxy>;
  /** Starts recording every change to the namespace's Machines. */
  recordMachines(): Promise<MachineHistory>;
  /** Stops JoinGuard, its proxy and the recording (also done after each test). */
  stopAll(): Promise<void>;
}

/** useScenario plus a fault proxy in front of JoinGuard and a Machine recording, all stopped after each test. */
export function useFaultScenario(o: ScenarioOptions): FaultScenario {
  const f: FaultScenario = {
    s: useScenario(o),
    seen: () => f.s.seen(() => (f.proxy ? `${describeTraffic(f.proxy, 0)}\n` : ''))(),
    async startBehindProxy(extra = {}) {
      await f.s.jg?.controller.stop();
      await f.proxy?.stop();
      f.proxy = await startProxy(f.s.env);
      await f.s.startJoinGuard({ access: accessThrough(f.proxy), ...extra });
      return f.proxy;
    },
    async recordMachines() {
      f.history = await MachineHistory.start(f.s.kube, f.s.namespace);
      return f.history;
    },
    async stopAll() {
      await f.s.jg?.controller.stop();
      await f.proxy?.stop();
      await f.history?.stop();
      f.proxy = undefined;
      f.history = undefined;
    },
  };
  afterEach(async function () {
    this.timeout(60_000);
    await f.stopAll();
  });
  return f;
}

/** Prints one figure line of a spec (collected for the report from the test output). */
export function figure(spec: string, text: string): void {
  process.stderr.write(`[faults ${spec}] ${text}\n`);
}

export async function scaleDeployment(kube: Kube, namespace: string, name: string, replicas: number): Promise<void> {
  await kube.mergePatch(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/machinedeployments/${name}`, {
    spec: { replicas },
  });
}

/** Successful writes (not GETs) the proxied client made to one Machine or its status, oldest first. */
export function machineWrites(proxy: FaultProxy, namespace: string, name: string): ProxiedRequest[] {
  const path = new RegExp(`/namespaces/${namespace}/machines/${name}(/status)?$`);
  return proxy.find({ method: /^(PUT|PATCH|POST|DELETE)$/, path }).filter((r) => r.code >= 200 && r.code < 300);
}

export interface ReadyzSample {
  at: number;
  code: number;
  /** The body of a failing answer (what JoinGuard says is not ready). */
  why?: string;
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

  constructor(
    private readonly port: number,
    private readonly proxy: FaultProxy,
    private readonly intervalMs = 250,
  ) {}

  start(): this {
    const tick = async () => {
      if (this.stopped) return;
      const { code, why } = await readyz(this.port);
      const at = Date.now();
      let staleMs = 0;
      let stalePath = '';
      for (const [path, t] of this.proxy.watchEvidence()) {
        if (at - t > staleMs) {
          staleMs = at - t;
          stalePath = path;
        }
      }
      this.samples.push({ at, code, staleMs, stalePath, ...(code !== 200 && why ? { why } : {}) });
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
    const worst = inWindow.reduce((a, s) => (s.staleMs > a.staleMs ? s : a), {
      staleMs: 0,
      stalePath: '-',
      at: 0,
      code: 0,
    });
    const lastWhy = inWindow.findLast((s) => s.why)?.why;
    return (
      `/readyz samples: ${[...codes].map(([c, n]) => `${c || 'no answer'}×${n}`).join(', ') || 'none'}; ` +
      `longest without watch evidence ${secs(worst.staleMs)} (${worst.stalePath}, /readyz said ${worst.code || 'nothing'})` +
      (lastWhy ? `; last reason given: ${lastWhy}` : '')
    );
  }
}

function readyz(port: number): Promise<{ code: number; why: string }> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/readyz', timeout: 1000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, why: body.trim().slice(0, 300) }));
      res.on('error', () => resolve({ code: res.statusCode ?? 0, why: body }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve({ code: 0, why: '' }));
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

/**
 * Polls the apiserver (GET /api as the test admin, every 200 ms) to time an outage as clients see it: from
 * the first request it did not answer to the first it answered again.
 */
export class ApiserverAvailability {
  readonly samples: { at: number; ok: boolean }[] = [];
  private readonly agent: https.Agent;
  private readonly server: URL;
  private timer?: NodeJS.Timeout;

  constructor(env: TestEnv) {
    const up = upstreamFromKubeconfig(fs.readFileSync(env.kubeconfigPath, 'utf8'));
    this.server = new URL(up.server);
    this.agent = new https.Agent({ ca: up.ca, cert: up.cert, key: up.key, keepAlive: false });
  }

  start(): this {
    const tick = () => {
      const at = Date.now();
      const req = https.get(
        { host: this.server.hostname, port: this.server.port, path: '/api', agent: this.agent, timeout: 1000 },
        (res) => {
          res.resume();
          this.samples.push({ at, ok: res.statusCode === 200 });
          this.timer = setTimeout(tick, 200);
        },
      );
      req.on('timeout', () => req.destroy());
      req.on('error', () => {
        this.samples.push({ at, ok: false });
        this.timer = setTimeout(tick, 200);
      });
    };
    tick();
    return this;
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.agent.destroy();
  }

  /** The first outage seen: first unanswered request, first answered one after it. */
  outage(): { downAt?: number; backAt?: number } {
    const down = this.samples.findIndex((x) => !x.ok);
    if (down < 0) return {};
    const back = this.samples.slice(down).find((x) => x.ok);
    return { downAt: this.samples[down]!.at, ...(back ? { backAt: back.at } : {}) };
  }
}

/**
 * Keeps every watch JoinGuard holds in a namespace busy: an annotation patched on one object of each kind it
 * watches (the check, the Cluster, a Machine, the KubeadmControlPlane, its KubeadmConfigs and a
 * MachineHealthCheck that selects nothing) every intervalMs. The apiserver sends a bookmark about once a
 * minute; with the specs' liveness bound of seconds a quiet but healthy watch would look dead, so the
 * heartbeat makes "silent past the bound" mean what it means in production: a dead stream.
 */
export class Heartbeat {
  private timer?: NodeJS.Timeout;
  private beats = 0;

  private constructor(
    private readonly kube: Kube,
    private readonly paths: string[],
    private readonly intervalMs: number,
  ) {}

  static async start(
    kube: Kube,
    namespace: string,
    cluster: string,
    check: string,
    intervalMs = 3_000,
  ): Promise<Heartbeat> {
    const capi = `/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}`;
    const mhc = `${capi}/machinehealthchecks`;
    if (!(await kube.get(`${mhc}/faults-heartbeat`))) {
      await kube.create(mhc, {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'MachineHealthCheck',
        metadata: { name: 'faults-heartbeat', namespace },
        spec: { clusterName: cluster, selector: { matchLabels: { 'faults.joinguard.io/selects': 'nothing' } } },
      });
    }
    const first = async (path: string, selector?: string) =>
      (await kube.list(path, selector)).items[0]?.metadata?.name as string | undefined;
    const kcp = await first(`/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/${namespace}/kubeadmcontrolplanes`);
    const config = await first(
      `/apis/bootstrap.cluster.x-k8s.io/v1beta2/namespaces/${namespace}/kubeadmconfigs`,
      'cluster.x-k8s.io/control-plane',
    );
    const machine = await first(`${capi}/machines`, 'cluster.x-k8s.io/control-plane');
    const paths = [
      `/apis/joinguard.io/v1alpha1/namespaces/${namespace}/machinejoinchecks/${check}`,
      `${capi}/clusters/${cluster}`,
      `${mhc}/faults-heartbeat`,
      ...(kcp
        ? [`/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/${namespace}/kubeadmcontrolplanes/${kcp}`]
        : []),
      ...(config ? [`/apis/bootstrap.cluster.x-k8s.io/v1beta2/namespaces/${namespace}/kubeadmconfigs/${config}`] : []),
      ...(machine ? [`${capi}/machines/${machine}`] : []),
    ];
    const h = new Heartbeat(kube, paths, intervalMs);
    h.tick();
    return h;
  }

  private tick(): void {
    const beat = String(++this.beats);
    // An apiserver that is down misses a beat; the next one tries again.
    void Promise.allSettled(
      this.paths.map((p) =>
        this.kube.mergePatch(p, { metadata: { annotations: { 'faults.joinguard.io/heartbeat': beat } } }),
      ),
    ).then(() => {
      if (this.beats > 0) this.timer = setTimeout(() => this.tick(), this.intervalMs);
    });
  }

  stop(): void {
    this.beats = -Infinity;
    clearTimeout(this.timer);
  }
}
