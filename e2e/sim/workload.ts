// What a simulated VM makes visible in its workload cluster (test-only): the Node kubelet registers (its
// kubelet endpoint is sim-kubelet, which also answers for the etcd member of a control-plane Node), the
// static-pod mirror pods of a kubeadm control plane, and the clients of the workload clusters. The
// `kube-system/kubeadm-config` ConfigMap that `kubeadm init` uploads is kubeadm-config.ts.
import { isConflict, KubeClient, type Json } from '../../hack/testenv/kube-client.js';

export const SIM_NODE_ANNOTATION = 'sim.joinguard.io/machine';
/** The simulated Cluster of a Node: sim-kubelet answers for its etcd member from the Nodes of the same Cluster. */
export const SIM_CLUSTER_NAMESPACE_LABEL = 'sim.joinguard.io/cluster-namespace';
export const SIM_CLUSTER_NAME_LABEL = 'sim.joinguard.io/cluster-name';
/** kubelet's port when no sim-kubelet runs: a loopback port nothing listens on, so a dial is refused at once. */
const NO_KUBELET_PORT = 10250;
const STATIC_PODS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'etcd'];

/** Node name of a Machine: unique across the test namespaces that share the apiserver. */
export function nodeNameOf(namespace: string, machineName: string): string {
  return `${machineName}.${namespace}`.slice(0, 253).replace(/[.-]+$/, '');
}

export interface NodeSpec {
  name: string;
  providerID: string;
  controlPlane: boolean;
  kubeletVersion: string;
  address: string;
  hostname: string;
  machineRef: string;
  cluster: { namespace: string; name: string };
  /** sim-kubelet's port (the apiserver's port-forwards reach it); default: nothing listens. */
  kubeletPort?: number;
}

/** Registers the Node as kubelet would (labels, taints, Ready status); an existing Node of the same providerID is kept. */
export async function registerNode(kube: KubeClient, n: NodeSpec): Promise<void> {
  const labels: Record<string, string> = {
    'kubernetes.io/hostname': n.hostname.slice(0, 63).replace(/[.-]+$/, ''),
    'kubernetes.io/os': 'linux',
    'kubernetes.io/arch': 'amd64',
    'beta.kubernetes.io/os': 'linux',
    'beta.kubernetes.io/arch': 'amd64',
    [SIM_CLUSTER_NAMESPACE_LABEL]: n.cluster.namespace,
    [SIM_CLUSTER_NAME_LABEL]: n.cluster.name,
  };
  if (n.controlPlane) {
    labels['node-role.kubernetes.io/control-plane'] = '';
    labels['node.kubernetes.io/exclude-from-external-load-balancers'] = '';
  }
  const node: Json = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: n.name,
      labels,
      annotations: {
        [SIM_NODE_ANNOTATION]: n.machineRef,
        'kubeadm.alpha.kubernetes.io/cri-socket': 'unix:///var/run/containerd/containerd.sock',
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
      },
    },
    spec: {
      providerID: n.providerID,
      ...(n.controlPlane ? { taints: [{ key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule' }] } : {}),
    },
  };
  try {
    await kube.create('/api/v1/nodes', node);
  } catch (err) {
    if (!isConflict(err)) throw err;
    const existing = await kube.get(`/api/v1/nodes/${n.name}`);
    if (existing?.spec?.providerID !== n.providerID) {
      throw new Error(`Node ${n.name} exists with providerID ${existing?.spec?.providerID}, not ${n.providerID}`);
    }
  }
  const now = new Date().toISOString();
  const cond = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    reason,
    message,
    lastHeartbeatTime: now,
    lastTransitionTime: now,
  });
  await kube.mergePatch(`/api/v1/nodes/${n.name}/status`, {
    status: {
      conditions: [
        cond('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
        cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        cond('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status (simulated)'),
      ],
      addresses: [
        { type: 'InternalIP', address: n.address },
        { type: 'Hostname', address: n.hostname },
      ],
      // sim-kubelet answers the apiserver's port-forwards to this Node's static pods (etcd, kube-apiserver);
      // without it, a loopback port nothing listens on: a dial is refused at once.
      daemonEndpoints: { kubeletEndpoint: { Port: n.kubeletPort ?? NO_KUBELET_PORT } },
      nodeInfo: {
        machineID: simId(n.providerID, 'm'),
        systemUUID: simId(n.providerID, 's'),
        bootID: simId(n.providerID, 'b'),
        kernelVersion: '6.8.0-sim',
        osImage: 'JoinGuard simulation',
        containerRuntimeVersion: 'containerd://2.1.0',
        kubeletVersion: n.kubeletVersion,
        kubeProxyVersion: n.kubeletVersion,
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
      capacity: { cpu: '2', memory: '4Gi', pods: '110', 'ephemeral-storage': '20Gi' },
      allocatable: { cpu: '2', memory: '4Gi', pods: '110', 'ephemeral-storage': '20Gi' },
    },
  });
}

function simId(seed: string, salt: string): string {
  let h = 2166136261;
  for (const c of `${salt}${seed}`) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return `${h.toString(16).padStart(8, '0')}${'0'.repeat(24)}`;
}

/** The mirror pods kubelet would publish for kubeadm's static pods on a control-plane Node, Running and Ready. */
export async function createMirrorPods(
  kube: KubeClient,
  nodeName: string,
  nodeUid: string | undefined,
  version: string,
  address: string,
): Promise<void> {
  const now = new Date().toISOString();
  for (const component of STATIC_PODS) {
    const name = `${component}-${nodeName}`;
    const pod: Json = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        namespace: 'kube-system',
        labels: { component, tier: 'control-plane' },
        annotations: {
          'kubernetes.io/config.mirror': simId(name, 'h'),
          'kubernetes.io/config.hash': simId(name, 'h'),
          'kubernetes.io/config.source': 'file',
        },
        ...(nodeUid
          ? { ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: nodeName, uid: nodeUid, controller: true }] }
          : {}),
      },
      spec: {
        nodeName,
        hostNetwork: true,
        priorityClassName: 'system-node-critical',
        containers: [
          {
            name: component,
            image: `registry.k8s.io/${component === 'etcd' ? 'etcd:3.6.16-0' : `${component}:${version}`}`,
          },
        ],
      },
    };
    try {
      await kube.create('/api/v1/namespaces/kube-system/pods', pod);
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    await kube.mergePatch(`/api/v1/namespaces/kube-system/pods/${name}/status`, {
      status: {
        phase: 'Running',
        hostIP: address,
        podIP: address,
        startTime: now,
        conditions: ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({
          type,
          status: 'True',
          lastTransitionTime: now,
        })),
        containerStatuses: [
          {
            name: component,
            ready: true,
            started: true,
            restartCount: 0,
            image: pod.spec.containers[0].image,
            imageID: '',
            containerID: `containerd://${simId(name, 'c')}`,
            state: { running: { startedAt: now } },
          },
        ],
      },
    });
  }
}

