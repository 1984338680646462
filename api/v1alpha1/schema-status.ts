// The status part of the MachineJoinCheck schema: all of MachineJoinCheckStatus (types.ts), persisted so
// that a restarted controller decides the same way. Written only by the controller, so it carries types
// and descriptions but no enums: a value list here would turn a new outcome into a failed status write.
import { STATUS_LIMITS } from './types.js';
import { arr, bool, conditions, int32, int64, num, obj, str, time, type JSONSchemaProps } from './schema-parts.js';

const owner = (what: string): JSONSchemaProps =>
  obj(`${what}: the Machine's controlling owner.`, {
    kind: str('kind of the owner, e.g. MachineSet or KubeadmControlPlane.'),
    name: str('name of the owner, in the check\'s namespace.'),
  });

const failureKind = str('kind of failure: JoinTimeout (no Node within joinTimeout) or ProvisionTimeout (infrastructure or bootstrap data not ready within provisionTimeout).');

const failure = obj('A Machine that timed out.', {
  machine: str('machine is the name of the Machine.'),
  uid: str('uid of the Machine.'),
  owner: owner('owner'),
  kind: failureKind,
  time: time('time the failure was recorded.'),
  bootstrapConfig: str("bootstrapConfig is the Machine's spec.bootstrap.configRef, as Kind/name."),
  dataSecretName: str("dataSecretName is the Machine's spec.bootstrap.dataSecretName: the join data it was given."),
  controlPlane: bool('controlPlane is true for a control-plane Machine.'),
});

const remediation = obj('A replacement JoinGuard asked of CAPI (or would have, in dry-run), recorded before the request was made.', {
  machine: str('machine is the name of the Machine to be replaced.'),
  uid: str('uid of the Machine.'),
  owner: owner('owner'),
  time: time('time the request was recorded.'),
  path: str(
    'path is how the replacement was asked: OwnerRemediated (remediation-contract conditions), RemediateAnnotation (cluster.x-k8s.io/remediate-machine for a MachineHealthCheck), MachineCondition (JoinGuardJoined=False), Delete, or Report (no owner can re-create it: reported only).',
  ),
  outcome: str(
    "outcome so far: Requested (recorded, write made or about to be), Marked (visible on the Machine), Deferred (the owner said RemediationDeferred), Refused (the owner said CannotBeRemediated), Withdrawn (the Machine joined first; mark removed), Replaced (old Machine gone), Reported, or DryRun.",
  ),
  kind: failureKind,
  ownerReason: str("ownerReason is the owner's OwnerRemediated reason as last seen, e.g. RemediationDeferred, CannotBeRemediated, MachineDeleting."),
  ownerMessage: str("ownerMessage is the owner's OwnerRemediated message as last seen."),
  finishedTime: time('finishedTime is when the remediation stopped being in flight (old Machine gone, or the mark withdrawn).'),
  canary: bool('canary is true for the one Machine rebuilt to test a suspicion.'),
  firstControlPlane: bool("firstControlPlane is true when the Machine was the first control-plane Machine: its replacement's join clock waits until it is gone."),
  lastAttempt: time('lastAttempt is when the write was last made; a write not visible on the Machine a minute later is made again.'),
});

