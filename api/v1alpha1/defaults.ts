// DESIGN.md's defaults for a MachineJoinCheck spec, in the form a user writes them. The CRD schema's
// `default`s, parseSettings and the mutating webhook all agree with this one table (a test proves it).
// `provisionTimeout` has none: unset means off.
import type { RemediationStrategy } from './types.js';

export const SPEC_DEFAULTS = {
  joinTimeout: '20m',
  maxInFlight: 1,
  remediation: { strategy: 'Auto', maxPerOwner: 5, window: '24h' },
  suspicion: { consecutiveJoinFailures: 2, probeInterval: '30m', maxProbeInterval: '8h' },
  neverJoinedLimit: 3,
  firstControlPlane: 'Remediate',
  dryRun: false,
  paused: false,
} as const;

export const FIRST_CONTROL_PLANE_POLICIES = ['Remediate', 'Report'] as const;
export const SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;

/** Bounds of the spec's numbers; int32 like every count in the Kubernetes API. */
export const INT32_MAX = 2147483647;
export const CLUSTER_NAME_MAX_LENGTH = 63;
/** The longest duration any spec field takes (a year): longer is a typo, and CEL's duration() must not overflow. */
export const SPEC_DURATION_MAX = '8760h';
/**
 * The CAPI minor a strategy needs: MachineCondition relies on MachineHealthCheck `checks.unhealthyMachineConditions`
 * (v1.12).
 */
export const STRATEGY_MIN_CAPI_MINOR: Partial<Record<RemediationStrategy, number>> = { MachineCondition: 12 };
/** A joinTimeout below this is admitted with a warning: few Machines boot and join that fast. */
export const RISKY_JOIN_TIMEOUT_MS = 2 * 60 * 1000;
/** maxInFlight as an integer or a percent of expectedMachines, `1%` to `100%`. */
export const PERCENT_PATTERN = '^(100|[1-9][0-9]?)%$';
