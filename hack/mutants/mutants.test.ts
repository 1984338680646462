// The mutants' anchors still occur exactly once in the code they mutate (a refactor that moves them fails here, in
// every unit run, not only when npm run test:mutants runs), and mutate() refuses a missing or repeated anchor.
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { MUTANTS, mutate } from './mutants.js';

describe('hack/mutants: the deliberate defects', () => {
  for (const m of MUTANTS) {
    it(`${m.name}: its anchor occurs exactly once in ${m.file}, and the mutant changes it`, () => {
      const text = readFileSync(m.file, 'utf8');
      expect(mutate(text, m)).to.not.equal(text);
    });
  }

  it('a missing or repeated anchor is an error that names the mutant', () => {
    const m = { ...MUTANTS[0]!, find: 'anchor' };
    expect(() => mutate('no such text', m)).to.throw(/cached-machine: its anchor is not in/);
    expect(() => mutate('anchor anchor', m)).to.throw(/cached-machine: its anchor occurs more than once/);
  });
});
