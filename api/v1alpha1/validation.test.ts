import { expect } from 'chai';
import { parseSettings } from './settings.js';
import { riskWarnings, strategyCapiProblem, validateSpec, type FieldError } from './validation.js';
import { BAD_CHECKS } from './testdata/bad-checks.js';

const sel = { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' } };
const spec = (extra: Record<string, unknown> = {}) => ({ clusterName: 'c1', selector: sel, ...extra });
const fields = (errs: FieldError[]) => errs.map((e) => e.field);

describe('api/v1alpha1 validateSpec', () => {
  it('accepts a minimal spec and a full one', () => {
    expect(validateSpec(spec())).to.deep.equal([]);
    expect(
      validateSpec(
        spec({
          joinTimeout: '1.5h',
          provisionTimeout: '30m',
          maxInFlight: '25%',
          remediation: { strategy: 'MachineCondition', maxPerOwner: 1, window: '1h30m' },
          suspicion: { consecutiveJoinFailures: 0, probeInterval: '1h', maxProbeInterval: '1h' },
          neverJoinedLimit: 0,
          firstControlPlane: 'Report',
          dryRun: true,
          paused: false,
          selector: {
            matchExpressions: [
              { key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' },
              { key: 'tier', operator: 'In', values: ['a', ''] },
            ],
          },
        }),
      ),
    ).to.deep.equal([]);
  });

  it('reads null as absent (what kubectl apply leaves when a field is cleared)', () => {
    expect(
      validateSpec(spec({ joinTimeout: null, remediation: null, suspicion: { probeInterval: null } })),
    ).to.deep.equal([]);
  });

  // Each row: a spec change, the field named, and a phrase of what would be accepted.
  const table: [string, Record<string, unknown>, string, RegExp][] = [
    ['missing clusterName', { clusterName: undefined }, 'spec.clusterName', /is required/],
    ['empty clusterName', { clusterName: '' }, 'spec.clusterName', /1 to 63 lower-case letters/],
    ['long clusterName', { clusterName: 'x'.repeat(64) }, 'spec.clusterName', /1 to 63/],
    [
      'clusterName UPPER',
      { clusterName: 'UPPER' },
      'spec.clusterName',
      /lower-case letters, digits, "-" and ".".*not "UPPER"/,
    ],
    ['missing selector', { selector: undefined }, 'spec.selector', /is required/],
    ['empty selector', { selector: {} }, 'spec.selector', /must not be empty/],
    ['selector not an object', { selector: 'app=x' }, 'spec.selector', /label selector object/],
    [
      'bad label key',
      { selector: { matchLabels: { 'a/b/c': 'x' } } },
      'spec.selector.matchLabels["a/b/c"]',
      /not a label key/,
    ],
    ['bad label value', { selector: { matchLabels: { a: 'x y' } } }, 'spec.selector.matchLabels.a', /letters, digits/],
    ['non-string label value', { selector: { matchLabels: { a: 1 } } }, 'spec.selector.matchLabels.a', /a string/],
    [
      'In without values',
      { selector: { matchExpressions: [{ key: 'a', operator: 'In' }] } },
      'spec.selector.matchExpressions[0].values',
      /at least one value/,
    ],
    [
      'Exists with values',
      { selector: { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] } },
      'spec.selector.matchExpressions[0].values',
      /must be empty/,
    ],
    [
      'bad operator',
      { selector: { matchExpressions: [{ key: 'a', operator: 'Equals', values: ['x'] }] } },
      'spec.selector.matchExpressions[0].operator',
      /In, NotIn, Exists, DoesNotExist/,
    ],
    [
      'missing key',
      { selector: { matchExpressions: [{ operator: 'Exists' }] } },
      'spec.selector.matchExpressions[0].key',
      /is required/,
    ],
    [
      'unit-less joinTimeout',
      { joinTimeout: '20' },
      'spec.joinTimeout',
      /needs a unit .*accepted: a duration above 0 and at most 8760h/,
    ],
    [
      'joinTimeout past int64',
      { joinTimeout: '9999999h' },
      'spec.joinTimeout',
      /must be at most 8760h, not "9999999h"/,
    ],
    [
      'joinTimeout above a year',
      { joinTimeout: '8761h' },
      'spec.joinTimeout',
      /must be at most 8760h, not "8761h" \(8761h\)/,
    ],
    [
      'probeInterval past int64',
      { suspicion: { probeInterval: '9999999h' } },
      'spec.suspicion.probeInterval',
      /must be at most 8760h/,
    ],
    ['days', { joinTimeout: '1d' }, 'spec.joinTimeout', /unknown unit/],
    ['zero joinTimeout', { joinTimeout: '0s' }, 'spec.joinTimeout', /longer than 0/],
    ['numeric joinTimeout', { joinTimeout: 1200 }, 'spec.joinTimeout', /duration string/],
    ['long duration text', { joinTimeout: '1'.repeat(30) + 'ms' + 's' }, 'spec.joinTimeout', /longer than 32/],
    [
      'zero provisionTimeout',
      { provisionTimeout: '0' },
      'spec.provisionTimeout',
      /leave it unset to turn the provision check off/,
    ],
    ['maxInFlight 0', { maxInFlight: 0 }, 'spec.maxInFlight', /from 1 to 2147483647, not 0/],
    ['maxInFlight 1.5', { maxInFlight: 1.5 }, 'spec.maxInFlight', /whole number/],
    ['maxInFlight past int32', { maxInFlight: 2147483648 }, 'spec.maxInFlight', /from 1 to 2147483647/],
    ['maxInFlight "3"', { maxInFlight: '3' }, 'spec.maxInFlight', /not a percent/],
    ['maxInFlight 0%', { maxInFlight: '0%' }, 'spec.maxInFlight', /"1%" to "100%"/],
    ['maxInFlight 101%', { maxInFlight: '101%' }, 'spec.maxInFlight', /not a percent/],
    ['maxInFlight true', { maxInFlight: true }, 'spec.maxInFlight', /integer or a percent/],
    ['remediation list', { remediation: [] }, 'spec.remediation', /must be an object/],
    [
      'bad strategy',
      { remediation: { strategy: 'Rebuild' } },
      'spec.remediation.strategy',
      /Auto, OwnerRemediated, MachineCondition, Delete/,
    ],
    ['maxPerOwner 0', { remediation: { maxPerOwner: 0 } }, 'spec.remediation.maxPerOwner', /from 1 to 2147483647/],
    [
      'maxPerOwner past int32',
      { remediation: { maxPerOwner: 2147483648 } },
      'spec.remediation.maxPerOwner',
      /from 1 to 2147483647, not number 2147483648/,
    ],
    ['bad window', { remediation: { window: '1w' } }, 'spec.remediation.window', /unknown unit/],
    [
      'negative failures',
      { suspicion: { consecutiveJoinFailures: -1 } },
      'spec.suspicion.consecutiveJoinFailures',
      /from 0 to 2147483647; 0 turns the suspicion off/,
    ],
    [
      'max below probe',
      { suspicion: { probeInterval: '2h', maxProbeInterval: '1h' } },
      'spec.suspicion.maxProbeInterval',
      /at least suspicion.probeInterval \(2h\)/,
    ],
    [
      'probe above default max',
      { suspicion: { probeInterval: '10h' } },
      'spec.suspicion.maxProbeInterval',
      /at least suspicion.probeInterval \(10h\).*it is 8h \(the default\)/,
    ],
    [
      'max below default probe',
      { suspicion: { maxProbeInterval: '10m' } },
      'spec.suspicion.maxProbeInterval',
      /\(30m\)/,
    ],
    [
      'neverJoinedLimit string',
      { neverJoinedLimit: '3' },
      'spec.neverJoinedLimit',
      /whole number from 0 to 2147483647.*not "3"/,
    ],
    ['bad firstControlPlane', { firstControlPlane: 'Skip' }, 'spec.firstControlPlane', /Remediate, Report/],
    ['dryRun string', { dryRun: 'yes' }, 'spec.dryRun', /true or false/],
    ['paused number', { paused: 1 }, 'spec.paused', /true or false/],
  ];
  for (const [name, change, field, msg] of table) {
    it(`${name}: names ${field}`, () => {
      const errs = validateSpec(spec(change));
      const hit = errs.find((e) => e.field === field);
      expect(hit, JSON.stringify(errs)).to.exist;
      expect(hit!.message).to.match(msg);
    });
  }

  // The shared table of bad checks: every row the CRD schema refuses, validateSpec refuses naming the same field
  // (the code says again what the schema says). Webhook rows are webhooks/table.test.ts's.
  const schemaRows = BAD_CHECKS.filter((r) => r.refusedBy === 'schema' && !r.update);
  it(`the shared table has at least 78 rows (${BAD_CHECKS.length}), ${schemaRows.length} of them the schema's`, () => {
    expect(BAD_CHECKS.length).to.be.at.least(78);
  });
  for (const row of schemaRows) {
    it(`table: ${row.name}: names ${row.field}`, () => {
      const errs = validateSpec(row.spec);
      expect(fields(errs), JSON.stringify(errs)).to.include(row.field);
    });
  }

  it('refuses a spec that is not an object', () => {
    for (const s of [undefined, null, 'x', [], 3]) expect(fields(validateSpec(s))).to.deep.equal(['spec']);
  });

  it('reports every problem at once', () => {
    expect(fields(validateSpec({ joinTimeout: 'x', paused: 'no' }))).to.have.members([
      'spec.clusterName',
      'spec.selector',
      'spec.joinTimeout',
      'spec.paused',
    ]);
  });
});

describe('api/v1alpha1 parseSettings', () => {
  it('applies every default of DESIGN.md', () => {
    const r = parseSettings(spec());
    expect(r.errors).to.deep.equal([]);
    expect(r.settings).to.deep.equal({
      clusterName: 'c1',
      selector: sel,
      joinTimeoutMs: 20 * 60_000,
      maxInFlight: { count: 1 },
      strategy: 'Auto',
      maxPerOwner: 5,
      windowMs: 24 * 3_600_000,
      consecutiveJoinFailures: 2,
      probeIntervalMs: 30 * 60_000,
      maxProbeIntervalMs: 8 * 3_600_000,
      neverJoinedLimit: 3,
      firstControlPlane: 'Remediate',
      dryRun: false,
      paused: false,
    });
    expect(r.settings).not.to.have.property('provisionTimeoutMs');
  });

  it('takes what the user wrote', () => {
    const r = parseSettings(
      spec({
        joinTimeout: '1h30m',
        provisionTimeout: '500ms',
        maxInFlight: '25%',
        remediation: { strategy: 'Delete', maxPerOwner: 2, window: '1h' },
        suspicion: { consecutiveJoinFailures: 0, probeInterval: '1m', maxProbeInterval: '2m' },
        neverJoinedLimit: 0,
        firstControlPlane: 'Report',
        dryRun: true,
        paused: true,
      }),
    );
    expect(r.settings).to.include({
      joinTimeoutMs: 5_400_000,
      provisionTimeoutMs: 500,
      strategy: 'Delete',
      maxPerOwner: 2,
      windowMs: 3_600_000,
      consecutiveJoinFailures: 0,
      probeIntervalMs: 60_000,
      maxProbeIntervalMs: 120_000,
      neverJoinedLimit: 0,
      firstControlPlane: 'Report',
      dryRun: true,
      paused: true,
    });
    expect(r.settings!.maxInFlight).to.deep.equal({ percent: 25 });
  });

  it('gives no settings for a bad spec, only the errors', () => {
    const r = parseSettings(spec({ joinTimeout: '20' }));
    expect(r.settings).to.equal(undefined);
    expect(fields(r.errors)).to.deep.equal(['spec.joinTimeout']);
  });

  it('copies the selector, so settings never alias a cached object', () => {
    const s = spec({
      selector: { matchLabels: { a: 'b' }, matchExpressions: [{ key: 'k', operator: 'In', values: ['v'] }] },
    });
    const r = parseSettings(s);
    (s.selector as any).matchLabels.a = 'changed';
    (s.selector as any).matchExpressions[0].values.push('w');
    expect(r.settings!.selector).to.deep.equal({
      matchLabels: { a: 'b' },
      matchExpressions: [{ key: 'k', operator: 'In', values: ['v'] }],
    });
  });
});

describe('api/v1alpha1 riskWarnings', () => {
  const settings = (joinTimeout: string) => parseSettings(spec({ joinTimeout })).settings!;
  it('warns about a joinTimeout under 2m, naming the field and the default', () => {
    const w = riskWarnings(settings('90s'));
    expect(w).to.have.length(1);
    expect(w[0]).to.match(/^spec\.joinTimeout is 1m30s, under 2m: .*the default is 20m/);
  });
  it('is quiet from 2m up', () => {
    expect(riskWarnings(settings('2m'))).to.deep.equal([]);
    expect(riskWarnings(settings('20m'))).to.deep.equal([]);
  });
});

describe('api/v1alpha1 strategyCapiProblem', () => {
  it('refuses MachineCondition below CAPI v1.12, naming the release and what is accepted', () => {
    expect(strategyCapiProblem('MachineCondition', { minor: 11, version: 'v1.11.5' })).to.match(
      /^MachineCondition needs CAPI v1\.12 or later .*runs CAPI v1\.11\.5: use Auto or OwnerRemediated/,
    );
    expect(strategyCapiProblem('MachineCondition', { minor: 10 })).to.match(/runs CAPI v1\.10:/);
  });
  it('says nothing from v1.12 on, for other strategies, or when the minor is unknown', () => {
    expect(strategyCapiProblem('MachineCondition', { minor: 12 })).to.equal(undefined);
    expect(strategyCapiProblem('MachineCondition', { minor: 14 })).to.equal(undefined);
    expect(strategyCapiProblem('Auto', { minor: 9 })).to.equal(undefined);
    expect(strategyCapiProblem('MachineCondition', {})).to.equal(undefined);
  });
});
