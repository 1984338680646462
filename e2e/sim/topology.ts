// The objects of one simulated workload cluster (test-only): a Cluster on a SimCluster, a real
// KubeadmControlPlane whose Machines run on SimMachines, and MachineDeployments of workers bootstrapped
// by SimBootstrapConfigs, written in the CAPI API version of the release under test (v1beta2, or v1beta1 for
// v1.10: refs with apiVersion, KCP `remediationStrategy`, MachineDeployment `strategy.remediation`). The
// cluster CA secret is the test control plane's own CA, so the kubeconfig KCP generates for the "workload
// cluster" is accepted by the same apiserver.
import { isConflict, type Json, type KubeClient } from '../../hack/testenv/kube-client.js';
import { capiApi, type CapiApiVersion } from './capi-api.js';
import { BOOTSTRAP_GROUP, INFRA_GROUP, SIM_VERSION } from './crds.js';

export interface WorkerPool {
  name: string;
  replicas: number;
  /** Extra labels on the pool's Machines (a check's selector can use them). */
  labels?: Record<string, string>;
  /** The MachineDeployment's remediation maxInFlight (its MachineSet defers marked Machines beyond it). */
  remediationMaxInFlight?: number | string;
  /** RollingUpdate settings of the MachineDeployment (CAPI's defaults when unset: maxSurge 1, maxUnavailable 0). */
  rollout?: { maxSurge?: number | string; maxUnavailable?: number | string };
  /** The VM image of the pool's SimMachineTemplate (default: none). */
  image?: string;
}

export interface ClusterShape {
  namespace: string;
  name: string;
  /** KCP replicas; 0 means no control plane object (workers only are then never initialized). */
  controlPlaneReplicas?: number;
  workers?: WorkerPool[];
  version?: string;
  /** KCP remediation in v1beta2 terms (maxRetry, retryPeriodSeconds, minHealthyPeriodSeconds). */
  kcpRemediation?: { maxRetry?: number; retryPeriodSeconds?: number; minHealthyPeriodSeconds?: number };
  /** The test control plane's CA (TestEnv.caCertPem / caKeyPem). */
  ca: { certPem: string; keyPem: string };
  /** The CAPI API version of the release under test (TestEnv.capiApiVersion); default v1beta2. */
  apiVersion?: CapiApiVersion;
}

export const DEFAULT_K8S_VERSION = 'v1.36.3';

/**
 * The KCP's kubeadm settings; the sim ignores them, as it ignores the bootstrap data. An initConfiguration as real
 * templates have one: v1.10's KCP compares it with the init Machine's KubeadmConfig (filters.go
 * matchInitOrJoinConfiguration) and, when the KCP has none, takes the TypeMeta CABPK wrote for a difference and
 * rolls the init Machine out as soon as the cluster is initialized.
 */
export const KCP_KUBEADM_CONFIG_SPEC: Json = {
  clusterConfiguration: { apiServer: { certSANs: ['127.0.0.1'] } },
  initConfiguration: { nodeRegistration: { imagePullPolicy: 'IfNotPresent' } },
};

export function controlPlaneName(cluster: string): string {
  return `${cluster}-cp`;
}

/** KCP's remediation settings as the API version spells them. */
function kcpRemediation(r: NonNullable<ClusterShape['kcpRemediation']>, v: CapiApiVersion): Json {
  if (v === 'v1beta2') return { remediation: r };
  const secs = (n: number | undefined) => (n === undefined ? undefined : `${n}s`);
  return {
    remediationStrategy: {
      maxRetry: r.maxRetry,
      retryPeriod: secs(r.retryPeriodSeconds),
      minHealthyPeriod: secs(r.minHealthyPeriodSeconds),
    },
  };
}

