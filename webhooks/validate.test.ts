// The validating webhook's decision on its own: the rules it adds to the API's (cluster label, immutability,
// overlap, MachineHealthCheck warning), with the API's rules and the cluster lookups stubbed.
import { expect } from 'chai';
import type { CapiApiVersion, LabelSelectorModel, MachineHealthCheckFacts } from '../api/capi/model.js';
import type { AdmissionRequest } from './admission.js';
import type { Lookups, MachineLabels } from './lookups.js';
import { decide, type SpecRules } from './validate.js';

const CN = 'cluster.x-k8s.io/cluster-name';
const MD = 'cluster.x-k8s.io/deployment-name';

function matches(sel: LabelSelectorModel | undefined, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel?.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel?.matchExpressions ?? []) {
    const has = e.key in labels;
    const v = labels[e.key];
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
    if (e.operator === 'In' && !(has && e.values!.includes(v!))) return false;
    if (e.operator === 'NotIn' && has && e.values!.includes(v!)) return false;
  }
  return true;
}

/** Stub API rules: refuses joinTimeout "bad", warns on joinTimeout "90s". */
const rules: SpecRules = {
  validateSpec: (spec) =>
    (spec as { joinTimeout?: string }).joinTimeout === 'bad' ? [{ field: 'joinTimeout', message: 'is not a duration' }] : [],
  warnings: (spec) => ((spec as { joinTimeout?: string }).joinTimeout === '90s' ? ['joinTimeout 90s is under 2m'] : []),
  matches,
  readMachineHealthCheck: (obj: unknown, _v: CapiApiVersion) => obj as MachineHealthCheckFacts,
};

function mjc(name: string, spec: Record<string, unknown>, meta: Record<string, unknown> = {}) {
  return { apiVersion: 'joinguard.io/v1alpha1', kind: 'MachineJoinCheck', metadata: { name, namespace: 'ns', ...meta }, spec };
}

function lookups(checks: unknown[] = [], mhcs: Partial<MachineHealthCheckFacts>[] = [], machines: MachineLabels[] = []): Lookups {
  return {
    checks: async () => checks,
    machineHealthChecks: async () => ({ objects: mhcs, version: 'v1beta2' as const }),
    machines: async () => machines,
  };
}

function create(obj: unknown): AdmissionRequest {
  return { uid: 'u', operation: 'CREATE', namespace: 'ns', name: (obj as { metadata: { name: string } }).metadata.name, object: obj };
}

