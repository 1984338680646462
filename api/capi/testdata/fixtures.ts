// Realistic CAPI objects as the API returns them, one builder per kind and version, written from the Go
// types and the CRD schemas of CAPI v1.14.2 (fixtures.test.ts checks every field against those CRDs when
// they are on this machine). Each call returns a fresh object: tests change what they need.
export const T0 = '2026-05-01T10:00:00Z'; // created
export const T1 = '2026-05-01T10:02:00Z'; // infrastructure ready
export const T2 = '2026-05-01T10:03:00Z'; // bootstrap data ready
export const T3 = '2026-05-01T10:05:00Z'; // control plane initialized
export const ms = (t: string) => Date.parse(t);

type Json = Record<string, any>;

const CAPI = 'cluster.x-k8s.io';

/** A v1beta2 worker Machine of MachineSet md-0-abc: Provisioned, waiting for its Node. */
export function machineV1beta2(): Json {
  return {
    apiVersion: `${CAPI}/v1beta2`,
    kind: 'Machine',
    metadata: {
      name: 'md-0-abc-xyz',
      namespace: 'default',
      uid: 'uid-m-1',
      resourceVersion: '1001',
      generation: 2,
      creationTimestamp: T0,
      labels: {
        'cluster.x-k8s.io/cluster-name': 'c1',
        'cluster.x-k8s.io/deployment-name': 'md-0',
        'cluster.x-k8s.io/set-name': 'md-0-abc',
      },
      annotations: { 'machine.cluster.x-k8s.io/exclude-node-draining': '' },
      finalizers: ['machine.cluster.x-k8s.io'],
      ownerReferences: [
        {
          apiVersion: `${CAPI}/v1beta2`,
          kind: 'MachineSet',
          name: 'md-0-abc',
          uid: 'uid-ms-1',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      clusterName: 'c1',
      bootstrap: {
        configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name: 'md-0-abc-xyz' },
        dataSecretName: 'md-0-abc-xyz',
      },
      infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name: 'md-0-abc-xyz' },
      version: 'v1.33.1',
      providerID: 'docker:////c1-md-0-abc-xyz',
      deletion: { nodeDrainTimeoutSeconds: 0 },
    },
    status: {
      phase: 'Provisioned',
      observedGeneration: 2,
      initialization: { infrastructureProvisioned: true, bootstrapDataSecretCreated: true },
      addresses: [{ type: 'InternalIP', address: '172.18.0.5' }],
      conditions: [
        {
          type: 'Available',
          status: 'False',
          reason: 'NotReady',
          message: '',
          lastTransitionTime: T0,
          observedGeneration: 2,
        },
        {
          type: 'Ready',
          status: 'False',
          reason: 'NotReady',
          message: '* NodeHealthy: Waiting for a Node',
          lastTransitionTime: T0,
          observedGeneration: 2,
        },
        {
          type: 'InfrastructureReady',
          status: 'True',
          reason: 'Ready',
          message: '',
          lastTransitionTime: T1,
          observedGeneration: 2,
        },
        {
          type: 'BootstrapConfigReady',
          status: 'True',
          reason: 'Ready',
          message: '',
          lastTransitionTime: T2,
          observedGeneration: 2,
        },
        {
          type: 'NodeReady',
          status: 'Unknown',
          reason: 'NodeDoesNotExist',
          message: 'Waiting for a Node with spec.providerID docker:////c1-md-0-abc-xyz to exist',
          lastTransitionTime: T0,
          observedGeneration: 2,
        },
        {
          type: 'NodeHealthy',
          status: 'Unknown',
          reason: 'NodeDoesNotExist',
          message: 'Waiting for a Node with spec.providerID docker:////c1-md-0-abc-xyz to exist',
          lastTransitionTime: T0,
          observedGeneration: 2,
        },
        {
          type: 'Deleting',
          status: 'False',
          reason: 'NotDeleting',
          message: '',
          lastTransitionTime: T0,
          observedGeneration: 2,
        },
        {
          type: 'Paused',
          status: 'False',
          reason: 'NotPaused',
          message: '',
          lastTransitionTime: T0,
          observedGeneration: 2,
        },
      ],
      deprecated: {
        v1beta1: {
          conditions: [
            { type: 'Ready', status: 'False', severity: 'Warning', reason: 'NodeProvisioning', lastTransitionTime: T0 },
          ],
        },
      },
    },
  };
}

