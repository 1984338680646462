// API_RULES: the real API rules wired into the webhook's SpecRules shape.
import { expect } from 'chai';
import { API_RULES } from './rules.js';

const SEL = { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' } };

describe('webhooks/rules: API_RULES', () => {
  it("passes api/v1alpha1's field errors through, rooted at spec", () => {
    const errs = API_RULES.validateSpec({ clusterName: 'c1', selector: SEL, joinTimeout: 'soon' });
    expect(errs.map((e) => e.field)).to.deep.equal(['spec.joinTimeout']);
  });

  it('warns about a joinTimeout under 2m, and not about the default', () => {
    expect(API_RULES.warnings({ clusterName: 'c1', selector: SEL, joinTimeout: '90s' })).to.have.length(1);
    expect(API_RULES.warnings({ clusterName: 'c1', selector: SEL })).to.deep.equal([]);
    expect(API_RULES.warnings({ clusterName: 'c1' })).to.deep.equal([]); // invalid: no settings, no warnings
  });

  it('matches label selectors; an absent selector matches nothing', () => {
    expect(API_RULES.matches({ matchLabels: { a: 'b' } }, { a: 'b', c: 'd' })).to.equal(true);
    expect(
      API_RULES.matches({ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['b'] }] }, { a: 'b' }),
    ).to.equal(false);
    expect(API_RULES.matches({}, { a: 'b' })).to.equal(true);
    expect(API_RULES.matches(undefined, { a: 'b' })).to.equal(false);
  });

  it('reads a v1beta2 MachineHealthCheck', () => {
    const mhc = API_RULES.readMachineHealthCheck(
      {
        metadata: { name: 'm', namespace: 'ns', uid: 'u' },
        spec: { clusterName: 'c1', selector: { matchLabels: { a: 'b' } }, checks: { nodeStartupTimeoutSeconds: 0 } },
      },
      'v1beta2',
    );
    expect(mhc.nodeStartupTimeoutSeconds).to.equal(0);
    expect(mhc.selector).to.deep.equal({ matchLabels: { a: 'b' } });
  });
});
