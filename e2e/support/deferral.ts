// A remediation deferred by its MachineSet, on the real CAPI managers (scenario (f) and the uninstall spec):
// a MachineDeployment that allows one remediation at a time, two workers held before they join, both marked by
// JoinGuard; the MachineSet deletes one (its VM teardown held, so the remediation stays in flight) and defers the
// other (OwnerRemediated=False/RemediationDeferred).
import { expect } from 'chai';
import type { Json } from '../../hack/testenv/kube-client.js';
import type { PolicyRule } from '../sim/policy.js';
import { conditionOf, isDeleting, waitFor } from './cluster-view.js';
import { createCheck } from './joinguard.js';
import type { Scenario, ScenarioOptions } from './scenario.js';
import type { ControllerOptions } from '../../controllers/options.js';

export const DEFERRAL_JOIN_TIMEOUT_S = 8;

/** The scenario's shape: one MachineDeployment `md` of 3, `remediation.maxInFlight: 1`, check `workers`. */
export function deferralScenario(prefix: string, cluster: string): ScenarioOptions {
  return {
    prefix,
    cluster,
    checkName: 'workers',
    createClusterFirst: false,
    workers: [{ name: 'md', replicas: 3, labels: { pool: 'workers' }, remediationMaxInFlight: 1 }],
  };
}

export interface Deferral {
  /** The Machine the MachineSet deletes (its teardown held). */
  taken: Json;
  /** The marked Machine the MachineSet defers. */
  deferred: Json;
  /** The two held workers' join hold; lift() lets them boot. */
  slow: PolicyRule;
  /** The VM teardown hold; lift() ends the deletion, and with it the deferral. */
  teardown: { lift(): void };
  /** The deferred Machine as it is now; fails the test if it was deleted or is being deleted. */
  stillThere(): Promise<Json>;
}

/**
 * Starts JoinGuard (with `joinguard` options, e.g. its own identity or a shorter unanswered bound) and the
 * Cluster, and waits until one marked worker is being deleted and the other deferred.
 */
export async function deferRemediation(s: Scenario, joinguard: Partial<ControllerOptions> = {}): Promise<Deferral> {
  const { kube, capi, sim, namespace, cluster } = s;
  const seen = s.seen();
  const slow = sim.policy.holdJoin({ namespace, role: 'worker' }, { limit: 2 });
  const teardown = sim.policy.holdDeletion({ namespace });
  await createCheck(kube, namespace, 'workers', {
    clusterName: cluster,
    selector: { matchLabels: { pool: 'workers' } },
    joinTimeout: `${DEFERRAL_JOIN_TIMEOUT_S}s`,
    // Both held Machines are marked: no stall on two failures in a row, room for two in flight.
    maxInFlight: 3,
    remediation: { maxPerOwner: 5 },
    suspicion: { consecutiveJoinFailures: 5 },
  });
  await s.startJoinGuard(joinguard);
  await s.createCluster();

  const deferredReason = (m: Json) => capi.v1beta2Conditions(m).find((c) => c.type === 'OwnerRemediated')?.reason;
  const { taken, deferred } = await waitFor(
    'one marked worker deleting, the other deferred by its MachineSet',
    async () => {
      const w = await s.workers();
      const t = w.find((m) => isDeleting(m) && slow.applied.includes(m.metadata.name));
      const d = w.find(
        (m) =>
          !isDeleting(m) &&
          conditionOf(m, 'HealthCheckSucceeded')?.status === 'False' &&
          deferredReason(m) === 'RemediationDeferred',
      );
      return t && d && { taken: t, deferred: d };
    },
    { timeoutMs: 150_000, describe: seen },
  );
  expect(slow.applied).to.include(deferred.metadata.name);
  const uid = deferred.metadata.uid as string;
  const stillThere = async () => {
    const m = (await s.workers()).find((x) => x.metadata.uid === uid);
    expect(m, `${deferred.metadata.name} was deleted\n${await seen()}`).to.not.equal(undefined);
    expect(isDeleting(m!), `${deferred.metadata.name} is being deleted\n${await seen()}`).to.equal(false);
    return m!;
  };
  return { taken, deferred, slow, teardown, stillThere };
}
