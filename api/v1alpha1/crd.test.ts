import { expect } from 'chai';
import { readFile } from 'node:fs/promises';
import { parse } from 'yaml';
import { buildCrd, CRD_NAME, renderCrdYaml } from './crd.js';
import { SPEC_DEFAULTS } from './defaults.js';
import { CRD_PATH } from './gen-crd.js';
import { machineJoinCheckSchema, type JSONSchemaProps } from './schema.js';
import { parseSettings } from './settings.js';
import { validateSpec } from './validation.js';

type Json = Record<string, unknown>;
const specSchema = machineJoinCheckSchema.properties!['spec']!;

/** Structural defaulting as the apiserver does it: top-down, only where the parent object exists. */
function applyDefaults(value: Json, s: JSONSchemaProps): Json {
  for (const [k, p] of Object.entries(s.properties ?? {})) {
    if (value[k] === undefined && p.default !== undefined) value[k] = structuredClone(p.default);
    const v = value[k];
    if (p.type === 'object' && p.properties && typeof v === 'object' && v !== null && !Array.isArray(v))
      applyDefaults(v as Json, p);
  }
  return value;
}

/** Every schema node with its path. */
function* nodes(s: JSONSchemaProps, path = ''): Generator<[string, JSONSchemaProps]> {
  yield [path, s];
  for (const [k, p] of Object.entries(s.properties ?? {})) yield* nodes(p, `${path}.${k}`);
  if (s.items) yield* nodes(s.items, `${path}[]`);
  if (s.additionalProperties) yield* nodes(s.additionalProperties, `${path}{}`);
}