/** The same Machine through the v1beta1 API of CAPI v1.10: booleans, v1beta1 conditions, status.v1beta2. */
export function machineV1beta1(): Json {
  return {
    apiVersion: `${CAPI}/v1beta1`,
    kind: 'Machine',
    metadata: {
      ...machineV1beta2()['metadata'],
      ownerReferences: [
        {
          apiVersion: `${CAPI}/v1beta1`,
          kind: 'MachineSet',
          name: 'md-0-abc',
          uid: 'uid-ms-1',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      clusterName: 'c1',
      bootstrap: {
        configRef: {
          apiVersion: 'bootstrap.cluster.x-k8s.io/v1beta1',
          kind: 'KubeadmConfig',
          name: 'md-0-abc-xyz',
          namespace: 'default',
          uid: 'uid-kc-1',
        },
        dataSecretName: 'md-0-abc-xyz',
      },
      infrastructureRef: {
        apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1',
        kind: 'DockerMachine',
        name: 'md-0-abc-xyz',
        namespace: 'default',
      },
      version: 'v1.30.4',
      providerID: 'docker:////c1-md-0-abc-xyz',
      nodeDrainTimeout: '0s',
    },
    status: {
      phase: 'Provisioned',
      observedGeneration: 2,
      bootstrapReady: true,
      infrastructureReady: true,
      lastUpdated: T2,
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          severity: 'Warning',
          reason: 'NodeProvisioning',
          message: 'Waiting for a node with matching ProviderID to exist',
          lastTransitionTime: T0,
        },
        { type: 'BootstrapReady', status: 'True', lastTransitionTime: T2 },
        { type: 'InfrastructureReady', status: 'True', lastTransitionTime: T1 },
        {
          type: 'NodeHealthy',
          status: 'False',
          severity: 'Warning',
          reason: 'NodeProvisioning',
          message: 'Waiting for a node with matching ProviderID to exist',
          lastTransitionTime: T0,
        },
      ],
      v1beta2: {
        conditions: [
          {
            type: 'InfrastructureReady',
            status: 'True',
            reason: 'Ready',
            message: '',
            lastTransitionTime: T1,
            observedGeneration: 2,
          },
          {
            type: 'BootstrapConfigReady',
            status: 'True',
            reason: 'Ready',
            message: '',
            lastTransitionTime: T2,
            observedGeneration: 2,
          },
          {
            type: 'NodeReady',
            status: 'Unknown',
            reason: 'NodeDoesNotExist',
            message: 'Waiting for a Node',
            lastTransitionTime: T0,
            observedGeneration: 2,
          },
          {
            type: 'NodeHealthy',
            status: 'Unknown',
            reason: 'NodeDoesNotExist',
            message: 'Waiting for a Node',
            lastTransitionTime: T0,
            observedGeneration: 2,
          },
        ],
      },
    },
  };
}

