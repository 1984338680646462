// CAPI v1.14.2's manager flags, as `manager --help` of its core manager prints them: core/main.go InitFlags,
// util/flags AddManagerOptions, component-base's logging flags (logs/api/v1 AddFlags), the feature gates and
// controller-runtime's --kubeconfig (its Go flag set). Written down here by hand from those sources; the e2e
// spec e2e/install/flags.test.ts checks this list against the real binary's --help, and cmd/flags.test.ts
// holds `joinguard --help` to it: every flag here is either taken with CAPI's type and default, or named in
// NOT_TAKEN with the reason.

export interface CapiFlag {
  name: string;
  /** pflag's type word as --help prints it ('' for a bool). */
  type: string;
  /** The default as --help prints it, '' when it prints none; `v` is 2, set by main() after InitFlags. */
  def: string;
}

export const CAPI_VERSION = 'v1.14.2';

export const CAPI_FLAGS: CapiFlag[] = [
  { name: 'additional-sync-machine-annotations', type: 'strings', def: '' },
  { name: 'additional-sync-machine-labels', type: 'strings', def: '' },
  { name: 'cluster-concurrency', type: 'int', def: '50' },
  { name: 'clustercache-client-burst', type: 'int', def: '30' },
  { name: 'clustercache-client-qps', type: 'float32', def: '20' },
  { name: 'clustercache-concurrency', type: 'int', def: '100' },
  { name: 'clusterclass-concurrency', type: 'int', def: '10' },
  { name: 'clusterresourceset-concurrency', type: 'int', def: '10' },
  { name: 'clustertopology-concurrency', type: 'int', def: '50' },
  { name: 'contention-profiling', type: '', def: '' },
  { name: 'diagnostics-address', type: 'string', def: '":8443"' },
  { name: 'extensionconfig-concurrency', type: 'int', def: '10' },
  { name: 'feature-gates', type: 'mapStringBool', def: '' },
  { name: 'health-addr', type: 'string', def: '":9440"' },
  { name: 'insecure-diagnostics', type: '', def: '' },
  { name: 'kube-api-burst', type: 'int', def: '200' },
  { name: 'kube-api-qps', type: 'float32', def: '100' },
  { name: 'kubeconfig', type: 'string', def: '' },
  { name: 'leader-elect', type: '', def: '' },
  { name: 'leader-elect-lease-duration', type: 'duration', def: '15s' },
  { name: 'leader-elect-renew-deadline', type: 'duration', def: '10s' },
  { name: 'leader-elect-retry-period', type: 'duration', def: '2s' },
  { name: 'log-flush-frequency', type: 'duration', def: '5s' },
  { name: 'log-json-info-buffer-size', type: 'quantity', def: '' },
  { name: 'log-json-split-stream', type: '', def: '' },
  { name: 'log-text-info-buffer-size', type: 'quantity', def: '' },
  { name: 'log-text-split-stream', type: '', def: '' },
  { name: 'logging-format', type: 'string', def: '"text"' },
  { name: 'machine-concurrency', type: 'int', def: '100' },
  { name: 'machinedeployment-concurrency', type: 'int', def: '50' },
  { name: 'machinehealthcheck-concurrency', type: 'int', def: '50' },
  { name: 'machinepool-concurrency', type: 'int', def: '50' },
  { name: 'machineset-concurrency', type: 'int', def: '50' },
  { name: 'machineset-preflight-checks', type: 'strings', def: '[All]' },
  { name: 'namespace', type: 'string', def: '' },
  { name: 'profiler-address', type: 'string', def: '' },
  { name: 'remote-conditions-grace-period', type: 'duration', def: '5m0s' },
  { name: 'remote-connection-grace-period', type: 'duration', def: '50s' },
  { name: 'runtime-extension-client-cert-file', type: 'string', def: '' },
  { name: 'runtime-extension-client-key-file', type: 'string', def: '' },
  { name: 'skip-crd-migration-phases', type: 'strings', def: '' },
  { name: 'sync-period', type: 'duration', def: '10m0s' },
  { name: 'tls-cipher-suites', type: 'strings', def: '' },
  { name: 'tls-curve-preferences', type: 'int32Slice', def: '[]' },
  { name: 'tls-min-version', type: 'string', def: '"VersionTLS12"' },
  { name: 'v', type: 'Level', def: '2' },
  { name: 'vmodule', type: 'pattern=N,...', def: '' },
  { name: 'watch-filter', type: 'string', def: '' },
  { name: 'webhook-cert-dir', type: 'string', def: '"/tmp/k8s-webhook-server/serving-certs/"' },
  { name: 'webhook-cert-name', type: 'string', def: '"tls.crt"' },
  { name: 'webhook-key-name', type: 'string', def: '"tls.key"' },
  { name: 'webhook-port', type: 'int', def: '9443' },
];

/** CAPI's flags taken with CAPI's name, type and meaning but another default (as --help prints it). */
export const OTHER_DEFAULT: Record<string, string> = {
  // Two writes per check in the first pass after install; qps stays CAPI's (docs/decisions/runtime-client-informers-leader-election.md, "Client-side rate limit").
  'kube-api-burst': '400',
};

const CORE = "a flag of CAPI's core manager for its own controllers";

/** CAPI's flags that mean nothing in JoinGuard, and why; `joinguard` refuses each, saying so. */
export const NOT_TAKEN: Record<string, string> = {
  'additional-sync-machine-annotations': `${CORE} (Machine to Node label sync); JoinGuard writes no Node`,
  'additional-sync-machine-labels': `${CORE} (Machine to Node label sync); JoinGuard writes no Node`,
  'cluster-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'clustercache-client-burst':
    `${CORE}'s workload-cluster cache; JoinGuard reads no workload ` +
    `cluster (except --workload-node-check, one Node list per ` +
    `Cluster)`,
  'clustercache-client-qps':
    `${CORE}'s workload-cluster cache; JoinGuard reads no workload ` +
    `cluster (except --workload-node-check, one Node list per ` +
    `Cluster)`,
  'clustercache-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'clusterclass-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'clusterresourceset-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'clustertopology-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'extensionconfig-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'machine-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'machinedeployment-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'machinehealthcheck-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'machinepool-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'machineset-concurrency': `${CORE}; JoinGuard's one controller takes --machinejoincheck-concurrency`,
  'machineset-preflight-checks':
    `${CORE} (MachineSet preflight checks); the MachineSet applies ` + `them to JoinGuard's requests too`,
  'skip-crd-migration-phases': `${CORE} (CAPI's CRD migrator); JoinGuard's CRD has one version`,
  'runtime-extension-client-cert-file': `${CORE} (Runtime SDK extensions); JoinGuard calls none`,
  'runtime-extension-client-key-file': `${CORE} (Runtime SDK extensions); JoinGuard calls none`,
  'remote-conditions-grace-period':
    `${CORE}: when it sets remote conditions such as NodeHealthy ` +
    `to Unknown; JoinGuard reads those conditions and sets none`,
  'remote-connection-grace-period':
    `${CORE}: how long after the last good probe it sets the ` +
    `Cluster's RemoteConnectionProbe to False. JoinGuard reads ` +
    `that condition; ` +
    'its own, different wait (after the connection is back, before Machine verdicts resume) is --connection-grace',
  'contention-profiling': "Go's block profiler; Node has none (--profiler-address serves Node's CPU and heap profiles)",
};
