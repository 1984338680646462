// Stand-in infrastructure and control-plane providers for the install tests, in groups of their own so that
// nothing else in the run (the bench, the scenarios) shares them. As in bench/crds.ts, the test plays the
// provider: it writes the contract fields CAPI reads into status by hand, and CAPI's real controllers do the
// rest. A Machine whose InstallMachine the test provisions reaches phase Provisioned without ever getting a
// Node; one it leaves alone stays Provisioning.
//   infrastructure.install.joinguard.io/v1alpha1 InstallCluster, InstallMachine, InstallMachineTemplate
//   controlplane.install.joinguard.io/v1alpha1   InstallControlPlane
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { raw } from './install-env.js';

type Json = Record<string, any>;
export const INFRA_GROUP = 'infrastructure.install.joinguard.io';
export const CP_GROUP = 'controlplane.install.joinguard.io';
const VERSION = 'v1alpha1';
const CAPI = '/apis/cluster.x-k8s.io/v1beta2';
const CN = 'cluster.x-k8s.io/cluster-name';

const KINDS = [
  { group: INFRA_GROUP, kind: 'InstallCluster' },
  { group: INFRA_GROUP, kind: 'InstallMachine' },
  { group: INFRA_GROUP, kind: 'InstallMachineTemplate' },
  { group: CP_GROUP, kind: 'InstallControlPlane' },
];
const plural = (kind: string) => `${kind.toLowerCase()}s`;
const at = (group: string, kind: string, ns: string, name?: string, sub?: string) =>
  `/apis/${group}/${VERSION}/namespaces/${ns}/${plural(kind)}${name ? `/${name}` : ''}${sub ? `/${sub}` : ''}`;

async function ok(res: Promise<{ status: number; body: string }>, what: string, also: number[] = []): Promise<Json> {
  const r = await res;
  if (r.status >= 300 && !also.includes(r.status)) throw new Error(`${what}: ${r.status} ${r.body.slice(0, 400)}`);
  return JSON.parse(r.body) as Json;
}

