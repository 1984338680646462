// A ClusterClass of the simulation and Clusters made from it (test-only), in the API version of the release under
// test (v1beta2 `templateRef`s and `healthCheck`; v1beta1 `ref`s, `template` and `machineHealthCheck` on v1.10).
// CAPI's topology controller (ClusterTopology on, hack/testenv MANAGER_FEATURE_GATES) clones the templates into a
// SimCluster, a real KubeadmControlPlane, MachineDeployments and the MachineHealthChecks the class defines; the
// sim then runs their Machines like any others. Upgrades are `spec.topology.version` changes.
import { isConflict, type Json, type KubeClient } from '../../hack/testenv/kube-client.js';
import { capiApi, type CapiApiVersion } from './capi-api.js';
import { BOOTSTRAP_GROUP, INFRA_GROUP, SIM_VERSION } from './crds.js';
import { collectionOf, DEFAULT_K8S_VERSION, KCP_KUBEADM_CONFIG_SPEC } from './topology.js';

export const WORKER_CLASS = 'default-worker';

export interface ClassShape {
  namespace: string;
  /** The ClusterClass's name (its templates are named after it). */
  name: string;
  /** The MachineHealthChecks the class defines; nodeStartupTimeout is written explicitly (CAPI's default, 10m). */
  healthChecks?: { nodeStartupTimeoutSeconds?: number };
  /** KCP remediation in v1beta2 terms (the KubeadmControlPlaneTemplate's). */
  kcpRemediation?: { maxRetry?: number; retryPeriodSeconds?: number; minHealthyPeriodSeconds?: number };
  apiVersion?: CapiApiVersion;
}

export interface ClassClusterShape {
  namespace: string;
  name: string;
  className: string;
  version?: string;
  controlPlaneReplicas: number;
  /** One MachineDeployment topology per entry, of class WORKER_CLASS. */
  workers: { name: string; replicas: number }[];
  /** The test control plane's CA (TestEnv.caCertPem / caKeyPem). */
  ca: { certPem: string; keyPem: string };
  apiVersion?: CapiApiVersion;
}

const UNHEALTHY_NODE = [
  { type: 'Ready', status: 'Unknown', timeoutSeconds: 300 },
  { type: 'Ready', status: 'False', timeoutSeconds: 300 },
];

/** The templates and the ClusterClass, in creation order. */
export function classObjects(c: ClassShape): Json[] {
  const v = c.apiVersion ?? 'v1beta2';
  const capi = capiApi(v);
  const ns = c.namespace;
  const startup = c.healthChecks?.nodeStartupTimeoutSeconds ?? 600;
  const names = {
    infra: `${c.name}-cluster`,
    cp: `${c.name}-control-plane`,
    cpMachine: `${c.name}-control-plane-machine`,
    worker: `${c.name}-worker-machine`,
    bootstrap: `${c.name}-worker-bootstrap`,
  };
  const tpl = (group: string, version: string, kind: string, name: string) =>
    v === 'v1beta2'
      ? { templateRef: { apiVersion: `${group}/${version}`, kind, name } }
      : { ref: { apiVersion: `${group}/${version}`, kind, name } };
  const kcpGroup = 'controlplane.cluster.x-k8s.io';
  const remediation =
    c.kcpRemediation === undefined
      ? {}
      : v === 'v1beta2'
        ? { remediation: c.kcpRemediation }
        : {
            remediationStrategy: Object.fromEntries(
              Object.entries({
                maxRetry: c.kcpRemediation.maxRetry,
                retryPeriod: secs(c.kcpRemediation.retryPeriodSeconds),
                minHealthyPeriod: secs(c.kcpRemediation.minHealthyPeriodSeconds),
              }).filter(([, x]) => x !== undefined),
            ),
          };
  const healthCheck =
    v === 'v1beta2'
      ? { healthCheck: { checks: { nodeStartupTimeoutSeconds: startup, unhealthyNodeConditions: UNHEALTHY_NODE } } }
      : {
          machineHealthCheck: {
            nodeStartupTimeout: `${startup}s`,
            unhealthyConditions: UNHEALTHY_NODE.map((u) => ({
              type: u.type,
              status: u.status,
              timeout: `${u.timeoutSeconds}s`,
            })),
          },
        };
  return [
    {
      apiVersion: `${INFRA_GROUP}/${SIM_VERSION}`,
      kind: 'SimClusterTemplate',
      metadata: { name: names.infra, namespace: ns },
      spec: { template: { spec: {} } },
    },
    {
      apiVersion: `${INFRA_GROUP}/${SIM_VERSION}`,
      kind: 'SimMachineTemplate',
      metadata: { name: names.cpMachine, namespace: ns },
      spec: { template: { spec: {} } },
    },
    {
      apiVersion: `${INFRA_GROUP}/${SIM_VERSION}`,
      kind: 'SimMachineTemplate',
      metadata: { name: names.worker, namespace: ns },
      spec: { template: { spec: {} } },
    },
    {
      apiVersion: `${BOOTSTRAP_GROUP}/${SIM_VERSION}`,
      kind: 'SimBootstrapConfigTemplate',
      metadata: { name: names.bootstrap, namespace: ns },
      spec: { template: { spec: {} } },
    },
    {
      apiVersion: `${kcpGroup}/${v}`,
      kind: 'KubeadmControlPlaneTemplate',
      metadata: { name: names.cp, namespace: ns },
      spec: { template: { spec: { kubeadmConfigSpec: KCP_KUBEADM_CONFIG_SPEC, ...remediation } } },
    },
    {
      apiVersion: capi.apiVersionOf('Cluster'),
      kind: 'ClusterClass',
      metadata: { name: c.name, namespace: ns },
      spec: {
        infrastructure: tpl(INFRA_GROUP, SIM_VERSION, 'SimClusterTemplate', names.infra),
        controlPlane: {
          ...tpl(kcpGroup, v, 'KubeadmControlPlaneTemplate', names.cp),
          machineInfrastructure: tpl(INFRA_GROUP, SIM_VERSION, 'SimMachineTemplate', names.cpMachine),
          ...healthCheck,
        },
        workers: {
          machineDeployments: [
            {
              class: WORKER_CLASS,
              ...(v === 'v1beta2'
                ? {
                    bootstrap: tpl(BOOTSTRAP_GROUP, SIM_VERSION, 'SimBootstrapConfigTemplate', names.bootstrap),
                    infrastructure: tpl(INFRA_GROUP, SIM_VERSION, 'SimMachineTemplate', names.worker),
                  }
                : {
                    template: {
                      bootstrap: tpl(BOOTSTRAP_GROUP, SIM_VERSION, 'SimBootstrapConfigTemplate', names.bootstrap),
                      infrastructure: tpl(INFRA_GROUP, SIM_VERSION, 'SimMachineTemplate', names.worker),
                    },
                  }),
              ...healthCheck,
            },
          ],
        },
      },
    },
  ];
}

