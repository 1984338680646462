// docs/install.md's RBAC table against the roles `npm run manifests` builds: every grant of the manager's
// ServiceAccount (its ClusterRole, the Lease Role, and the opt-in roles at `true`) is a row, and no row grants more.
// The table names resources without their API group; the grants are compared as `verb resource`.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { MANIFESTS_DIR, objectsOf, renderProviderFiles } from './render.js';
import { ruleStrings } from './rbac-needs.js';

const root = resolve(MANIFESTS_DIR, '..');
const MANAGER_ROLES = [
  'ClusterRole joinguard-manager-role',
  'Role joinguard-leader-election-role',
  'ClusterRole joinguard-workload-secrets-true',
  'ClusterRole joinguard-machine-delete-true',
];

/** The rows of the table under `## RBAC`, as `verb resource` (resource without its group). */
function tableGrants(markdown: string): string[] {
  const section = /^## RBAC[^\n]*\n([\s\S]*?)(?=^## )/m.exec(markdown)?.[1];
  if (!section) throw new Error('docs/install.md has no `## RBAC` section');
  const rows = section.split('\n').filter((l) => /^\| `/.test(l));
  if (rows.length === 0) throw new Error('the RBAC section has no table rows');
  const out = new Set<string>();
  for (const row of rows) {
    const [resources, verbs] = row.split('|').slice(1, 3) as [string, string];
    const names = [...resources.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    for (const r of names) for (const v of verbs.split(',').map((x) => x.trim())) out.add(`${v} ${r}`);
  }
  return [...out].sort();
}

describe('docs/install.md: the RBAC table is the built roles', () => {
  it("lists exactly the manager's grants (ClusterRole, Lease Role, opt-in roles)", async () => {
    const objs = objectsOf((await renderProviderFiles('0.1.0')).components);
    const built = new Set<string>();
    for (const id of MANAGER_ROLES) {
      const [kind, name] = id.split(' ');
      const role = objs.find((o) => o.kind === kind && o.metadata.name === name) as
        { rules: { apiGroups?: string[]; resources?: string[]; verbs?: string[] }[] } | undefined;
      expect(role, id).to.not.equal(undefined);
      for (const g of ruleStrings(role!.rules)) built.add(g.replace(/ [^ /]+\//, ' '));
    }
    const documented = tableGrants(readFileSync(join(root, 'docs', 'install.md'), 'utf8'));
    expect(documented).to.deep.equal([...built].sort());
  });

  it('would catch a missing row: the table without its machinesets row is short of list and watch', () => {
    const text = readFileSync(join(root, 'docs', 'install.md'), 'utf8');
    const without = text
      .split('\n')
      .filter((l) => !l.startsWith('| `machinesets`'))
      .join('\n');
    const all = tableGrants(text);
    expect(all.filter((g) => !tableGrants(without).includes(g))).to.deep.equal([
      'list machinesets',
      'watch machinesets',
    ]);
  });
});
