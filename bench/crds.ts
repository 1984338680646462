// The CRDs the benchmark installs: MachineJoinCheck (from manifests/crd) and three bench-only kinds that
// stand in for an infrastructure and a control-plane provider. The fleet creates these already
// "provisioned" (status written by the bench), so CAPI's real Cluster and Machine controllers bring every
// Machine to phase Provisioned without any provider running — and without Nodes, which in this test
// environment would be cached once per Cluster by CAPI's ClusterCache (every Cluster's workload cluster is
// the same apiserver), a cost no real fleet has.
//   infrastructure.bench.joinguard.io/v1alpha1 BenchCluster, BenchMachine, BenchMachineTemplate  (v1beta2 infra
//                                              contract; the template is what the KCP and the MachineSets name:
//                                              without its CRD CAPI's conversion of their refs retried in a loop)
//   controlplane.bench.joinguard.io/v1alpha1   BenchControlPlane            (v1beta2 control-plane contract)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import type { Json, KubeClient } from '../hack/testenv/kube-client.js';

export const BENCH_INFRA_GROUP = 'infrastructure.bench.joinguard.io';
export const BENCH_CP_GROUP = 'controlplane.bench.joinguard.io';
export const BENCH_VERSION = 'v1alpha1';

export const BENCH_CLUSTER = {
  group: BENCH_INFRA_GROUP,
  version: BENCH_VERSION,
  plural: 'benchclusters',
  kind: 'BenchCluster',
  namespaced: true,
};
export const BENCH_MACHINE = {
  group: BENCH_INFRA_GROUP,
  version: BENCH_VERSION,
  plural: 'benchmachines',
  kind: 'BenchMachine',
  namespaced: true,
};
export const BENCH_MACHINE_TEMPLATE = {
  group: BENCH_INFRA_GROUP,
  version: BENCH_VERSION,
  plural: 'benchmachinetemplates',
  kind: 'BenchMachineTemplate',
  namespaced: true,
};
export const BENCH_CONTROL_PLANE = {
  group: BENCH_CP_GROUP,
  version: BENCH_VERSION,
  plural: 'benchcontrolplanes',
  kind: 'BenchControlPlane',
  namespaced: true,
};

const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const here = path.dirname(fileURLToPath(import.meta.url));

// Schemaless spec/status: the bench writes exactly the contract fields CAPI reads, nothing validates them.
const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };

function benchCrd(def: { group: string; kind: string; plural: string }): Json {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${def.plural}.${def.group}`,
      // CAPI reads the contract version of a referenced kind from this label (internal/contract).
      labels: { 'cluster.x-k8s.io/v1beta2': BENCH_VERSION, 'joinguard.io/benchmark': 'true' },
    },
    spec: {
      group: def.group,
      scope: 'Namespaced',
      names: { kind: def.kind, listKind: `${def.kind}List`, plural: def.plural, singular: def.kind.toLowerCase() },
      versions: [
        {
          name: BENCH_VERSION,
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
  };
}

export function machineJoinCheckCrd(): Json {
  const file = path.join(here, '..', 'manifests', 'crd', 'joinguard.io_machinejoinchecks.yaml');
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'))
    .map((d) => d.toJSON() as Json)
    .filter((d) => d?.kind === 'CustomResourceDefinition');
  if (docs.length !== 1) throw new Error(`${file}: expected one CRD, found ${docs.length}`);
  return docs[0]!;
}

/** Creates the CRDs and waits until each is Established. */
export async function installBenchCrds(rest: KubeClient, timeoutMs = 30_000): Promise<void> {
  const crds = [
    machineJoinCheckCrd(),
    ...[BENCH_CLUSTER, BENCH_MACHINE, BENCH_MACHINE_TEMPLATE, BENCH_CONTROL_PLANE].map(benchCrd),
  ];
  for (const crd of crds) await rest.create(CRD_PATH, crd);
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      const cur = await rest.get(`${CRD_PATH}/${crd.metadata.name}`);
      if ((cur?.status?.conditions ?? []).some((c: Json) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${crd.metadata.name} not Established after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
