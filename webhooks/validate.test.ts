// The validating webhook's decision on its own: the rules it adds to the API's (cluster label, immutability,
// overlap, MachineHealthCheck warning), with the API's rules and the cluster lookups stubbed.
import { expect } from 'chai';
import type { CapiApiVersion, LabelSelectorModel, MachineHealthCheckFacts } from '../api/capi/model.js';
import type { AdmissionRequest } from './admission.js';
import type { CapiKnowledge } from './capi-version.js';
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
    (spec as { joinTimeout?: string }).joinTimeout === 'bad'
      ? [{ field: 'joinTimeout', message: 'is not a duration' }]
      : [],
  warnings: (spec) => ((spec as { joinTimeout?: string }).joinTimeout === '90s' ? ['joinTimeout 90s is under 2m'] : []),
  matches,
  readMachineHealthCheck: (obj: unknown, _v: CapiApiVersion) => obj as MachineHealthCheckFacts,
  strategyCapiProblem: (strategy, capi) =>
    strategy === 'MachineCondition' && capi.minor !== undefined && capi.minor < 12
      ? `too old: ${capi.version}`
      : undefined,
  strategyMinCapiMinor: (strategy) => (strategy === 'MachineCondition' ? 12 : undefined),
};

function mjc(name: string, spec: Record<string, unknown>, meta: Record<string, unknown> = {}) {
  return {
    apiVersion: 'joinguard.io/v1alpha1',
    kind: 'MachineJoinCheck',
    metadata: { name, namespace: 'ns', ...meta },
    spec,
  };
}

function lookups(
  checks: unknown[] = [],
  mhcs: Partial<MachineHealthCheckFacts>[] = [],
  machines: MachineLabels[] = [],
): Lookups {
  return {
    checks: async () => checks,
    machineHealthChecks: async () => ({ objects: mhcs, version: 'v1beta2' as const }),
    machines: async () => machines,
  };
}