function secs(n: number | undefined): string | undefined {
  return n === undefined ? undefined : `${n}s`;
}

/** The Cluster of a topology, with its CA secret (so that the kubeconfig KCP makes reaches the test apiserver). */
export function classClusterObjects(s: ClassClusterShape): Json[] {
  const v = s.apiVersion ?? 'v1beta2';
  const capi = capiApi(v);
  const cn = { 'cluster.x-k8s.io/cluster-name': s.name };
  return [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'cluster.x-k8s.io/secret',
      metadata: { name: `${s.name}-ca`, namespace: s.namespace, labels: cn },
      stringData: { 'tls.crt': s.ca.certPem, 'tls.key': s.ca.keyPem },
    },
    {
      apiVersion: capi.apiVersionOf('Cluster'),
      kind: 'Cluster',
      metadata: { name: s.name, namespace: s.namespace },
      spec: {
        clusterNetwork: {
          services: { cidrBlocks: ['10.128.0.0/12'] },
          pods: { cidrBlocks: ['192.168.0.0/16'] },
          serviceDomain: 'cluster.local',
        },
        topology: {
          ...(v === 'v1beta2' ? { classRef: { name: s.className } } : { class: s.className }),
          version: s.version ?? DEFAULT_K8S_VERSION,
          controlPlane: { replicas: s.controlPlaneReplicas },
          workers: {
            machineDeployments: s.workers.map((w) => ({ class: WORKER_CLASS, name: w.name, replicas: w.replicas })),
          },
        },
      },
    },
  ];
}

async function createAll(kube: KubeClient, objects: Json[]): Promise<void> {
  for (const o of objects) {
    try {
      await kube.create(collectionOf(o), o);
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
}

export const createClusterClass = (kube: KubeClient, c: ClassShape) => createAll(kube, classObjects(c));
export const createClassCluster = (kube: KubeClient, s: ClassClusterShape) => createAll(kube, classClusterObjects(s));

/** Changes the topology as an operator does: the version (an upgrade) and/or the control-plane replicas. */
export async function changeTopology(
  kube: KubeClient,
  o: { namespace: string; name: string; apiVersion?: CapiApiVersion; version?: string; controlPlaneReplicas?: number },
): Promise<void> {
  const capi = capiApi(o.apiVersion ?? 'v1beta2');
  await kube.mergePatch(capi.path('Cluster', o.namespace, o.name), {
    spec: {
      topology: {
        ...(o.version ? { version: o.version } : {}),
        ...(o.controlPlaneReplicas !== undefined ? { controlPlane: { replicas: o.controlPlaneReplicas } } : {}),
      },
    },
  });
}
