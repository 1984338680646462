// The table of bad MachineJoinChecks (issue 10, finding 8): every spec field with wrong types, out-of-range and
// int32-overflowing numbers, bad and huge durations, bad percents, selectors and enums, an immutable clusterName
// change, unknown fields and bad names. Each row says which field the refusal must name and who refuses it
// first: the apiserver itself (decoding, object names), the CRD schema and its CEL rules, or the validating
// webhook (what a schema cannot say: label keys, the Cluster label, overlaps, the CAPI release). Read by
// validation.test.ts, webhooks/table.test.ts and, against the real apiserver, e2e/install/admission.test.ts.

type Json = Record<string, any>;

export const CN = 'cluster.x-k8s.io/cluster-name';
export const MD = 'cluster.x-k8s.io/deployment-name';
export const CP = 'cluster.x-k8s.io/control-plane';
export const CPN = 'cluster.x-k8s.io/control-plane-name';

export type RefusedBy = 'apiserver' | 'schema' | 'webhook';

export interface BadCheck {
  name: string;
  /** The spec sent (on create; for an update, the spec it is changed to). */
  spec: Json;
  /** The field the refusal names (as the first layer to refuse words it). */
  field: string;
  refusedBy: RefusedBy;
  /** More the message says (what was wrong, what would be accepted). */
  says?: RegExp;
  /** An update of this existing check (EXISTING_CHECKS) to `spec`, instead of a create. */
  update?: string;
  /** Replaces metadata.name on create. */
  objectName?: string;
  /** Fields beside apiVersion, kind, metadata and spec. */
  extra?: Json;
  /** The HTTP code of the refusal: 422 Invalid, or 400 for what the apiserver cannot decode (unknown fields). */
  code?: 400 | 422;
}

