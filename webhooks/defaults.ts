// The mutating webhook: writes DESIGN.md's defaults into a MachineJoinCheck as a JSON patch, so that what a
// user reads back (`kubectl get -o yaml`) is what the controller acts on. Only absent fields are written; a
// value the user wrote, even a bad one, is left for the validating webhook to refuse with its field name.
import { SPEC_DEFAULTS } from '../api/v1alpha1/defaults.js';
import { isObject, pointerSegment, type JsonPatchOp } from './admission.js';

export { SPEC_DEFAULTS };

const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';

/**
 * The patch that defaults `obj`. A spec that is not an object gets no patch: validation refuses it with a
 * message, which a patch would only hide. Like CAPI's MachineHealthCheck defaulting, the check is labelled
 * with its Cluster's name (`cluster.x-k8s.io/cluster-name`), so `kubectl get mjc -l ...` finds a Cluster's checks.
 */
export function defaultingPatch(obj: unknown): JsonPatchOp[] {
  if (!isObject(obj) || !isObject(obj['spec'])) return [];
  const spec = obj['spec'];
  const ops: JsonPatchOp[] = [];
  addMissing(ops, '/spec', spec, SPEC_DEFAULTS as unknown as Record<string, unknown>);

  const clusterName = spec['clusterName'];
  if (typeof clusterName === 'string' && clusterName !== '') {
    const meta = isObject(obj['metadata']) ? obj['metadata'] : undefined;
    if (!meta) {
      ops.push({ op: 'add', path: '/metadata', value: { labels: { [CLUSTER_NAME_LABEL]: clusterName } } });
    } else if (!isObject(meta['labels'])) {
      ops.push({ op: 'add', path: '/metadata/labels', value: { [CLUSTER_NAME_LABEL]: clusterName } });
    } else if (meta['labels'][CLUSTER_NAME_LABEL] !== clusterName) {
      ops.push({ op: 'add', path: `/metadata/labels/${pointerSegment(CLUSTER_NAME_LABEL)}`, value: clusterName });
    }
  }
  return ops;
}

/** Adds each default that `have` lacks; a nested default object is added whole when its parent is absent. */
function addMissing(ops: JsonPatchOp[], path: string, have: Record<string, unknown>, defaults: Record<string, unknown>): void {
  for (const [key, def] of Object.entries(defaults)) {
    const p = `${path}/${pointerSegment(key)}`;
    const cur = have[key];
    if (cur === undefined || cur === null) {
      // `null` is what `kubectl apply` leaves when a field is cleared: treat it as absent.
      ops.push({ op: cur === null ? 'replace' : 'add', path: p, value: structuredClone(def) });
    } else if (isObject(def) && isObject(cur)) {
      addMissing(ops, p, cur, def as Record<string, unknown>);
    }
    // A present non-object where an object is expected is validation's to refuse.
  }
}

/** Applies a patch of `add`/`replace` ops to a copy of `obj` (for tests and for validating the defaulted object). */
export function applyPatch<T>(obj: T, ops: JsonPatchOp[]): T {
  const out = structuredClone(obj) as unknown;
  for (const op of ops) {
    const segs = op.path.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    let cur = out as Record<string, unknown>;
    for (const s of segs.slice(0, -1)) cur = cur[s] as Record<string, unknown>;
    const last = segs[segs.length - 1]!;
    if (op.op === 'remove') delete cur[last];
    else cur[last] = structuredClone(op.value);
  }
  return out as T;
}
