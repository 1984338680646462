// The add-on's RBAC, exercised under its own ServiceAccount (a TokenRequest token, as the pod would hold):
// the controller's reads and writes succeed, everything else is refused, Secrets are readable only when the
// manifests are substituted with JOINGUARD_WORKLOAD_NODE_CHECK=true, and Machines deletable only with
// JOINGUARD_ALLOW_MACHINE_DELETE=true.
import { expect } from 'chai';
import { AuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { getTestEnv, type TestEnv } from '../support/testenv.js';
import { apply, install, raw, substitutedComponents, type Installed } from './install-env.js';
import { CERT_MANAGER_START_TIMEOUT_MS } from '../support/cert-manager.js';
import { CONTROLLER_NEEDS } from '../../manifests/rbac-needs.js';

type Json = Record<string, any>;
const CN = 'cluster.x-k8s.io/cluster-name';

interface Access {
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
}

async function allowed(sa: KubeConfig, a: Access): Promise<boolean> {
  const review = await sa.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: {
      spec: {
        resourceAttributes: {
          verb: a.verb,
          group: a.group,
          resource: a.resource,
          subresource: a.subresource,
          namespace: a.namespace,
        },
      },
    },
  });
  return review.status?.allowed === true;
}

const show = (a: Access) =>
  `${a.verb} ${a.group || 'core'}/${a.resource}${a.subresource ? `/${a.subresource}` : ''}${a.namespace ? ` in ${a.namespace}` : ''}`;