/** Checks and a Machine that exist before the table is tried (the overlap rows meet them). */
export const EXISTING_CHECKS: { name: string; spec: Json }[] = [
  { name: 'workers-md-0', spec: { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-0' } } } },
  {
    name: 'control-plane',
    spec: {
      clusterName: 'c1',
      selector: { matchLabels: { [CPN]: 'kcp-1' }, matchExpressions: [{ key: CP, operator: 'Exists' }] },
    },
  },
  {
    name: 'odd-cp',
    spec: {
      clusterName: 'c1',
      selector: { matchLabels: { odd: 'yes', [CPN]: 'kcp-odd' }, matchExpressions: [{ key: CP, operator: 'Exists' }] },
    },
  },
];
/** A Machine that breaks CAPI's label conventions (control plane and MachineDeployment at once). */
export const EXISTING_MACHINE = {
  name: 'odd-machine',
  labels: { [CN]: 'c1', [CP]: '', [CPN]: 'kcp-odd', [MD]: 'md-7', odd: 'yes' },
};

const sel = { matchLabels: { [MD]: 'md-bad' } };
const base = (extra: Json = {}): Json => ({ clusterName: 'c1', selector: sel, ...extra });
const withSelector = (selector: unknown): Json => ({ clusterName: 'c1', selector });
const expr = (key: unknown, operator?: unknown, values?: unknown): Json => ({
  matchExpressions: [
    {
      ...(key === undefined ? {} : { key }),
      ...(operator === undefined ? {} : { operator }),
      ...(values === undefined ? {} : { values }),
    },
  ],
});
const mjc0 = 'spec.selector.matchExpressions[0]';

const DURATION_SAYS = /duration such as "90s"|must be longer than 0|at most 8760h/;
const durationRows = (field: string, at: (v: unknown) => Json): BadCheck[] => [
  {
    name: `${field} not a duration`,
    spec: at('soon'),
    field: `spec.${field}`,
    refusedBy: 'schema',
    says: /must be a duration such as "90s", "20m" or "1h30m"/,
  },
  {
    name: `${field} a number`,
    spec: at(1200),
    field: `spec.${field}`,
    refusedBy: 'schema',
    says: /must be of type string/,
  },
  { name: `${field} zero`, spec: at('0s'), field: `spec.${field}`, refusedBy: 'schema', says: /must be longer than 0/ },
  { name: `${field} negative`, spec: at('-5m'), field: `spec.${field}`, refusedBy: 'schema', says: DURATION_SAYS },
  { name: `${field} without a unit`, spec: at('20'), field: `spec.${field}`, refusedBy: 'schema', says: DURATION_SAYS },
  { name: `${field} in days`, spec: at('1d'), field: `spec.${field}`, refusedBy: 'schema', says: DURATION_SAYS },
  {
    name: `${field} past int64 (9999999h)`,
    spec: at('9999999h'),
    field: `spec.${field}`,
    refusedBy: 'schema',
    says: /at most 8760h/,
  },
  {
    name: `${field} above a year (8761h)`,
    spec: at('8761h'),
    field: `spec.${field}`,
    refusedBy: 'schema',
    says: /at most 8760h/,
  },
];

export const BAD_CHECKS: BadCheck[] = [
  // ---- the object itself
  {
    name: 'name in upper case',
    spec: base(),
    objectName: 'Workers',
    field: 'metadata.name',
    refusedBy: 'apiserver',
    says: /RFC 1123/,
  },
  {
    name: 'name with an underscore',
    spec: base(),
    objectName: 'workers_md',
    field: 'metadata.name',
    refusedBy: 'apiserver',
    says: /RFC 1123/,
  },
  {
    name: 'name of 254 characters',
    spec: base(),
    objectName: 'w'.repeat(254),
    field: 'metadata.name',
    refusedBy: 'apiserver',
    says: /253/,
  },
  {
    name: 'unknown top-level field',
    spec: base(),
    extra: { specs: {} },
    field: 'specs',
    refusedBy: 'apiserver',
    code: 400,
    says: /unknown field/,
  },
  {
    name: 'spec not an object',
    spec: 'c1' as unknown as Json,
    field: 'spec',
    refusedBy: 'schema',
    says: /must be of type object/,
  },
  {
    name: 'unknown spec field',
    spec: base({ timeout: '20m' }),
    field: 'spec.timeout',
    refusedBy: 'apiserver',
    code: 400,
    says: /unknown field/,
  },
  {
    name: 'unknown remediation field',
    spec: base({ remediation: { max: 2 } }),
    field: 'spec.remediation.max',
    refusedBy: 'apiserver',
    code: 400,
    says: /unknown field/,
  },
  {
    name: 'unknown selector field',
    spec: withSelector({ ...sel, matchFields: { a: 'b' } }),
    field: 'spec.selector.matchFields',
    refusedBy: 'apiserver',
    code: 400,
    says: /unknown field/,
  },

  // ---- clusterName (a Cluster's name: DNS-1123 subdomain and label value, so at most 63)
  { name: 'no clusterName', spec: { selector: sel }, field: 'spec.clusterName', refusedBy: 'schema', says: /Required/ },
  {
    name: 'clusterName null',
    spec: { clusterName: null, selector: sel },
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /Required/,
  },
  { name: 'empty clusterName', spec: base({ clusterName: '' }), field: 'spec.clusterName', refusedBy: 'schema' },
  {
    name: 'clusterName of 64 characters',
    spec: base({ clusterName: 'c'.repeat(64) }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /63/,
  },
  {
    name: 'clusterName in upper case',
    spec: base({ clusterName: 'UPPER' }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be the name of a Cluster: lower-case letters/,
  },
  {
    name: 'clusterName not ASCII',
    spec: base({ clusterName: 'clüster' }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be the name of a Cluster/,
  },
  {
    name: 'clusterName with a space',
    spec: base({ clusterName: 'a b' }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be the name of a Cluster/,
  },
  {
    name: 'clusterName a path',
    spec: base({ clusterName: '../etc' }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be the name of a Cluster/,
  },
  {
    name: 'clusterName with an underscore',
    spec: base({ clusterName: 'c_1' }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be the name of a Cluster/,
  },
  {
    name: 'clusterName starting with "-"',
    spec: base({ clusterName: '-c1' }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be the name of a Cluster/,
  },
  {
    name: 'clusterName ending with "."',
    spec: base({ clusterName: 'c1.' }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be the name of a Cluster/,
  },
  {
    name: 'clusterName a number',
    spec: base({ clusterName: 1 }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be of type string/,
  },
  {
    name: 'clusterName a list',
    spec: base({ clusterName: ['c1'] }),
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /must be of type string/,
  },
  {
    name: 'clusterName changed',
    update: 'workers-md-0',
    spec: { clusterName: 'c2', selector: { matchLabels: { [MD]: 'md-0' } } },
    field: 'spec.clusterName',
    refusedBy: 'schema',
    says: /immutable.*create a new MachineJoinCheck/,
  },

  // ---- selector
  { name: 'no selector', spec: { clusterName: 'c1' }, field: 'spec.selector', refusedBy: 'schema', says: /Required/ },
  {
    name: 'empty selector',
    spec: withSelector({}),
    field: 'spec.selector',
    refusedBy: 'schema',
    says: /must not be empty/,
  },
  {
    name: 'empty matchLabels',
    spec: withSelector({ matchLabels: {} }),
    field: 'spec.selector',
    refusedBy: 'schema',
    says: /must not be empty/,
  },
  {
    name: 'selector a string',
    spec: withSelector('app=x'),
    field: 'spec.selector',
    refusedBy: 'schema',
    says: /must be of type object/,
  },
  {
    name: 'matchLabels a list',
    spec: withSelector({ matchLabels: ['a'] }),
    field: 'spec.selector.matchLabels',
    refusedBy: 'schema',
    says: /must be of type object/,
  },
  {
    name: 'label value with a space',
    spec: withSelector({ matchLabels: { a: 'x y' } }),
    field: 'spec.selector.matchLabels.a',
    refusedBy: 'schema',
  },
  {
    name: 'label value of 64 characters',
    spec: withSelector({ matchLabels: { a: 'v'.repeat(64) } }),
    field: 'spec.selector.matchLabels.a',
    refusedBy: 'schema',
  },
  {
    name: 'label value a number',
    spec: withSelector({ matchLabels: { a: 1 } }),
    field: 'spec.selector.matchLabels.a',
    refusedBy: 'schema',
    says: /must be of type string/,
  },
  {
    name: 'label key with two slashes',
    spec: withSelector({ matchLabels: { 'a/b/c': 'x' } }),
    field: 'spec.selector.matchLabels["a/b/c"]',
    refusedBy: 'webhook',
    says: /is not a label key/,
  },
  {
    name: 'label key with an upper-case prefix',
    spec: withSelector({ matchLabels: { 'Example.com/a': 'x' } }),
    field: 'spec.selector.matchLabels["Example.com/a"]',
    refusedBy: 'webhook',
    says: /prefix that is not a DNS subdomain/,
  },
  {
    name: 'label key of 64 characters',
    spec: withSelector({ matchLabels: { ['k'.repeat(64)]: 'x' } }),
    field: `spec.selector.matchLabels["${'k'.repeat(64)}"]`,
    refusedBy: 'webhook',
    says: /longer than 63/,
  },
  {
    name: 'label key empty',
    spec: withSelector({ matchLabels: { '': 'x' } }),
    field: 'spec.selector.matchLabels[""]',
    refusedBy: 'webhook',
    says: /needs a name/,
  },
  {
    name: 'matchExpressions a string',
    spec: withSelector({ matchExpressions: 'pool in (a)' }),
    field: 'spec.selector.matchExpressions',
    refusedBy: 'schema',
    says: /must be of type array/,
  },
  {
    name: 'expression a string',
    spec: withSelector({ matchExpressions: ['a In (b)'] }),
    field: mjc0,
    refusedBy: 'schema',
    says: /must be of type object/,
  },
  {
    name: 'expression without key',
    spec: withSelector(expr(undefined, 'Exists')),
    field: `${mjc0}.key`,
    refusedBy: 'schema',
    says: /Required/,
  },
  {
    name: 'expression key with a space',
    spec: withSelector(expr('a b', 'Exists')),
    field: `${mjc0}.key`,
    refusedBy: 'schema',
  },
  {
    name: 'expression without operator',
    spec: withSelector(expr('a')),
    field: `${mjc0}.operator`,
    refusedBy: 'schema',
    says: /Required/,
  },
  {
    name: 'unknown operator',
    spec: withSelector(expr('pool', 'Like', ['a'])),
    field: `${mjc0}.operator`,
    refusedBy: 'schema',
    says: /"In", "NotIn", "Exists", "DoesNotExist"/,
  },
  {
    name: 'operator in lower case',
    spec: withSelector(expr('pool', 'in', ['a'])),
    field: `${mjc0}.operator`,
    refusedBy: 'schema',
  },
  {
    name: 'In without values',
    spec: withSelector(expr('pool', 'In')),
    field: `${mjc0}.values`,
    refusedBy: 'schema',
    says: /non-empty for operators In and NotIn/,
  },
  {
    name: 'NotIn with no values',
    spec: withSelector(expr('pool', 'NotIn', [])),
    field: `${mjc0}.values`,
    refusedBy: 'schema',
    says: /non-empty for operators In and NotIn/,
  },
  {
    name: 'Exists with values',
    spec: withSelector(expr('pool', 'Exists', ['a'])),
    field: `${mjc0}.values`,
    refusedBy: 'schema',
    says: /empty for Exists and DoesNotExist/,
  },
  {
    name: 'DoesNotExist with values',
    spec: withSelector(expr('pool', 'DoesNotExist', ['a'])),
    field: `${mjc0}.values`,
    refusedBy: 'schema',
    says: /empty for Exists and DoesNotExist/,
  },
  {
    name: 'values a string',
    spec: withSelector(expr('pool', 'In', 'a')),
    field: `${mjc0}.values`,
    refusedBy: 'schema',
    says: /must be of type array/,
  },
  {
    name: 'value with a space',
    spec: withSelector(expr('pool', 'In', ['a b'])),
    field: `${mjc0}.values[0]`,
    refusedBy: 'schema',
  },
  {
    name: 'matchLabels of another Cluster',
    spec: withSelector({ matchLabels: { [CN]: 'c2', [MD]: 'md-9' } }),
    field: `spec.selector.matchLabels[${JSON.stringify(CN)}]`,
    refusedBy: 'webhook',
    says: /is "c2" but spec.clusterName is "c1".*remove this requirement or make it admit "c1"/,
  },
  {
    name: 'NotIn the own Cluster',
    spec: withSelector({ matchLabels: { [MD]: 'md-9' }, ...expr(CN, 'NotIn', ['c1']) }),
    field: mjc0,
    refusedBy: 'webhook',
    says: /NotIn "c1" excludes every Machine/,
  },
  {
    name: 'DoesNotExist of the Cluster label',
    spec: withSelector({ matchLabels: { [MD]: 'md-9' }, ...expr(CN, 'DoesNotExist') }),
    field: mjc0,
    refusedBy: 'webhook',
    says: /DoesNotExist selects no Machine/,
  },
  {
    name: 'In other Clusters only',
    spec: withSelector({ matchLabels: { [MD]: 'md-9' }, ...expr(CN, 'In', ['c2', 'c3']) }),
    field: mjc0,
    refusedBy: 'webhook',
    says: /does not include "c1"/,
  },
  {
    name: 'the same Machines as workers-md-0',
    spec: withSelector({ matchLabels: { [MD]: 'md-0' } }),
    field: 'spec.selector',
    refusedBy: 'webhook',
    says: /overlaps MachineJoinCheck "workers-md-0".*accepted is a selector that excludes its Machines/,
  },
  {
    name: 'a subset of workers-md-0',
    spec: withSelector({ matchLabels: { [MD]: 'md-0', zone: 'a' } }),
    field: 'spec.selector',
    refusedBy: 'webhook',
    says: /overlaps MachineJoinCheck "workers-md-0"/,
  },
  {
    name: 'every MachineDeployment Machine',
    spec: withSelector(expr(MD, 'Exists')),
    field: 'spec.selector',
    refusedBy: 'webhook',
    says: /overlaps MachineJoinCheck "workers-md-0"/,
  },
  {
    name: 'a label another check does not exclude',
    spec: withSelector({ matchLabels: { team: 'a' } }),
    field: 'spec.selector',
    refusedBy: 'webhook',
    says: /a Machine could carry labels that satisfy both selectors/,
  },
  {
    name: 'an existing Machine both select',
    spec: withSelector({ matchLabels: { odd: 'yes' }, ...expr(MD, 'In', ['md-7']) }),
    field: 'spec.selector',
    refusedBy: 'webhook',
    says: /overlaps MachineJoinCheck "odd-cp".*both select Machine "odd-machine"/,
  },
  {
    name: 'an update that makes the selector overlap',
    update: 'control-plane',
    spec: withSelector(expr('pool', 'Exists')),
    field: 'spec.selector',
    refusedBy: 'webhook',
    says: /overlaps MachineJoinCheck "workers-md-0"/,
  },

  // ---- durations (every one bounded: above 0, at most 8760h)
  ...durationRows('joinTimeout', (v) => base({ joinTimeout: v })),
  {
    name: 'joinTimeout with a space',
    spec: base({ joinTimeout: '1h 30m' }),
    field: 'spec.joinTimeout',
    refusedBy: 'schema',
    says: /no spaces/,
  },
  {
    name: 'joinTimeout empty',
    spec: base({ joinTimeout: '' }),
    field: 'spec.joinTimeout',
    refusedBy: 'schema',
    says: DURATION_SAYS,
  },
  {
    name: 'joinTimeout of 33 characters',
    spec: base({ joinTimeout: `${'0'.repeat(31)}1s` }),
    field: 'spec.joinTimeout',
    refusedBy: 'schema',
    says: /32/,
  },
  {
    name: 'provisionTimeout not a duration',
    spec: base({ provisionTimeout: 'forever' }),
    field: 'spec.provisionTimeout',
    refusedBy: 'schema',
    says: DURATION_SAYS,
  },
  {
    name: 'provisionTimeout zero',
    spec: base({ provisionTimeout: '0' }),
    field: 'spec.provisionTimeout',
    refusedBy: 'schema',
    says: /must be longer than 0/,
  },
  {
    name: 'provisionTimeout past int64',
    spec: base({ provisionTimeout: '9999999h' }),
    field: 'spec.provisionTimeout',
    refusedBy: 'schema',
    says: /at most 8760h/,
  },
  ...durationRows('remediation.window', (v) => base({ remediation: { window: v } })).filter((_, i) =>
    [0, 2, 5, 6].includes(i),
  ),
  ...durationRows('suspicion.probeInterval', (v) => base({ suspicion: { probeInterval: v } })).filter((_, i) =>
    [0, 1, 2, 6, 7].includes(i),
  ),
  ...durationRows('suspicion.maxProbeInterval', (v) => base({ suspicion: { maxProbeInterval: v } })).filter((_, i) =>
    [0, 2, 6].includes(i),
  ),
  {
    name: 'maxProbeInterval below probeInterval',
    spec: base({ suspicion: { probeInterval: '2h', maxProbeInterval: '30m' } }),
    field: 'spec.suspicion.maxProbeInterval',
    refusedBy: 'schema',
    says: /at least probeInterval/,
  },
  {
    name: 'probeInterval above the default maxProbeInterval',
    spec: base({ suspicion: { probeInterval: '10h' } }),
    field: 'spec.suspicion.maxProbeInterval',
    refusedBy: 'schema',
    says: /at least probeInterval/,
  },
  {
    name: 'maxProbeInterval below the default probeInterval',
    spec: base({ suspicion: { maxProbeInterval: '10m' } }),
    field: 'spec.suspicion.maxProbeInterval',
    refusedBy: 'schema',
    says: /at least probeInterval/,
  },

  // ---- maxInFlight (int or percent)
  {
    name: 'maxInFlight zero',
    spec: base({ maxInFlight: 0 }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /integer from 1 to 2147483647/,
  },
  {
    name: 'maxInFlight negative',
    spec: base({ maxInFlight: -1 }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /integer from 1 to 2147483647/,
  },
  {
    name: 'maxInFlight past int32',
    spec: base({ maxInFlight: 2147483648 }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /integer from 1 to 2147483647/,
  },
  {
    name: 'maxInFlight a fraction',
    spec: base({ maxInFlight: 1.5 }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /must be of type integer,string/,
  },
  {
    name: 'maxInFlight 0%',
    spec: base({ maxInFlight: '0%' }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /"1%" to "100%"/,
  },
  {
    name: 'maxInFlight 150%',
    spec: base({ maxInFlight: '150%' }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /"1%" to "100%"/,
  },
  {
    name: 'maxInFlight -10%',
    spec: base({ maxInFlight: '-10%' }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /"1%" to "100%"/,
  },
  {
    name: 'maxInFlight 50.5%',
    spec: base({ maxInFlight: '50.5%' }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /"1%" to "100%"/,
  },
  {
    name: 'maxInFlight a number in a string',
    spec: base({ maxInFlight: '3' }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /"1%" to "100%"/,
  },
  {
    name: 'maxInFlight a word',
    spec: base({ maxInFlight: 'many' }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /"1%" to "100%"/,
  },
  {
    name: 'maxInFlight a boolean',
    spec: base({ maxInFlight: true }),
    field: 'spec.maxInFlight',
    refusedBy: 'schema',
    says: /must be of type integer,string/,
  },

  // ---- remediation
  {
    name: 'remediation a list',
    spec: base({ remediation: [] }),
    field: 'spec.remediation',
    refusedBy: 'schema',
    says: /must be of type object/,
  },
  {
    name: 'remediation a string',
    spec: base({ remediation: 'fast' }),
    field: 'spec.remediation',
    refusedBy: 'schema',
    says: /must be of type object/,
  },
  {
    name: 'unknown strategy',
    spec: base({ remediation: { strategy: 'Reboot' } }),
    field: 'spec.remediation.strategy',
    refusedBy: 'schema',
    says: /"Auto", "OwnerRemediated", "MachineCondition", "Delete"/,
  },
  {
    name: 'strategy in lower case',
    spec: base({ remediation: { strategy: 'auto' } }),
    field: 'spec.remediation.strategy',
    refusedBy: 'schema',
    says: /"Auto"/,
  },
  {
    name: 'strategy a number',
    spec: base({ remediation: { strategy: 1 } }),
    field: 'spec.remediation.strategy',
    refusedBy: 'schema',
    says: /must be of type string/,
  },
  {
    name: 'maxPerOwner zero',
    spec: base({ remediation: { maxPerOwner: 0 } }),
    field: 'spec.remediation.maxPerOwner',
    refusedBy: 'schema',
    says: /greater than or equal to 1/,
  },
  {
    name: 'maxPerOwner negative',
    spec: base({ remediation: { maxPerOwner: -1 } }),
    field: 'spec.remediation.maxPerOwner',
    refusedBy: 'schema',
    says: /greater than or equal to 1/,
  },
  {
    name: 'maxPerOwner past int32',
    spec: base({ remediation: { maxPerOwner: 2147483648 } }),
    field: 'spec.remediation.maxPerOwner',
    refusedBy: 'schema',
    says: /less than or equal to 2147483647/,
  },
  {
    name: 'maxPerOwner a string',
    spec: base({ remediation: { maxPerOwner: '5' } }),
    field: 'spec.remediation.maxPerOwner',
    refusedBy: 'schema',
    says: /must be of type integer/,
  },
  {
    name: 'maxPerOwner a fraction',
    spec: base({ remediation: { maxPerOwner: 1.5 } }),
    field: 'spec.remediation.maxPerOwner',
    refusedBy: 'schema',
    says: /must be of type integer/,
  },

  // ---- suspicion
  {
    name: 'suspicion a string',
    spec: base({ suspicion: 'on' }),
    field: 'spec.suspicion',
    refusedBy: 'schema',
    says: /must be of type object/,
  },
  {
    name: 'consecutiveJoinFailures negative',
    spec: base({ suspicion: { consecutiveJoinFailures: -1 } }),
    field: 'spec.suspicion.consecutiveJoinFailures',
    refusedBy: 'schema',
    says: /greater than or equal to 0/,
  },
  {
    name: 'consecutiveJoinFailures past int32',
    spec: base({ suspicion: { consecutiveJoinFailures: 2147483648 } }),
    field: 'spec.suspicion.consecutiveJoinFailures',
    refusedBy: 'schema',
    says: /less than or equal to 2147483647/,
  },
  {
    name: 'consecutiveJoinFailures a word',
    spec: base({ suspicion: { consecutiveJoinFailures: 'two' } }),
    field: 'spec.suspicion.consecutiveJoinFailures',
    refusedBy: 'schema',
    says: /must be of type integer/,
  },

  // ---- the rest
  {
    name: 'neverJoinedLimit negative',
    spec: base({ neverJoinedLimit: -2 }),
    field: 'spec.neverJoinedLimit',
    refusedBy: 'schema',
    says: /greater than or equal to 0/,
  },
  {
    name: 'neverJoinedLimit past int32',
    spec: base({ neverJoinedLimit: 2147483648 }),
    field: 'spec.neverJoinedLimit',
    refusedBy: 'schema',
    says: /less than or equal to 2147483647/,
  },
  {
    name: 'neverJoinedLimit a string',
    spec: base({ neverJoinedLimit: '3' }),
    field: 'spec.neverJoinedLimit',
    refusedBy: 'schema',
    says: /must be of type integer/,
  },
  {
    name: 'unknown firstControlPlane policy',
    spec: base({ firstControlPlane: 'Delete' }),
    field: 'spec.firstControlPlane',
    refusedBy: 'schema',
    says: /"Remediate", "Report"/,
  },
  {
    name: 'firstControlPlane in lower case',
    spec: base({ firstControlPlane: 'report' }),
    field: 'spec.firstControlPlane',
    refusedBy: 'schema',
    says: /"Remediate", "Report"/,
  },
  {
    name: 'firstControlPlane a boolean',
    spec: base({ firstControlPlane: true }),
    field: 'spec.firstControlPlane',
    refusedBy: 'schema',
    says: /must be of type string/,
  },
  {
    name: 'dryRun a string',
    spec: base({ dryRun: 'yes' }),
    field: 'spec.dryRun',
    refusedBy: 'schema',
    says: /must be of type boolean/,
  },
  {
    name: 'dryRun a number',
    spec: base({ dryRun: 1 }),
    field: 'spec.dryRun',
    refusedBy: 'schema',
    says: /must be of type boolean/,
  },
  {
    name: 'paused a number',
    spec: base({ paused: 1 }),
    field: 'spec.paused',
    refusedBy: 'schema',
    says: /must be of type boolean/,
  },
  {
    name: 'paused the string "false"',
    spec: base({ paused: 'false' }),
    field: 'spec.paused',
    refusedBy: 'schema',
    says: /must be of type boolean/,
  },
];
