// The MachineJoinCheck CRD's OpenAPI v3 schema (structural), the source of manifests/crd/. Every field
// has a description (kubectl explain), every default comes from defaults.ts, and the rules the schema can
// state it states (pattern, enum, minimum, CEL); validation.ts states them again in code.
import {
  CLUSTER_NAME_MAX_LENGTH,
  FIRST_CONTROL_PLANE_POLICIES,
  INT32_MAX,
  PERCENT_PATTERN,
  SPEC_DEFAULTS as D,
  SPEC_DURATION_MAX,
  STRATEGY_MIN_CAPI_MINOR,
} from './defaults.js';
import { CLUSTER_NAME_PATTERN } from './labels.js';
import { REMEDIATION_STRATEGIES } from './types.js';
import {
  bool,
  count,
  describeDefaults,
  duration,
  durationAtLeast,
  labelSelector,
  obj,
  str,
  type JSONSchemaProps,
} from './schema-parts.js';
import { statusSchema } from './schema-status.js';

export type { JSONSchemaProps, ValidationRule } from './schema-parts.js';

const max = SPEC_DURATION_MAX;

// Every default's sentence ("Defaults to 20m.") is appended from SPEC_DEFAULTS by describeDefaults.
const specSchema: JSONSchemaProps = describeDefaults(
  obj(
    'spec says which Machines of which Cluster are checked, how ' +
      'long they may take to join, and how JoinGuard asks CAPI ' +
      'for a replacement.',
    {
      clusterName: str(
        'clusterName is the name of the Cluster, in this namespace, ' +
          'whose Machines are checked. Required and immutable: create ' +
          'another MachineJoinCheck for another Cluster.',
        {
          minLength: 1,
          maxLength: CLUSTER_NAME_MAX_LENGTH,
          'x-kubernetes-validations': [
            {
              rule: `self.matches(r'${CLUSTER_NAME_PATTERN}')`,
              message:
                `must be the name of a Cluster: lower-case letters, digits, ` +
                `"-" and ".", starting and ending with a letter or digit, ` +
                `at most ${CLUSTER_NAME_MAX_LENGTH} characters`,
            },
            {
              rule: 'self == oldSelf',
              message: 'clusterName is immutable; create a new MachineJoinCheck for another Cluster',
            },
          ],
        },
      ),
      selector: {
        ...labelSelector(
          "selector chooses which of the Cluster's Machines are checked, " +
            "like a MachineHealthCheck's selector; it must not be empty. " +
            'A Machine may be checked by one MachineJoinCheck only.',
        ),
        'x-kubernetes-validations': [
          {
            rule:
              '(has(self.matchLabels) && size(self.matchLabels) > 0) || ' +
              '(has(self.matchExpressions) && size(self.matchExpressions) ' +
              '> 0)',
            message: 'selector must not be empty: name the Machines to check with matchLabels or matchExpressions',
          },
        ],
      },
      joinTimeout: duration(
        "joinTimeout is the longest wait from the start of a Machine's " +
          'join clock to status.nodeRef. The clock starts at the latest ' +
          "of: the Machine's creation, its infrastructure ready, its " +
          'bootstrap data ready and, for every Machine but the first ' +
          "control-plane Machine, the Cluster's control plane initialized. " +
          'Under 2m is admitted with a warning.',
        { max, default: D.joinTimeout },
      ),
      provisionTimeout: duration(
        'provisionTimeout is the longest wait from Machine creation ' +
          'until its infrastructure and its bootstrap data are ready, ' +
          'such as 30m. Unset turns the provision check off.',
        { max },
      ),
      maxInFlight: {
        description:
          `maxInFlight is how many remediations may be requested and ` +
          `not yet finished (old Machine gone, replacement created) ` +
          `at one time: an integer from 1 to ${INT32_MAX}, or a percent ` +
          `of the expected Machines from "1%" to "100%" (rounded down, ` +
          `at least 1).`,
        'x-kubernetes-int-or-string': true,
        default: D.maxInFlight,
        'x-kubernetes-validations': [
          {
            rule: `type(self) == int ? (self >= 1 && self <= ${INT32_MAX}) : self.matches('${PERCENT_PATTERN}')`,
            message: `must be an integer from 1 to ${INT32_MAX}, or a percent from "1%" to "100%"`,
          },
        ],
      },
      remediation: obj(
        'remediation says how a replacement is asked of CAPI and how many replacements an owner may get.',
        {
          strategy: str(
            `strategy is how a replacement is asked of CAPI. OwnerRemediated: ` +
              `JoinGuard sets CAPI's remediation-contract conditions (HealthCheckSucceeded=False, ` +
              `OwnerRemediated=False) so the MachineSet or control-plane ` +
              `provider replaces the Machine. Auto: as OwnerRemediated, ` +
              `except that when a MachineHealthCheck also selects the Machine, ` +
              `JoinGuard sets cluster.x-k8s.io/remediate-machine and lets ` +
              `that MachineHealthCheck act. MachineCondition (CAPI v1.${STRATEGY_MIN_CAPI_MINOR.MachineCondition}+, ` +
              `refused on older releases): JoinGuard only sets its own ` +
              `Machine condition JoinGuardJoined=False for a MachineHealthCheck ` +
              `with checks.unhealthyMachineConditions to act on. Delete: ` +
              `deletes MachineSet-owned Machines (never a control-plane ` +
              `Machine).`,
            { enum: [...REMEDIATION_STRATEGIES], default: D.remediation.strategy },
          ),
          maxPerOwner: count(
            'maxPerOwner is how many remediations one owner (MachineSet, ' +
              'KubeadmControlPlane) may get within window; past it the ' +
              'check stops with Progressing=False/RemediationBudgetExhausted.',
            { minimum: 1, default: D.remediation.maxPerOwner },
          ),
          window: duration('window is the sliding window of maxPerOwner, such as 24h.', {
            max,
            default: D.remediation.window,
          }),
        },
        { default: {} },
      ),
      suspicion: obj(
        'suspicion says when join failures in a row point at a cause ' +
          'outside the Machines (an expired join credential, a broken ' +
          'network path to the control-plane endpoint), so that rebuilding ' +
          'stops and only canaries are rebuilt.',
        {
          consecutiveJoinFailures: count(
            'consecutiveJoinFailures is how many Machines in a row, across ' +
              'Machines and owners, must time out joining with no Machine ' +
              'joining in between to raise the suspicion (Progressing=False/BootstrapCredentialSuspect). ' +
              'The failure that reaches it is not rebuilt. 0 turns the ' +
              'suspicion off.',
            { minimum: 0, default: D.suspicion.consecutiveJoinFailures },
          ),
          probeInterval: duration(
            'probeInterval is the first wait before a canary Machine ' +
              'is rebuilt while suspected; each further wait doubles, up ' +
              'to maxProbeInterval.',
            { max, default: D.suspicion.probeInterval },
          ),
          maxProbeInterval: duration('maxProbeInterval caps the canary back-off; at least probeInterval.', {
            max,
            default: D.suspicion.maxProbeInterval,
          }),
        },
        {
          default: {},
          'x-kubernetes-validations': [
            durationAtLeast('maxProbeInterval', 'probeInterval', 'maxProbeInterval must be at least probeInterval'),
          ],
        },
      ),
      neverJoinedLimit: count(
        'neverJoinedLimit is how many failures are tolerated while ' +
          'no Machine in scope has ever joined; the one that reaches ' +
          'it stops all remediation with Progressing=False/NeverJoined ' +
          '(a cluster misconfigured from the start). 0 turns it off.',
        { minimum: 0, default: D.neverJoinedLimit },
      ),
      firstControlPlane: str(
        'firstControlPlane says whether the first control-plane Machine ' +
          '(the one that initializes the control plane) may be replaced, ' +
          "always through the control-plane provider's own remediation: " +
          'Remediate, or Report (only report it).',
        { enum: [...FIRST_CONTROL_PLANE_POLICIES], default: D.firstControlPlane },
      ),
      dryRun: bool(
        'dryRun makes JoinGuard decide and report everything (status, events, metrics) and change no Machine.',
        { default: D.dryRun },
      ),
      paused: bool('paused makes JoinGuard do nothing for this check; the Paused condition says so.', {
        default: D.paused,
      }),
    },
    { required: ['clusterName', 'selector'] },
  ),
);

