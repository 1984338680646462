// The PrometheusRule's alerts (observability.ts ships them; e2e/lifecycle/promtool.test.ts runs promtool's unit tests
// of each, firing and not firing). Each links the runbook section that says what to do, and groups by the management
// cluster's `cluster` label too, so a central ruler (Thanos, Mimir) keeps management clusters apart. Which stops the
// stall alert judges comes from STOP_MEANINGS (api/v1alpha1), the stops' meanings: manifests/ imports api/ alone.
import { stopsWhere, type StopReason } from '../api/v1alpha1/types.js';

export const PROVIDER_LABEL = 'cluster.x-k8s.io/provider';
export const PROVIDER = 'addon-joinguard';
export const CONTROLLER = 'machinejoincheck';
export const WEBHOOK = 'validation.machinejoincheck.joinguard.io';
const WEBHOOK_PATH = '/validate-joinguard-io-v1alpha1-machinejoincheck';
/** The Deployments a release installs: the add-on's and each shard's (`joinguard-controller-manager-<shard>`). */
const DEPLOYMENTS = 'joinguard-controller-manager(-.+)?';
/**
 * Every JoinGuard series, whoever scrapes it: the ServiceMonitor and CAPI's own scrape config (hack/observability)
 * both turn the pod label cluster.x-k8s.io/provider into `provider`. The alerts select by it, not by job (the
 * ServiceMonitor's job is the Service's name, CAPI's is `capi-providers`).
 */
export const SELECTOR = `provider="${PROVIDER}"`;
/**
 * What the alerts group by: the management cluster (the `cluster` external label of a multi-cluster Prometheus;
 * absent elsewhere, which is fine), the add-on's namespace, and per check the Cluster's namespace and name as CAPI
 * labels its own workload-cluster series (cluster_namespace, cluster_name).
 */
const BY_CHECK = 'cluster, cluster_namespace, cluster_name, check';
const BY_INSTALL = 'cluster, namespace';
/**
 * RemediationBudgetExhausted is pacing, not a stall, while remediations of the check keep finishing: under
 * `maxInFlight: 1` each stuck Machine waits for the one before it. A remediation finishes when its old Machine is
 * gone (minutes: no Node to drain; up to half an hour where the infrastructure deprovisions a host or clones a VM:
 * Metal3, vSphere) or its mark is withdrawn; none finished for this long, and a stop this old, is a stall.
 */
export const PACING_WINDOW_SECONDS = 1800;

/** Where a release's runbook lives: the same URL the controller's condition messages use. */
export function runbookBase(version: string): string {
  return `https://github.com/joinguard/joinguard/blob/v${version}/docs/runbook.md`;
}

export interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  labels: { severity: 'warning' | 'critical' };
  annotations: { summary: string; description: string; runbook_url: string };
}

const CHECK = '{{ $labels.cluster_namespace }}/{{ $labels.check }}';

/** `reason="X"`, or a regex for several. */
function reasonIs(reasons: readonly StopReason[]): string {
  return reasons.length === 1 ? `reason="${reasons[0]}"` : `reason=~"${reasons.join('|')}"`;
}

/** Stops the stall alert leaves alone: chosen by the user, or announced at once by an alert of their own. */
const STALL_QUIET = [...stopsWhere('stallAlert', 'quiet'), ...stopsWhere('stallAlert', 'ownAlert')];
/** Stops that are pacing, not a stall, while remediations keep finishing or replacements come up. */
const PACING_STOPS = stopsWhere('stallAlert', 'unlessPacing');

const condition = (type: string, status: string) =>
  `joinguard_check_condition{${SELECTOR}, type="${type}", status="${status}"`;
const progressingFalse = condition('Progressing', 'False');
const refused = `joinguard_write_refused_machines{${SELECTOR}`;

