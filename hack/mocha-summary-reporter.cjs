// Mocha's spec reporter plus one plain closing line, `N passed, N failed[, N skipped]`, which CI reads.
'use strict';
const Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once('end', () => {
      const s = runner.stats || { passes: 0, failures: 0, pending: 0 };
      const skipped = s.pending ? `, ${s.pending} skipped` : '';
      process.stdout.write(`${s.passes} passed, ${s.failures} failed${skipped}\n`);
    });
  }
}

module.exports = SpecWithSummary;
