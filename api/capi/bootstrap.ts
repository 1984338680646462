// A Machine's bootstrap config -> BootstrapConfigFacts. For a KubeadmConfig (bootstrap.cluster.x-k8s.io,
// v1beta2 or v1beta1) JoinGuard needs whether it joins: KCP always sets joinConfiguration.controlPlane on
// a joining control-plane Machine's config and empties joinConfiguration on the init Machine's
// (controlplane/kubeadm/pkg/desiredstate). v1beta2 omits an empty joinConfiguration (omitzero), v1beta1
// leaves it nil; so "has a join configuration" means a non-empty object. Other providers' kinds carry
// no such facts.
import type { BootstrapConfigFacts } from './model.js';
import { CABPK_GROUP } from './model.js';
import { ObjectReader } from './reader.js';
import { groupOf } from './resources.js';

export function readBootstrapConfig(obj: unknown): BootstrapConfigFacts {
  const kindField = typeof obj === 'object' && obj !== null ? (obj as Record<string, unknown>)['kind'] : undefined;
  const r: ObjectReader = ObjectReader.of(
    obj,
    typeof kindField === 'string' && kindField !== '' ? kindField : 'BootstrapConfig',
  );
  const kind = r.requiredString('kind');
  const apiVersion = r.requiredString('apiVersion');
  const facts: BootstrapConfigFacts = {
    kind,
    name: r.requiredString('metadata.name'),
    namespace: r.requiredString('metadata.namespace'),
  };
  if (kind !== 'KubeadmConfig' || groupOf(apiVersion) !== CABPK_GROUP) return facts;
  const join = r.object('spec.joinConfiguration');
  facts.hasJoinConfiguration = join !== undefined && Object.keys(join).length > 0;
  facts.joinsControlPlane = r.object('spec.joinConfiguration.controlPlane') !== undefined;
  return facts;
}
