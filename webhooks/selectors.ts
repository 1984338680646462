// Selector reasoning the CRD schema cannot do: whether a check's selector contradicts its Cluster's label,
// and whether two selectors of the same Cluster can select one Machine.
//
// Overlap rule (documented in docs/install.md): two selectors overlap when some label set satisfies both,
// given that every Machine of the Cluster carries `cluster.x-k8s.io/cluster-name: <clusterName>` and given
// CAPI's ownership labels: a Machine is a control-plane Machine (`control-plane`, `control-plane-name`), a
// MachineSet Machine (`set-name`, `deployment-name`) or a MachinePool Machine (`pool-name`), never two of these.
// The test is exact for label logic (per key: the requirements of both selectors must admit a value, or
// absence), so it also covers Machines that do not exist yet; the webhook additionally refuses when an
// existing Machine is selected by both, which catches Machines that break CAPI's label conventions.
import type { LabelSelectorModel } from '../api/capi/model.js';
import type { FieldProblem } from './admission.js';

export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';

/** CAPI label keys by owner: a Machine carries keys of at most one group. */
const OWNERSHIP_GROUPS: { name: string; keys: string[] }[] = [
  { name: 'control-plane', keys: ['cluster.x-k8s.io/control-plane', 'cluster.x-k8s.io/control-plane-name'] },
  { name: 'MachineSet', keys: ['cluster.x-k8s.io/set-name', 'cluster.x-k8s.io/deployment-name'] },
  { name: 'MachinePool', keys: ['cluster.x-k8s.io/pool-name'] },
];

type Op = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
interface Req {
  op: Op;
  values: string[];
}

/** A selector as per-key requirements (matchLabels k=v is `k In [v]`). Tolerates malformed input. */
function requirements(sel: LabelSelectorModel | undefined): Map<string, Req[]> {
  const m = new Map<string, Req[]>();
  const add = (k: string, r: Req) => m.set(k, [...(m.get(k) ?? []), r]);
  if (!sel || typeof sel !== 'object') return m;
  if (sel.matchLabels && typeof sel.matchLabels === 'object') {
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-conversion -- a user's selector, as written
    for (const [k, v] of Object.entries(sel.matchLabels)) add(k, { op: 'In', values: [String(v)] });
  }
  if (Array.isArray(sel.matchExpressions)) {
    for (const e of sel.matchExpressions) {
      if (!e || typeof e.key !== 'string') continue;
      add(e.key, { op: e.operator, values: Array.isArray(e.values) ? e.values.map(String) : [] });
    }
  }
  return m;
}

/** Whether the key's requirements admit absence, and whether they admit some value. */
function keyOptions(reqs: Req[]): { absent: boolean; present: boolean } {
  const mustExist = reqs.some((r) => r.op === 'In' || r.op === 'Exists');
  const mustNotExist = reqs.some((r) => r.op === 'DoesNotExist');
  const absent = !mustExist;
  let present = !mustNotExist;
  if (present) {
    const ins = reqs.filter((r) => r.op === 'In');
    const excluded = new Set(reqs.filter((r) => r.op === 'NotIn').flatMap((r) => r.values));
    if (ins.length > 0) {
      let allowed = new Set(ins[0]!.values);
      for (const r of ins.slice(1)) allowed = new Set(r.values.filter((v) => allowed.has(v)));
      present = [...allowed].some((v) => !excluded.has(v));
    }
    // With no `In`, infinitely many values remain after a finite NotIn.
  }
  return { absent, present };
}

/**
 * Whether one Machine of Cluster `clusterName` can be selected by both selectors. Returns the reason when
 * they cannot (the first key or ownership rule that separates them), for messages and tests.
 */
export function selectorsOverlap(
  a: LabelSelectorModel | undefined,
  b: LabelSelectorModel | undefined,
  clusterName: string,
): { overlap: true } | { overlap: false; separatedBy: string } {
  const ra = requirements(a);
  const merged = new Map<string, Req[]>();
  for (const [k, v] of ra) merged.set(k, [...v]);
  for (const [k, v] of requirements(b)) merged.set(k, [...(merged.get(k) ?? []), ...v]);
  merged.set(CLUSTER_NAME_LABEL, [...(merged.get(CLUSTER_NAME_LABEL) ?? []), { op: 'In', values: [clusterName] }]);

  const opts = new Map<string, { absent: boolean; present: boolean }>();
  for (const [k, reqs] of merged) {
    const o = keyOptions(reqs);
    if (!o.absent && !o.present) return { overlap: false, separatedBy: `label ${k}` };
    opts.set(k, o);
  }
  // Keys a Machine must carry; two ownership groups with a required key cannot meet on one Machine.
  const requiredGroups = OWNERSHIP_GROUPS.filter((g) => g.keys.some((k) => opts.get(k)?.absent === false));
  if (requiredGroups.length > 1) {
    return { overlap: false, separatedBy: `CAPI ownership labels (${requiredGroups.map((g) => g.name).join(' vs ')})` };
  }
  return { overlap: true };
}

/**
 * Requirements on `cluster.x-k8s.io/cluster-name` that no Machine of the Cluster can meet: CAPI sets that
 * label to the Cluster's name on every Machine, so such a selector would select nothing.
 */
export function clusterLabelContradictions(sel: LabelSelectorModel | undefined, clusterName: string): FieldProblem[] {
  const out: FieldProblem[] = [];
  if (!sel || typeof sel !== 'object') return out;
  const accept =
    `every Machine of Cluster ${JSON.stringify(clusterName)} ` +
    `carries ${CLUSTER_NAME_LABEL}=${clusterName}; remove this ` +
    `requirement or make it admit ${JSON.stringify(clusterName)}`;
  const ml = sel.matchLabels;
  if (ml && typeof ml === 'object' && CLUSTER_NAME_LABEL in ml && ml[CLUSTER_NAME_LABEL] !== clusterName) {
    out.push({
      field: `spec.selector.matchLabels[${JSON.stringify(CLUSTER_NAME_LABEL)}]`,
      message:
        `is ${JSON.stringify(ml[CLUSTER_NAME_LABEL])} but spec.clusterName ` +
        `is ${JSON.stringify(clusterName)}: ${accept}`,
    });
  }
  (Array.isArray(sel.matchExpressions) ? sel.matchExpressions : []).forEach((e, i) => {
    if (!e || e.key !== CLUSTER_NAME_LABEL) return;
    const values = Array.isArray(e.values) ? e.values : [];
    let why: string | undefined;
    if (e.operator === 'DoesNotExist') why = 'DoesNotExist selects no Machine';
    else if (e.operator === 'NotIn' && values.includes(clusterName))
      why = `NotIn ${JSON.stringify(clusterName)} excludes every Machine`;
    else if (e.operator === 'In' && values.length > 0 && !values.includes(clusterName)) {
      why = `In ${JSON.stringify(values)} does not include ${JSON.stringify(clusterName)}`;
    }
    if (why) out.push({ field: `spec.selector.matchExpressions[${i}]`, message: `${why}: ${accept}` });
  });
  return out;
}