/** Every object of the shape, in creation order. */
export function clusterObjects(s: ClusterShape): Json[] {
  const capi = capiApi(s.apiVersion ?? 'v1beta2');
  const version = s.version ?? DEFAULT_K8S_VERSION;
  const ns = s.namespace;
  const cn = { 'cluster.x-k8s.io/cluster-name': s.name };
  const cpReplicas = s.controlPlaneReplicas ?? 1;
  const infraRef = (kind: string, name: string) => capi.ref(INFRA_GROUP, SIM_VERSION, kind, name);
  const objects: Json[] = [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'cluster.x-k8s.io/secret',
      metadata: { name: `${s.name}-ca`, namespace: ns, labels: cn },
      stringData: { 'tls.crt': s.ca.certPem, 'tls.key': s.ca.keyPem },
    },
    {
      apiVersion: `${INFRA_GROUP}/${SIM_VERSION}`,
      kind: 'SimCluster',
      metadata: { name: s.name, namespace: ns },
      spec: {},
    },
    {
      apiVersion: capi.apiVersionOf('Cluster'),
      kind: 'Cluster',
      metadata: { name: s.name, namespace: ns },
      spec: {
        clusterNetwork: {
          services: { cidrBlocks: ['10.128.0.0/12'] },
          pods: { cidrBlocks: ['192.168.0.0/16'] },
          serviceDomain: 'cluster.local',
        },
        infrastructureRef: infraRef('SimCluster', s.name),
        ...(cpReplicas > 0
          ? {
              controlPlaneRef: capi.ref(
                'controlplane.cluster.x-k8s.io',
                capi.version,
                'KubeadmControlPlane',
                controlPlaneName(s.name),
              ),
            }
          : {}),
      },
    },
  ];
  if (cpReplicas > 0) {
    objects.push(
      {
        apiVersion: `${INFRA_GROUP}/${SIM_VERSION}`,
        kind: 'SimMachineTemplate',
        metadata: { name: controlPlaneName(s.name), namespace: ns },
        spec: { template: { spec: {} } },
      },
      {
        apiVersion: capi.apiVersionOf('KubeadmControlPlane'),
        kind: 'KubeadmControlPlane',
        metadata: { name: controlPlaneName(s.name), namespace: ns },
        spec: {
          replicas: cpReplicas,
          version,
          machineTemplate:
            capi.version === 'v1beta2'
              ? { spec: { infrastructureRef: infraRef('SimMachineTemplate', controlPlaneName(s.name)) } }
              : { infrastructureRef: infraRef('SimMachineTemplate', controlPlaneName(s.name)) },
          kubeadmConfigSpec: KCP_KUBEADM_CONFIG_SPEC,
          ...(s.kcpRemediation ? kcpRemediation(s.kcpRemediation, capi.version) : {}),
        },
      },
    );
  }
  for (const pool of s.workers ?? []) {
    const md = `${s.name}-${pool.name}`;
    const labels = { 'cluster.x-k8s.io/deployment-name': md, ...(pool.labels ?? {}) };
    objects.push(
      simMachineTemplate(ns, md, pool.image),
      {
        apiVersion: `${BOOTSTRAP_GROUP}/${SIM_VERSION}`,
        kind: 'SimBootstrapConfigTemplate',
        metadata: { name: md, namespace: ns },
        spec: { template: { spec: {} } },
      },
      {
        apiVersion: capi.apiVersionOf('MachineDeployment'),
        kind: 'MachineDeployment',
        metadata: { name: md, namespace: ns },
        spec: {
          clusterName: s.name,
          replicas: pool.replicas,
          selector: { matchLabels: { 'cluster.x-k8s.io/deployment-name': md } },
          ...machineDeploymentStrategy(pool, capi.version),
          template: {
            metadata: { labels },
            spec: {
              clusterName: s.name,
              version,
              bootstrap: { configRef: capi.ref(BOOTSTRAP_GROUP, SIM_VERSION, 'SimBootstrapConfigTemplate', md) },
              infrastructureRef: infraRef('SimMachineTemplate', md),
            },
          },
        },
      },
    );
  }
  return objects;
}

