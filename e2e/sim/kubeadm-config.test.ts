// Table tests of the simulation's kubeadm-config lease (pure, no control plane): who may hold the shared
// ConfigMap, and when it must go.
import { expect } from 'chai';
import type { Json } from '../../hack/testenv/kube-client.js';
import { leaseStep, type LeaseWorld } from './kubeadm-config.js';

const cluster = (ns: string, name: string, initialized: boolean, extra: Json = {}): Json => ({
  metadata: { namespace: ns, name, ...extra },
  spec: {
    controlPlaneRef: { kind: 'KubeadmControlPlane', name: `${name}-cp` },
    controlPlaneEndpoint: { host: '127.0.0.1', port: 6443 },
  },
  status: { initialized },
});
const kcp = (ns: string, name: string, version: string): Json => ({
  metadata: { namespace: ns, name },
  spec: { version },
});
const machine = (ns: string, kcpName: string, version: string, conditions: Json[] = []): Json => ({
  metadata: {
    namespace: ns,
    name: `${kcpName}-${version}`,
    ownerReferences: [{ kind: 'KubeadmControlPlane', name: kcpName, controller: true }],
  },
  spec: { version },
  status: { conditions },
});
const world = (clusters: Json[], kcps: Json[], machines: Json[]): LeaseWorld => ({
  clusters,
  kcps,
  machines,
  controlPlaneInitialized: (c) => c.status.initialized === true,
  conditions: (o) => o.status?.conditions ?? [],
});

describe('sim: the kubeadm-config lease (leaseStep)', () => {
  const rolling = world(
    [cluster('a', 'c', true)],
    [kcp('a', 'c-cp', 'v2')],
    [machine('a', 'c-cp', 'v1'), machine('a', 'c-cp', 'v2')],
  );

  it('creates it for an initialized cluster whose KCP rolls out, at the oldest Machine version', () => {
    expect(leaseStep(rolling, undefined)).to.deep.equal({
      acquire: { namespace: 'a', cluster: 'c' },
      version: 'v1',
      endpoint: '127.0.0.1:6443',
    });
  });

  it('a Machine with UpToDate=False is a rollout too; a settled KCP needs nothing', () => {
    const upToDateFalse = world(
      [cluster('a', 'c', true)],
      [kcp('a', 'c-cp', 'v1')],
      [machine('a', 'c-cp', 'v1', [{ type: 'UpToDate', status: 'False' }])],
    );
    expect(leaseStep(upToDateFalse, undefined)).to.have.property('acquire');
    const settled = world(
      [cluster('a', 'c', true)],
      [kcp('a', 'c-cp', 'v1')],
      [machine('a', 'c-cp', 'v1', [{ type: 'UpToDate', status: 'True' }])],
    );
    expect(leaseStep(settled, undefined)).to.equal(undefined);
  });

  it('never creates it while any cluster initializes (its KCP would take it for its own kubeadm init)', () => {
    const w = { ...rolling, clusters: [...rolling.clusters, cluster('b', 'd', false)] };
    expect(leaseStep(w, undefined)).to.equal(undefined);
    expect(leaseStep(w, { holder: { namespace: 'a', cluster: 'c' }, kind: 'rollout' })).to.deep.equal({
      release: 'Cluster b/d is initializing',
    });
  });

  it('releases a rollout lease once the rollout is over, and any lease whose Cluster is gone or deleting', () => {
    const done = world([cluster('a', 'c', true)], [kcp('a', 'c-cp', 'v2')], [machine('a', 'c-cp', 'v2')]);
    expect(leaseStep(done, { holder: { namespace: 'a', cluster: 'c' }, kind: 'rollout' })).to.deep.equal({
      release: 'its KubeadmControlPlane rolled out',
    });
    const deleting = world([cluster('a', 'c', true, { deletionTimestamp: 'now' })], [], []);
    expect(leaseStep(deleting, { holder: { namespace: 'a', cluster: 'c' }, kind: 'rollout' })).to.deep.equal({
      release: 'its Cluster is gone',
    });
  });

  it('keeps an init lease until its Cluster says initialized', () => {
    const init = world([cluster('a', 'c', false)], [kcp('a', 'c-cp', 'v1')], []);
    expect(leaseStep(init, { holder: { namespace: 'a', cluster: 'c' }, kind: 'init' })).to.equal(undefined);
    const inited = world([cluster('a', 'c', true)], [kcp('a', 'c-cp', 'v1')], []);
    expect(leaseStep(inited, { holder: { namespace: 'a', cluster: 'c' }, kind: 'init' })).to.deep.equal({
      release: 'its Cluster reports ControlPlaneInitialized',
    });
  });
});
