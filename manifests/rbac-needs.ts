// What the controller and its webhook do against the apiserver, as RBAC grants: the one list that
// manifests.test.ts holds the ClusterRole and Roles to (exactly, no more) and that e2e/install/rbac.test.ts
// asks the apiserver about under the add-on's ServiceAccount. A new API call in the controller starts here;
// e2e/install/remediation.test.ts runs the controller under these grants and fails if one is missing.

export interface Grant {
  group: string;
  /** `machines` or `machines/status`. */
  resource: string;
  verbs: string[];
  /** Granted in the provider's Namespace only (the leader Lease), by a Role. */
  namespaced?: boolean;
  /** Granted only when JOINGUARD_WORKLOAD_NODE_CHECK=true. */
  workloadNodeCheck?: boolean;
  /** Granted only when JOINGUARD_ALLOW_MACHINE_DELETE=true (remediation.strategy Delete). */
  machineDelete?: boolean;
}

// Informers list and watch; nothing reads these kinds one by one.
const WATCH = ['list', 'watch'];

export const CONTROLLER_NEEDS: Grant[] = [
  // Informer and webhook overlap lookups; `patch` removes `joinguard.io/resume` (a JSON patch with a test op) and
  // adds or removes the finalizer `joinguard.io/withdraw-marks` (metadata.finalizers: no `/finalizers` grant needed,
  // that subresource is only checked for owners referenced with blockOwnerDeletion).
  { group: 'joinguard.io', resource: 'machinejoinchecks', verbs: ['get', ...WATCH, 'patch'] },
  // Status is written whole, guarded by resourceVersion (executor.ts: PUT on /status).
  { group: 'joinguard.io', resource: 'machinejoinchecks/status', verbs: ['update'] },
  // `get`: the live re-read before every write; `patch`: the remediate-machine and requested-by annotations.
  // The webhook lists them for overlaps.
  { group: 'cluster.x-k8s.io', resource: 'machines', verbs: ['get', ...WATCH, 'patch'] },
  // The Delete strategy (uid and resourceVersion preconditions), opt-in.
  { group: 'cluster.x-k8s.io', resource: 'machines', verbs: ['delete'], machineDelete: true },
  // The remediation-contract conditions (and their withdrawal), merge patches guarded by resourceVersion.
  { group: 'cluster.x-k8s.io', resource: 'machines/status', verbs: ['patch'] },
  // `get`: the live re-read of the Cluster before every write.
  { group: 'cluster.x-k8s.io', resource: 'clusters', verbs: ['get', ...WATCH] },
  { group: 'cluster.x-k8s.io', resource: 'machinehealthchecks', verbs: WATCH },
  // A MachineDeployment's revisions and their templates: the evidence of RolloutSuspect (rollout-suspect.ts).
  { group: 'cluster.x-k8s.io', resource: 'machinesets', verbs: WATCH },
  { group: 'controlplane.cluster.x-k8s.io', resource: 'kubeadmcontrolplanes', verbs: WATCH },
  // Control-plane configs only (a label selector): whether a replacement carries a join configuration. RBAC
  // cannot narrow the read: the grant exposes every KubeadmConfig's join token (docs/install.md).
  { group: 'bootstrap.cluster.x-k8s.io', resource: 'kubeadmconfigs', verbs: WATCH },
  // runtime/client/discovery.ts: clusterctl's inventory says the exact CAPI release (else a 403 at every start).
  { group: 'clusterctl.cluster.x-k8s.io', resource: 'providers', verbs: ['list'] },
  // events.ts creates core/v1 Events and never updates them (repeats are de-duplicated in memory).
  { group: '', resource: 'events', verbs: ['create'] },
  // runtime/serving/diagnostics-auth.ts: who a scraper of /metrics is, and whether it may `get /metrics`.
  { group: 'authentication.k8s.io', resource: 'tokenreviews', verbs: ['create'] },
  { group: 'authorization.k8s.io', resource: 'subjectaccessreviews', verbs: ['create'] },
  // leader.ts: get, create, and an update guarded by resourceVersion (renewal and hand-back).
  { group: 'coordination.k8s.io', resource: 'leases', verbs: ['get', 'create', 'update'], namespaced: true },
  // workload-nodes.ts reads `<cluster>-kubeconfig` by name; no list or watch of Secrets.
  { group: '', resource: 'secrets', verbs: ['get'], workloadNodeCheck: true },
];

/** `verb group/resource` strings, the unit both tests compare. */
export function grantStrings(grants: { group: string; resource: string; verbs: string[] }[]): string[] {
  return grants.flatMap((g) => g.verbs.map((v) => `${v} ${g.group || 'core'}/${g.resource}`)).sort();
}

/** The grants of RBAC rules (apiGroups x resources x verbs), as grantStrings. */
export function ruleStrings(rules: { apiGroups?: string[]; resources?: string[]; verbs?: string[] }[]): string[] {
  const out = new Set<string>();
  for (const r of rules) {
    for (const group of r.apiGroups ?? []) {
      for (const resource of r.resources ?? [])
        for (const verb of r.verbs ?? []) out.add(`${verb} ${group || 'core'}/${resource}`);
    }
  }
  return [...out].sort();
}