/** Progressing False for a stop that is a stall (STOP_MEANINGS' stallAlert), pacing excepted. */
function stalledAlert(rb: string): AlertRule {
  // 0 is "none finished yet": left out, so a budget that never saw one finish is judged by the two below.
  const finishedAgo =
    `time() - max by (${BY_CHECK}) ` + `(joinguard_last_remediation_finished_timestamp_seconds{${SELECTOR}} > 0)`;
  // How long the budget stop has lasted: the first remediation in flight is judged by its own age, not as "none
  // finished" (it fired 15 minutes into a 30-minute replacement). 0, unknown, reads as old: no free pass.
  const stoppedAgo =
    `time() - max by (${BY_CHECK}) (joinguard_check_condition_last_transition_timestamp_seconds{${SELECTOR}, ` +
    `type="Progressing", status="False", ${reasonIs(PACING_STOPS)}})`;
  // A Machine of the check whose clock runs within its deadline (provisionTimeout, joinTimeout, set for the
  // infrastructure): a replacement still coming up. Past its deadline it is Stuck and no longer counts here.
  const replacing =
    `max by (${BY_CHECK}) (joinguard_machines{${SELECTOR}, state="Joining", ` + `verdict=~"Provisioning|Joining"}) > 0`;
  return {
    alert: 'JoinGuardCheckStalled',
    // DryRun is chosen by the user; a suspicion (of the credential or of a rollout) has its own alert, at once.
    // The budget stop counts only when nothing moves: no remediation of the check finished within the pacing
    // window, the stop is older than it, and no replacement is coming up within its deadline. While they finish or
    // come up, the budget frees by itself (pacing), and the alert stays quiet however slow the pace.
    expr:
      `max by (${BY_CHECK}, reason) (${progressingFalse}, reason!~"${STALL_QUIET.join('|')}"}) == 1 ` +
      `unless on (${BY_CHECK}) (max by (${BY_CHECK}) (${progressingFalse}, ${reasonIs(PACING_STOPS)}}) == 1 ` +
      `and on (${BY_CHECK}) (${finishedAgo} < ${PACING_WINDOW_SECONDS} ` +
      `or ${stoppedAgo} < ${PACING_WINDOW_SECONDS} or ${replacing}))`,
    for: '15m',
    labels: { severity: 'warning' },
    annotations: {
      summary: `MachineJoinCheck ${CHECK} has stopped remediating: {{ $labels.reason }}`,
      description:
        'Progressing has been False with reason {{ $labels.reason }} for 15 minutes on the check of Cluster ' +
        '{{ $labels.cluster_name }} (for a remediation budget: stopped for over 30 minutes, no remediation ' +
        'finished within 30 minutes and no replacement coming up within its deadline). ' +
        '`kubectl describe mjc -n {{ $labels.cluster_namespace }} {{ $labels.check }}` names the evidence.',
      runbook_url: `${rb}#{{ $labels.reason | toLower }}`,
    },
  };
}

/** The stops announced at once by an alert of their own (STOP_MEANINGS' stallAlert `ownAlert`). */
function suspicionAlerts(rb: string): AlertRule[] {
  return [
    {
      alert: 'JoinGuardSuspicionRaised',
      expr: `max by (${BY_CHECK}) (${progressingFalse}, reason="BootstrapCredentialSuspect"}) == 1`,
      for: '1m',
      labels: { severity: 'warning' },
      annotations: {
        summary: `Rebuilding stalled for MachineJoinCheck ${CHECK}: the join credential or network path is suspected`,
        description:
          'Several Machines of Cluster {{ $labels.cluster_name }} in a row never joined. JoinGuard stopped ' +
          'rebuilding them and rebuilds one canary at growing intervals. The condition message names the ' +
          'Machines, their bootstrap data and the endpoint.',
        runbook_url: `${rb}#bootstrapcredentialsuspect`,
      },
    },
    {
      alert: 'JoinGuardRolloutSuspect',
      expr: `max by (${BY_CHECK}) (${progressingFalse}, reason="RolloutSuspect"}) == 1`,
      for: '1m',
      labels: { severity: 'warning' },
      annotations: {
        summary:
          `A rollout cannot join: MachineJoinCheck ${CHECK} stopped rebuilding the Machines of ` +
          'a new template revision',
        description:
          'Machines of one new template revision of Cluster {{ $labels.cluster_name }} failed to join in a row ' +
          'while the previous revision joined. JoinGuard stopped asking for them; fix the template or roll back. ' +
          'The condition message names the revision, the Machines and the templates that differ.',
        runbook_url: `${rb}#rolloutsuspect`,
      },
    },
  ];
}