describe('install: RBAC under the add-on ServiceAccount', function () {
  this.timeout(120_000);
  let env: TestEnv;
  let installed: Installed;
  const ns = `jg-rbac-${process.pid}`;
  const workload = `jg-rbac-workload-${process.pid}`;

  before(async function () {
    this.timeout(CERT_MANAGER_START_TIMEOUT_MS);
    env = await getTestEnv();
    installed = await install(env, ns);
    const admin = env.kubeConfig();
    expect((await raw(admin, 'POST', '/api/v1/namespaces', { metadata: { name: workload } })).status).to.be.oneOf([
      201, 409,
    ]);
  });
  after(async () => {
    await installed?.uninstall();
  });

  // Every grant of rbac-needs.ts, cluster-wide (a ClusterRole) or in the provider's Namespace (the Lease Role).
  const GRANTED: Access[] = CONTROLLER_NEEDS.filter((g) => !g.workloadNodeCheck && !g.machineDelete).flatMap((g) =>
    g.verbs.map((verb) => {
      const [resource, subresource] = g.resource.split('/') as [string, string | undefined];
      return {
        verb,
        group: g.group,
        resource,
        ...(subresource ? { subresource } : {}),
        ...(g.namespaced ? { namespace: ns } : {}),
      };
    }),
  );
  const REFUSED: Access[] = [
    { verb: 'get', group: '', resource: 'secrets', namespace: workload },
    { verb: 'list', group: '', resource: 'secrets' },
    // Only with the Delete strategy allowed (JOINGUARD_ALLOW_MACHINE_DELETE=true).
    { verb: 'delete', group: 'cluster.x-k8s.io', resource: 'machines', namespace: workload },
    { verb: 'get', group: 'clusterctl.cluster.x-k8s.io', resource: 'providers', namespace: workload },
    // What an earlier draft granted and the controller does not use.
    { verb: 'update', group: 'cluster.x-k8s.io', resource: 'machines', namespace: workload },
    { verb: 'update', group: 'cluster.x-k8s.io', resource: 'machines', subresource: 'status', namespace: workload },
    { verb: 'update', group: 'joinguard.io', resource: 'machinejoinchecks', namespace: workload },
    { verb: 'patch', group: 'joinguard.io', resource: 'machinejoinchecks', subresource: 'status', namespace: workload },
    { verb: 'get', group: 'cluster.x-k8s.io', resource: 'machinesets', namespace: workload },
    { verb: 'list', group: 'cluster.x-k8s.io', resource: 'machinedeployments' },
    { verb: 'patch', group: '', resource: 'events', namespace: workload },
    { verb: 'create', group: 'events.k8s.io', resource: 'events', namespace: workload },
    { verb: 'patch', group: 'coordination.k8s.io', resource: 'leases', namespace: ns },
    { verb: 'create', group: 'joinguard.io', resource: 'machinejoinchecks', namespace: workload },
    { verb: 'delete', group: 'joinguard.io', resource: 'machinejoinchecks', namespace: workload },
    { verb: 'create', group: 'cluster.x-k8s.io', resource: 'machines', namespace: workload },
    { verb: 'delete', group: 'cluster.x-k8s.io', resource: 'clusters', namespace: workload },
    { verb: 'patch', group: 'cluster.x-k8s.io', resource: 'machinesets', namespace: workload },
    { verb: 'patch', group: 'cluster.x-k8s.io', resource: 'clusters', subresource: 'status', namespace: workload },
    { verb: 'patch', group: 'controlplane.cluster.x-k8s.io', resource: 'kubeadmcontrolplanes', namespace: workload },
    { verb: 'create', group: 'coordination.k8s.io', resource: 'leases', namespace: workload },
    { verb: 'delete', group: 'coordination.k8s.io', resource: 'leases', namespace: ns },
    { verb: 'list', group: '', resource: 'pods' },
    { verb: 'get', group: '', resource: 'nodes' },
    { verb: 'create', group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings' },
  ];

  it('may do what the controller does (SubjectAccessReview of every grant)', async () => {
    const missing: string[] = [];
    expect(GRANTED.length).to.be.greaterThan(15);
    for (const a of GRANTED) if (!(await allowed(installed.sa, a))) missing.push(show(a));
    expect(missing).to.deep.equal([]);
  });

  it('may do nothing else', async () => {
    const granted: string[] = [];
    for (const a of REFUSED) if (await allowed(installed.sa, a)) granted.push(show(a));
    expect(granted).to.deep.equal([]);
  });

  it('really reads and writes: list Machines, mark one, patch a check, record an event, hold a Lease', async () => {
    const admin = env.kubeConfig();
    const sa = installed.sa;
    const m = await raw(admin, 'POST', `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: { name: 'rbac-m1', labels: { [CN]: 'c1' } },
      spec: {
        clusterName: 'c1',
        bootstrap: { dataSecretName: 'x' },
        infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'FakeMachine', name: 'x' },
      },
    });
    expect(m.status, m.body).to.equal(201);
    const list = await raw(
      sa,
      'GET',
      `/apis/cluster.x-k8s.io/v1beta2/machines?labelSelector=${encodeURIComponent(`${CN}=c1`)}`,
    );
    expect(list.status, list.body).to.equal(200);
    expect((JSON.parse(list.body) as Json).items.map((i: Json) => i.metadata.name)).to.include('rbac-m1');

    const mark = await raw(
      sa,
      'PATCH',
      `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines/rbac-m1`,
      JSON.stringify({ metadata: { annotations: { 'cluster.x-k8s.io/remediate-machine': '' } } }),
      'application/merge-patch+json',
    );
    expect(mark.status, mark.body).to.equal(200);
    const status = await raw(
      sa,
      'PATCH',
      `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines/rbac-m1/status?fieldManager=joinguard`,
      JSON.stringify({
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Machine',
        metadata: { name: 'rbac-m1' },
        status: {
          conditions: [
            {
              type: 'JoinGuardJoined',
              status: 'False',
              reason: 'JoinTimeout',
              message: 'rbac test',
              lastTransitionTime: new Date().toISOString(),
            },
          ],
        },
      }),
      'application/apply-patch+yaml',
    );
    // Apply on /status with fieldManager, as a controller owning only its own condition would.
    expect([200, 201], status.body).to.include(status.status);

    const check = await raw(admin, 'POST', `/apis/joinguard.io/v1alpha1/namespaces/${workload}/machinejoinchecks`, {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: { name: 'rbac' },
      spec: { clusterName: 'c1', selector: { matchLabels: { pool: 'rbac' } } },
    });
    expect(check.status, check.body).to.equal(201);
    // Status is written whole with the read resourceVersion, as the executor does.
    const read = JSON.parse(
      (
        await raw(
          sa,
          'GET',
          `/apis/joinguard.io/v1alpha1/namespaces/${workload}/machinejoinchecks?fieldSelector=metadata.name%3Drbac`,
        )
      ).body,
    ) as Json;
    const st = await raw(
      sa,
      'PUT',
      `/apis/joinguard.io/v1alpha1/namespaces/${workload}/machinejoinchecks/rbac/status`,
      {
        ...read.items[0],
        apiVersion: 'joinguard.io/v1alpha1',
        kind: 'MachineJoinCheck',
        status: { observedGeneration: 1 },
      },
    );
    expect(st.status, st.body).to.equal(200);

    const ev = await raw(sa, 'POST', `/api/v1/namespaces/${workload}/events`, {
      metadata: { generateName: 'rbac-' },
      involvedObject: { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Machine', name: 'rbac-m1', namespace: workload },
      reason: 'JoinTimedOut',
      message: 'rbac test',
      type: 'Warning',
      source: { component: 'joinguard' },
    });
    expect(ev.status, ev.body).to.equal(201);

    const lease = await raw(sa, 'POST', `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, {
      metadata: { name: 'joinguard-rbac-test' },
      spec: { holderIdentity: 'test', leaseDurationSeconds: 15 },
    });
    expect(lease.status, lease.body).to.equal(201);

    const del = await raw(sa, 'DELETE', `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines/rbac-m1`);
    expect(del.status, del.body).to.equal(403);
    expect(JSON.parse(del.body).message).to.match(/cannot delete resource "machines"/);
    // clusterctl's inventory, which discovery reads at every start: allowed (a 404 here: no clusterctl CRD in the env).
    const inventory = await raw(sa, 'GET', '/apis/clusterctl.cluster.x-k8s.io/v1alpha3/providers');
    expect(inventory.status, inventory.body).to.be.oneOf([200, 404]);
  });

  it('is refused Machine delete (403) by default, granted it with JOINGUARD_ALLOW_MACHINE_DELETE=true', async () => {
    const admin = env.kubeConfig();
    const m = await raw(admin, 'POST', `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: { name: 'rbac-del', labels: { [CN]: 'c1' } },
      spec: {
        clusterName: 'c1',
        bootstrap: { dataSecretName: 'x' },
        infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'FakeMachine', name: 'x' },
      },
    });
    expect(m.status, m.body).to.equal(201);
    const del = () =>
      raw(installed.sa, 'DELETE', `/apis/cluster.x-k8s.io/v1beta2/namespaces/${workload}/machines/rbac-del`);
    expect((await del()).status).to.equal(403);
    const on = await substitutedComponents({ JOINGUARD_NAMESPACE: ns, JOINGUARD_ALLOW_MACHINE_DELETE: 'true' });
    const binding = on.objects.find(
      (o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'joinguard-machine-delete',
    )!;
    expect((binding as Json).roleRef.name).to.equal('joinguard-machine-delete-true');
    const deployment = on.objects.find((o) => o.kind === 'Deployment')! as Json;
    expect(deployment.spec.template.spec.containers[0].args).to.include('--allow-machine-delete=true');
    const bindingPath = '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/joinguard-machine-delete';
    try {
      expect((await raw(admin, 'DELETE', bindingPath)).status).to.equal(200);
      await apply(admin, binding);
      let res = await del();
      for (let i = 0; i < 50 && res.status === 403; i++) {
        await new Promise((r) => setTimeout(r, 100)); // the authorizer's cache
        res = await del();
      }
      expect(res.status, res.body).to.equal(200);
    } finally {
      const offBinding = installed.components.objects.find(
        (o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'joinguard-machine-delete',
      )!;
      await raw(admin, 'DELETE', bindingPath);
      await apply(admin, offBinding);
    }
  });

  it('is refused Secrets (403) while the workload-node check is off, granted them once it is on', async () => {
    const admin = env.kubeConfig();
    expect(
      (
        await raw(admin, 'POST', `/api/v1/namespaces/${workload}/secrets`, {
          metadata: { name: 'c1-kubeconfig' },
          stringData: { value: 'x' },
        })
      ).status,
    ).to.equal(201);
    const read = () => raw(installed.sa, 'GET', `/api/v1/namespaces/${workload}/secrets/c1-kubeconfig`);
    const off = await read();
    expect(off.status, off.body).to.equal(403);
    expect(JSON.parse(off.body).message).to.match(/cannot get resource "secrets"/);

    // Switch on: the binding's roleRef follows the variable; roleRef is immutable, so re-create it.
    const on = await substitutedComponents({ JOINGUARD_NAMESPACE: ns, JOINGUARD_WORKLOAD_NODE_CHECK: 'true' });
    const binding = on.objects.find(
      (o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'joinguard-workload-secrets',
    )!;
    expect((binding as Json).roleRef.name).to.equal('joinguard-workload-secrets-true');
    const bindingPath = '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/joinguard-workload-secrets';
    try {
      expect((await raw(admin, 'DELETE', bindingPath)).status).to.equal(200);
      await apply(admin, binding);
      let res = await read();
      for (let i = 0; i < 50 && res.status === 403; i++) {
        await new Promise((r) => setTimeout(r, 100)); // the authorizer's cache
        res = await read();
      }
      expect(res.status, res.body).to.equal(200);
    } finally {
      const offBinding = installed.components.objects.find(
        (o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'joinguard-workload-secrets',
      )!;
      await raw(admin, 'DELETE', bindingPath);
      await apply(admin, offBinding);
    }
  });
});
