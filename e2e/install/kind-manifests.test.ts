// The manifests of the kind flow (e2e/kind, which needs Docker and cannot run here), checked as far as the
// local control plane can: substituted with clusterctl's rules, every CAPI object and the MachineJoinCheck
// created with dryRun=All against CAPI v1.14.2's CRDs and webhooks and JoinGuard's CRD. CAPD's own kinds
// (DevCluster, DevMachineTemplate) are not installed here: their module does not resolve on this Go proxy.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { parseAllDocuments } from 'yaml';
import { substitute } from '../../manifests/substitute.js';
import type { Json, KubeClient } from '../../hack/testenv/kube-client.js';
import { installJoinGuardCrd } from '../support/joinguard.js';
import { getTestEnv, type TestEnv } from '../support/testenv.js';

const kindDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../kind');
const CAPD_KINDS = new Set(['DevCluster', 'DevMachineTemplate']);

function objects(file: string, vars: Record<string, string>): Json[] {
  const text = substitute(fs.readFileSync(path.join(kindDir, file), 'utf8'), vars);
  return parseAllDocuments(text)
    .map((d) => d.toJS() as Json)
    .filter((o) => o?.kind);
}

function collection(o: Json): string {
  const [group, version] = String(o.apiVersion).split('/') as [string, string];
  return `/apis/${group}/${version}/namespaces/${o.metadata.namespace}/${String(o.kind).toLowerCase()}s`;
}

describe('e2e/kind manifests against CAPI v1.14 and JoinGuard (dry run)', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let kube: KubeClient;
  const namespace = `kind-manifests-${process.pid}`;
  const vars = { CLUSTER_NAME: 'jg-e2e', NAMESPACE: namespace, KUBERNETES_VERSION: 'v1.34.0' };

  before(async function () {
    env = await getTestEnv();
    if (env.capiRelease !== 'v1.14') this.skip(); // the kind flow pins CAPI v1.14.2
    kube = env.kube();
    await installJoinGuardCrd(kube);
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  });

  after(() => kube?.close());

  it('workload-cluster.yaml: CAPD v1beta2 Dev* kinds, and every CAPI object is admitted by v1.14.2', async () => {
    const all = objects('workload-cluster.yaml', vars);
    expect(all.filter((o) => CAPD_KINDS.has(o.kind)).map((o) => `${o.apiVersion} ${o.kind}`)).to.deep.equal(
      Array(3)
        .fill(0)
        .map((_, i) => `infrastructure.cluster.x-k8s.io/v1beta2 ${i === 0 ? 'DevCluster' : 'DevMachineTemplate'}`),
    );
    const capi = all.filter((o) => !CAPD_KINDS.has(o.kind));
    expect(capi.map((o) => o.kind)).to.have.members([
      'Cluster',
      'KubeadmControlPlane',
      'KubeadmConfigTemplate',
      'MachineDeployment',
    ]);
    for (const o of capi) {
      const res = await kube.send('POST', `${collection(o)}?dryRun=All`, o);
      expect(res.status, `${o.kind}: ${res.body.slice(0, 600)}`).to.equal(201);
    }
  });

  it('machinejoincheck.yaml: admitted, joinTimeout below provisionTimeout (CAPD v1.14 provisions before bootstrap)', async () => {
    const [check] = objects('machinejoincheck.yaml', vars);
    expect(check?.spec?.joinTimeout).to.equal('6m');
    expect(check?.spec?.provisionTimeout).to.equal('20m');
    const res = await kube.send('POST', `${collection(check!)}?dryRun=All`, check);
    expect(res.status, res.body.slice(0, 600)).to.equal(201);
  });
});
