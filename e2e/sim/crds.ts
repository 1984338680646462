// The CRDs of the simulation's kinds (test-only), built from TypeScript so that there is no YAML to keep
// in step. Two kind sets, each clearly a simulation:
//   infrastructure.sim.joinguard.io/v1alpha1: SimCluster, SimClusterTemplate, SimMachine, SimMachineTemplate
//   bootstrap.sim.joinguard.io/v1alpha1:      SimBootstrapConfig, SimBootstrapConfigTemplate
// They carry CAPI's contract label of the release under test, `cluster.x-k8s.io/v1beta2: v1alpha1` (v1.11+)
// or `cluster.x-k8s.io/v1beta1: v1alpha1` (v1.10); CAPI reads it from the CRD to pick the API version of a
// ref and, since v1.11, the contract whose fields it reads. The schemas have the fields of both contracts
// (capi-api.ts); the sim writes those of the contract in force: InfraCluster spec.controlPlaneEndpoint and
// provisioned/ready; InfraMachine spec.providerID, provisioned/ready, status.addresses; bootstrap
// dataSecretCreated/ready + status.dataSecretName; `Ready` conditions on all of them.
import { installCrds } from '../../hack/testenv/crds.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import type { CapiApiVersion } from './capi-api.js';

export const INFRA_GROUP = 'infrastructure.sim.joinguard.io';
export const BOOTSTRAP_GROUP = 'bootstrap.sim.joinguard.io';
export const SIM_VERSION = 'v1alpha1';

export const SIM_CLUSTER = {
  group: INFRA_GROUP,
  version: SIM_VERSION,
  plural: 'simclusters',
  namespaced: true,
  kind: 'SimCluster',
};
export const SIM_MACHINE = {
  group: INFRA_GROUP,
  version: SIM_VERSION,
  plural: 'simmachines',
  namespaced: true,
  kind: 'SimMachine',
};
export const SIM_MACHINE_TEMPLATE = {
  group: INFRA_GROUP,
  version: SIM_VERSION,
  plural: 'simmachinetemplates',
  namespaced: true,
  kind: 'SimMachineTemplate',
};
export const SIM_CLUSTER_TEMPLATE = {
  group: INFRA_GROUP,
  version: SIM_VERSION,
  plural: 'simclustertemplates',
  namespaced: true,
  kind: 'SimClusterTemplate',
};
export const SIM_BOOTSTRAP = {
  group: BOOTSTRAP_GROUP,
  version: SIM_VERSION,
  plural: 'simbootstrapconfigs',
  namespaced: true,
  kind: 'SimBootstrapConfig',
};
export const SIM_BOOTSTRAP_TEMPLATE = {
  group: BOOTSTRAP_GROUP,
  version: SIM_VERSION,
  plural: 'simbootstrapconfigtemplates',
  namespaced: true,
  kind: 'SimBootstrapConfigTemplate',
};

const str = { type: 'string' };
const bool = { type: 'boolean' };
const obj = (properties: Json, extra: Json = {}) => ({ type: 'object', properties, ...extra });

const conditions = {
  type: 'array',
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
  items: obj(
    {
      type: str,
      status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
      reason: str,
      message: str,
      lastTransitionTime: { type: 'string', format: 'date-time' },
      observedGeneration: { type: 'integer', format: 'int64' },
    },
    { required: ['type', 'status', 'lastTransitionTime', 'reason'] },
  ),
};

const endpoint = obj({ host: str, port: { type: 'integer', format: 'int32' } });

/** The sim's own record of a simulated VM's boot (not a contract field; nothing in CAPI reads it). */
const boot = obj({
  dataSeenAt: { ...str, description: "When the sim first saw the Machine's bootstrap data (ISO time, ms)." },
  provisionedAt: str,
  phase: { type: 'string', enum: ['Waiting', 'Held', 'Joined', 'Failed'] },
  role: { type: 'string', enum: ['init', 'join-control-plane', 'join'] },
  reason: str,
  message: str,
  nodeName: str,
  attemptedAt: str,
});

const simMachineSpec = obj({
  providerID: { ...str, description: 'sim://<namespace>/<machine>, set by the simulation when provisioned.' },
  image: {
    ...str,
    description:
      'The VM image (a name only): what a template revision changes; the join policy can fail every VM of one image.',
  },
});

const simMachineStatus = obj({
  initialization: obj({ provisioned: bool }),
  ready: bool,
  addresses: { type: 'array', items: obj({ type: str, address: str }, { required: ['type', 'address'] }) },
  conditions,
  boot,
});

const bootstrapStatus = obj({
  initialization: obj({ dataSecretCreated: bool }),
  ready: bool,
  dataSecretName: str,
  conditions,
});

interface KindDef {
  group: string;
  kind: string;
  plural: string;
  singular: string;
  description: string;
  spec: Json;
  status?: Json;
  printer?: Json[];
}

