// Fault injection (issue 10, finding 3 and deliverable 2): the budget holds above the size of the status
// list. 40 workers never join, the check allows `maxInFlight: 25`; at no moment may more than 25 Machines
// carry JoinGuard's mark (a marked Machine is in flight until it is gone). The count "at any moment" is
// reconstructed from a watch on the Machines (every change, in the apiserver's order), not a sampled poll.
import { expect } from 'chai';
import { waitFor } from '../support/cluster-view.js';
import { createCheck } from '../support/joinguard.js';
import { carriesJoinGuardMark } from './machine-history.js';
import { figure, scaleDeployment, secs, useFaultScenario } from './harness.js';

const JOIN_TIMEOUT_S = 20;
const WORKERS = 40;
const MAX_IN_FLIGHT = 25;

describe('faults (d): 40 stuck workers, maxInFlight 25', function () {
  this.timeout(420_000);
  const cluster = 'fd';
  const f = useFaultScenario({
    prefix: 'jg-fd',
    cluster,
    checkName: 'workers',
    waitJoined: true,
    workers: [{ name: 'md', replicas: 0, labels: { role: 'worker' } }],
  });
  const { s, seen } = f;

  it(`never has more than ${MAX_IN_FLIGHT} Machines marked at once, and reuses the budget as marked Machines go`, async () => {
    const { kube, sim, namespace } = s;
    sim.policy.neverJoin({ namespace, role: 'worker' });
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { role: 'worker' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      maxInFlight: MAX_IN_FLIGHT,
      remediation: { maxPerOwner: 1000 },
      suspicion: { consecutiveJoinFailures: 0 },
      neverJoinedLimit: 0,
    });
    const h = await f.recordMachines();
    await f.startBehindProxy();
    const t0 = Date.now();
    await scaleDeployment(kube, namespace, `${cluster}-md`, WORKERS);

    const marked = () => h.distinct(carriesJoinGuardMark);
    const firstMark = await waitFor('the first mark', async () => h.where(carriesJoinGuardMark)[0], {
      timeoutMs: 180_000,
      describe: seen,
    });
    // Every one of the first 40 is marked once the budget frees up (the owner deletes marked Machines).
    await waitFor(`${WORKERS} Machines marked in all`, async () => marked().length >= WORKERS, {
      timeoutMs: 150_000,
      describe: async () => `marked so far: ${marked().length}\n${await seen()}`,
    }).catch(() => undefined);
    const allAt = Date.now();
    const peak = h.peak((x) => carriesJoinGuardMark(x));
    figure(
      'd',
      `scaled to ${WORKERS} at 0s; first mark +${secs(firstMark.at - t0)}; ${marked().length} distinct Machines marked by +${secs(allAt - t0)}; ` +
        `peak marked at one moment: ${peak.count} (at +${secs(peak.at - t0)}), limit ${MAX_IN_FLIGHT}; from ${h.changes.length} watch events` +
        (h.restarts.length ? `, watch restarted ${h.restarts.length}x` : ''),
    );

    const problems: string[] = [];
    if (peak.count > MAX_IN_FLIGHT)
      problems.push(
        `${peak.count} Machines carried JoinGuard's mark at once (maxInFlight ${MAX_IN_FLIGHT}): ${peak.names.join(', ')}`,
      );
    if (marked().length <= MAX_IN_FLIGHT)
      problems.push(
        `only ${marked().length} Machines marked in all: the budget was not reused as marked Machines went`,
      );
    if (h.restarts.length)
      problems.push(
        `the Machine watch started over ${h.restarts.length} times (a change may be missing): ${h.restarts[0]}`,
      );
    expect(problems, await seen()).to.deep.equal([]);
  });
});
