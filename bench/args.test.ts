// Unit test: which phases an invocation runs, in what order, and the medians the summary is made of.
import { expect } from 'chai';
import { parseArgs, planOf, timingFor } from './args.js';
import { fleetShape } from './fleet.js';
import { planBudget } from './plan.js';
import { spread } from './stats.js';

describe('bench: the phases of an invocation', () => {
  it('runs three rounds of the headline phases, one of each other case, the replicas (and their re-list) last', () => {
    const plan = planOf(parseArgs(['--machines', '10000']));
    expect(plan.map((p) => p.id)).to.deep.equal([
      'joinguard#1',
      'mhc#1',
      'mhc-long#1',
      'both#1',
      'cpu#1',
      'burst#1',
      'joinguard#2',
      'mhc#2',
      'mhc-long#2',
      'both#2',
      'joinguard#3',
      'mhc#3',
      'mhc-long#3',
      'both#3',
      'replicas#1',
    ]);
    expect(new Set(plan.map((p) => p.tag)).size, 'each phase names its Machines apart').to.equal(plan.length);
    expect(plan.filter((p) => p.quietMs > 0).map((p) => p.id)).to.deep.equal([
      'joinguard#1',
      'joinguard#2',
      'joinguard#3',
    ]);
  });

  it('takes repeats and quiet windows per kind, and the MHC at its default 10m beside the short timeout', () => {
    const a = parseArgs([
      '--machines',
      '1000',
      '--phases',
      'joinguard,mhc-long',
      '--repeat',
      'joinguard=2,mhc-long=1',
      '--quiet-min',
      'joinguard=4',
    ]);
    expect(planOf(a).map((p) => [p.id, p.quietMs])).to.deep.equal([
      ['joinguard#1', 240_000],
      ['mhc-long#1', 0],
      ['joinguard#2', 240_000],
    ]);
    const t = timingFor(a);
    expect([t.joinTimeoutS, t.mhcTimeoutS, t.mhcLongTimeoutS]).to.deep.equal([60, 60, 600]);
    expect(() => parseArgs(['--phases', 'nope'])).to.throw(/unknown phase nope/);
  });

  it('has a headline plan: JoinGuard alone 3 times, the 10m MHC on a pool of its own hosting round 1 and the 60 s MHC', () => {
    const a = parseArgs(['--plan', 'headline', '--machines', '10000']);
    const plan = planOf(a);
    expect(plan.map((p) => p.id)).to.deep.equal([
      'mhc-long#1',
      'joinguard#1',
      'mhc#1',
      'both#1',
      'joinguard#2',
      'cpu#1',
      'joinguard#3',
      'burst#1',
      'replicas#1',
    ]);
    expect(plan[0]!.pool).to.equal('long');
    expect(plan[0]!.hosts).to.deep.equal(['joinguard#1', 'mhc#1']);
    expect(plan.filter((p) => p.hostedBy).map((p) => p.id)).to.deep.equal(['joinguard#1', 'mhc#1']);
    expect(new Set(plan.map((p) => p.tag)).size).to.equal(plan.length);
    expect(plan.filter((p) => p.quietMs > 0).map((p) => [p.id, p.quietMs])).to.deep.equal([
      ['joinguard#1', 60_000],
      ['joinguard#2', 60_000],
      ['joinguard#3', 60_000],
    ]);
    const t = timingFor(a);
    expect([t.joinTimeoutS, t.mhcTimeoutS, t.mhcLongTimeoutS, t.tailMs, t.mhcTailMs]).to.deep.equal([
      30, 60, 600, 30_000, 60_000,
    ]);
    expect(() => parseArgs(['--plan', 'headline', '--phases', 'joinguard'])).to.throw(/fixes its phases/);
    expect(() => parseArgs(['--plan', 'nope'])).to.throw(/unknown plan nope/);
  });

  it("prints a budget per phase, the hosted ones inside their host's wait", () => {
    const a = parseArgs(['--plan', 'headline', '--machines', '10000']);
    const plan = planOf(a);
    const b = planBudget(plan, timingFor(a), fleetShape(10000), 500);
    expect(plan.every((p) => (p.budgetS ?? 0) > 0)).to.equal(true);
    const outside = plan.filter((p) => !p.hostedBy).reduce((s, p) => s + p.budgetS!, 0);
    expect(b.totalS).to.be.at.least(b.restoreS + outside);
    expect(b.lines.find((l) => l.trim().startsWith('joinguard#1'))).to.match(/inside mhc-long#1's wait/);
  });

  it('writes raw data out of the tree, results where asked', () => {
    const a = parseArgs(['--smoke']);
    expect(a.out).to.match(/bench\/runs\/results\.smoke\.json$/);
    expect(a.raw).to.match(/bench\/runs\/raw-smoke-200-/);
  });
});

describe('bench: medians over runs', () => {
  it('is the middle run of an odd count, the mean of the middle two of an even one, with the range and every run', () => {
    expect(spread([0.7, 1.71, 0.658])).to.deep.equal({ median: 0.7, min: 0.658, max: 1.71, runs: [0.7, 1.71, 0.658] });
    expect(spread([4, 5, undefined, 6, 7])!.median).to.equal(5.5);
    expect(spread([undefined])).to.equal(undefined);
  });
});
