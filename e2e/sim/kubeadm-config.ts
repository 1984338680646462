// The `kube-system/kubeadm-config` ConfigMap of the simulated workload clusters (test-only). `kubeadm init`
// uploads it; it is KCP's only evidence that the control plane is initialized
// (controlplane/kubeadm/reconcilers/kubeadmcontrolplane/status.go setControlPlaneInitialized -> HasKubeadmConfig),
// and KCP rewrites its ClusterConfiguration before it rolls out Machines (update.go UpdateClusterConfiguration;
// v1.10: upgrade.go), failing the rollout while it is missing.
//
// Every test cluster's workload cluster is the SAME apiserver, so kube-system is shared. KCP reads
// kubeadm-config of "its" workload cluster, and any cluster's would do; hence the lease: the sim creates
// kubeadm-config for one cluster at a time: while its init Machine runs `kubeadm init` (until the Cluster reports
// ControlPlaneInitialized, which KCP sets once and never resets, or the lease runs out), or while an
// initialized cluster's KCP rolls out and no other cluster is initializing.
import { isConflict, isNotFound, type Json, type KubeClient } from '../../hack/testenv/kube-client.js';

const LEASE_ANNOTATION = 'sim.joinguard.io/cluster';
const KUBEADM_CONFIG = '/api/v1/namespaces/kube-system/configmaps/kubeadm-config';

/** kubeadm's ClusterConfiguration as `kubeadm init` uploads it (what KCP would parse on upgrades). */
function clusterConfiguration(clusterName: string, version: string, endpoint: string): string {
  return [
    'apiVersion: kubeadm.k8s.io/v1beta4',
    'kind: ClusterConfiguration',
    `clusterName: ${clusterName}`,
    `kubernetesVersion: ${version}`,
    `controlPlaneEndpoint: ${endpoint}`,
    'certificatesDir: /etc/kubernetes/pki',
    'imageRepository: registry.k8s.io',
    'etcd:',
    '  local:',
    '    dataDir: /var/lib/etcd',
    'networking:',
    '  dnsDomain: cluster.local',
    '  serviceSubnet: 10.96.0.0/12',
    'apiServer: {}',
    'controllerManager: {}',
    'scheduler: {}',
    'dns: {}',
    'proxy: {}',
    '',
  ].join('\n');
}

export interface LeaseHolder {
  namespace: string;
  cluster: string;
}

/**
 * Why a cluster holds kubeadm-config: 'init' while its first control-plane Machine runs `kubeadm init` (until the
 * Cluster says initialized, or the lease runs out); 'rollout' while an initialized cluster's KubeadmControlPlane
 * rolls out Machines (KCP rewrites the ClusterConfiguration in it before each scale-up: UpdateClusterConfiguration),
 * and only while no other cluster is initializing (its KCP would take the ConfigMap for its own kubeadm init).
 */
export type LeaseKind = 'init' | 'rollout';

/** The shared `kube-system/kubeadm-config`, handed to one cluster at a time. */
export class KubeadmConfigLease {
  private held?: { holder: LeaseHolder; kind: LeaseKind; since: number; uid?: string };

  constructor(
    private readonly kube: KubeClient,
    private readonly leaseMs: number,
  ) {}

  get holder(): LeaseHolder | undefined {
    return this.held?.holder;
  }

  get state(): { holder: LeaseHolder; kind: LeaseKind } | undefined {
    return this.held ? { holder: this.held.holder, kind: this.held.kind } : undefined;
  }

  /**
   * Creates kubeadm-config for the cluster. 'busy' while another cluster holds it; 'foreign' when a
   * kubeadm-config exists that the sim did not make (it is left alone: KCP will see it anyway).
   */
  async acquire(
    holder: LeaseHolder,
    version: string,
    endpoint: string,
    kind: LeaseKind = 'init',
  ): Promise<'acquired' | 'busy' | 'foreign'> {
    const id = `${holder.namespace}/${holder.cluster}`;
    const existing = await this.kube.get(KUBEADM_CONFIG);
    if (existing) {
      const owner = existing.metadata?.annotations?.[LEASE_ANNOTATION] as string | undefined;
      if (owner === undefined) return 'foreign';
      if (owner !== id) {
        // A lease of an earlier sim (restart) that nobody releases: treat it by its age.
        const age = Date.now() - Date.parse(existing.metadata.creationTimestamp);
        if (this.held || age < this.leaseMs) return 'busy';
        await this.kube.delete(KUBEADM_CONFIG, { preconditions: { uid: existing.metadata.uid } });
      } else {
        this.held = {
          holder,
          kind: this.held?.kind ?? kind,
          since: this.held?.since ?? Date.now(),
          uid: existing.metadata.uid,
        };
        return 'acquired';
      }
    }
    try {
      const created = await this.kube.create('/api/v1/namespaces/kube-system/configmaps', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'kubeadm-config', namespace: 'kube-system', annotations: { [LEASE_ANNOTATION]: id } },
        data: { ClusterConfiguration: clusterConfiguration(holder.cluster, version, endpoint) },
      });
      this.held = { holder, kind, since: Date.now(), uid: created.metadata?.uid };
      return 'acquired';
    } catch (err) {
      if (isConflict(err)) return 'busy';
      throw err;
    }
  }

  /**
   * Deletes kubeadm-config when keep(holder, kind) says it is no longer needed (true = keep), or an init lease
   * ran out; returns why, if it did.
   */
  async maybeRelease(keep: (h: LeaseHolder, kind: LeaseKind) => true | string): Promise<string | undefined> {
    if (!this.held) return undefined;
    const verdict = keep(this.held.holder, this.held.kind);
    const expired = this.held.kind === 'init' && Date.now() - this.held.since > this.leaseMs;
    if (verdict === true && !expired) return undefined;
    const why = verdict !== true ? verdict : `the lease of ${this.leaseMs}ms ran out`;
    try {
      await this.kube.delete(KUBEADM_CONFIG, this.held.uid ? { preconditions: { uid: this.held.uid } } : undefined);
    } catch (err) {
      if (!(isConflict(err) || isNotFound(err))) throw err;
    }
    this.held = undefined;
    return why;
  }
}

