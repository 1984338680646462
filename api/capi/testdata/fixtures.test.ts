// The fixtures are what CAPI v1.14.2's CRDs accept: every field exists in the version's schema, has its
// type and enum, and every required field is there. The CRDs are read from the local Go module cache
// (or $CAPI_SOURCE); without them the check is skipped, and fails in CI (hack/testing/inputs.ts).
import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { goModuleDir, skipOrFail } from '../../../hack/testing/inputs.js';
import { markForRemediation, setJoinGuardCondition, withdrawMark } from '../remediation-writes.js';
import * as f from './fixtures.js';

type Json = Record<string, any>;
const SOURCE = process.env['CAPI_SOURCE'] ?? goModuleDir('sigs.k8s.io/cluster-api', 'v1.14.2');
const CRDS: Record<string, string> = {
  Machine: 'core/config/crd/bases/cluster.x-k8s.io_machines.yaml',
  Cluster: 'core/config/crd/bases/cluster.x-k8s.io_clusters.yaml',
  MachineHealthCheck: 'core/config/crd/bases/cluster.x-k8s.io_machinehealthchecks.yaml',
  KubeadmControlPlane: 'controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml',
  KubeadmConfig: 'bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml',
};

function schemaFor(obj: Json): Json {
  const crd = parse(readFileSync(join(SOURCE, CRDS[obj['kind']]!), 'utf8')) as Json;
  const version = String(obj['apiVersion']).split('/')[1];
  const v = (crd['spec']['versions'] as Json[]).find((x) => x['name'] === version);
  if (!v) throw new Error(`${obj['kind']} ${version} not in the CRD`);
  return v['schema']['openAPIV3Schema'];
}

function check(value: unknown, s: Json, path: string, out: string[]): void {
  if (s['x-kubernetes-preserve-unknown-fields'] || path === '.metadata') return;
  if (s['x-kubernetes-int-or-string']) {
    if (typeof value !== 'string' && !Number.isInteger(value)) out.push(`${path}: int or string expected`);
    return;
  }
  if (s['enum'] && !s['enum'].includes(value)) out.push(`${path}: ${JSON.stringify(value)} not in ${s['enum']}`);
  switch (s['type']) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        return void out.push(`${path}: object expected`);
      for (const r of s['required'] ?? []) if (!(r in value)) out.push(`${path}.${r}: required`);
      for (const [k, v] of Object.entries(value)) {
        const p = s['properties']?.[k] ?? s['additionalProperties'];
        if (!p) out.push(`${path}.${k}: not in the CRD`);
        else check(v, p, `${path}.${k}`, out);
      }
      return;
    }
    case 'array':
      if (!Array.isArray(value)) return void out.push(`${path}: list expected`);
      value.forEach((v, i) => check(v, s['items'], `${path}[${i}]`, out));
      return;
    case 'string':
      if (typeof value !== 'string') out.push(`${path}: string expected`);
      else if (s['minLength'] !== undefined && value.length < s['minLength'])
        out.push(`${path}: shorter than ${s['minLength']}`);
      return;
    case 'integer':
      if (!Number.isInteger(value)) out.push(`${path}: integer expected`);
      return;
    case 'boolean':
      if (typeof value !== 'boolean') out.push(`${path}: boolean expected`);
      return;
  }
}

describe('api/capi fixtures match the CAPI v1.14.2 CRDs', function () {
  before(function () {
    const machine = join(SOURCE, CRDS['Machine']!);
    if (!existsSync(machine)) skipOrFail(this, `no CAPI v1.14.2 CRDs: ${machine} (hack/testenv/capi-sources.sh)`);
  });

  const now = new Date('2026-05-01T11:00:00Z');
  const cases: [string, Json][] = [
    ['Machine v1beta2', f.machineV1beta2()],
    ['Machine v1beta1', f.machineV1beta1()],
    ['control-plane Machine v1beta2', f.cpMachineV1beta2()],
    ['Cluster v1beta2', f.clusterV1beta2()],
    ['Cluster v1beta1', f.clusterV1beta1()],
    ['KubeadmControlPlane v1beta2', f.kcpV1beta2()],
    ['KubeadmControlPlane v1beta1', f.kcpV1beta1()],
    ...(['v1beta2', 'v1beta1'] as const).flatMap((v) =>
      (['init', 'joinControlPlane', 'worker'] as const).map((role): [string, Json] => [
        `KubeadmConfig ${v} ${role}`,
        f.kubeadmConfig(v, role),
      ]),
    ),
    ['MachineHealthCheck v1beta2', f.mhcV1beta2()],
    ['MachineHealthCheck v1beta1', f.mhcV1beta1()],
  ];
  for (const [name, obj] of cases) {
    it(name, () => {
      const out: string[] = [];
      check(obj, schemaFor(obj), '', out);
      expect(out).to.deep.equal([]);
    });
  }

  it('the check notices a misspelt field, a wrong type and a missing required field', () => {
    const m = f.machineV1beta2();
    m['status']['initialisation'] = {};
    m['status']['phase'] = 3;
    delete m['status']['conditions'][0]['reason'];
    const out: string[] = [];
    check(m, schemaFor(m), '', out);
    expect(out).to.have.members([
      '.status.conditions[0].reason: required',
      '.status.phase: 3 not in Pending,Provisioning,Provisioned,Running,Updating,Deleting,Deleted,Failed,Unknown',
      '.status.phase: string expected',
      '.status.initialisation: not in the CRD',
    ]);
  });

  // The writes land in a list the CRD accepts (required fields, no empty v1beta1 reason/message).
  for (const [v, fixture] of [
    ['v1beta2', f.machineV1beta2],
    ['v1beta1', f.machineV1beta1],
  ] as const) {
    it(`the status writes are valid ${v} Machine conditions`, () => {
      for (const write of [
        markForRemediation(fixture(), v, {
          kind: 'JoinTimeout',
          message: 'no Node after 20m',
          now,
          setOwnerRemediated: true,
        }),
        withdrawMark(fixture(), v, now),
        setJoinGuardCondition(fixture(), v, {
          status: 'False',
          reason: 'JoinTimeout',
          message: 'no Node after 20m',
          now,
        }),
      ]) {
        const m = fixture();
        m['status']['conditions'] = write.conditions;
        const out: string[] = [];
        check(m, schemaFor(m), '', out);
        expect(out).to.deep.equal([]);
      }
    });
  }
});