describe('webhooks/validate: decide', () => {
  const workers = mjc('workers', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-0' } } });

  it('admits a good check with no lookups at all', async () => {
    expect(await decide(create(workers), rules)).to.deep.equal({ problems: [], warnings: [] });
  });

  it("roots the API's field names at spec and passes its warnings", async () => {
    const d = await decide(create(mjc('a', { clusterName: 'c1', selector: {}, joinTimeout: 'bad' })), rules);
    expect(d.problems).to.deep.equal([{ field: 'spec.joinTimeout', message: 'is not a duration' }]);
    const w = await decide(create(mjc('a', { clusterName: 'c1', selector: {}, joinTimeout: '90s' })), rules);
    expect(w).to.deep.equal({ problems: [], warnings: ['joinTimeout 90s is under 2m'] });
  });

  it('refuses a selector that contradicts the Cluster label', async () => {
    const d = await decide(create(mjc('a', { clusterName: 'c1', selector: { matchLabels: { [CN]: 'c2' } } })), rules);
    expect(d.problems.map((p) => p.field)).to.deep.equal([`spec.selector.matchLabels[${JSON.stringify(CN)}]`]);
  });

  it('keeps clusterName immutable, and says what is accepted', async () => {
    const req: AdmissionRequest = {
      uid: 'u',
      operation: 'UPDATE',
      namespace: 'ns',
      object: mjc('workers', { clusterName: 'c2', selector: {} }),
      oldObject: mjc('workers', { clusterName: 'c1', selector: {} }),
    };
    const d = await decide(req, rules);
    expect(d.problems).to.have.length(1);
    expect(d.problems[0]!.field).to.equal('spec.clusterName');
    expect(d.problems[0]!.message).to.match(/immutable/).and.match(/keep "c1"/);
  });

  it('admits metadata-only updates and deletion even for a spec the rules now refuse', async () => {
    const bad = { clusterName: 'c1', selector: {}, joinTimeout: 'bad' };
    const req: AdmissionRequest = {
      uid: 'u',
      operation: 'UPDATE',
      namespace: 'ns',
      object: mjc('a', bad, { annotations: {} }),
      oldObject: mjc('a', bad, { annotations: { 'joinguard.io/resume': '1' } }),
    };
    expect((await decide(req, rules, lookups([mjc('b', { clusterName: 'c1', selector: {} })]))).problems).to.deep.equal([]);
  });

  it('refuses a second check of the Cluster whose selector can meet the first', async () => {
    const other = mjc('all', { clusterName: 'c1', selector: {} });
    const d = await decide(create(workers), rules, lookups([other]));
    expect(d.problems).to.have.length(1);
    expect(d.problems[0]!.field).to.equal('spec.selector');
    expect(d.problems[0]!.message).to.match(/overlaps MachineJoinCheck "all"/).and.match(/accepted is a selector that excludes/);
  });

  it('admits disjoint checks, checks of other Clusters, itself on update, and deleting checks', async () => {
    const l = lookups([
      mjc('md1', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-1' } } }),
      mjc('cp', { clusterName: 'c1', selector: { matchExpressions: [{ key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' }] } }),
      mjc('other-cluster', { clusterName: 'c2', selector: {} }),
      mjc('workers', { clusterName: 'c1', selector: {} }),
      mjc('going', { clusterName: 'c1', selector: {} }, { deletionTimestamp: '2026-01-01T00:00:00Z' }),
    ]);
    expect((await decide(create(workers), rules, l)).problems).to.deep.equal([]);
  });

  it('refuses when an existing Machine is selected by both, naming it, even if CAPI labels say they cannot meet', async () => {
    const cp = mjc('cp', { clusterName: 'c1', selector: { matchExpressions: [{ key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' }] } });
    const odd: MachineLabels = { name: 'odd-1', labels: { [CN]: 'c1', [MD]: 'md-0', 'cluster.x-k8s.io/control-plane': '' } };
    const d = await decide(create(workers), rules, lookups([cp], [], [odd]));
    expect(d.problems[0]!.message).to.match(/both select Machine "odd-1"/);
  });

  it('warns about an overlapping MachineHealthCheck whose node startup timeout is not 0', async () => {
    const mhc = (name: string, selector: LabelSelectorModel, t?: number): Partial<MachineHealthCheckFacts> => ({
      name,
      clusterName: 'c1',
      selector,
      nodeStartupTimeoutSeconds: t,
    });
    const d = await decide(
      create(workers),
      rules,
      lookups([], [mhc('unset', {}), mhc('ten', { matchLabels: { [MD]: 'md-0' } }, 600), mhc('zero', {}, 0), mhc('other', { matchLabels: { [MD]: 'md-1' } })]),
    );
    expect(d.problems).to.deep.equal([]);
    expect(d.warnings).to.have.length(2);
    expect(d.warnings[0]).to.match(/MachineHealthCheck "unset".*unset \(CAPI uses 10m\)/);
    expect(d.warnings[1]).to.match(/MachineHealthCheck "ten".*600s/);
    for (const w of d.warnings) expect(w).to.match(/set its nodeStartupTimeout explicitly to 0/);
  });

  it('refuses as an internal error when the lookups fail', async () => {
    const failing: Lookups = { ...lookups(), checks: async () => Promise.reject(new Error('connection refused')) };
    const d = await decide(create(workers), rules, failing);
    expect(d.internalError).to.match(/could not look up .*connection refused; try again/);
  });
});
