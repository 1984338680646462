// Building blocks of the MachineJoinCheck OpenAPI v3 schema: the subset of JSONSchemaProps a structural
// CRD schema uses, small constructors that make a description mandatory (so `kubectl explain` works on
// every field), and the shared shapes (durations, label selectors, metav1.Condition).
import {
  DURATION_BOUNDED_PATTERN,
  DURATION_MAX_LENGTH,
  DURATION_PATTERN,
  DURATION_UNBOUNDED_FLOOR_MS,
  parseDuration,
} from './duration.js';
import { INT32_MAX, SELECTOR_OPERATORS } from './defaults.js';
import { LABEL_KEY_PATTERN, LABEL_NAME_MAX_LENGTH, LABEL_PREFIX_MAX_LENGTH, LABEL_VALUE_PATTERN } from './labels.js';

export interface ValidationRule {
  rule: string;
  message: string;
  fieldPath?: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
}

/** apiextensions.k8s.io/v1 JSONSchemaProps, as far as this CRD uses it. */
export interface JSONSchemaProps {
  description?: string;
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  format?: string;
  properties?: Record<string, JSONSchemaProps>;
  additionalProperties?: JSONSchemaProps;
  items?: JSONSchemaProps;
  required?: string[];
  enum?: (string | number | boolean)[];
  default?: unknown;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  maxProperties?: number;
  'x-kubernetes-int-or-string'?: true;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: ValidationRule[];
}

type Extra = Omit<JSONSchemaProps, 'description' | 'type'>;

export const str = (description: string, extra: Extra = {}): JSONSchemaProps => ({
  description,
  type: 'string',
  ...extra,
});
export const bool = (description: string, extra: Extra = {}): JSONSchemaProps => ({
  description,
  type: 'boolean',
  ...extra,
});
export const num = (description: string, extra: Extra = {}): JSONSchemaProps => ({
  description,
  type: 'number',
  ...extra,
});
export const int32 = (description: string, extra: Extra = {}): JSONSchemaProps => ({
  description,
  type: 'integer',
  format: 'int32',
  ...extra,
});
/**
 * An int32 of the spec, bounded by `maximum` instead of `format: int32`: the apiserver's format error on an
 * overflow names no field (`<nil>: ... must be of type integer with format int32`), the maximum's does.
 */
export const count = (description: string, extra: Extra & { minimum: number }): JSONSchemaProps => ({
  description,
  type: 'integer',
  maximum: INT32_MAX,
  ...extra,
});
export const int64 = (description: string, extra: Extra = {}): JSONSchemaProps => ({
  description,
  type: 'integer',
  format: 'int64',
  ...extra,
});
export const time = (description: string): JSONSchemaProps => ({ description, type: 'string', format: 'date-time' });
export const obj = (
  description: string,
  properties: Record<string, JSONSchemaProps>,
  extra: Extra = {},
): JSONSchemaProps => ({
  description,
  type: 'object',
  properties,
  ...extra,
});
export const arr = (description: string, items: JSONSchemaProps, extra: Extra = {}): JSONSchemaProps => ({
  description,
  type: 'array',
  items,
  ...extra,
});

// CEL rules use raw strings (r'...'): the patterns' backslashes reach RE2 as written.
const durationSyntax = (expr: string) => `${expr}.matches(r'${DURATION_PATTERN}')`;
/** duration() is only called on text that cannot overflow it (a type-conversion error names no field). */
const durationBounded = (expr: string) => `${expr}.matches(r'${DURATION_BOUNDED_PATTERN}')`;

/**
 * A duration string above 0 and at most `max`, e.g. `20m`. CEL, not `pattern`, so that each refusal says in
 * words what is accepted; one rule for the syntax, one for the range.
 */
export function duration(description: string, o: { max: string; default?: string }): JSONSchemaProps {
  if (parseDuration(o.max) >= DURATION_UNBOUNDED_FLOOR_MS)
    throw new Error(`duration bound ${o.max} is beyond what the bounded pattern can tell`);
  return {
    description: `${description} A duration above 0 and at most ${o.max}.`,
    type: 'string',
    maxLength: DURATION_MAX_LENGTH,
    ...(o.default !== undefined ? { default: o.default } : {}),
    'x-kubernetes-validations': [
      {
        rule: durationSyntax('self'),
        message:
          'must be a duration such as "90s", "20m" or "1h30m": numbers ' +
          'with a unit (ns, us, ms, s, m, h), no spaces or sign',
      },
      {
        rule:
          `!${durationSyntax('self')} || (${durationBounded('self')} ` +
          `&& duration(self) > duration('0s') && duration(self) <= ` +
          `duration('${o.max}'))`,
        message: `must be longer than 0 and at most ${o.max}`,
      },
    ],
  };
}

/** `a >= b` for two optional duration fields of `self`, only once both are well-formed and in range. */
export function durationAtLeast(a: string, b: string, message: string): ValidationRule {
  return {
    rule:
      `!has(self.${a}) || !has(self.${b}) || !${durationBounded(`self.${a}`)} ` +
      `|| !${durationBounded(`self.${b}`)} || duration(self.${a}) ` +
      `>= duration(self.${b})`,
    message,
    fieldPath: `.${a}`,
    reason: 'FieldValueInvalid',
  };
}