/** A v1beta2 control-plane Machine of KubeadmControlPlane c1-cp. */
export function cpMachineV1beta2(): Json {
  const m = machineV1beta2();
  m['metadata'] = {
    ...m['metadata'],
    name: 'c1-cp-aaaaa',
    uid: 'uid-cp-1',
    labels: {
      'cluster.x-k8s.io/cluster-name': 'c1',
      'cluster.x-k8s.io/control-plane': '',
      'cluster.x-k8s.io/control-plane-name': 'c1-cp',
    },
    annotations: { 'controlplane.cluster.x-k8s.io/kubeadm-cluster-configuration': '{}' },
    ownerReferences: [
      {
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
        kind: 'KubeadmControlPlane',
        name: 'c1-cp',
        uid: 'uid-kcp-1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
  };
  m['spec']['bootstrap'] = {
    configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name: 'c1-cp-aaaaa' },
    dataSecretName: 'c1-cp-aaaaa',
  };
  return m;
}

export function clusterV1beta2(): Json {
  return {
    apiVersion: `${CAPI}/v1beta2`,
    kind: 'Cluster',
    metadata: {
      name: 'c1',
      namespace: 'default',
      uid: 'uid-c-1',
      resourceVersion: '900',
      generation: 1,
      creationTimestamp: T0,
      finalizers: ['cluster.cluster.x-k8s.io'],
    },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: ['192.168.0.0/16'] } },
      controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
      controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name: 'c1-cp' },
      infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerCluster', name: 'c1' },
    },
    status: {
      phase: 'Provisioned',
      observedGeneration: 1,
      initialization: { infrastructureProvisioned: true, controlPlaneInitialized: true },
      conditions: [
        {
          type: 'Available',
          status: 'False',
          reason: 'NotAvailable',
          message: '',
          lastTransitionTime: T0,
          observedGeneration: 1,
        },
        {
          type: 'InfrastructureReady',
          status: 'True',
          reason: 'Ready',
          message: '',
          lastTransitionTime: T0,
          observedGeneration: 1,
        },
        {
          type: 'ControlPlaneInitialized',
          status: 'True',
          reason: 'Initialized',
          message: '',
          lastTransitionTime: T3,
          observedGeneration: 1,
        },
        {
          type: 'RemoteConnectionProbe',
          status: 'True',
          reason: 'ProbeSucceeded',
          message: '',
          lastTransitionTime: T3,
          observedGeneration: 1,
        },
      ],
    },
  };
}

export function clusterV1beta1(): Json {
  return {
    apiVersion: `${CAPI}/v1beta1`,
    kind: 'Cluster',
    metadata: {
      name: 'c1',
      namespace: 'default',
      uid: 'uid-c-1',
      resourceVersion: '900',
      generation: 1,
      creationTimestamp: T0,
    },
    spec: {
      controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
      controlPlaneRef: {
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
        kind: 'KubeadmControlPlane',
        name: 'c1-cp',
        namespace: 'default',
      },
      infrastructureRef: {
        apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1',
        kind: 'DockerCluster',
        name: 'c1',
        namespace: 'default',
      },
    },
    status: {
      phase: 'Provisioned',
      infrastructureReady: true,
      controlPlaneReady: true,
      observedGeneration: 1,
      conditions: [
        { type: 'Ready', status: 'True', lastTransitionTime: T3 },
        { type: 'ControlPlaneInitialized', status: 'True', lastTransitionTime: T3 },
        { type: 'ControlPlaneReady', status: 'True', lastTransitionTime: T3 },
        { type: 'InfrastructureReady', status: 'True', lastTransitionTime: T0 },
      ],
      v1beta2: {
        conditions: [
          {
            type: 'RemoteConnectionProbe',
            status: 'True',
            reason: 'ProbeSucceeded',
            message: '',
            lastTransitionTime: T3,
            observedGeneration: 1,
          },
        ],
      },
    },
  };
}

export function kcpV1beta2(): Json {
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: {
      name: 'c1-cp',
      namespace: 'default',
      uid: 'uid-kcp-1',
      resourceVersion: '700',
      generation: 1,
      creationTimestamp: T0,
    },
    spec: {
      replicas: 3,
      version: 'v1.33.1',
      machineTemplate: {
        spec: {
          infrastructureRef: {
            apiGroup: 'infrastructure.cluster.x-k8s.io',
            kind: 'DockerMachineTemplate',
            name: 'c1-cp',
          },
        },
      },
      kubeadmConfigSpec: { clusterConfiguration: {} },
      remediation: { maxRetry: 3, retryPeriodSeconds: 300, minHealthyPeriodSeconds: 7200 },
    },
    status: {
      initialization: { controlPlaneInitialized: true },
      replicas: 1,
      readyReplicas: 0,
      availableReplicas: 0,
      upToDateReplicas: 1,
    },
  };
}

