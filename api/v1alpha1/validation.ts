// Everything the CRD schema (schema.ts) says about a MachineJoinCheck spec, said again in code, so that
// the controller never acts on a bad spec even when admission was bypassed (an apiserver without the CEL
// rules, a webhook that failed open), plus what a schema cannot say (label keys in matchLabels).
// Messages name the field and say what would be accepted. `null` counts as absent, as the apiserver
// drops nulls before defaulting.
import { REMEDIATION_STRATEGIES, type CheckSettings, type RemediationStrategy } from './types.js';
import {
  CLUSTER_NAME_MAX_LENGTH,
  FIRST_CONTROL_PLANE_POLICIES,
  INT32_MAX,
  PERCENT_PATTERN,
  RISKY_JOIN_TIMEOUT_MS,
  SELECTOR_OPERATORS,
  SPEC_DEFAULTS,
  SPEC_DURATION_MAX,
  STRATEGY_MIN_CAPI_MINOR,
} from './defaults.js';
import { DURATION_MAX_LENGTH, DURATION_PATTERN, formatDuration, parseDuration, tryParseDuration } from './duration.js';
import { CLUSTER_NAME_PATTERN, labelKeyProblem, labelValueProblem } from './labels.js';

export interface FieldError {
  /** The field's path from the object's root, e.g. `spec.joinTimeout`, `spec.selector.matchExpressions[0].key`. */
  field: string;
  /** What is wrong and what would be accepted. */
  message: string;
}

type Obj = Record<string, unknown>;

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const present = (v: unknown): boolean => v !== undefined && v !== null;
const PERCENT_RE = new RegExp(PERCENT_PATTERN);
const CLUSTER_NAME_RE = new RegExp(CLUSTER_NAME_PATTERN);
const DURATION_RE = new RegExp(DURATION_PATTERN);
const DURATION_MAX_MS = parseDuration(SPEC_DURATION_MAX);

export function validateSpec(spec: unknown): FieldError[] {
  if (!isObject(spec)) {
    return [
      { field: 'spec', message: `must be an object with at least clusterName and selector, not ${describe(spec)}` },
    ];
  }
  const errs: FieldError[] = [];
  const add = (field: string, message: string) => errs.push({ field, message });

  validateClusterName(spec['clusterName'], add);
  validateSelector(spec['selector'], 'spec.selector', add);

  durationField(spec, 'joinTimeout', 'spec.joinTimeout', add);
  durationField(
    spec,
    'provisionTimeout',
    'spec.provisionTimeout',
    add,
    ' (leave it unset to turn the provision check off)',
  );
  validateMaxInFlight(spec['maxInFlight'], add);

  validateRemediation(spec['remediation'], add);
  validateSuspicion(spec['suspicion'], add);

  intField(spec, 'neverJoinedLimit', 'spec.neverJoinedLimit', 0, add, '; 0 turns the never-joined stop off');
  enumField(spec, 'firstControlPlane', 'spec.firstControlPlane', FIRST_CONTROL_PLANE_POLICIES, add);
  boolField(spec, 'dryRun', 'spec.dryRun', add);
  boolField(spec, 'paused', 'spec.paused', add);
  return errs;
}

function validateClusterName(clusterName: unknown, add: Add): void {
  if (!present(clusterName)) add('spec.clusterName', 'is required: the name of the Cluster whose Machines are checked');
  else if (
    typeof clusterName !== 'string' ||
    clusterName === '' ||
    clusterName.length > CLUSTER_NAME_MAX_LENGTH ||
    !CLUSTER_NAME_RE.test(clusterName)
  ) {
    add(
      'spec.clusterName',
      `must be the name of a Cluster in this namespace: 1 to ${CLUSTER_NAME_MAX_LENGTH} ` +
        `lower-case letters, digits, "-" and ".", starting and ending ` +
        `with a letter or digit, not ${describe(clusterName)}`,
    );
  }
}

function validateRemediation(remediation: unknown, add: Add): void {
  if (present(remediation) && !isObject(remediation))
    add('spec.remediation', `must be an object (strategy, maxPerOwner, window), not ${describe(remediation)}`);
  else if (isObject(remediation)) {
    enumField(remediation, 'strategy', 'spec.remediation.strategy', REMEDIATION_STRATEGIES, add);
    intField(remediation, 'maxPerOwner', 'spec.remediation.maxPerOwner', 1, add);
    durationField(remediation, 'window', 'spec.remediation.window', add);
  }
}