const templateOf = (spec: Json) =>
  obj(
    {
      template: obj(
        { metadata: obj({}, { 'x-kubernetes-preserve-unknown-fields': true }), spec },
        { required: ['spec'] },
      ),
    },
    { required: ['template'] },
  );

const KINDS: KindDef[] = [
  {
    group: INFRA_GROUP,
    kind: 'SimCluster',
    plural: 'simclusters',
    singular: 'simcluster',
    description:
      'SIMULATION (JoinGuard tests): a pretend infrastructure cluster. The sim marks it provisioned with a controlPlaneEndpoint.',
    spec: obj({ controlPlaneEndpoint: endpoint }),
    status: obj({ initialization: obj({ provisioned: bool }), ready: bool, conditions }),
    printer: [
      { name: 'Provisioned', type: 'boolean', jsonPath: '.status.initialization.provisioned' },
      { name: 'Endpoint', type: 'string', jsonPath: '.spec.controlPlaneEndpoint.host' },
      { name: 'Port', type: 'integer', jsonPath: '.spec.controlPlaneEndpoint.port' },
    ],
  },
  {
    group: INFRA_GROUP,
    kind: 'SimClusterTemplate',
    plural: 'simclustertemplates',
    singular: 'simclustertemplate',
    description:
      'SIMULATION (JoinGuard tests): template of SimClusters, for ClusterClasses (the topology controller clones it).',
    spec: templateOf(obj({ controlPlaneEndpoint: endpoint })),
  },
  {
    group: INFRA_GROUP,
    kind: 'SimMachine',
    plural: 'simmachines',
    singular: 'simmachine',
    description:
      'SIMULATION (JoinGuard tests): a pretend VM. The sim provisions it and, when its join policy allows, registers its Node.',
    spec: simMachineSpec,
    status: simMachineStatus,
    printer: [
      { name: 'ProviderID', type: 'string', jsonPath: '.spec.providerID' },
      { name: 'Provisioned', type: 'boolean', jsonPath: '.status.initialization.provisioned' },
      { name: 'Boot', type: 'string', jsonPath: '.status.boot.phase' },
      { name: 'Reason', type: 'string', jsonPath: '.status.boot.reason' },
    ],
  },
  {
    group: INFRA_GROUP,
    kind: 'SimMachineTemplate',
    plural: 'simmachinetemplates',
    singular: 'simmachinetemplate',
    description: 'SIMULATION (JoinGuard tests): template of SimMachines.',
    spec: templateOf(simMachineSpec),
  },
  {
    group: BOOTSTRAP_GROUP,
    kind: 'SimBootstrapConfig',
    plural: 'simbootstrapconfigs',
    singular: 'simbootstrapconfig',
    description: 'SIMULATION (JoinGuard tests): pretend bootstrap data; the sim writes the data secret after a delay.',
    spec: obj({}),
    status: bootstrapStatus,
    printer: [{ name: 'DataSecret', type: 'string', jsonPath: '.status.dataSecretName' }],
  },
  {
    group: BOOTSTRAP_GROUP,
    kind: 'SimBootstrapConfigTemplate',
    plural: 'simbootstrapconfigtemplates',
    singular: 'simbootstrapconfigtemplate',
    description: 'SIMULATION (JoinGuard tests): template of SimBootstrapConfigs.',
    spec: templateOf(obj({})),
  },
];

function crdOf(def: KindDef, contract: CapiApiVersion): Json {
  const schema = obj(
    {
      apiVersion: str,
      kind: str,
      metadata: { type: 'object' },
      spec: { ...def.spec, description: def.description },
      ...(def.status ? { status: def.status } : {}),
    },
    { description: def.description },
  );
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${def.plural}.${def.group}`,
      labels: {
        [`cluster.x-k8s.io/${contract}`]: SIM_VERSION,
        'cluster.x-k8s.io/provider': def.group === INFRA_GROUP ? 'infrastructure-sim' : 'bootstrap-sim',
        'joinguard.io/simulation': 'true',
      },
    },
    spec: {
      group: def.group,
      scope: 'Namespaced',
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        categories: ['cluster-api', 'joinguard-sim'],
      },
      versions: [
        {
          name: SIM_VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: schema },
          ...(def.status ? { subresources: { status: {} } } : {}),
          additionalPrinterColumns: [
            ...(def.printer ?? []),
            { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
          ],
        },
      ],
    },
  };
}

/** The CRDs of the simulation, labelled for the provider contract of the release under test. */
export function simCrds(contract: CapiApiVersion): Json[] {
  return KINDS.map((k) => crdOf(k, contract));
}

/** Creates (or replaces) the sim CRDs and waits until the apiserver serves them. */
export function installSimCrds(kube: KubeClient, contract: CapiApiVersion, timeoutMs = 20_000): Promise<void> {
  return installCrds(kube, simCrds(contract), timeoutMs);
}