/** Ready False for a reason of its own, and the writes the apiserver refuses. */
function refusalAlerts(rb: string): AlertRule[] {
  return [
    {
      alert: 'JoinGuardCheckNotReady',
      // Ready's own reasons: the check cannot work as written (InvalidSpec, ClusterNotFound, MachineDeleteNotAllowed,
      // and any added later). NotReady only summarises Progressing, which the alerts above judge reason by reason.
      expr: `max by (${BY_CHECK}, reason) (${condition('Ready', 'False')}, reason!="NotReady"}) == 1`,
      for: '10m',
      labels: { severity: 'warning' },
      annotations: {
        summary: `MachineJoinCheck ${CHECK} cannot work as written: Ready=False/{{ $labels.reason }}`,
        description:
          'For 10 minutes the check of Cluster {{ $labels.cluster_name }} has not been able to act: its stuck ' +
          'Machines are not replaced. The Ready message says what to change.',
        runbook_url: `${rb}#{{ $labels.reason | toLower }}`,
      },
    },
    {
      alert: 'JoinGuardWithdrawalRefused',
      // A joined Machine keeps JoinGuard's mark: its owner deletes a healthy Machine as soon as its deferral lifts.
      expr: `max by (${BY_CHECK}) (${refused}, write="withdraw"}) > 0`,
      for: '2m',
      labels: { severity: 'critical' },
      annotations: {
        summary: `A Machine that joined keeps JoinGuard's remediation mark: MachineJoinCheck ${CHECK}`,
        description:
          'The apiserver refuses to let JoinGuard withdraw its mark from a Machine of Cluster ' +
          '{{ $labels.cluster_name }} that joined (a policy, RBAC, a webhook). Its owner may delete that ' +
          'healthy Machine. The WriteRefused events on the Machine name the refusal; withdraw by hand meanwhile.',
        runbook_url: `${rb}#withdrawal-refused`,
      },
    },
    {
      alert: 'JoinGuardWritesRefused',
      expr: `max by (${BY_CHECK}, write) (${refused}, write!="withdraw"}) > 0`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary: `JoinGuard's {{ $labels.write }} writes are refused for Machines of MachineJoinCheck ${CHECK}`,
        description:
          'For 15 minutes the apiserver has refused to let JoinGuard {{ $labels.write }} stuck Machines of Cluster ' +
          '{{ $labels.cluster_name }}: they are not replaced. The WriteRefused events and the Progressing ' +
          'message name the Machines and the refusal.',
        runbook_url: `${rb}#writes-refused`,
      },
    },
  ];
}

/** The alerts about one check: its conditions, its refused writes, who reconciles it. */
function checkAlerts(rb: string): AlertRule[] {
  return [
    stalledAlert(rb),
    ...suspicionAlerts(rb),
    ...refusalAlerts(rb),
    {
      alert: 'JoinGuardCheckReconciledTwice',
      // Only a leader reconciles, so only a leader exports a check's conditions: two scrape targets exporting the same
      // check are two leaders writing the same objects (shards that overlap, or a `clusterctl upgrade` that dropped
      // the add-on Deployment's watch filter while shards run).
      expr:
        `count by (${BY_CHECK}) (count by (${BY_CHECK}, instance) ` +
        `(joinguard_check_condition{${SELECTOR}, type="Ready"})) > 1`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary: `Two JoinGuard leaders reconcile MachineJoinCheck ${CHECK}`,
        description:
          'Two replicas, each leading its own Lease, reconcile the check of Cluster {{ $labels.cluster_name }}: ' +
          'their writes collide. Usually an unfiltered Deployment beside shards (the add-on upgraded without ' +
          'JOINGUARD_WATCH_FILTER_FLAG), or two shards with one value.',
        runbook_url: `${rb}#two-leaders`,
      },
    },
  ];
}

const webhookSeries = `controller_runtime_webhook_requests_in_flight{${SELECTOR}, webhook="${WEBHOOK_PATH}"}`;
const upReplicas = `count by (${BY_INSTALL}) (up{${SELECTOR}} == 1)`;

