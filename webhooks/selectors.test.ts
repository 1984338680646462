// Overlap and cluster-label contradiction: the selector logic of the validating webhook.
import { expect } from 'chai';
import type { LabelSelectorModel } from '../api/capi/model.js';
import { clusterLabelContradictions, selectorsOverlap } from './selectors.js';

const CP = 'cluster.x-k8s.io/control-plane';
const MD = 'cluster.x-k8s.io/deployment-name';
const CN = 'cluster.x-k8s.io/cluster-name';

describe('webhooks/selectors: overlap of two selectors of one Cluster', () => {
  const table: { name: string; a: LabelSelectorModel; b: LabelSelectorModel; overlap: boolean }[] = [
    { name: 'two empty selectors', a: {}, b: {}, overlap: true },
    {
      name: 'same matchLabels',
      a: { matchLabels: { pool: 'gpu' } },
      b: { matchLabels: { pool: 'gpu' } },
      overlap: true,
    },
    {
      name: 'a subset',
      a: { matchLabels: { pool: 'gpu' } },
      b: { matchLabels: { pool: 'gpu', zone: 'a' } },
      overlap: true,
    },
    {
      name: 'different keys can meet on one Machine',
      a: { matchLabels: { team: 'a' } },
      b: { matchLabels: { tier: 'web' } },
      overlap: true,
    },
    {
      name: 'one key, two values',
      a: { matchLabels: { [MD]: 'md-0' } },
      b: { matchLabels: { [MD]: 'md-1' } },
      overlap: false,
    },
    {
      name: 'control plane vs MachineDeployment (CAPI ownership)',
      a: { matchExpressions: [{ key: CP, operator: 'Exists' }] },
      b: { matchLabels: { [MD]: 'md-0' } },
      overlap: false,
    },
    {
      name: 'control plane vs MachinePool',
      a: { matchLabels: { [CP]: '' } },
      b: { matchExpressions: [{ key: 'cluster.x-k8s.io/pool-name', operator: 'Exists' }] },
      overlap: false,
    },
    {
      name: 'Exists vs DoesNotExist',
      a: { matchExpressions: [{ key: 'x', operator: 'Exists' }] },
      b: { matchExpressions: [{ key: 'x', operator: 'DoesNotExist' }] },
      overlap: false,
    },
    {
      name: 'In vs NotIn of the same values',
      a: { matchExpressions: [{ key: 'x', operator: 'In', values: ['1', '2'] }] },
      b: { matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['1', '2'] }] },
      overlap: false,
    },
    {
      name: 'In vs NotIn leaving a value',
      a: { matchExpressions: [{ key: 'x', operator: 'In', values: ['1', '2'] }] },
      b: { matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['1'] }] },
      overlap: true,
    },
    {
      name: 'NotIn vs DoesNotExist (absence satisfies both)',
      a: { matchExpressions: [{ key: 'x', operator: 'NotIn', values: ['1'] }] },
      b: { matchExpressions: [{ key: 'x', operator: 'DoesNotExist' }] },
      overlap: true,
    },
    {
      name: 'disjoint In sets',
      a: { matchExpressions: [{ key: 'x', operator: 'In', values: ['1'] }] },
      b: { matchExpressions: [{ key: 'x', operator: 'In', values: ['2', '3'] }] },
      overlap: false,
    },
    {
      name: 'worker selector excluding the control plane vs empty',
      a: { matchExpressions: [{ key: CP, operator: 'DoesNotExist' }] },
      b: {},
      overlap: true,
    },
    {
      name: 'control plane vs workers by DoesNotExist',
      a: { matchExpressions: [{ key: CP, operator: 'Exists' }] },
      b: { matchExpressions: [{ key: CP, operator: 'DoesNotExist' }] },
      overlap: false,
    },
    {
      name: 'another cluster-name value never meets this Cluster',
      a: { matchLabels: { [CN]: 'other' } },
      b: {},
      overlap: false,
    },
  ];
  for (const t of table) {
    it(`${t.name}: ${t.overlap ? 'overlap' : 'disjoint'}`, () => {
      expect(selectorsOverlap(t.a, t.b, 'c1').overlap).to.equal(t.overlap);
      expect(selectorsOverlap(t.b, t.a, 'c1').overlap, 'symmetric').to.equal(t.overlap);
    });
  }

  it('says what separates disjoint selectors', () => {
    const r = selectorsOverlap({ matchLabels: { [MD]: 'a' } }, { matchLabels: { [MD]: 'b' } }, 'c1');
    expect(r).to.deep.equal({ overlap: false, separatedBy: `label ${MD}` });
  });

  it('tolerates malformed selectors (validation refuses them elsewhere)', () => {
    expect(
      selectorsOverlap(undefined, { matchExpressions: [null as never, { key: 1 as never, operator: 'In' }] }, 'c1')
        .overlap,
    ).to.equal(true);
  });
});

describe('webhooks/selectors: contradictions with cluster.x-k8s.io/cluster-name', () => {
  it('matchLabels of another Cluster', () => {
    const p = clusterLabelContradictions({ matchLabels: { [CN]: 'b' } }, 'a');
    expect(p).to.have.length(1);
    expect(p[0]!.field).to.equal(`spec.selector.matchLabels[${JSON.stringify(CN)}]`);
    expect(p[0]!.message)
      .to.match(/is "b" but spec.clusterName is "a"/)
      .and.match(/remove this requirement/);
  });
  it('NotIn with the Cluster, DoesNotExist, In without it', () => {
    const p = clusterLabelContradictions(
      {
        matchExpressions: [
          { key: CN, operator: 'NotIn', values: ['a'] },
          { key: CN, operator: 'DoesNotExist' },
          { key: CN, operator: 'In', values: ['b', 'c'] },
          { key: CN, operator: 'In', values: ['a', 'b'] },
          { key: CN, operator: 'NotIn', values: ['b'] },
          { key: CN, operator: 'Exists' },
        ],
      },
      'a',
    );
    expect(p.map((x) => x.field)).to.deep.equal([
      'spec.selector.matchExpressions[0]',
      'spec.selector.matchExpressions[1]',
      'spec.selector.matchExpressions[2]',
    ]);
  });
  it('agreeing requirements pass', () => {
    expect(clusterLabelContradictions({ matchLabels: { [CN]: 'a' } }, 'a')).to.deep.equal([]);
    expect(clusterLabelContradictions({}, 'a')).to.deep.equal([]);
  });
});