/** The suspicion's fields, and its back-off's bounds compared after defaulting. */
function validateSuspicion(suspicion: unknown, add: Add): void {
  if (present(suspicion) && !isObject(suspicion)) {
    add(
      'spec.suspicion',
      `must be an object (consecutiveJoinFailures, probeInterval, maxProbeInterval), not ${describe(suspicion)}`,
    );
  } else {
    const s = isObject(suspicion) ? suspicion : {};
    intField(
      s,
      'consecutiveJoinFailures',
      'spec.suspicion.consecutiveJoinFailures',
      0,
      add,
      '; 0 turns the suspicion off',
    );
    const probe = durationField(s, 'probeInterval', 'spec.suspicion.probeInterval', add);
    const max = durationField(s, 'maxProbeInterval', 'spec.suspicion.maxProbeInterval', add);
    // Compared as the apiserver does, after defaulting: a lone probeInterval above 8h is refused too.
    const probeMs = probe ?? (present(s['probeInterval']) ? undefined : ms(SPEC_DEFAULTS.suspicion.probeInterval));
    const maxMs = max ?? (present(s['maxProbeInterval']) ? undefined : ms(SPEC_DEFAULTS.suspicion.maxProbeInterval));
    if (probeMs !== undefined && maxMs !== undefined && maxMs < probeMs) {
      add(
        'spec.suspicion.maxProbeInterval',
        `must be at least suspicion.probeInterval (${formatDuration(probeMs)}), ` +
          `as the canary back-off doubles from probeInterval up to ` +
          `it; ` +
          (`it is ${formatDuration(maxMs)}${max === undefined ? ' (the default)' : ''}: ` +
            `raise it to ${formatDuration(probeMs)} or more, or lower ` +
            `probeInterval`),
      );
    }
  }
}

/** Legal but risky settings, admitted with these warnings (the MHC overlap is the webhook's: it needs API reads). */
export function riskWarnings(settings: CheckSettings): string[] {
  const warnings: string[] = [];
  if (settings.joinTimeoutMs < RISKY_JOIN_TIMEOUT_MS) {
    warnings.push(
      `spec.joinTimeout is ${formatDuration(settings.joinTimeoutMs)}, ` +
        `under ${formatDuration(RISKY_JOIN_TIMEOUT_MS)}: ` +
        `few Machines boot and join that fast, so JoinGuard may replace Machines that would have joined; ` +
        (`the default is ${SPEC_DEFAULTS.joinTimeout}, and status.joinDurations ` +
          `suggests a value from the joins it has seen`),
    );
  }
  return warnings;
}

/**
 * Why `strategy` cannot work on the CAPI release found (undefined when it can, or when the minor is unknown):
 * one message for the webhook's refusal and the controller's condition.
 */
export function strategyCapiProblem(
  strategy: RemediationStrategy,
  capi: { minor?: number; version?: string },
): string | undefined {
  const need = STRATEGY_MIN_CAPI_MINOR[strategy];
  if (need === undefined || capi.minor === undefined || capi.minor >= need) return undefined;
  return (
    `${strategy} needs CAPI v1.${need} or later (a MachineHealthCheck ` +
    `with checks.unhealthyMachineConditions on JoinGuardJoined ` +
    `does the marking), ` +
    (`and this management cluster runs CAPI ${capi.version ?? `v1.${capi.minor}`}: ` +
      `use Auto or OwnerRemediated, or upgrade CAPI first`)
  );
}

type Add = (field: string, message: string) => void;

function validateSelector(sel: unknown, field: string, add: Add): void {
  if (!present(sel)) {
    add(
      field,
      'is required: a label selector (matchLabels and/or matchExpressions) ' +
        'choosing the Machines of the Cluster to check',
    );
    return;
  }
  if (!isObject(sel)) {
    add(field, `must be a label selector object with matchLabels and/or matchExpressions, not ${describe(sel)}`);
    return;
  }
  let terms = 0;
  const labels = sel['matchLabels'];
  if (present(labels) && !isObject(labels))
    add(`${field}.matchLabels`, `must be a map of label keys to values, not ${describe(labels)}`);
  else if (isObject(labels)) {
    for (const [k, v] of Object.entries(labels)) {
      terms++;
      // A key's problem is named as `matchLabels["key"]`, a value's as the apiserver names it: `matchLabels.key`.
      const keyProblem = labelKeyProblem(k);
      if (keyProblem) add(`${field}.matchLabels[${JSON.stringify(k)}]`, `is not a label key: it ${keyProblem}`);
      const f = `${field}.matchLabels.${k}`;
      if (typeof v !== 'string') add(f, `must be a label value (a string), not ${describe(v)}`);
      else {
        const p = labelValueProblem(v);
        if (p) add(f, `value ${JSON.stringify(v)} ${p}`);
      }
    }
  }
  const exprs = sel['matchExpressions'];
  if (present(exprs) && !Array.isArray(exprs))
    add(`${field}.matchExpressions`, `must be a list of {key, operator, values}, not ${describe(exprs)}`);
  else if (Array.isArray(exprs)) {
    exprs.forEach((e, i) => {
      terms++;
      validateExpression(e, `${field}.matchExpressions[${i}]`, add);
    });
  }
  if (terms === 0) {
    add(
      field,
      'must not be empty: an empty selector would check every Machine ' +
        'of the Cluster; name them, e.g. matchLabels {cluster.x-k8s.io/deployment-name: ' +
        'md-0} or a matchExpressions Exists on cluster.x-k8s.io/control-plane',
    );
  }
}