function simMachineTemplate(namespace: string, name: string, image: string | undefined): Json {
  return {
    apiVersion: `${INFRA_GROUP}/${SIM_VERSION}`,
    kind: 'SimMachineTemplate',
    metadata: { name, namespace },
    spec: { template: { spec: image === undefined ? {} : { image } } },
  };
}

/** Remediation maxInFlight and RollingUpdate settings as the API version spells them. */
function machineDeploymentStrategy(pool: WorkerPool, v: CapiApiVersion): Json {
  const maxInFlight = pool.remediationMaxInFlight;
  const rollingUpdate =
    pool.rollout === undefined
      ? undefined
      : Object.fromEntries(Object.entries(pool.rollout).filter(([, x]) => x !== undefined));
  if (v === 'v1beta2') {
    return {
      ...(maxInFlight === undefined ? {} : { remediation: { maxInFlight } }),
      ...(rollingUpdate === undefined ? {} : { rollout: { strategy: { type: 'RollingUpdate', rollingUpdate } } }),
    };
  }
  if (maxInFlight === undefined && rollingUpdate === undefined) return {};
  return {
    strategy: {
      type: 'RollingUpdate',
      ...(rollingUpdate === undefined ? {} : { rollingUpdate }),
      ...(maxInFlight === undefined ? {} : { remediation: { maxInFlight } }),
    },
  };
}

/**
 * A new template revision for a worker pool, as an operator rolls one out: a new SimMachineTemplate
 * `<cluster>-<pool>-<revision>` with the image, and the MachineDeployment pointed at it (its MachineSet of the
 * new revision then scales up as the rollout strategy allows). Returns the template's name.
 */
export async function rollWorkerPool(
  kube: KubeClient,
  o: { namespace: string; cluster: string; pool: string; revision: string; image: string; apiVersion?: CapiApiVersion },
): Promise<string> {
  const md = `${o.cluster}-${o.pool}`;
  const name = `${md}-${o.revision}`;
  const template = simMachineTemplate(o.namespace, name, o.image);
  try {
    await kube.create(collectionOf(template), template);
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  await pointWorkerPool(kube, { ...o, template: name });
  return name;
}

/** Points a worker pool's MachineDeployment at a SimMachineTemplate (a rollback names the template it had before). */
export async function pointWorkerPool(
  kube: KubeClient,
  o: { namespace: string; cluster: string; pool: string; template: string; apiVersion?: CapiApiVersion },
): Promise<void> {
  const capi = capiApi(o.apiVersion ?? 'v1beta2');
  await kube.mergePatch(capi.path('MachineDeployment', o.namespace, `${o.cluster}-${o.pool}`), {
    spec: {
      template: { spec: { infrastructureRef: capi.ref(INFRA_GROUP, SIM_VERSION, 'SimMachineTemplate', o.template) } },
    },
  });
}

/** REST collection path of an object's kind (the kinds clusterObjects and cluster-class.ts make, plus Namespace). */
export function collectionOf(o: Json): string {
  const [group, version] = String(o.apiVersion).includes('/')
    ? (String(o.apiVersion).split('/') as [string, string])
    : ['', o.apiVersion as string];
  const kind = String(o.kind).toLowerCase();
  const plural = kind.endsWith('ss') ? `${kind}es` : `${kind}s`;
  const base = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
  return o.kind === 'Namespace' ? `${base}/namespaces` : `${base}/namespaces/${o.metadata.namespace}/${plural}`;
}

/** Creates the namespace (if missing) and every object of the shape; existing objects are kept. */
export async function createCluster(kube: KubeClient, s: ClusterShape): Promise<void> {
  try {
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: s.namespace } });
  } catch (err) {
    if (!isConflict(err)) throw err;
  }
  for (const o of clusterObjects(s)) {
    try {
      await kube.create(collectionOf(o), o);
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
}