/** Appends "Defaults to X." to the description of every node with a scalar default, so `kubectl explain` says it. */
export function describeDefaults(s: JSONSchemaProps): JSONSchemaProps {
  const out: JSONSchemaProps = { ...s };
  const d = s.default;
  if (d !== undefined && (typeof d === 'string' || typeof d === 'number' || typeof d === 'boolean')) {
    out.description = `${s.description ?? ''} Defaults to ${String(d)}.`.trimStart();
  }
  if (s.properties)
    out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, p]) => [k, describeDefaults(p)]));
  if (s.items) out.items = describeDefaults(s.items);
  return out;
}

const LABEL_KEY_MAX_LENGTH = LABEL_PREFIX_MAX_LENGTH + 1 + LABEL_NAME_MAX_LENGTH;

export function labelSelector(description: string): JSONSchemaProps {
  return obj(description, {
    matchLabels: {
      description:
        'matchLabels is a map of {key,value} pairs. A single {key,value} ' +
        'in the matchLabels map is equivalent to an element of matchExpressions, ' +
        'whose key field is "key", the operator is "In", and the ' +
        'values array contains only "value". The requirements are ' +
        'ANDed.',
      type: 'object',
      additionalProperties: {
        description: 'A label value the key must have.',
        type: 'string',
        maxLength: LABEL_NAME_MAX_LENGTH,
        pattern: LABEL_VALUE_PATTERN,
      },
    },
    matchExpressions: arr(
      'matchExpressions is a list of label selector requirements. The requirements are ANDed.',
      obj(
        'A label selector requirement is a selector that contains ' +
          'values, a key, and an operator that relates the key and ' +
          'values.',
        {
          key: str('key is the label key that the selector applies to.', {
            minLength: 1,
            maxLength: LABEL_KEY_MAX_LENGTH,
            pattern: LABEL_KEY_PATTERN,
          }),
          operator: str(
            "operator represents a key's relationship to a set of values. " +
              'Valid operators are In, NotIn, Exists and DoesNotExist.',
            {
              enum: [...SELECTOR_OPERATORS],
            },
          ),
          values: arr(
            'values is an array of string values. If the operator is ' +
              'In or NotIn, the values array must be non-empty. If the ' +
              'operator is Exists or DoesNotExist, the values array must ' +
              'be empty.',
            str('A label value.', { maxLength: LABEL_NAME_MAX_LENGTH, pattern: LABEL_VALUE_PATTERN }),
            { 'x-kubernetes-list-type': 'atomic' },
          ),
        },
        {
          required: ['key', 'operator'],
          'x-kubernetes-validations': [
            {
              rule:
                "self.operator in ['In', 'NotIn'] ? (has(self.values) && " +
                'size(self.values) > 0) : (!has(self.values) || size(self.values) ' +
                '== 0)',
              message: 'values must be non-empty for operators In and NotIn, and empty for Exists and DoesNotExist',
              fieldPath: '.values',
              reason: 'FieldValueInvalid',
            },
          ],
        },
      ),
      { 'x-kubernetes-list-type': 'atomic' },
    ),
  });
}

/** metav1.Condition, exactly as Kubernetes' own CRDs declare it. */
export function conditions(description: string): JSONSchemaProps {
  return arr(
    description,
    obj(
      'Condition contains details for one aspect of the current state of this API Resource.',
      {
        lastTransitionTime: {
          description:
            'lastTransitionTime is the last time the condition transitioned ' +
            'from one status to another. This should be when the underlying ' +
            'condition changed. If that is not known, then using the ' +
            'time when the API field changed is acceptable.',
          type: 'string',
          format: 'date-time',
        },
        message: str(
          'message is a human readable message indicating details about the transition. This may be an empty string.',
          { maxLength: 32768 },
        ),
        observedGeneration: int64(
          'observedGeneration represents the .metadata.generation that ' +
            'the condition was set based upon. For instance, if .metadata.generation ' +
            'is currently 12, but the .status.conditions[x].observedGeneration ' +
            'is 9, the condition is out of date with respect to the current ' +
            'state of the instance.',
          { minimum: 0 },
        ),
        reason: str(
          'reason contains a programmatic identifier indicating the ' +
            "reason for the condition's last transition. Producers of " +
            'specific condition types may define expected values and ' +
            'meanings for this field, and whether the values are considered ' +
            'a guaranteed API. The value should be a CamelCase string. ' +
            'This field may not be empty.',
          { maxLength: 1024, minLength: 1, pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$' },
        ),
        status: str('status of the condition, one of True, False, Unknown.', { enum: ['True', 'False', 'Unknown'] }),
        type: str('type of condition in CamelCase or in foo.example.com/CamelCase.', {
          maxLength: 316,
          pattern:
            '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?' +
            '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
        }),
      },
      { required: ['lastTransitionTime', 'message', 'reason', 'status', 'type'] },
    ),
    { maxItems: 32, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] },
  );
}