/** Deletes a sim Node (only if it still has this providerID) and its mirror pods. */
export async function deleteNode(kube: KubeClient, nodeName: string, providerID: string): Promise<boolean> {
  const node = await kube.get(`/api/v1/nodes/${nodeName}`);
  let deleted = false;
  if (node && node.spec?.providerID === providerID) {
    deleted = await kube.delete(`/api/v1/nodes/${nodeName}`, { preconditions: { uid: node.metadata.uid } });
  }
  for (const component of STATIC_PODS) {
    await kube.delete(`/api/v1/namespaces/kube-system/pods/${component}-${nodeName}`, { gracePeriodSeconds: 0 });
  }
  return deleted;
}

/** The ConfigMap (in the Cluster's namespace) where sim-kubelet finds etcd members that have no Node. */
export const simEtcdConfigMap = (cluster: string) => `${cluster}-sim-etcd`;

/**
 * A failed control-plane join left its etcd member behind as a learner (cluster-api #13221): sim-kubelet lists it
 * in the Cluster's etcd member list from now on, under the name the member would have had (its Node's).
 */
export async function leaveEtcdLearner(
  kube: KubeClient,
  namespace: string,
  cluster: string,
  memberName: string,
): Promise<void> {
  const path = `/api/v1/namespaces/${namespace}/configmaps/${simEtcdConfigMap(cluster)}`;
  for (;;) {
    const cm = await kube.get(path);
    const learners = new Set(
      String(cm?.data?.learners ?? '')
        .split('\n')
        .filter(Boolean),
    );
    if (learners.has(memberName)) return;
    learners.add(memberName);
    const data = { learners: [...learners].join('\n') };
    try {
      if (cm) await kube.mergePatch(path, { metadata: { resourceVersion: cm.metadata.resourceVersion }, data });
      else
        await kube.create(`/api/v1/namespaces/${namespace}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: simEtcdConfigMap(cluster), namespace },
          data,
        });
      return;
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
}

/** Clients of the workload clusters, from their `<cluster>-kubeconfig` secrets (or the management client). */
export class WorkloadClients {
  private readonly cache = new Map<string, { rv: string; kube: KubeClient }>();

  constructor(
    private readonly management: KubeClient,
    private readonly mode: 'kubeconfig' | 'direct',
  ) {}

  async get(namespace: string, cluster: string): Promise<KubeClient> {
    if (this.mode === 'direct') return this.management;
    const secret = await this.management.get(`/api/v1/namespaces/${namespace}/secrets/${cluster}-kubeconfig`);
    const value = secret?.data?.value as string | undefined;
    if (!value) throw new Error(`secret ${namespace}/${cluster}-kubeconfig not found (or has no value)`);
    const key = `${namespace}/${cluster}`;
    const cached = this.cache.get(key);
    if (cached && cached.rv === secret!.metadata.resourceVersion) return cached.kube;
    cached?.kube.close();
    const kube = KubeClient.fromKubeconfig(Buffer.from(value, 'base64').toString('utf8'), 5_000);
    this.cache.set(key, { rv: secret!.metadata.resourceVersion, kube });
    return kube;
  }

  close(): void {
    for (const { kube } of this.cache.values()) kube.close();
    this.cache.clear();
  }
}