/** What the lease needs to know of the world (the sim's caches). */
export interface LeaseWorld {
  clusters: Json[];
  kcps: Json[];
  machines: Json[];
  controlPlaneInitialized(cluster: Json): boolean;
  /** metav1-style conditions of an object in the release's API (capi-api.ts). */
  conditions(o: Json): Json[];
}

const ownedBy = (o: Json, kind: string, name: string) =>
  ((o.metadata?.ownerReferences ?? []) as Json[]).some((r) => r.kind === kind && r.name === name);

/** A KCP rolls out when one of its Machines is not up to date: another version, or its UpToDate condition False. */
export function kcpRollingOut(kcp: Json, machines: Json[], conditions: (o: Json) => Json[]): boolean {
  const own = machines.filter(
    (m) =>
      m.metadata.namespace === kcp.metadata.namespace &&
      ownedBy(m, 'KubeadmControlPlane', kcp.metadata.name) &&
      !m.metadata.deletionTimestamp,
  );
  return own.some(
    (m) =>
      m.spec?.version !== kcp.spec?.version || conditions(m).some((c) => c.type === 'UpToDate' && c.status === 'False'),
  );
}

function kcpOf(c: Json, kcps: Json[]): Json | undefined {
  const ref = c.spec?.controlPlaneRef;
  return ref?.kind === 'KubeadmControlPlane'
    ? kcps.find((k) => k.metadata.namespace === c.metadata.namespace && k.metadata.name === ref.name)
    : undefined;
}

/**
 * The lease's next step: release it (why), create it for a rollout (who, which version), or nothing. An init lease
 * is released once its Cluster is initialized or gone; a rollout lease once the rollout is over or any cluster
 * initializes (kubeadm-config would tell that cluster's KCP that it is initialized).
 */
export function leaseStep(
  world: LeaseWorld,
  held: { holder: LeaseHolder; kind: LeaseKind } | undefined,
): { release: string } | { acquire: LeaseHolder; version: string; endpoint: string } | undefined {
  const live = world.clusters.filter((c) => !c.metadata.deletionTimestamp);
  const initializing = live.filter((c) => c.spec?.controlPlaneRef && !world.controlPlaneInitialized(c));
  const find = (h: LeaseHolder) =>
    live.find((c) => c.metadata.namespace === h.namespace && c.metadata.name === h.cluster);
  const rolling = (c: Json) => {
    const kcp = kcpOf(c, world.kcps);
    return (
      kcp !== undefined && world.controlPlaneInitialized(c) && kcpRollingOut(kcp, world.machines, world.conditions)
    );
  };
  if (held) {
    const c = find(held.holder);
    if (c === undefined) return { release: 'its Cluster is gone' };
    if (held.kind === 'init')
      return world.controlPlaneInitialized(c) ? { release: 'its Cluster reports ControlPlaneInitialized' } : undefined;
    if (initializing.length > 0)
      return {
        release: `Cluster ${initializing[0]!.metadata.namespace}/${initializing[0]!.metadata.name} is initializing`,
      };
    return rolling(c) ? undefined : { release: 'its KubeadmControlPlane rolled out' };
  }
  if (initializing.length > 0) return undefined;
  const c = live.find(rolling);
  if (c === undefined) return undefined;
  const kcp = kcpOf(c, world.kcps)!;
  const versions = world.machines
    .filter(
      (m) => ownedBy(m, 'KubeadmControlPlane', kcp.metadata.name) && m.metadata.namespace === kcp.metadata.namespace,
    )
    .map((m) => m.spec?.version as string)
    .filter(Boolean)
    .sort();
  const ep = c.spec?.controlPlaneEndpoint;
  return {
    acquire: { namespace: c.metadata.namespace, cluster: c.metadata.name },
    version: versions[0] ?? kcp.spec.version,
    endpoint: `${ep?.host}:${ep?.port}`,
  };
}
