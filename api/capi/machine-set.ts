// MachineSet (cluster.x-k8s.io v1beta2 and v1beta1) -> MachineSetFacts: only what a rollout's evidence needs
// (rollout-suspect.ts). The template references read the same in both versions (kind and name; v1beta2 names the
// group, v1beta1 the apiVersion, neither is needed to tell two templates apart). Field names from core/v1beta2 and
// core/v1beta1 machineset_types.go; the revision annotation from machinedeployment_types.go (RevisionAnnotation).
import { CAPI_GROUP, type MachineSetFacts } from './model.js';
import { ObjectReader } from './reader.js';
import { CAPI_LABEL_CLUSTER_NAME, groupOf } from './resources.js';
import { readMeta } from './machine.js';

export const MD_ANNOTATION_REVISION = 'machinedeployment.clusters.x-k8s.io/revision';
export const CAPI_LABEL_DEPLOYMENT_NAME = 'cluster.x-k8s.io/deployment-name';

export function readMachineSet(obj: unknown): MachineSetFacts {
  const r: ObjectReader = ObjectReader.of(obj, 'MachineSet');
  const meta = readMeta(r);
  const clusterName = r.string('spec.clusterName') || meta.labels[CAPI_LABEL_CLUSTER_NAME];
  if (!clusterName) r.fail('spec.clusterName', `is required (or the ${CAPI_LABEL_CLUSTER_NAME} label)`);
  const facts: MachineSetFacts = {
    name: meta.name,
    namespace: meta.namespace,
    uid: meta.uid,
    clusterName,
    createdAt: meta.createdAt,
  };
  if (meta.deletingSince !== undefined) facts.deletingSince = meta.deletingSince;
  const deployment = deploymentOf(r) ?? meta.labels[CAPI_LABEL_DEPLOYMENT_NAME];
  if (deployment) facts.deployment = deployment;
  const revision = meta.annotations[MD_ANNOTATION_REVISION];
  if (revision) facts.revision = revision;
  const infra = templateRef(r, 'spec.template.spec.infrastructureRef');
  if (infra) facts.infrastructureTemplate = infra;
  const bootstrap = templateRef(r, 'spec.template.spec.bootstrap.configRef');
  if (bootstrap) facts.bootstrapTemplate = bootstrap;
  const version = r.string('spec.template.spec.version');
  if (version) facts.version = version;
  return facts;
}

/** The controller owner's name when it is a MachineDeployment. */
function deploymentOf(r: ObjectReader): string | undefined {
  const refs = r.list('metadata.ownerReferences') ?? [];
  for (const ref of refs) {
    if (typeof ref !== 'object' || ref === null) continue;
    const o = ref as Record<string, unknown>;
    if (
      o['controller'] !== true ||
      o['kind'] !== 'MachineDeployment' ||
      typeof o['apiVersion'] !== 'string' ||
      groupOf(o['apiVersion']) !== CAPI_GROUP
    )
      continue;
    if (typeof o['name'] === 'string' && o['name'] !== '') return o['name'];
  }
  return undefined;
}

function templateRef(r: ObjectReader, path: string): string | undefined {
  const kind = r.string(`${path}.kind`);
  const name = r.string(`${path}.name`);
  return kind && name ? `${kind}/${name}` : undefined;
}
