// One definition of "stuck" (issue 19 item 3): the status counts `kubectl get mjc` shows and the metric the
// dashboard sums, `joinguard_machines{state}`, agree for every Machine, a Machine being remediated included.
// Unit tests: the real planner and the real metrics, a fake world (testing/builders).
import { expect } from 'chai';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import type { MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import { COUNTED_AS, countVerdicts } from './counts.js';
import { JoinGuardMetrics } from './metrics.js';
import { MINUTE, T0, snapshot, withNode, worker } from '../testing/builders.js';
import { Scenario } from '../testing/scenario.js';
import type { MachineState } from '../types.js';

const ref = { namespace: 'ns1', check: 'workers', cluster: 'prod' };

/** sum(joinguard_machines{state=...}) of the check, as the dashboard's panels compute it. */
async function metricSums(m: JoinGuardMetrics): Promise<Record<string, number>> {
  const sums: Record<string, number> = {};
  for (const v of (await m.machines.get()).values)
    sums[String(v.labels['state'])] = (sums[String(v.labels['state'])] ?? 0) + v.value;
  return sums;
}

function expectAgree(status: MachineJoinCheckStatus, sums: Record<string, number>, where: string): void {
  expect(
    { joined: sums['Joined'] ?? 0, joining: sums['Joining'] ?? 0, stuck: sums['Stuck'] ?? 0 },
    where,
  ).to.deep.equal({
    joined: status.joinedMachines ?? 0,
    joining: status.joiningMachines ?? 0,
    stuck: status.stuckMachines ?? 0,
  });
}

describe('counts: one definition of joined, joining and stuck for status and metrics', () => {
  it('a Machine being remediated is counted once, as Stuck, in status.stuckMachines and in joinguard_machines{state="Stuck"}', async () => {
    const metrics = new JoinGuardMetrics(new Registry());
    const sc = new Scenario(
      snapshot({
        machines: [withNode(worker('w-0')), worker('w-1'), worker('w-2', { createdAt: T0 + 15 * MINUTE })],
        now: T0 + 21 * MINUTE,
      }),
    );
    const states: string[] = [];
    for (const step of [() => sc, () => sc.converge().advance(MINUTE), () => sc.advance(MINUTE)]) {
      step();
      const p = sc.plan();
      metrics.observe(ref, p.verdicts, {}, p.status, sc.s.now, p.settledInScope);
      expectAgree(p.status, await metricSums(metrics), `at ${new Date(sc.s.now).toISOString()}`);
      states.push(p.verdicts.find((v) => v.machine === 'w-1')!.state);
    }
    // The step the issue was found on: w-1 Remediating, counted Stuck in both.
    expect(states).to.include('Remediating');
    expect(sc.status.stuckMachines).to.equal(1);
    const series = (await metrics.machines.get()).values.filter((v) => v.labels['state'] === 'Stuck' && v.value > 0);
    expect(series.map((v) => [v.labels['verdict'], v.value])).to.deep.equal([['Remediating', 1]]);
  });

  it('for any verdicts, each status count equals the metric summed over that state (fast-check, seeded)', async () => {
    const states = Object.keys(COUNTED_AS) as MachineState[];
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...states), { maxLength: 40 }),
        fc.nat({ max: 5 }),
        async (list, settled) => {
          const metrics = new JoinGuardMetrics(new Registry());
          const verdicts = list.map((state, i) => ({ uid: `m${i}`, state }));
          // First a history, then these verdicts: emptied series must read 0, not linger.
          metrics.observe(
            ref,
            states.map((state, i) => ({ uid: `old${i}`, state })),
            {},
            {},
            0,
            3,
          );
          metrics.observe(ref, verdicts, {}, {}, 0, settled);
          const c = countVerdicts(verdicts);
          expectAgree(
            { joinedMachines: c.joined + settled, joiningMachines: c.joining, stuckMachines: c.stuck },
            await metricSums(metrics),
            JSON.stringify(list),
          );
        },
      ),
      { seed: 19, numRuns: 200 },
    );
  });
});
