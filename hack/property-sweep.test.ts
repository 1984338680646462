// hack/property-sweep.ts's arguments, seeds and verdicts (no mocha run: the outputs below are written by hand).
import { expect } from 'chai';
import { commitSeed, parseArgs, replayCommand, seedList, verdict } from './property-sweep.js';

describe('hack/property-sweep', () => {
  it('reads --seeds, --runs, --from and --jobs; 1,024 histories and 2 processes by default', () => {
    expect(parseArgs(['--seeds', '64'])).to.deep.equal({ seeds: 64, runs: 1024, from: undefined, jobs: 2 });
    expect(parseArgs(['--seeds', '2', '--runs', '128', '--from', '7', '--jobs', '1'])).to.deep.equal({
      seeds: 2,
      runs: 128,
      from: 7,
      jobs: 1,
    });
    expect(() => parseArgs([])).to.throw(/at least 1/);
    expect(() => parseArgs(['--seeds', 'x'])).to.throw(/--seeds: an integer/);
    expect(() => parseArgs(['--seed', '2'])).to.throw(/unknown argument --seed/);
  });

  it("sweeps distinct consecutive seeds from --from, else from the commit's (HEAD's first 7 hex digits), else 1", () => {
    expect(commitSeed(() => '3ac718b0123456789\n')).to.equal(0x3ac718b);
    expect(commitSeed(() => 'fatal: not a git repository')).to.equal(undefined);
    expect(
      commitSeed(() => {
        throw new Error('no git');
      }),
    ).to.equal(undefined);
    const args = parseArgs(['--seeds', '3']);
    expect(seedList(args, 0x3ac718b)).to.deep.equal([0x3ac718b, 0x3ac718b + 1, 0x3ac718b + 2]);
    expect(seedList(args, undefined)).to.deep.equal([1, 2, 3]);
    expect(seedList({ ...args, from: 20260301 }, 5)).to.deep.equal([20260301, 20260302, 20260303]);
  });

  it('a seed passes only on a zero exit with its closing line at 0 failed; a failure keeps its first lines', () => {
    expect(verdict(1, 3, 0, '  1 passing (3s)\n\n1 passed, 0 failed\n').ok).to.equal(true);
    expect(verdict(1, 3, 0, 'crashed before any test\n')).to.include({ ok: false, why: 'crashed before any test' });
    expect(verdict(1, 3, null, '')).to.include({ ok: false, why: 'no result (exit null)' });
    // What mocha prints for the property test's failure (taken from a fast-check run that threw the same way).
    const failed = verdict(
      8,
      40,
      1,
      [
        '  0 passing (40s)',
        '  1 failing',
        '',
        '  1) planner and executor: properties over random histories',
        '       keeps every invariant:',
        '     Error: Property failed after 321 tests',
        '{ seed: 8, path: "320", endOnFailure: true }',
        'Counterexample: [{"release":"v1.14"},[{"k":"provision","i":0}]]',
        'Shrunk 0 time(s)',
        '      at buildError (node_modules/fast-check/lib/cjs/fast-check.js:2512:16)',
        '     Caused by: AssertionError: history 321: [counted-once] ms-a-m2 rebuilt',
        '      at run (controllers/joincheck/property.test.ts:1:1)',
        '0 passed, 1 failed',
      ].join('\n'),
    );
    expect(failed.ok).to.equal(false);
    expect(failed.why).to.equal(
      'Error: Property failed after 321 tests | Caused by: AssertionError: history 321: [counted-once] ms-a-m2 rebuilt',
    );
    expect(replayCommand(8, 1024)).to.equal(
      'PROPERTY_SEED=8 PROPERTY_RUNS=1024 npx mocha --config .mocharc.unit.json controllers/joincheck/property.test.ts',
    );
  });
});
