// The API's own rules as the validating webhook needs them: api/v1alpha1's validation and risk warnings, and
// api/capi's selector matching and MachineHealthCheck reader. Kept apart from validate.ts so its decision
// can be tested with stubs, and loaded by server.ts only when no rules are passed in.
import { matchesSelector, readMachineHealthCheck } from '../api/capi/readers.js';
import type { LabelSelectorModel } from '../api/capi/model.js';
import { parseSettings } from '../api/v1alpha1/settings.js';
import { STRATEGY_MIN_CAPI_MINOR } from '../api/v1alpha1/defaults.js';
import type { RemediationStrategy } from '../api/v1alpha1/types.js';
import { riskWarnings, strategyCapiProblem, validateSpec } from '../api/v1alpha1/validation.js';
import type { SpecRules } from './validate.js';

export const API_RULES: SpecRules = {
  validateSpec: (spec) => validateSpec(spec),
  warnings(spec) {
    // riskWarnings reads the defaulted settings, so an unset joinTimeout is judged as its default (20m).
    const parsed = parseSettings(spec);
    return parsed.settings ? riskWarnings(parsed.settings) : [];
  },
  // An absent selector selects nothing here: only a check or MHC that has one can overlap another.
  matches: (selector: LabelSelectorModel | undefined, labels: Record<string, string>) =>
    selector !== undefined && matchesSelector(selector, labels),
  readMachineHealthCheck,
  // Only called with a strategy the schema admitted.
  strategyCapiProblem: (strategy, capi) => strategyCapiProblem(strategy as RemediationStrategy, capi),
  strategyMinCapiMinor: (strategy) => STRATEGY_MIN_CAPI_MINOR[strategy as RemediationStrategy],
};