/** Creates the stand-in CRDs (an existing one is kept) and waits until each is Established. */
export async function ensureStandInCrds(admin: KubeConfig): Promise<void> {
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  for (const { group, kind } of KINDS) {
    const name = `${plural(kind)}.${group}`;
    await ok(
      raw(admin, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
        apiVersion: 'apiextensions.k8s.io/v1',
        kind: 'CustomResourceDefinition',
        // CAPI finds the contract version of a referenced kind through this label.
        metadata: { name, labels: { 'cluster.x-k8s.io/v1beta2': VERSION } },
        spec: {
          group,
          scope: 'Namespaced',
          names: { kind, listKind: `${kind}List`, plural: plural(kind), singular: kind.toLowerCase() },
          versions: [
            {
              name: VERSION,
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    apiVersion: { type: 'string' },
                    kind: { type: 'string' },
                    metadata: { type: 'object' },
                    spec: open,
                    status: open,
                  },
                },
              },
            },
          ],
        },
      }),
      `CRD ${name}`,
      [409],
    );
    const deadline = Date.now() + 30_000;
    for (;;) {
      const crd = await ok(
        raw(admin, 'GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`),
        `CRD ${name}`,
      );
      if ((crd.status?.conditions ?? []).some((c: Json) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not Established`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/**
 * A Cluster whose infrastructure is provisioned and whose control plane is initialized, with a
 * `<cluster>-kubeconfig` Secret pointing at the test apiserver (CAPI's ClusterCache connects to it, so the
 * Cluster's RemoteConnectionProbe turns True and Machines without Nodes are observable).
 */
export async function createReadyCluster(
  admin: KubeConfig,
  ns: string,
  name: string,
  server: string,
  kubeconfigPath: string,
): Promise<void> {
  const url = new URL(server);
  await ok(
    raw(admin, 'POST', at(INFRA_GROUP, 'InstallCluster', ns), {
      apiVersion: `${INFRA_GROUP}/${VERSION}`,
      kind: 'InstallCluster',
      metadata: { name },
      spec: { controlPlaneEndpoint: { host: url.hostname, port: Number(url.port) } },
    }),
    'InstallCluster',
  );
  await ok(
    raw(
      admin,
      'PATCH',
      at(INFRA_GROUP, 'InstallCluster', ns, name, 'status'),
      { status: { initialization: { provisioned: true } } },
      'application/merge-patch+json',
    ),
    'InstallCluster status',
  );
  await ok(
    raw(admin, 'POST', at(CP_GROUP, 'InstallControlPlane', ns), {
      apiVersion: `${CP_GROUP}/${VERSION}`,
      kind: 'InstallControlPlane',
      metadata: { name },
      spec: {},
    }),
    'InstallControlPlane',
  );
  await ok(
    raw(
      admin,
      'PATCH',
      at(CP_GROUP, 'InstallControlPlane', ns, name, 'status'),
      { status: { initialization: { controlPlaneInitialized: true } } },
      'application/merge-patch+json',
    ),
    'InstallControlPlane status',
  );
  await ok(
    raw(admin, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
      metadata: { name: `${name}-kubeconfig`, labels: { [CN]: name } },
      type: 'cluster.x-k8s.io/secret',
      data: { value: Buffer.from(await readFile(kubeconfigPath)).toString('base64') },
    }),
    'kubeconfig Secret',
  );
  await ok(
    raw(admin, 'POST', `${CAPI}/namespaces/${ns}/clusters`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name },
      spec: {
        infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'InstallCluster', name },
        controlPlaneRef: { apiGroup: CP_GROUP, kind: 'InstallControlPlane', name },
      },
    }),
    'Cluster',
  );
}

/** A MachineSet of worker Machines from an InstallMachineTemplate, bootstrap data given directly. */
export async function createMachineSet(
  admin: KubeConfig,
  ns: string,
  cluster: string,
  name: string,
  replicas: number,
): Promise<Json> {
  await ok(
    raw(admin, 'POST', at(INFRA_GROUP, 'InstallMachineTemplate', ns), {
      apiVersion: `${INFRA_GROUP}/${VERSION}`,
      kind: 'InstallMachineTemplate',
      metadata: { name },
      spec: { template: { spec: {} } },
    }),
    'InstallMachineTemplate',
  );
  return ok(
    raw(admin, 'POST', `${CAPI}/namespaces/${ns}/machinesets`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'MachineSet',
      metadata: { name, labels: { [CN]: cluster } },
      spec: {
        clusterName: cluster,
        replicas,
        selector: { matchLabels: { pool: name } },
        template: {
          metadata: { labels: { pool: name, [CN]: cluster } },
          spec: {
            clusterName: cluster,
            bootstrap: { dataSecretName: `${name}-bootstrap` },
            infrastructureRef: { apiGroup: INFRA_GROUP, kind: 'InstallMachineTemplate', name },
          },
        },
      },
    }),
    'MachineSet',
  );
}

/** Plays the infrastructure provider for one Machine: a providerID and `provisioned`, and no Node ever. */
export async function provisionInfrastructure(admin: KubeConfig, ns: string, machine: Json): Promise<void> {
  const name = machine.spec.infrastructureRef.name as string;
  await ok(
    raw(
      admin,
      'PATCH',
      at(INFRA_GROUP, 'InstallMachine', ns, name),
      { spec: { providerID: `install://${ns}/${name}` } },
      'application/merge-patch+json',
    ),
    'InstallMachine',
  );
  await ok(
    raw(
      admin,
      'PATCH',
      at(INFRA_GROUP, 'InstallMachine', ns, name, 'status'),
      {
        status: { initialization: { provisioned: true }, addresses: [{ type: 'InternalIP', address: '127.0.0.1' }] },
      },
      'application/merge-patch+json',
    ),
    'InstallMachine status',
  );
}

/** The Machines of a pool, by name. */
export async function machinesOf(admin: KubeConfig, ns: string, pool: string): Promise<Json[]> {
  const list = await ok(
    raw(admin, 'GET', `${CAPI}/namespaces/${ns}/machines?labelSelector=${encodeURIComponent(`pool=${pool}`)}`),
    'list Machines',
  );
  return list.items as Json[];
}
