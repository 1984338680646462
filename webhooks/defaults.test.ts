// The defaulting patch: DESIGN.md's defaults for absent fields only, as a JSON patch the apiserver applies.
import { expect } from 'chai';
import { applyPatch, defaultingPatch, SPEC_DEFAULTS } from './defaults.js';

const CN = 'cluster.x-k8s.io/cluster-name';

function check(spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: 'x', namespace: 'n' }) {
  return { apiVersion: 'joinguard.io/v1alpha1', kind: 'MachineJoinCheck', metadata, spec };
}

describe('webhooks/defaults', () => {
  it('fills every default of a minimal check and labels it with its Cluster', () => {
    const obj = check({ clusterName: 'c1', selector: { matchLabels: { a: 'b' } } });
    const out = applyPatch(obj, defaultingPatch(obj));
    expect(out.spec).to.deep.equal({
      clusterName: 'c1',
      selector: { matchLabels: { a: 'b' } },
      joinTimeout: '20m',
      maxInFlight: 1,
      remediation: { strategy: 'Auto', maxPerOwner: 5, window: '24h' },
      suspicion: { consecutiveJoinFailures: 2, probeInterval: '30m', maxProbeInterval: '8h' },
      neverJoinedLimit: 3,
      firstControlPlane: 'Remediate',
      dryRun: false,
      paused: false,
    });
    expect(out.metadata).to.deep.equal({ name: 'x', namespace: 'n', labels: { [CN]: 'c1' } });
    expect(out.spec).not.to.have.property('provisionTimeout');
  });

  it('keeps what the user wrote, even zero, false and bad values', () => {
    const spec = {
      clusterName: 'c1',
      selector: {},
      joinTimeout: 'soon',
      maxInFlight: '50%',
      remediation: { strategy: 'Delete' },
      suspicion: { consecutiveJoinFailures: 0 },
      neverJoinedLimit: 0,
      dryRun: true,
    };
    const out = applyPatch(check(spec), defaultingPatch(check(spec)));
    expect(out.spec).to.deep.include({ joinTimeout: 'soon', maxInFlight: '50%', neverJoinedLimit: 0, dryRun: true, paused: false });
    expect(out.spec.remediation).to.deep.equal({ strategy: 'Delete', maxPerOwner: 5, window: '24h' });
    expect(out.spec.suspicion).to.deep.equal({ consecutiveJoinFailures: 0, probeInterval: '30m', maxProbeInterval: '8h' });
  });

  it('writes nothing for a fully defaulted check (idempotent)', () => {
    const obj = check({ clusterName: 'c1', selector: {} });
    const once = applyPatch(obj, defaultingPatch(obj));
    expect(defaultingPatch(once)).to.deep.equal([]);
  });

  it('treats null as absent (kubectl apply of a cleared field)', () => {
    const obj = check({ clusterName: 'c1', selector: {}, joinTimeout: null, remediation: null });
    const out = applyPatch(obj, defaultingPatch(obj));
    expect(out.spec.joinTimeout).to.equal(SPEC_DEFAULTS.joinTimeout);
    expect(out.spec.remediation).to.deep.equal(SPEC_DEFAULTS.remediation);
  });

  it('leaves a non-object spec and a wrongly typed nested field to validation', () => {
    expect(defaultingPatch({ spec: 'x' })).to.deep.equal([]);
    expect(defaultingPatch({})).to.deep.equal([]);
    const ops = defaultingPatch(check({ clusterName: 'c1', selector: {}, remediation: 'fast' }));
    expect(ops.some((o) => o.path.startsWith('/spec/remediation'))).to.equal(false);
  });

  it('corrects a cluster-name label that disagrees with spec.clusterName, escaping the key', () => {
    const ops = defaultingPatch(check({ clusterName: 'c1', selector: {} }, { name: 'x', labels: { [CN]: 'old', keep: 'me' } }));
    expect(ops).to.deep.include({ op: 'add', path: '/metadata/labels/cluster.x-k8s.io~1cluster-name', value: 'c1' });
  });
});