/** Who leads: a Lease nobody holds, replicas of one Lease without leader election. */
function leaderAlerts(rb: string): AlertRule[] {
  return [
    {
      alert: 'JoinGuardNoLeader',
      // Every electing replica reports its Lease from the start (0 as a standby, 1 while leading): replicas that
      // elect and none leads. A replica without leader election reports no such series (its own alert below); no
      // replica at all is JoinGuardWebhookUnavailable.
      expr: `max by (${BY_INSTALL}, name) (leader_election_master_status{${SELECTOR}}) == 0`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary: 'No JoinGuard replica holds the leader Lease {{ $labels.namespace }}/{{ $labels.name }}',
        description:
          'For 5 minutes the replicas of Lease {{ $labels.name }} have run and none has led: no check of that ' +
          'shard is reconciled and no stuck Machine is replaced.',
        runbook_url: `${rb}#no-leader`,
      },
    },
    {
      alert: 'JoinGuardReplicasWithoutLeaderElection',
      // Replicas of one Lease (one shard), one of them with --leader-elect=false: two writers on the same objects.
      expr:
        `count by (${BY_INSTALL}, name) (joinguard_leader_election_enabled{${SELECTOR}}) > 1 ` +
        `and on (${BY_INSTALL}, name) min by (${BY_INSTALL}, name) ` +
        `(joinguard_leader_election_enabled{${SELECTOR}}) == 0`,
      for: '1m',
      labels: { severity: 'critical' },
      annotations: {
        summary:
          'More than one JoinGuard replica of Lease {{ $labels.namespace }}/{{ $labels.name }} runs, and not all ' +
          'of them with leader election',
        description:
          'A replica without --leader-elect writes whatever the others do: two writers on the same Machines and ' +
          'checks. Run one replica without leader election, or turn it on for all.',
        runbook_url: `${rb}#no-leader`,
      },
    },
  ];
}

/** The admission webhook: no replica serves it, or the kube-apiserver cannot call it. */
function webhookAlerts(rb: string): AlertRule[] {
  return [
    {
      alert: 'JoinGuardWebhookUnavailable',
      // The webhook's own series exist only while a replica's webhook server listens (controller_runtime_webhook_*).
      // Three branches, each with the management cluster's `cluster` label where one exists: replicas up of which
      // none serves it; a JoinGuard Deployment that wants replicas (kube-state-metrics) and none is up; and, only
      // when neither can say (no kube-state-metrics, no JoinGuard target at all), absent().
      expr:
        `(${upReplicas} unless on (${BY_INSTALL}) count by (${BY_INSTALL}) (${webhookSeries})) ` +
        `or (count by (${BY_INSTALL}) (kube_deployment_spec_replicas{deployment=~"${DEPLOYMENTS}"} > 0) ` +
        `unless on (${BY_INSTALL}) ${upReplicas}) ` +
        `or on () absent(up{${SELECTOR}} == 1)`,
      for: '5m',
      labels: { severity: 'critical' },
      annotations: {
        summary:
          'No JoinGuard replica serves the admission webhook: MachineJoinChecks cannot be created or their spec ' +
          'changed (failurePolicy Fail)',
        description:
          'Creating a MachineJoinCheck or changing its spec fails until a replica serves the webhook again ' +
          '(annotations such as joinguard.io/resume still work). With no replica up at all, no stuck Machine is ' +
          'replaced either.',
        runbook_url: `${rb}#webhook-unavailable`,
      },
    },
    {
      alert: 'JoinGuardWebhookCallsFailing',
      // Seen from the kube-apiserver (its own metrics): a replica may serve and still be unreachable (Service,
      // certificate).
      expr:
        `sum by (cluster) (rate(apiserver_admission_webhook_rejection_count{name="${WEBHOOK}", ` +
        `error_type=~"calling_webhook_error|apiserver_internal_error"}[5m])) > 0`,
      for: '5m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'The kube-apiserver cannot call the JoinGuard admission webhook',
        description:
          'MachineJoinCheck writes are refused because the webhook call itself fails (connection, TLS or ' +
          'timeout), not because a check is invalid.',
        runbook_url: `${rb}#webhook-unavailable`,
      },
    },
  ];
}

/** The alerts about the installation: leaders, the webhook, reconciles. */
function installAlerts(rb: string): AlertRule[] {
  return [
    ...leaderAlerts(rb),
    ...webhookAlerts(rb),
    {
      alert: 'JoinGuardReconcileErrors',
      expr:
        `sum by (${BY_INSTALL}) (rate(controller_runtime_reconcile_errors_total{` +
        `${SELECTOR}, controller="${CONTROLLER}"}[5m])) > 0`,
      for: '15m',
      labels: { severity: 'warning' },
      annotations: {
        summary: 'JoinGuard reconciles of MachineJoinChecks keep failing',
        description:
          "Reconcile errors for 15 minutes: the leader's error log lines (JSON: the key err; text: lines " +
          'starting with E) name the check and the error.',
        runbook_url: `${rb}#reconcile-errors`,
      },
    },
  ];
}

/** The alerts; each links the runbook section that says what to do. */
export function alertRules(version: string): AlertRule[] {
  const rb = runbookBase(version);
  return [...checkAlerts(rb), ...installAlerts(rb)];
}