/** The CRD's openAPIV3Schema. */
export const machineJoinCheckSchema: JSONSchemaProps = obj(
  'MachineJoinCheck watches the Machines of one Cluster in ' +
    "its namespace, chosen by a selector like a MachineHealthCheck's, " +
    'and asks CAPI to replace those whose Node never appears; ' +
    'it treats the first control-plane Machine with care, and ' +
    'stops rebuilding when the failures say the cause is not ' +
    'in the Machine (an expired join credential, a broken network ' +
    'path).',
  {
    apiVersion: str(
      'APIVersion defines the versioned schema of this representation ' +
        'of an object. Servers should convert recognized schemas ' +
        'to the latest internal value, and may reject unrecognized ' +
        'values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/' +
        'api-conventions.md#resources',
    ),
    kind: str(
      'Kind is a string value representing the REST resource this ' +
        'object represents. Servers may infer this from the endpoint ' +
        'the client submits requests to. Cannot be updated. In CamelCase. ' +
        'More info: https://git.k8s.io/community/contributors/devel/sig-architecture/' +
        'api-conventions.md#types-kinds',
    ),
    // The apiserver allows nothing else on the root metadata (not even a description).
    metadata: { type: 'object' },
    spec: specSchema,
    status: statusSchema,
  },
  { required: ['spec'] },
);
