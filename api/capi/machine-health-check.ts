// MachineHealthCheck (cluster.x-k8s.io v1beta2 and v1beta1) -> MachineHealthCheckFacts, through the table
// of fields per API version (fields.ts: v1beta2 spec.checks.nodeStartupTimeoutSeconds and
// spec.checks.unhealthyMachineConditions; v1beta1 spec.nodeStartupTimeout, a metav1.Duration, and
// spec.unhealthyMachineConditions). Unset startup timeout stays undefined: CAPI then uses 600 s.
import { CAPI_ANNOTATION_PAUSED, CONDITION_JOINGUARD_JOINED } from '../v1alpha1/types.js';
import { CAPI_FIELDS, readPeriodSeconds } from './fields.js';
import type { CapiApiVersion, LabelSelectorModel, MachineHealthCheckFacts } from './model.js';
import { isObj, kindOf, ObjectReader } from './reader.js';

export function readMachineHealthCheck(obj: unknown, v: CapiApiVersion): MachineHealthCheckFacts {
  const r: ObjectReader = ObjectReader.of(obj, 'MachineHealthCheck');
  const f = CAPI_FIELDS[v].machineHealthCheck;
  const annotations = r.stringMap('metadata.annotations');
  const conditionsPath = f.unhealthyMachineConditions;
  const unhealthy = r.list(conditionsPath) ?? [];
  const watches = unhealthy.some((c, i) => {
    if (!isObj(c)) r.fail(`${conditionsPath}[${i}]`, `must be an object {type, status, timeout}, found ${kindOf(c)}`);
    return c['type'] === CONDITION_JOINGUARD_JOINED;
  });
  const facts: MachineHealthCheckFacts = {
    name: r.requiredString('metadata.name'),
    namespace: r.requiredString('metadata.namespace'),
    uid: r.requiredString('metadata.uid'),
    clusterName: r.requiredString('spec.clusterName'),
    selector: readSelector(r, 'spec.selector'),
    paused: CAPI_ANNOTATION_PAUSED in annotations,
    watchesJoinGuardCondition: watches,
  };
  const timeout = readPeriodSeconds(r, f.nodeStartupTimeout);
  if (timeout !== undefined) facts.nodeStartupTimeoutSeconds = timeout;
  return facts;
}

const OPERATORS = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

/** A metav1.LabelSelector; absent is the empty selector. */
export function readSelector(r: ObjectReader, path: string): LabelSelectorModel {
  const out: LabelSelectorModel = {};
  if (!r.object(path)) return out;
  const labels = r.stringMap(`${path}.matchLabels`);
  if (Object.keys(labels).length > 0) out.matchLabels = labels;
  const exprs = r.list(`${path}.matchExpressions`);
  if (exprs) {
    out.matchExpressions = exprs.map((e, i) => {
      const at = `${path}.matchExpressions[${i}]`;
      if (!isObj(e)) r.fail(at, `must be an object {key, operator, values}, found ${kindOf(e)}`);
      const key = e['key'];
      const op = e['operator'];
      const values = e['values'] ?? undefined;
      if (typeof key !== 'string' || key === '') r.fail(`${at}.key`, `is required (a label key), found ${kindOf(key)}`);
      if (typeof op !== 'string' || !OPERATORS.has(op))
        r.fail(`${at}.operator`, `must be In, NotIn, Exists or DoesNotExist, found ${kindOf(op)}`);
      if (
        values !== undefined &&
        values !== null &&
        (!Array.isArray(values) || values.some((x) => typeof x !== 'string'))
      ) {
        r.fail(`${at}.values`, `must be a list of strings, found ${kindOf(values)}`);
      }
      const expr: NonNullable<LabelSelectorModel['matchExpressions']>[number] = {
        key,
        operator: op as 'In' | 'NotIn' | 'Exists' | 'DoesNotExist',
      };
      if (Array.isArray(values)) expr.values = [...(values as string[])];
      return expr;
    });
  }
  return out;
}