export function kcpV1beta1(): Json {
  return {
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
    kind: 'KubeadmControlPlane',
    metadata: {
      name: 'c1-cp',
      namespace: 'default',
      uid: 'uid-kcp-1',
      resourceVersion: '700',
      generation: 1,
      creationTimestamp: T0,
    },
    spec: {
      replicas: 3,
      version: 'v1.30.4',
      machineTemplate: {
        infrastructureRef: {
          apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1',
          kind: 'DockerMachineTemplate',
          name: 'c1-cp',
        },
      },
      kubeadmConfigSpec: { clusterConfiguration: {} },
      remediationStrategy: { maxRetry: 3, retryPeriod: '5m0s', minHealthyPeriod: '2h0m0s' },
    },
    status: {
      initialized: false,
      ready: false,
      replicas: 1,
      updatedReplicas: 1,
      readyReplicas: 0,
      unavailableReplicas: 1,
    },
  };
}

/** KubeadmConfigs as KCP and MachineDeployments create them. */
export function kubeadmConfig(v: 'v1beta2' | 'v1beta1', role: 'init' | 'joinControlPlane' | 'worker'): Json {
  const spec: Json = { clusterConfiguration: {} };
  if (role === 'init') {
    // v1beta2 omits an empty initConfiguration and joinConfiguration (omitzero); v1beta1 KCP sets initConfiguration.
    if (v === 'v1beta1')
      spec['initConfiguration'] = {
        nodeRegistration: { kubeletExtraArgs: { 'eviction-hard': 'nodefs.available<0%' } },
      };
  } else if (role === 'joinControlPlane') {
    spec['joinConfiguration'] = { controlPlane: {}, nodeRegistration: { name: 'c1-cp-bbbbb' } };
  } else {
    delete spec['clusterConfiguration'];
    spec['joinConfiguration'] = { nodeRegistration: { name: 'md-0-abc-xyz' } };
  }
  return {
    apiVersion: `bootstrap.cluster.x-k8s.io/${v}`,
    kind: 'KubeadmConfig',
    metadata: {
      name: role === 'worker' ? 'md-0-abc-xyz' : 'c1-cp-aaaaa',
      namespace: 'default',
      uid: 'uid-kc-1',
      resourceVersion: '500',
      creationTimestamp: T0,
    },
    spec,
    status:
      v === 'v1beta2'
        ? { initialization: { dataSecretCreated: true }, dataSecretName: 'c1-cp-aaaaa' }
        : { ready: true, dataSecretName: 'c1-cp-aaaaa' },
  };
}

export function mhcV1beta2(): Json {
  return {
    apiVersion: `${CAPI}/v1beta2`,
    kind: 'MachineHealthCheck',
    metadata: {
      name: 'md-0-mhc',
      namespace: 'default',
      uid: 'uid-mhc-1',
      resourceVersion: '300',
      generation: 1,
      creationTimestamp: T0,
    },
    spec: {
      clusterName: 'c1',
      selector: { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' } },
      checks: {
        nodeStartupTimeoutSeconds: 0,
        unhealthyNodeConditions: [{ type: 'Ready', status: 'Unknown', timeoutSeconds: 300 }],
        unhealthyMachineConditions: [{ type: 'JoinGuardJoined', status: 'False', timeoutSeconds: 0 }],
      },
      remediation: { triggerIf: { unhealthyLessThanOrEqualTo: '40%' } },
    },
  };
}

export function mhcV1beta1(): Json {
  return {
    apiVersion: `${CAPI}/v1beta1`,
    kind: 'MachineHealthCheck',
    metadata: {
      name: 'md-0-mhc',
      namespace: 'default',
      uid: 'uid-mhc-1',
      resourceVersion: '300',
      generation: 1,
      creationTimestamp: T0,
    },
    spec: {
      clusterName: 'c1',
      selector: {
        matchExpressions: [{ key: 'cluster.x-k8s.io/deployment-name', operator: 'In', values: ['md-0', 'md-1'] }],
      },
      maxUnhealthy: '40%',
      unhealthyConditions: [{ type: 'Ready', status: 'Unknown', timeout: '5m0s' }],
    },
    status: { expectedMachines: 1, currentHealthy: 0, remediationsAllowed: 1 },
  };
}
