// The status part of the MachineJoinCheck schema: all of MachineJoinCheckStatus (types.ts), persisted so that a
// restarted controller decides the same way. The schema holds the bounds the controller keeps (counts >= 0 and
// int32, lists bounded, enums from the same code as the controller's values), so a hand-edited status out of
// those bounds is refused by the apiserver; the controller still reads status with suspicion (memory.ts).
import {
  FAILURE_KINDS,
  HOLDS,
  REMEDIATION_OUTCOMES,
  REMEDIATION_PATHS,
  REQUEST_STATES,
  STATUS_LIMITS,
  TIMED_PHASES,
  WITHDRAWN_REASONS,
} from './types.js';
import { arr, bool, conditions, int32, int64, num, obj, str, time, type JSONSchemaProps } from './schema-parts.js';

const count = (description: string): JSONSchemaProps => int32(description, { minimum: 0 });
const bounded = (description: string, items: JSONSchemaProps, max: number): JSONSchemaProps =>
  arr(`${description} (at most ${max}).`, items, { maxItems: max });

const owner = (what: string): JSONSchemaProps =>
  obj(`${what}: the Machine's controlling owner.`, {
    kind: str('kind of the owner, e.g. MachineSet or KubeadmControlPlane.'),
    name: str("name of the owner, in the check's namespace."),
  });

const failureKind = str(
  'kind of failure: JoinTimeout (no Node within joinTimeout) ' +
    'or ProvisionTimeout (infrastructure or bootstrap data not ' +
    'ready within provisionTimeout).',
  {
    enum: [...FAILURE_KINDS],
  },
);
const path = str(
  'path is how the replacement was asked: OwnerRemediated (remediation-contract ' +
    'conditions), RemediateAnnotation (cluster.x-k8s.io/remediate-machine ' +
    'for a MachineHealthCheck), MachineCondition (JoinGuardJoined=False), ' +
    'Delete, or Report (no owner can re-create it: reported only).',
  { enum: [...REMEDIATION_PATHS] },
);

const failure = obj('A Machine that timed out.', {
  machine: str('machine is the name of the Machine.'),
  uid: str('uid of the Machine.'),
  owner: owner('owner'),
  kind: failureKind,
  time: time('time the failure was recorded.'),
  bootstrapConfig: str("bootstrapConfig is the Machine's spec.bootstrap.configRef, as Kind/name."),
  dataSecretName: str("dataSecretName is the Machine's spec.bootstrap.dataSecretName: the join data it was given."),
  controlPlane: bool('controlPlane is true for a control-plane Machine.'),
  version: str("version is the Machine's spec.version: a KubeadmControlPlane rollout's revision."),
});

const remediation = obj(
  'A replacement JoinGuard asked of CAPI (or would have, in dry run): the history shown to users.',
  {
    machine: str('machine is the name of the Machine to be replaced.'),
    uid: str('uid of the Machine.'),
    owner: owner('owner'),
    time: time('time the request was recorded.'),
    path,
    outcome: str(
      'outcome so far: Requested (recorded, the mark being made), ' +
        'Marked (visible on the Machine), Deferred (the owner said ' +
        'RemediationDeferred), Refused (the owner said CannotBeRemediated), ' +
        'Withdrawn (the Machine joined or was opted out first; mark ' +
        'removed), Cancelled (it joined before the mark was made), ' +
        'Unanswered (nobody acted on it in time; withdrawn and reported), ' +
        'Replaced (old Machine gone), Reported, or DryRun.',
      { enum: [...REMEDIATION_OUTCOMES] },
    ),
    kind: failureKind,
    ownerReason: str(
      "ownerReason is the owner's OwnerRemediated reason as last " +
        'seen, e.g. RemediationDeferred, CannotBeRemediated, MachineDeleting.',
    ),
    ownerMessage: str("ownerMessage is the owner's OwnerRemediated message as last seen."),
    finishedTime: time(
      'finishedTime is when the remediation stopped being in flight (old Machine gone, or the mark withdrawn).',
    ),
    canary: bool('canary is true for the one Machine rebuilt to test a suspicion.'),
    firstControlPlane: bool('firstControlPlane is true when the Machine was the first control-plane Machine.'),
  },
);

