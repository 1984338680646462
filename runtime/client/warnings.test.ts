// Warning headers as apimachinery's ParseWarningHeaders reads them, and the log that says each one once.
import { expect } from 'chai';
import { capturingLogger } from '../testing/http-server.js';
import { parseWarningHeaders, WarningLog } from './warnings.js';

describe('API warnings', () => {
  it('parses code, agent and quoted text; escapes; an optional date; several per header', () => {
    expect(parseWarningHeaders('299 - "a \\"quoted\\" word"')).to.deep.equal([
      { code: 299, agent: '-', text: 'a "quoted" word' },
    ]);
    expect(
      parseWarningHeaders([
        '299 kube-apiserver "one" "Wed, 21 Oct 2015 07:28:00 GMT", 299 - "two, three"',
        '199 - "misc"',
      ]),
    ).to.deep.equal([
      { code: 299, agent: 'kube-apiserver', text: 'one' },
      { code: 299, agent: '-', text: 'two, three' },
      { code: 199, agent: '-', text: 'misc' },
    ]);
  });

  it('drops what is malformed (and the rest of that header), keeps what came before', () => {
    expect(parseWarningHeaders('299 - "good", 29 - "bad"')).to.deep.equal([{ code: 299, agent: '-', text: 'good' }]);
    expect(parseWarningHeaders('299 - "no end')).to.deep.equal([]);
    expect(parseWarningHeaders('299 "no agent"')).to.deep.equal([]);
    expect(parseWarningHeaders('299 - "ctl\u0007"')).to.deep.equal([]);
  });

  it('WarningLog: each distinct text once, as CAPI logs them ("API Server Warning")', () => {
    const { logger, lines } = capturingLogger();
    const w = new WarningLog(logger);
    for (const t of ['x is deprecated', 'x is deprecated', 'unknown field "spec.y"', 'x is deprecated', ''])
      w.handle(t);
    expect(lines.map((l) => [l.level, l.message, l.logger])).to.deep.equal([
      ['info', 'x is deprecated', 'API Server Warning'],
      ['info', 'unknown field "spec.y"', 'API Server Warning'],
    ]);
  });
});