function validateExpression(e: unknown, field: string, add: Add): void {
  if (!isObject(e)) {
    add(field, `must be an object {key, operator, values}, not ${describe(e)}`);
    return;
  }
  const key = e['key'];
  if (typeof key !== 'string') add(`${field}.key`, `is required: a label key, not ${describe(key)}`);
  else {
    const p = labelKeyProblem(key);
    if (p) add(`${field}.key`, `is not a label key: it ${p}`);
  }
  const op = e['operator'];
  if (typeof op !== 'string' || !(SELECTOR_OPERATORS as readonly string[]).includes(op)) {
    add(`${field}.operator`, `must be one of ${SELECTOR_OPERATORS.join(', ')}, not ${describe(op)}`);
  }
  const values = e['values'];
  if (present(values) && !Array.isArray(values))
    add(`${field}.values`, `must be a list of label values, not ${describe(values)}`);
  const list = Array.isArray(values) ? values : [];
  list.forEach((v, j) => {
    if (typeof v !== 'string') add(`${field}.values[${j}]`, `must be a label value (a string), not ${describe(v)}`);
    else {
      const p = labelValueProblem(v);
      if (p) add(`${field}.values[${j}]`, `value ${JSON.stringify(v)} ${p}`);
    }
  });
  if ((op === 'In' || op === 'NotIn') && list.length === 0)
    add(`${field}.values`, `must list at least one value for operator ${op}`);
  if ((op === 'Exists' || op === 'DoesNotExist') && list.length > 0)
    add(`${field}.values`, `must be empty for operator ${op}`);
}

function validateMaxInFlight(v: unknown, add: Add): void {
  if (!present(v)) return;
  const accepted =
    `accepted: an integer from 1 to ${INT32_MAX}, or a percent ` + `of the expected Machines from "1%" to "100%"`;
  if (typeof v === 'number') {
    if (!Number.isInteger(v) || v < 1 || v > INT32_MAX)
      add('spec.maxInFlight', `must be a whole number from 1 to ${INT32_MAX}, not ${v}; ${accepted}`);
  } else if (typeof v === 'string') {
    if (!PERCENT_RE.test(v)) add('spec.maxInFlight', `${JSON.stringify(v)} is not a percent; ${accepted}`);
  } else add('spec.maxInFlight', `must be an integer or a percent, not ${describe(v)}; ${accepted}`);
}

/** Checks a duration field; returns its value in ms when present and valid. */
function durationField(o: Obj, key: string, field: string, add: Add, hint = ''): number | undefined {
  const v = o[key];
  if (!present(v)) return undefined;
  const accepted =
    `accepted: a duration above 0 and at most ${SPEC_DURATION_MAX}, ` + `such as "90s", "20m" or "1h30m"${hint}`;
  if (typeof v === 'string' && v.length > DURATION_MAX_LENGTH) {
    add(field, `is longer than ${DURATION_MAX_LENGTH} characters; ${accepted}`);
    return undefined;
  }
  const r = tryParseDuration(v);
  if (r.error !== undefined) {
    // Well-formed but past Go's int64 of nanoseconds: a range problem, said as one.
    add(
      field,
      typeof v === 'string' && DURATION_RE.test(v)
        ? `must be at most ${SPEC_DURATION_MAX}, not ${JSON.stringify(v)}; ${accepted}`
        : `${r.error}; ${accepted}`,
    );
    return undefined;
  }
  if (r.ms <= 0) {
    add(field, `must be longer than 0; ${accepted}`);
    return undefined;
  }
  if (r.ms > DURATION_MAX_MS) {
    add(field, `must be at most ${SPEC_DURATION_MAX}, not ${JSON.stringify(v)} (${formatDuration(r.ms)}); ${accepted}`);
    return undefined;
  }
  return r.ms;
}

function intField(o: Obj, key: string, field: string, min: number, add: Add, hint = ''): void {
  const v = o[key];
  if (!present(v)) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > INT32_MAX) {
    add(field, `must be a whole number from ${min} to ${INT32_MAX}${hint}, not ${describe(v)}`);
  }
}

function enumField(o: Obj, key: string, field: string, values: readonly string[], add: Add): void {
  const v = o[key];
  if (present(v) && (typeof v !== 'string' || !values.includes(v)))
    add(field, `must be one of ${values.join(', ')}, not ${describe(v)}`);
}

function boolField(o: Obj, key: string, field: string, add: Add): void {
  const v = o[key];
  if (present(v) && typeof v !== 'boolean') add(field, `must be true or false, not ${describe(v)}`);
}

function ms(d: string): number {
  const r = tryParseDuration(d);
  if (r.ms === undefined) throw new Error(`bad built-in default ${d}`);
  return r.ms;
}

export function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return JSON.stringify(v);
  return `${typeof v} ${String(v)}`;
}