const request = obj(
  'What JoinGuard asked about one Machine that still exists: ' +
    'the memory that decides (never asked twice, the mark it ' +
    'keeps, the mark it withdraws).',
  {
    machine: str('machine is the name of the Machine.'),
    uid: str('uid of the Machine.'),
    owner: owner('owner'),
    path,
    kind: failureKind,
    time: time('time the request was recorded (before it was made).'),
    state: str(
      'state: Open (the mark stays until the Machine is gone), ' +
        'Withdrawn (every mark JoinGuard caused is removed), Reported ' +
        'or DryRun (nothing written).',
      {
        enum: [...REQUEST_STATES],
      },
    ),
    withdrawn: str(
      'withdrawn says why: Joined, OptedOut (a skip annotation), ' +
        "Unanswered, or WithdrawAll (the check's joinguard.io/withdraw-all " +
        'annotation).',
      { enum: [...WITHDRAWN_REASONS] },
    ),
    marked: bool(
      'marked is true once the mark was seen on the Machine (written with the next change that is not derived from the mark).',
    ),
    markedTime: time(
      "markedTime is when the mark became visible: the mark's own time on the Machine (its condition's " +
        "lastTransitionTime, never before the request nor after JoinGuard's clock), else when it was first seen; " +
        'a request is unanswered only counting from then.',
    ),
    answered: bool('answered is true once the owner (or the MachineHealthCheck asked) acted on it.'),
    canary: bool('canary is true for a canary rebuild.'),
    firstControlPlane: bool('firstControlPlane is true when the Machine was the first control-plane Machine.'),
  },
);

// Field names chosen for `kubectl describe`, which prints each entry's fields in alphabetical order with nothing
// between entries: `machine` sorts first, so every entry starts with its Machine's name.
const timedMachine = obj(
  'A Machine being timed or held. Display only: derived again on every pass, never read back as memory.',
  {
    machine: str('machine is the name of the Machine.'),
    phase: str(
      'phase is the clock the Machine is on: Provisioning (infrastructure or bootstrap data not ready, ' +
        'timed by provisionTimeout) or Joining (no Node yet, timed by joinTimeout).',
      { enum: [...TIMED_PHASES] },
    ),
    since: time(
      'since is when its clock started (a join clock: the latest of creation, readiness and, but for ' +
        'the first control-plane Machine, the control plane initialized).',
    ),
    until: time(
      'until is its deadline: since plus provisionTimeout or joinTimeout. Past it with no Node, ' +
        'JoinGuard asks for a replacement unless onHold says what holds it.',
    ),
    onHold: str(
      'onHold says what holds the Machine back from a verdict or a request: FirstControlPlane, ' +
        'ControlPlaneNotInitialized, PreviousFirstControlPlane, EndpointProbe, EndpointAnswered, ' +
        'ConnectionDown, ConnectionGrace, NodeWithoutProviderID (a verdict waits); a guard ' +
        '(FirstControlPlaneReplacementMisconfigured, NeverJoined, BootstrapCredentialSuspect, RolloutSuspect, ' +
        'RemediationRefusedByOwner, RemediationBudgetExhausted: see Progressing), OwnerBusy (its ' +
        "KubeadmControlPlane's retry period, or one remediation at a time), Paused, ClusterDeleting, " +
        'WithdrawingMarks, MachineHealthCheckPaused, MachineDeleteNotAllowed (see Ready), or AlreadyMarked ' +
        '(someone else asked for its remediation).',
      { enum: [...HOLDS] },
    ),
  },
  { required: ['machine', 'phase'] },
);

