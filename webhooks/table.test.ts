// The shared table of bad MachineJoinChecks (api/v1alpha1/testdata/bad-checks.ts) against the validating
// webhook's decision with the API's real rules, the world of the e2e (its existing checks and Machine) served
// by stub lookups: every row the schema or the webhook refuses is refused here too, naming the same field.
// Only what the apiserver refuses before any rule runs (object names, unknown fields) is left to the e2e.
import { expect } from 'chai';
import { BAD_CHECKS, EXISTING_CHECKS, EXISTING_MACHINE } from '../api/v1alpha1/testdata/bad-checks.js';
import type { AdmissionRequest } from './admission.js';
import type { Lookups } from './lookups.js';
import { API_RULES } from './rules.js';
import { decide } from './validate.js';

const ns = 'jg';
const mjc = (name: string, spec: unknown) => ({
  apiVersion: 'joinguard.io/v1alpha1',
  kind: 'MachineJoinCheck',
  metadata: { name, namespace: ns },
  spec,
});
const existing = EXISTING_CHECKS.map((c) => mjc(c.name, c.spec));
const lookups: Lookups = {
  checks: async () => existing,
  machineHealthChecks: async () => ({ objects: [], version: 'v1beta2' }),
  machines: async () => [EXISTING_MACHINE],
};

describe('webhooks: the table of bad checks against decide() with the API rules', () => {
  const rows = BAD_CHECKS.filter((r) => r.refusedBy !== 'apiserver');
  it(`tries ${rows.length} of the ${BAD_CHECKS.length} rows (the rest are the apiserver's own)`, () => {
    expect(rows.length).to.be.at.least(100);
  });
  for (const row of rows) {
    it(`${row.name}: names ${row.field}`, async () => {
      const old = row.update ? existing.find((c) => c.metadata.name === row.update) : undefined;
      if (row.update) expect(old, `no existing check ${row.update}`).to.exist;
      const req: AdmissionRequest = old
        ? {
            uid: 'u',
            operation: 'UPDATE',
            namespace: ns,
            name: row.update,
            object: mjc(row.update!, row.spec),
            oldObject: old,
          }
        : { uid: 'u', operation: 'CREATE', namespace: ns, name: 'bad', object: mjc('bad', row.spec) };
      const d = await decide(req, API_RULES, { lookups });
      expect(d.internalError).to.equal(undefined);
      const hit = d.problems.find((p) => p.field === row.field);
      expect(hit, JSON.stringify(d.problems)).to.exist;
      if (row.refusedBy === 'webhook' && row.says) expect(`${hit!.field}: ${hit!.message}`).to.match(row.says);
    });
  }

  it('admits a good check in the same world', async () => {
    const d = await decide(
      {
        uid: 'u',
        operation: 'CREATE',
        namespace: ns,
        name: 'md-1',
        object: mjc('md-1', {
          clusterName: 'c1',
          selector: { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-1' } },
        }),
      },
      API_RULES,
      { lookups },
    );
    expect(d).to.deep.equal({ problems: [], warnings: [] });
  });
});
