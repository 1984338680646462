// The mutants' anchors still occur exactly once in the code they mutate (a refactor that moves them fails here, in
// every unit run, not only when npm run test:mutants runs), mutate() refuses a missing or repeated anchor, and every
// named test exists.
import { existsSync, readFileSync } from 'node:fs';
import { expect } from 'chai';
import { editsByFile, MUTANTS, mutate, PROPERTY } from './mutants.js';

describe('hack/mutants: the deliberate defects', () => {
  for (const m of MUTANTS) {
    it(`${m.name}: each anchor occurs exactly once in its file, the mutant changes it, its named tests exist`, () => {
      for (const file of editsByFile(m).keys()) {
        const text = readFileSync(file, 'utf8');
        expect(mutate(text, m, file)).to.not.equal(text);
      }
      expect(m.tests).to.not.be.empty;
      for (const t of m.tests) {
        const [file, title] = t.split('#');
        expect(existsSync(file!), t).to.equal(true);
        if (title !== undefined) expect(readFileSync(file!, 'utf8'), t).to.contain(title);
      }
      if (m.tests.includes(PROPERTY)) expect(m.seed, 'the property test runs with a fixed seed').to.be.a('number');
    });
  }

  it('a missing or repeated anchor is an error that names the mutant', () => {
    const m = { ...MUTANTS[0]!, find: 'anchor' };
    expect(() => mutate('no such text', m)).to.throw(/cached-machine: its anchor is not in/);
    expect(() => mutate('anchor anchor', m)).to.throw(/cached-machine: its anchor occurs more than once/);
  });
});