function create(obj: unknown): AdmissionRequest {
  return {
    uid: 'u',
    operation: 'CREATE',
    namespace: 'ns',
    name: (obj as { metadata: { name: string } }).metadata.name,
    object: obj,
  };
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
    expect(d.problems[0]!.message)
      .to.match(/immutable/)
      .and.match(/keep "c1"/);
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
    expect(
      (await decide(req, rules, { lookups: lookups([mjc('b', { clusterName: 'c1', selector: {} })]) })).problems,
    ).to.deep.equal([]);
  });

  it('refuses a second check of the Cluster whose selector can meet the first', async () => {
    const other = mjc('all', { clusterName: 'c1', selector: {} });
    const d = await decide(create(workers), rules, { lookups: lookups([other]) });
    expect(d.problems).to.have.length(1);
    expect(d.problems[0]!.field).to.equal('spec.selector');
    expect(d.problems[0]!.message)
      .to.match(/overlaps MachineJoinCheck "all"/)
      .and.match(/accepted is a selector that excludes/);
  });

  it('admits disjoint checks, checks of other Clusters, itself on update, and deleting checks', async () => {
    const l = lookups([
      mjc('md1', { clusterName: 'c1', selector: { matchLabels: { [MD]: 'md-1' } } }),
      mjc('cp', {
        clusterName: 'c1',
        selector: { matchExpressions: [{ key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' }] },
      }),
      mjc('other-cluster', { clusterName: 'c2', selector: {} }),
      mjc('workers', { clusterName: 'c1', selector: {} }),
      mjc('going', { clusterName: 'c1', selector: {} }, { deletionTimestamp: '2026-01-01T00:00:00Z' }),
    ]);
    expect((await decide(create(workers), rules, { lookups: l })).problems).to.deep.equal([]);
  });

  it('refuses when an existing Machine is selected by both, naming it, even if CAPI labels say they cannot meet', async () => {
    const cp = mjc('cp', {
      clusterName: 'c1',
      selector: { matchExpressions: [{ key: 'cluster.x-k8s.io/control-plane', operator: 'Exists' }] },
    });
    const odd: MachineLabels = {
      name: 'odd-1',
      labels: { [CN]: 'c1', [MD]: 'md-0', 'cluster.x-k8s.io/control-plane': '' },
    };
    const d = await decide(create(workers), rules, { lookups: lookups([cp], [], [odd]) });
    expect(d.problems[0]!.message).to.match(/both select Machine "odd-1"/);
  });

  it('warns about an overlapping MachineHealthCheck whose node startup timeout is not 0', async () => {
    const mhc = (name: string, selector: LabelSelectorModel, t?: number): Partial<MachineHealthCheckFacts> => ({
      name,
      clusterName: 'c1',
      selector,
      nodeStartupTimeoutSeconds: t,
    });
    const d = await decide(create(workers), rules, {
      lookups: lookups(
        [],
        [
          mhc('unset', {}),
          mhc('ten', { matchLabels: { [MD]: 'md-0' } }, 600),
          mhc('zero', {}, 0),
          mhc('other', { matchLabels: { [MD]: 'md-1' } }),
        ],
      ),
    });
    expect(d.problems).to.deep.equal([]);
    expect(d.warnings).to.have.length(2);
    expect(d.warnings[0]).to.match(/MachineHealthCheck "unset".*unset \(CAPI uses 10m\)/);
    expect(d.warnings[1]).to.match(/MachineHealthCheck "ten".*600s/);
    for (const w of d.warnings) expect(w).to.match(/set its nodeStartupTimeout explicitly to 0/);
  });

  it('refuses as an internal error when the lookups fail', async () => {
    const failing: Lookups = { ...lookups(), checks: async () => Promise.reject(new Error('connection refused')) };
    const d = await decide(create(workers), rules, { lookups: failing });
    expect(d.internalError).to.match(/could not look up .*connection refused; try again/);
  });

  describe('MachineCondition against the CAPI release found', () => {
    const mc = mjc('mc', {
      clusterName: 'c1',
      selector: { matchLabels: { [MD]: 'md-0' } },
      remediation: { strategy: 'MachineCondition' },
    });
    const capi = (k: CapiKnowledge) => async () => k;

    it('refuses it below v1.12, naming spec.remediation.strategy and where the release was found', async () => {
      const d = await decide(create(mc), rules, {
        capi: capi({ facts: { apiVersion: 'v1beta1', minor: 10, version: 'v1.10.10', source: 'the core CRD label' } }),
      });
      expect(d.problems).to.deep.equal([
        { field: 'spec.remediation.strategy', message: 'too old: v1.10.10 (CAPI found from the core CRD label)' },
      ]);
    });

    it('admits it from v1.12 on, and other strategies on any release', async () => {
      expect(
        await decide(create(mc), rules, { capi: capi({ facts: { apiVersion: 'v1beta2', minor: 12 } }) }),
      ).to.deep.equal({ problems: [], warnings: [] });
      const auto = mjc('a', {
        clusterName: 'c1',
        selector: { matchLabels: { [MD]: 'md-0' } },
        remediation: { strategy: 'Auto' },
      });
      expect(
        await decide(create(auto), rules, { capi: capi({ facts: { apiVersion: 'v1beta1', minor: 9 } }) }),
      ).to.deep.equal({ problems: [], warnings: [] });
    });

    it('admits it with a warning when the minor is not known, saying why', async () => {
      const unknownMinor = await decide(create(mc), rules, {
        capi: capi({ facts: { apiVersion: 'v1beta2', source: 'no provider label' } }),
      });
      expect(unknownMinor.problems).to.deep.equal([]);
      expect(unknownMinor.warnings).to.have.length(1);
      expect(unknownMinor.warnings[0]).to.match(
        /^spec\.remediation\.strategy: MachineCondition needs CAPI v1\.12 or later, .*not known \(discovery did not report it \(no provider label\)\)/,
      );
      const failed = await decide(create(mc), rules, { capi: capi({ error: 'connection refused' }) });
      expect(failed.warnings[0]).to.match(/not known \(connection refused\)/);
    });

    it('does not ask for the release when the spec is refused anyway or the strategy needs none', async () => {
      let asked = 0;
      const counting = async () => (asked++, {});
      await decide(
        create(
          mjc('b', {
            clusterName: 'c1',
            selector: {},
            joinTimeout: 'bad',
            remediation: { strategy: 'MachineCondition' },
          }),
        ),
        rules,
        { capi: counting },
      );
      await decide(create(workers), rules, { capi: counting });
      expect(asked).to.equal(0);
    });
  });
});