describe('api/v1alpha1 CRD', () => {
  it('(a) the committed manifests/crd file is what gen-crd.ts generates (run `npm run crd`)', async () => {
    expect(await readFile(CRD_PATH, 'utf8')).to.equal(renderCrdYaml());
  });

  it('names, short name, scope, status subresource and printer columns', () => {
    const crd = parse(renderCrdYaml()) as ReturnType<typeof buildCrd>;
    expect(crd.metadata.name).to.equal(CRD_NAME).and.equal('machinejoinchecks.joinguard.io');
    expect(crd.spec.names).to.include({
      kind: 'MachineJoinCheck',
      plural: 'machinejoinchecks',
      singular: 'machinejoincheck',
    });
    expect(crd.spec.names.shortNames).to.deep.equal(['mjc']);
    expect(crd.spec.scope).to.equal('Namespaced');
    const v = crd.spec.versions[0]!;
    expect(v).to.include({ name: 'v1alpha1', served: true, storage: true });
    expect(v.subresources).to.deep.equal({ status: {} });
    const cols = Object.fromEntries(
      v.additionalPrinterColumns.filter((c) => !c.priority).map((c) => [c.name, c.jsonPath]),
    );
    expect(cols).to.deep.equal({
      Cluster: '.spec.clusterName',
      Ready: '.status.conditions[?(@.type=="Ready")].status',
      Paused: '.status.conditions[?(@.type=="Paused")].status',
      Expected: '.status.expectedMachines',
      Joined: '.status.joinedMachines',
      Stuck: '.status.stuckMachines',
      Held: '.status.heldMachines',
      'Held By': '.status.heldReason',
      Progressing: '.status.conditions[?(@.type=="Progressing")].reason',
      'Next Deadline': '.status.timedMachines[0].until',
      Age: '.metadata.creationTimestamp',
    });
    const wide = v.additionalPrinterColumns.filter((c) => c.priority).map((c) => c.name);
    expect(wide).to.deep.equal(['Joining', 'Dry Run']);
  });

  it('(c) the schema defaults are the defaults parseSettings applies', () => {
    const minimal = { clusterName: 'c1', selector: { matchLabels: { a: 'b' } } };
    const defaulted = applyDefaults(structuredClone(minimal), specSchema);
    expect(defaulted).to.deep.equal({ ...minimal, ...SPEC_DEFAULTS });
    expect(parseSettings(defaulted)).to.deep.equal(parseSettings(minimal));
    // A default never breaks a rule: a partly written nested object is completed, not refused.
    expect(validateSpec(applyDefaults({ ...minimal, suspicion: { probeInterval: '1h' } }, specSchema))).to.deep.equal(
      [],
    );
  });

  it('is structural: every node typed (or int-or-string), described, and its required fields declared', () => {
    const problems: string[] = [];
    for (const [path, s] of nodes(machineJoinCheckSchema)) {
      if (path === '.metadata') {
        // The apiserver refuses anything but `type: object` on the root metadata.
        if (JSON.stringify(s) !== '{"type":"object"}') problems.push(`${path}: must be exactly {type: object}`);
        continue;
      }
      if (!s.type && !s['x-kubernetes-int-or-string']) problems.push(`${path}: no type`);
      if (s.type && s['x-kubernetes-int-or-string']) problems.push(`${path}: int-or-string nodes carry no type`);
      if (!s.description) problems.push(`${path}: no description (kubectl explain)`);
      for (const r of s.required ?? []) if (!s.properties?.[r]) problems.push(`${path}: requires undeclared ${r}`);
      for (const k of s['x-kubernetes-list-map-keys'] ?? []) {
        if (!s.items?.required?.includes(k)) problems.push(`${path}: list-map key ${k} must be required`);
      }
      if (s.default !== undefined && path.startsWith('.status')) problems.push(`${path}: status has no defaults`);
    }
    expect(problems).to.deep.equal([]);
  });

  it('every defaulted field says its default in its description (kubectl explain), from SPEC_DEFAULTS', () => {
    const said: Record<string, unknown> = {};
    for (const [path, s] of nodes(specSchema)) {
      if (s.default === undefined || typeof s.default === 'object') continue;
      expect(s.description, path).to.match(new RegExp(` Defaults to ${String(s.default)}\\.$`));
      said[path] = s.default;
    }
    // Every leaf of the one defaults table, and nothing else.
    const leaves = (o: object, at = ''): [string, unknown][] =>
      Object.entries(o).flatMap(([k, v]) =>
        typeof v === 'object' && v !== null ? leaves(v, `${at}.${k}`) : [[`${at}.${k}`, v] as [string, unknown]],
      );
    expect(said).to.deep.equal(Object.fromEntries(leaves(SPEC_DEFAULTS)));
  });

  it('every duration field says its bound, and every count its int32 maximum', () => {
    for (const [path, s] of nodes(specSchema)) {
      if (s['x-kubernetes-validations']?.some((r) => r.rule.includes('duration(self)')))
        expect(s.description, path).to.match(/at most 8760h\./);
      if (s.type === 'integer') expect(s.maximum, path).to.equal(2147483647);
    }
  });

  it('says nothing clusterctl would read as a variable (`${X}`, `$X`, `$$`)', () => {
    expect(renderCrdYaml()).not.to.match(/\$[{$A-Za-z_]/);
  });

  // What kube-apiserver's own validation (k8s.io/apiextensions-apiserver v0.36.3: pruning, defaulting,
  // OpenAPI and CEL) said of these specs, run offline; validateSpec must reach the same verdict.
  const sel = { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' } };
  const apiserver: [string, Json, string[]][] = [
    ['minimal', { clusterName: 'c1', selector: sel }, []],
    [
      'partial suspicion',
      { clusterName: 'c1', selector: sel, suspicion: { probeInterval: '1h' }, remediation: { strategy: 'Delete' } },
      [],
    ],
    [
      'probe above the default max',
      { clusterName: 'c1', selector: sel, suspicion: { probeInterval: '10h' } },
      ['spec.suspicion.maxProbeInterval'],
    ],
    [
      'bad durations',
      { clusterName: 'c1', selector: sel, joinTimeout: '20', provisionTimeout: '0s', remediation: { window: '1d' } },
      ['spec.joinTimeout', 'spec.provisionTimeout', 'spec.remediation.window'],
    ],
    [
      'fractions',
      {
        clusterName: 'c1',
        selector: sel,
        joinTimeout: '1.5h',
        provisionTimeout: '500ms',
        remediation: { window: '1h30m' },
      },
      [],
    ],
    ['percent', { clusterName: 'c1', selector: sel, maxInFlight: '25%' }, []],
    ['0%', { clusterName: 'c1', selector: sel, maxInFlight: '0%' }, ['spec.maxInFlight']],
    ['0', { clusterName: 'c1', selector: sel, maxInFlight: 0 }, ['spec.maxInFlight']],
    ['"3"', { clusterName: 'c1', selector: sel, maxInFlight: '3' }, ['spec.maxInFlight']],
    ['empty selector', { clusterName: 'c1', selector: {} }, ['spec.selector']],
    [
      'bad expressions',
      {
        clusterName: 'c1',
        selector: {
          matchExpressions: [
            { key: 'a', operator: 'In' },
            { key: 'b', operator: 'Exists', values: ['x'] },
            { key: 'c', operator: 'Foo' },
          ],
        },
      },
      [
        'spec.selector.matchExpressions[0].values',
        'spec.selector.matchExpressions[1].values',
        'spec.selector.matchExpressions[2].operator',
      ],
    ],
    [
      'enums and minimums',
      {
        clusterName: 'c1',
        selector: sel,
        firstControlPlane: 'Nope',
        remediation: { strategy: 'X', maxPerOwner: 0 },
        neverJoinedLimit: -1,
      },
      ['spec.firstControlPlane', 'spec.neverJoinedLimit', 'spec.remediation.maxPerOwner', 'spec.remediation.strategy'],
    ],
    ['missing', {}, ['spec.clusterName', 'spec.selector']],
  ];
  for (const [name, spec, fields] of apiserver) {
    it(`agrees with the apiserver on ${name}`, () => {
      expect(validateSpec(spec).map((e) => e.field)).to.have.members(fields);
    });
  }
});
