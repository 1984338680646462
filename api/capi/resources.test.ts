import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { goModuleDir, skipOrFail } from '../../hack/testing/inputs.js';
import { CAPI_KINDS, CAPI_RESOURCES, capiResource, groupOf } from './resources.js';

const SOURCE = process.env['CAPI_SOURCE'] ?? goModuleDir('sigs.k8s.io/cluster-api', 'v1.14.2');
const DIRS = ['core', 'bootstrap/kubeadm', 'controlplane/kubeadm'].map((d) => join(SOURCE, d, 'config/crd/bases'));

describe('api/capi resources', () => {
  it('builds group, version, apiVersion and plural per kind and version', () => {
    expect(capiResource('KubeadmControlPlane', 'v1beta1')).to.deep.equal({
      group: 'controlplane.cluster.x-k8s.io',
      version: 'v1beta1',
      apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
      plural: 'kubeadmcontrolplanes',
      kind: 'KubeadmControlPlane',
    });
    expect(CAPI_RESOURCES.v1beta2.Machine.apiVersion).to.equal('cluster.x-k8s.io/v1beta2');
    expect(groupOf('v1')).to.equal('');
  });

  it("matches CAPI v1.14.2's CRDs: names, kinds, and both versions served", function () {
    if (!existsSync(DIRS[0]!)) skipOrFail(this, `no CAPI v1.14.2 CRDs at ${DIRS[0]} (hack/testenv/capi-sources.sh)`);
    for (const kind of CAPI_KINDS) {
      const r = capiResource(kind, 'v1beta2');
      const file = DIRS.map((d) => join(d, `${r.group}_${r.plural}.yaml`)).find(existsSync);
      expect(file, `${r.group}_${r.plural}.yaml`).to.be.a('string');
      const crd = parse(readFileSync(file!, 'utf8'));
      expect(crd.spec.names.kind).to.equal(kind);
      const served = crd.spec.versions.filter((v: any) => v.served).map((v: any) => v.name);
      expect(served).to.include.members(['v1beta1', 'v1beta2']);
    }
  });
});