export const statusSchema: JSONSchemaProps = obj(
  'status is what JoinGuard observed and decided; all of it ' +
    'is kept so that a restarted controller decides the same ' +
    'way.',
  {
    observedGeneration: int64(
      'observedGeneration is the metadata.generation of the spec this status was computed from.',
      { minimum: 0 },
    ),
    expectedMachines: count(
      'expectedMachines is how many Machines of the Cluster the selector chooses (not being deleted).',
    ),
    joinedMachines: count('joinedMachines is how many of them have a Node (status.nodeRef).'),
    joiningMachines: count('joiningMachines is how many are provisioning or waiting for their Node.'),
    stuckMachines: count(
      'stuckMachines is how many are past their deadline with no ' +
        'Node, or asked to be replaced and not gone yet: each counted ' +
        'once, as joinguard_machines{state="Stuck"} counts them.',
    ),
    heldMachines: count(
      'heldMachines is how many have no verdict yet, or are held back from a request (see heldReason and Progressing).',
    ),
    heldReason: str(
      'heldReason is the main reason Machines are held: a Progressing ' +
        'reason, MachineDeleteNotAllowed (see Ready), or why a verdict ' +
        'waits (e.g. FirstControlPlane, ConnectionDown).',
    ),
    timedMachines: bounded(
      'timedMachines are the Machines being timed (provisioning or joining, with their deadline) and those ' +
        'held back, nearest deadline first (held ones with no clock last, then by name). Display only: the ' +
        "marks in flight and their owners' answers are in remediations (no finishedTime yet)",
      timedMachine,
      STATUS_LIMITS.timedMachines,
    ),
    everJoined: bool('everJoined is true once any Machine in scope has joined; until then neverJoinedLimit applies.'),
    consecutiveJoinFailures: count(
      'consecutiveJoinFailures is how many Machines in a row timed out joining with no Machine joining in between.',
    ),
    failuresSinceResume: count(
      'failuresSinceResume is how many failures were recorded since ' +
        'the last joinguard.io/resume: what neverJoinedLimit counts.',
    ),
    recentFailures: bounded(
      'recentFailures are the latest timeouts, newest last',
      failure,
      STATUS_LIMITS.recentFailures,
    ),
    remediations: bounded(
      'remediations are the latest replacements asked of CAPI, newest last',
      remediation,
      STATUS_LIMITS.remediations,
    ),
    requests: bounded(
      'requests are, for every Machine JoinGuard asked about that still exists, what it asked and where that stands',
      request,
      STATUS_LIMITS.requests,
    ),
    ownerWindows: bounded(
      'ownerWindows are, per owner, the times of its requests kept for ' +
        'the longer of remediation.window and a day, whatever maxPerOwner ' +
        'is: the exact per-owner budget',
      obj("One owner's requests inside the window.", {
        kind: str('kind of the owner.'),
        name: str('name of the owner.'),
        times: arr('times of the requests, oldest first.', time('A request time.')),
      }),
      STATUS_LIMITS.ownerWindows,
    ),
    suspicion: obj(
      'suspicion is set while join failures in a row point at the ' +
        'join credential or the network path to the control-plane ' +
        'endpoint; only canaries are rebuilt meanwhile.',
      {
        reason: str(
          'reason of the suspicion: BootstrapCredentialSuspect, or ' +
            'RolloutSuspect when the failures all come from a new template ' +
            'revision.',
          { enum: ['BootstrapCredentialSuspect', 'RolloutSuspect'] },
        ),
        since: time('since is when the suspicion was raised.'),
        nextCanaryTime: time('nextCanaryTime is when the next canary Machine may be rebuilt.'),
        canariesSpent: count('canariesSpent is how many canaries were rebuilt under this suspicion.'),
        machines: bounded(
          'machines are the names of the Machines whose failures raised the suspicion',
          str('A Machine name.'),
          STATUS_LIMITS.suspectMachines,
        ),
        rollout: obj(
          'rollout (RolloutSuspect) is the template revision the failures ' +
            'all come from, of which no Machine joined, and the previous ' +
            'revision whose Machines did.',
          {
            owner: owner('owner is the MachineDeployment or KubeadmControlPlane rolling out; owner'),
            revision: str("revision is the MachineDeployment's revision number, or the KubeadmControlPlane's version."),
            machineSet: str('machineSet is the MachineSet of that revision.'),
            previousRevision: str('previousRevision is the last revision whose Machines joined.'),
            previousMachineSet: str('previousMachineSet is the MachineSet of the previous revision.'),
            changes: bounded(
              'changes are the template references that differ from the previous revision, as "what: old -> new"',
              str('A change.'),
              STATUS_LIMITS.rolloutChanges,
            ),
          },
        ),
      },
    ),
    joinDurations: obj(
      'joinDurations summarises how long the Machines that did join took, from their join clock start to their Node.',
      {
        count: count('count of join durations measured.'),
        p50Seconds: num('p50Seconds is the median join duration in seconds.', { minimum: 0 }),
        p95Seconds: num('p95Seconds is the 95th percentile join duration in seconds.', { minimum: 0 }),
        maxSeconds: num('maxSeconds is the longest join duration in seconds.', { minimum: 0 }),
        suggestedJoinTimeout: str(
          'suggestedJoinTimeout is a joinTimeout the observed joins ' +
            'fit in: p95 × 1.5, rounded up to a minute, at least 2m.',
        ),
        recentSeconds: bounded(
          'recentSeconds are the latest join durations in seconds, from which the figures above are computed',
          num('A join duration in seconds.', { minimum: 0 }),
          STATUS_LIMITS.joinDurationSamples,
        ),
      },
    ),
    observations: bounded(
      'observations are kept per Machine only where no object carries ' +
        'it: a readiness time that was missing, in the future or ' +
        'moved (the first time seen stands), that its failure was ' +
        'counted, and — while a join would reset a count or a suspicion ' +
        '— that it had not joined',
      obj('What the controller keeps of one Machine.', {
        machine: str('machine is the name of the Machine.'),
        uid: str('uid of the Machine.'),
        readySeen: time(
          "readySeen is the readiness time its join clock uses when the conditions' times cannot be trusted.",
        ),
        failedAt: time('failedAt is when its failure was counted: a failure counts once per Machine.'),
        failedKind: str(
          'failedKind is ProvisionTimeout when the failure counted was a provision timeout: a join ' +
            'timeout of the same Machine later still counts towards the suspicion.',
          { enum: ['ProvisionTimeout'] },
        ),
      }),
      STATUS_LIMITS.observations,
    ),
    firstControlPlane: obj('firstControlPlane is the memory of the first control-plane Machine and its replacement.', {
      replaced: obj(
        'replaced is the last first control-plane Machine JoinGuard ' +
          "had replaced; its replacement's join clock starts once it " +
          'is gone.',
        {
          machine: str('machine is the name of the replaced Machine.'),
          uid: str('uid of the replaced Machine.'),
          time: time('time the replacement was requested.'),
          goneTime: time('goneTime is when the old Machine was seen gone.'),
        },
      ),
      extendedFor: str(
        'extendedFor is the uid of the Machine given one more joinTimeout ' +
          'because the control plane answered at its endpoint (once ' +
          'per Machine).',
      ),
      extendedUntil: time('extendedUntil is that extended deadline.'),
      probeRequested: time(
        "probeRequested is when the Cluster's controlPlaneEndpoint " +
          'was last probed; it is probed again only after a minute ' +
          'without an answer.',
      ),
      misconfigured: obj(
        'misconfigured is set when the replacement is not an init ' +
          'Machine (it has a join configuration), or the Cluster reports ' +
          'initialized with no control-plane Machine left: no more ' +
          'first control-plane remediation until a resume.',
        { since: time('since is when it was seen.'), message: str('message says what was seen.') },
      ),
    }),
    connectionDownSeen: time(
      'connectionDownSeen is when the workload connection was seen down, after the control plane was initialized.',
    ),
    connectionRestoredSeen: time(
      'connectionRestoredSeen is when the workload connection was ' +
        'seen back, when no condition says; verdicts resume a grace ' +
        'period later.',
    ),
    controlPlaneInitializedSeen: time(
      'controlPlaneInitializedSeen is the first time the control ' +
        'plane was seen initialized, when the Cluster condition carries ' +
        'no trusted time.',
    ),
    lastResume: obj('lastResume is the last joinguard.io/resume annotation acted on.', {
      value: str('value of the annotation.'),
      time: time('time it was acted on.'),
      removed: bool(
        'removed is true once the annotation was seen removed (the same value written again then acts again).',
      ),
    }),
    conditions: conditions(
      'conditions are Ready (the check works and its view is current), ' +
        'Progressing (True/AsExpected or True/Remediating; False ' +
        'with BootstrapCredentialSuspect, RolloutSuspect, ControlPlaneEndpointUnreachable, ' +
        'NeverJoined, RemediationBudgetExhausted, RemediationRefusedByOwner, ' +
        'FirstControlPlaneReplacementMisconfigured or DryRun, each ' +
        'with a runbook section) and Paused.',
    ),
  },
);
