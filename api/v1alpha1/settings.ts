// A MachineJoinCheck spec as the controller acts on it: validated (validation.ts), every default of
// DESIGN.md applied (defaults.ts), durations in milliseconds. A spec with any error yields no settings,
// so a bad spec is reported and never half-applied.
import type { LabelSelectorModel } from '../capi/model.js';
import type { CheckSettings, FirstControlPlanePolicy, RemediationStrategy } from './types.js';
import { SPEC_DEFAULTS } from './defaults.js';
import { parseDuration } from './duration.js';
import { validateSpec, type FieldError } from './validation.js';

export type { FieldError } from './validation.js';

type Obj = Record<string, unknown>;

export function parseSettings(
  spec: unknown,
): { settings: CheckSettings; errors: [] } | { settings?: undefined; errors: FieldError[] } {
  const errors = validateSpec(spec);
  if (errors.length > 0) return { errors };
  const s = spec as Obj; // validateSpec proved its shape
  const remediation = obj(s['remediation']);
  const suspicion = obj(s['suspicion']);
  const D = SPEC_DEFAULTS;

  const provision = val<string>(s, 'provisionTimeout');
  const settings: CheckSettings = {
    clusterName: s['clusterName'] as string,
    selector: copySelector(s['selector'] as LabelSelectorModel),
    joinTimeoutMs: parseDuration(val<string>(s, 'joinTimeout') ?? D.joinTimeout),
    ...(provision !== undefined ? { provisionTimeoutMs: parseDuration(provision) } : {}),
    maxInFlight: maxInFlight(val<number | string>(s, 'maxInFlight') ?? D.maxInFlight),
    strategy: val<RemediationStrategy>(remediation, 'strategy') ?? D.remediation.strategy,
    maxPerOwner: val<number>(remediation, 'maxPerOwner') ?? D.remediation.maxPerOwner,
    windowMs: parseDuration(val<string>(remediation, 'window') ?? D.remediation.window),
    consecutiveJoinFailures: val<number>(suspicion, 'consecutiveJoinFailures') ?? D.suspicion.consecutiveJoinFailures,
    probeIntervalMs: parseDuration(val<string>(suspicion, 'probeInterval') ?? D.suspicion.probeInterval),
    maxProbeIntervalMs: parseDuration(val<string>(suspicion, 'maxProbeInterval') ?? D.suspicion.maxProbeInterval),
    neverJoinedLimit: val<number>(s, 'neverJoinedLimit') ?? D.neverJoinedLimit,
    firstControlPlane: val<FirstControlPlanePolicy>(s, 'firstControlPlane') ?? D.firstControlPlane,
    dryRun: val<boolean>(s, 'dryRun') ?? D.dryRun,
    paused: val<boolean>(s, 'paused') ?? D.paused,
  };
  return { settings, errors: [] };
}

function maxInFlight(v: number | string): CheckSettings['maxInFlight'] {
  return typeof v === 'number' ? { count: v } : { percent: Number(v.slice(0, -1)) };
}

function obj(v: unknown): Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : {};
}

/** A field's value, `null` read as absent. */
function val<T>(o: Obj, key: string): T | undefined {
  const v = o[key];
  return v === null || v === undefined ? undefined : (v as T);
}

/** A copy, so that settings never alias a cached object (informer caches are shared references). */
function copySelector(sel: LabelSelectorModel): LabelSelectorModel {
  const out: LabelSelectorModel = {};
  if (sel.matchLabels) out.matchLabels = { ...sel.matchLabels };
  if (sel.matchExpressions) {
    out.matchExpressions = sel.matchExpressions.map((e) => ({
      key: e.key,
      operator: e.operator,
      ...(e.values ? { values: [...e.values] } : {}),
    }));
  }
  return out;
}
