// The fixture every JoinGuard scenario shares: the test control plane, the shared simulation, the
// JoinGuard CRD, a namespace of its own with one simulated cluster, and what a failing wait prints (the
// Machines, the check, JoinGuard's last log lines). Call useScenario() inside a describe(): it registers
// the before/after hooks and returns the context they fill in.
import type { MachineJoinCheck } from '../../api/v1alpha1/types.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { capiApi, type CapiApi } from '../sim/capi-api.js';
import type { Sim } from '../sim/sim.js';
import { createClassCluster, createClusterClass, type ClassShape } from '../sim/cluster-class.js';
import { createCluster, type ClusterShape, type WorkerPool } from '../sim/topology.js';
import { deleteClusters, describeMachines, hasNode, isControlPlane, listMachines, waitFor } from './cluster-view.js';
import { describeCheck, getCheck, installJoinGuardCrd, startJoinGuard, type CapturedLog } from './joinguard.js';
import { getSim } from './shared-sim.js';
import { getTestEnv, type TestEnv } from './testenv.js';
import type { ControllerOptions, RunningController } from '../../controllers/options.js';

export interface ScenarioOptions {
  /** Namespace prefix; the pid is appended so parallel runs never meet. */
  prefix: string;
  cluster: string;
  /** The check the scenario is about (for failure messages). */
  checkName: string;
  workers: WorkerPool[];
  /** Create the cluster in before() (default true); false leaves it to the test (after setting sim rules). */
  createClusterFirst?: boolean;
  /** Wait in before() until every Machine joined (default false). */
  waitJoined?: boolean;
  /** More of the cluster's shape: control-plane replicas (default 1), KCP remediation, Kubernetes version. */
  shape?: Pick<ClusterShape, 'controlPlaneReplicas' | 'kcpRemediation' | 'version'>;
  /**
   * Make the cluster from a ClusterClass `<cluster>-class` (e2e/sim/cluster-class.ts, with the MachineHealthChecks
   * it defines) instead of by hand; `workers` is then ignored.
   */
  topology?: {
    controlPlaneReplicas: number;
    workers: { name: string; replicas: number }[];
    kcpRemediation?: ClassShape['kcpRemediation'];
  };
}

export interface Scenario {
  env: TestEnv;
  kube: KubeClient;
  /** The CAPI API of the release under test (paths, conditions, contract). */
  capi: CapiApi;
  sim: Sim;
  namespace: string;
  cluster: string;
  /** JoinGuard in this process, if startJoinGuard() was called. */
  jg?: { controller: RunningController; log: CapturedLog };
  /** Creates the namespace's cluster (when createClusterFirst was false). */
  createCluster(): Promise<void>;
  startJoinGuard(extra?: Partial<ControllerOptions>): Promise<void>;
  check(): Promise<MachineJoinCheck>;
  machines(): Promise<Json[]>;
  workers(): Promise<Json[]>;
  /** What a failing wait prints. `extra` adds lines (e.g. a child process's output). */
  seen(extra?: () => string): () => Promise<string>;
}

export function useScenario(o: ScenarioOptions): Scenario {
  const namespace = `${o.prefix}-${process.pid}`;
  const s = { namespace, cluster: o.cluster } as Scenario;
  s.createCluster = async () => {
    const ca = { certPem: s.env.caCertPem, keyPem: s.env.caKeyPem };
    const t = o.topology;
    if (t === undefined)
      return createCluster(s.kube, {
        ...o.shape,
        namespace,
        name: o.cluster,
        workers: o.workers,
        ca,
        apiVersion: s.capi.version,
      });
    const className = `${o.cluster}-class`;
    await createClusterClass(s.kube, {
      namespace,
      name: className,
      apiVersion: s.capi.version,
      ...(t.kcpRemediation ? { kcpRemediation: t.kcpRemediation } : {}),
    });
    await createClassCluster(s.kube, {
      namespace,
      name: o.cluster,
      className,
      controlPlaneReplicas: t.controlPlaneReplicas,
      workers: t.workers,
      ca,
      apiVersion: s.capi.version,
    });
  };
  s.startJoinGuard = async (extra = {}) => {
    s.jg = await startJoinGuard(s.env.kubeConfig(), namespace, extra);
  };
  s.check = () => getCheck(s.kube, namespace, o.checkName);
  s.machines = () => listMachines(s.kube, s.capi, namespace, o.cluster);
  s.workers = async () => (await s.machines()).filter((m) => !isControlPlane(m));
  s.seen = (extra) => async () =>
    `${describeMachines(await s.machines())}\n` +
    `${describeCheck(await s.check().catch(() => ({ metadata: { name: o.checkName } }) as MachineJoinCheck))}\n` +
    `${s.jg ? `JoinGuard log:\n${s.jg.log.tail(15)}\n` : ''}${extra ? extra() : ''}` +
    `sim events:\n${s.sim
      .eventsOf(namespace)
      .slice(-15)
      .map((e) => `  ${new Date(e.time).toISOString().slice(11, 23)} ${e.type} ${e.name}: ${e.message}`)
      .join('\n')}\n` +
    `sim errors: ${s.sim.errors.slice(-3).join(' | ') || 'none'}`;

  before(async function () {
    this.timeout(300_000);
    s.env = await getTestEnv();
    s.kube = s.env.kube();
    s.capi = capiApi(s.env.capiApiVersion);
    s.sim = await getSim();
    await installJoinGuardCrd(s.kube);
    await s.kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    if (o.createClusterFirst === false) return;
    await s.createCluster();
    if (!o.waitJoined) return;
    const expected = o.topology
      ? o.topology.controlPlaneReplicas + o.topology.workers.reduce((n, w) => n + w.replicas, 0)
      : (o.shape?.controlPlaneReplicas ?? 1) + o.workers.reduce((n, w) => n + w.replicas, 0);
    await waitFor(
      `the cluster up with ${expected} joined Machines`,
      async () => {
        const ms = await s.machines();
        return ms.length === expected && ms.every(hasNode);
      },
      { timeoutMs: 150_000, describe: s.seen() },
    );
  });

  after(async function () {
    this.timeout(60_000);
    await s.jg?.controller.stop();
    if (s.kube) await deleteClusters(s.kube, s.capi, namespace);
    s.kube?.close();
  });

  return s;
}