export const statusSchema: JSONSchemaProps = obj(
  'status is what JoinGuard observed and decided; all of it is kept so that a restarted controller decides the same way.',
  {
    observedGeneration: int64('observedGeneration is the metadata.generation of the spec this status was computed from.', { minimum: 0 }),
    expectedMachines: int32('expectedMachines is how many Machines of the Cluster the selector chooses.'),
    joinedMachines: int32('joinedMachines is how many of them have a Node (status.nodeRef).'),
    joiningMachines: int32('joiningMachines is how many have infrastructure and bootstrap data ready and wait for their Node.'),
    stuckMachines: int32('stuckMachines is how many are past their deadline with no Node.'),
    everJoined: bool('everJoined is true once any Machine in scope has joined; until then neverJoinedLimit applies.'),
    consecutiveJoinFailures: int32('consecutiveJoinFailures is how many Machines in a row timed out joining with no Machine joining in between.'),
    recentFailures: arr(`recentFailures are the latest timeouts, newest last (at most ${STATUS_LIMITS.recentFailures}).`, failure),
    remediations: arr(`remediations are the latest replacements asked of CAPI, newest last (at most ${STATUS_LIMITS.remediations}).`, remediation),
    suspicion: obj(
      'suspicion is set while join failures in a row point at the join credential or the network path to the control-plane endpoint; only canaries are rebuilt meanwhile.',
      {
        reason: str('reason of the suspicion: BootstrapCredentialSuspect.'),
        since: time('since is when the suspicion was raised.'),
        nextCanaryTime: time('nextCanaryTime is when the next canary Machine may be rebuilt.'),
        canariesSpent: int32('canariesSpent is how many canaries were rebuilt under this suspicion.'),
        machines: arr('machines are the names of the Machines whose failures raised the suspicion.', str('A Machine name.')),
      },
    ),
    joinDurations: obj('joinDurations summarises how long the Machines that did join took, from their join clock start to their Node.', {
      count: int32('count of join durations measured.'),
      p50Seconds: num('p50Seconds is the median join duration in seconds.'),
      p95Seconds: num('p95Seconds is the 95th percentile join duration in seconds.'),
      maxSeconds: num('maxSeconds is the longest join duration in seconds.'),
      suggestedJoinTimeout: str('suggestedJoinTimeout is a joinTimeout the observed joins fit in: p95 × 1.5, rounded up to a minute, at least 2m.'),
      recentSeconds: arr(
        `recentSeconds are the latest join durations in seconds (at most ${STATUS_LIMITS.joinDurationSamples}), from which the figures above are computed.`,
        num('A join duration in seconds.'),
      ),
    }),
    observations: arr(
      'observations are times no object carries, kept per Machine: the first time the controller saw a state.',
      obj('What the controller saw of one Machine.', {
        machine: str('machine is the name of the Machine.'),
        uid: str('uid of the Machine.'),
        readySeen: time('readySeen is the first time the Machine was seen with infrastructure and bootstrap data ready (used when its conditions carry no time).'),
        clockHeldUntil: time("clockHeldUntil is, for the first control-plane Machine's replacement, when the old Machine's infrastructure was seen gone: its join clock starts then."),
        firstControlPlane: bool('firstControlPlane is true when the Machine was ever seen as the first control-plane Machine.'),
        failedAt: time('failedAt is when its failure was recorded: a failure is counted once per Machine, even after recentFailures dropped it.'),
      }),
    ),
    connectionRestoredSeen: time('connectionRestoredSeen is when the workload connection was seen back, when no condition says; verdicts resume a grace period later.'),
    lastResume: obj('lastResume is the last joinguard.io/resume annotation acted on.', {
      value: str('value of the annotation.'),
      time: time('time it was acted on.'),
    }),
    refusedOwners: arr(
      'refusedOwners are owners that said CannotBeRemediated: no more requests go to them until a joinguard.io/resume.',
      obj('An owner that refused.', {
        kind: str('kind of the owner.'),
        name: str('name of the owner.'),
      }),
    ),
    firstControlPlaneExtendedUntil: time(
      "firstControlPlaneExtendedUntil is the first control-plane Machine's extended deadline: the control plane answered at the endpoint, so initialization may be finishing.",
    ),
    firstControlPlaneExtendedFor: str('firstControlPlaneExtendedFor is the uid of the Machine the extension was given to (once per Machine).'),
    endpointProbeRequested: time("endpointProbeRequested is when the Cluster's controlPlaneEndpoint was last probed; it is probed again only after a minute without an answer."),
    firstControlPlaneRemediation: obj("firstControlPlaneRemediation is the last first control-plane replacement requested; its replacement's join clock waits for finishedTime.", {
      machine: str('machine is the name of the replaced Machine.'),
      uid: str('uid of the replaced Machine.'),
      time: time('time the replacement was requested.'),
      finishedTime: time("finishedTime is when the old Machine's infrastructure was gone."),
    }),
    firstControlPlaneMisconfigured: obj(
      'firstControlPlaneMisconfigured is set when the first control-plane replacement is not an init Machine (it has a join configuration), or the Cluster reports initialized with no control-plane Machine left: no more first control-plane remediation (Progressing=False/FirstControlPlaneReplacementMisconfigured).',
      {
        since: time('since is when it was seen.'),
        message: str('message says what was seen.'),
      },
    ),
    connectionDownSeen: time('connectionDownSeen is when the workload connection was seen down, after the control plane was initialized.'),
    controlPlaneInitializedSeen: time('controlPlaneInitializedSeen is the first time the control plane was seen initialized, when the Cluster condition carries no time.'),
    failuresSinceResume: int32('failuresSinceResume is how many failures were recorded since the last joinguard.io/resume: what neverJoinedLimit counts.'),
    conditions: conditions(
      'conditions are Ready (the check works and its view is current), Progressing (True/AsExpected or True/Remediating; False with BootstrapCredentialSuspect, ControlPlaneEndpointUnreachable, NeverJoined, RemediationBudgetExhausted, RemediationRefusedByOwner, FirstControlPlaneReplacementMisconfigured or DryRun, each with a runbook section in docs/runbook.md) and Paused.',
    ),
  },
);
