// The table of fields per CAPI API version (fields.ts), proven two ways. Against the releases themselves:
// every path is in that version's CRD schema with the right type (v1beta2 from CAPI v1.14.2, v1beta1 from
// v1.10.10, the last release JoinGuard reads through v1beta1), every condition list is the kind of list the
// table says (CAPI's v1beta1 Condition has `severity`, metav1.Condition does not), and every condition type and
// reason is a constant of that release's API. And against the readers: an object carrying only what the
// table names reads as the facts it should. The CRDs and API sources come from the Go module cache (or
// $CAPI_SOURCE / $CAPI_V1BETA1_SOURCE); without them the release half is skipped, and fails in CI
// (hack/testing/inputs.ts).
import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { goModuleDir, skipOrFail } from '../../hack/testing/inputs.js';
import { CAPI_FIELDS, type CondAt, type Period, type RefGroup } from './fields.js';
import type { CapiApiVersion } from './model.js';
import { readCluster, readKubeadmControlPlane, readMachine, readMachineHealthCheck } from './readers.js';

type Json = Record<string, any>;

/** The release each API version is checked against, and where its CRDs and API types are. */
const RELEASES: Record<
  CapiApiVersion,
  { name: string; root: string; crds: { core: string; kcp: string }; api: string[] }
> = {
  v1beta2: {
    name: 'CAPI v1.14.2',
    root: process.env['CAPI_SOURCE'] ?? goModuleDir('sigs.k8s.io/cluster-api', 'v1.14.2'),
    crds: { core: 'core/config/crd/bases', kcp: 'controlplane/kubeadm/config/crd/bases' },
    api: [join(goModuleDir('sigs.k8s.io/cluster-api/api', 'v1.14.2'), 'core/v1beta2')],
  },
  v1beta1: {
    name: 'CAPI v1.10.10',
    root: process.env['CAPI_V1BETA1_SOURCE'] ?? goModuleDir('sigs.k8s.io/cluster-api', 'v1.10.10'),
    crds: { core: 'config/crd/bases', kcp: 'controlplane/kubeadm/config/crd/bases' },
    api: ['api/v1beta1'],
  },
};

function crdSchema(
  v: CapiApiVersion,
  kind: 'machines' | 'clusters' | 'machinehealthchecks' | 'kubeadmcontrolplanes',
): Json {
  const rel = RELEASES[v];
  const file =
    kind === 'kubeadmcontrolplanes'
      ? join(rel.root, rel.crds.kcp, `controlplane.cluster.x-k8s.io_${kind}.yaml`)
      : join(rel.root, rel.crds.core, `cluster.x-k8s.io_${kind}.yaml`);
  const crd = parse(readFileSync(file, 'utf8')) as Json;
  return (crd['spec']['versions'] as Json[]).find((x) => x['name'] === v)!['schema']['openAPIV3Schema'];
}

function at(schema: Json, path: string): Json | undefined {
  let cur: Json | undefined = schema;
  for (const p of path.split('.')) cur = cur?.['properties']?.[p];
  return cur;
}

/** Every Go source of the release's API, concatenated (for its constants). */
function apiSource(v: CapiApiVersion): string {
  const rel = RELEASES[v];
  return rel.api
    .map((d) => (d.startsWith('/') ? d : join(rel.root, d)))
    .flatMap((d) =>
      readdirSync(d)
        .filter((f) => f.endsWith('.go') && !f.endsWith('_test.go'))
        .map((f) => readFileSync(join(d, f), 'utf8')),
    )
    .join('\n');
}

const VERSIONS = Object.keys(CAPI_FIELDS) as CapiApiVersion[];

describe('api/capi fields per API version', () => {
  for (const v of VERSIONS) {
    describe(`${v}, against ${RELEASES[v].name}`, function () {
      before(function () {
        const crds = join(RELEASES[v].root, RELEASES[v].crds.core);
        if (!existsSync(crds))
          skipOrFail(this, `no ${RELEASES[v].name} CRDs at ${crds} (hack/testenv/capi-sources.sh)`);
      });
      const f = CAPI_FIELDS[v];
      const expectType = (schema: Json, path: string, type: string) =>
        expect(at(schema, path)?.['type'], `${path} in ${RELEASES[v].name}`).to.equal(type);
      const expectList = (schema: Json, c: CondAt, v1beta1Conditions: boolean) => {
        const list = at(schema, c.list);
        expect(list?.['type'], `${c.list} in ${RELEASES[v].name}`).to.equal('array');
        const item = list!['items']['properties'];
        expect(item, c.list).to.include.keys('type', 'status', 'lastTransitionTime', 'reason', 'message');
        // CAPI's v1beta1 Condition carries severity; metav1.Condition does not.
        expect(
          'severity' in item,
          `${c.list}: ${v1beta1Conditions ? "CAPI's v1beta1 Condition" : 'metav1.Condition'}`,
        ).to.equal(v1beta1Conditions);
      };
      const expectRef = (schema: Json, g: RefGroup) =>
        expectType(schema, 'apiGroup' in g ? g.apiGroup : g.apiVersion, 'string');
      const expectPeriod = (schema: Json, p: Period) =>
        'seconds' in p ? expectType(schema, p.seconds, 'integer') : expectType(schema, p.duration, 'string');
      const ownerListIsV1beta1 = v === 'v1beta1';

      it("Machine: flags, condition lists (the owners' and the connection's), the config ref group", () => {
        const s = crdSchema(v, 'machines');
        expectType(s, f.machine.infrastructureReady.flag, 'boolean');
        expectType(s, f.machine.bootstrapReady.flag, 'boolean');
        expectList(s, { list: f.machine.ownerConditions, type: 'HealthCheckSucceeded' }, ownerListIsV1beta1);
        expectList(s, { list: f.machine.connectionConditions, type: 'NodeReady' }, false);
        for (const c of [...f.machine.infrastructureReady.conditions, ...f.machine.bootstrapReady.conditions]) {
          expectList(s, c, c.list === f.machine.ownerConditions && ownerListIsV1beta1);
        }
        expectRef(s, f.machine.configRefGroup);
      });

      it('Cluster: flags, conditions, the probe, the control-plane ref group', () => {
        const s = crdSchema(v, 'clusters');
        expectType(s, f.cluster.controlPlaneInitialized.flag, 'boolean');
        expectType(s, f.cluster.infrastructureReady.flag, 'boolean');
        expectList(s, f.cluster.remoteConnectionProbe, false);
        expectRef(s, f.cluster.controlPlaneRefGroup);
      });

      it('KubeadmControlPlane: initialized, maxRetry and the two periods', () => {
        const s = crdSchema(v, 'kubeadmcontrolplanes');
        expectType(s, f.kubeadmControlPlane.initialized, 'boolean');
        expectType(s, f.kubeadmControlPlane.maxRetry, 'integer');
        expectPeriod(s, f.kubeadmControlPlane.retryPeriod);
        expectPeriod(s, f.kubeadmControlPlane.minHealthyPeriod);
      });

      it('MachineHealthCheck: node startup timeout; unhealthyMachineConditions only from v1.12', () => {
        const s = crdSchema(v, 'machinehealthchecks');
        expectPeriod(s, f.machineHealthCheck.nodeStartupTimeout);
        // v1.10 has no unhealthyMachineConditions: read as none, so the MachineCondition strategy has no MHC there.
        if (v === 'v1beta1') expect(at(s, f.machineHealthCheck.unhealthyMachineConditions)).to.equal(undefined);
        else expectType(s, f.machineHealthCheck.unhealthyMachineConditions, 'array');
      });

      it("every condition type and reason the table names is a constant of the release's API", () => {
        const src = apiSource(v);
        const types = [
          ...f.machine.infrastructureReady.conditions,
          ...f.machine.bootstrapReady.conditions,
          ...f.cluster.controlPlaneInitialized.conditions,
          ...f.cluster.infrastructureReady.conditions,
          f.cluster.remoteConnectionProbe,
        ].map((c) => c.type);
        if (f.machine.nodeInspectionFailed)
          types.push(f.machine.nodeInspectionFailed.type, f.machine.nodeInspectionFailed.reason);
        for (const t of [
          ...types,
          'HealthCheckSucceeded',
          'OwnerRemediated',
          'NodeReady',
          'NodeHealthy',
          'ConnectionDown',
        ]) {
          expect(src, `"${t}" in ${RELEASES[v].name}`).to.include(`"${t}"`);
        }
      });
    });
  }

  // The readers read exactly where the table says: an object built from the table's paths alone.
  const T1 = '2026-05-01T10:01:00Z';
  const T1ms = Date.parse(T1);
  const meta = (name: string) => ({
    name,
    namespace: 'ns',
    uid: `uid-${name}`,
    resourceVersion: '1',
    creationTimestamp: '2026-05-01T10:00:00Z',
  });
  const setAt = (o: Json, path: string, value: unknown) => {
    const parts = path.split('.');
    let cur = o;
    for (const p of parts.slice(0, -1)) cur = cur[p] ??= {};
    cur[parts.at(-1)!] = value;
  };
  const addCond = (o: Json, c: CondAt, extra: Json = {}) => {
    const parts = c.list.split('.');
    let cur = o;
    for (const p of parts.slice(0, -1)) cur = cur[p] ??= {};
    (cur[parts.at(-1)!] ??= []).push({
      type: c.type,
      status: 'True',
      reason: 'X',
      message: '',
      lastTransitionTime: T1,
      ...extra,
    });
  };

  for (const v of VERSIONS) {
    describe(`${v}: the readers take each fact from the table's path`, () => {
      const f = CAPI_FIELDS[v];

      it("Machine: each timed fact from its flag and its first condition, the owners' conditions, the connection", () => {
        for (const fact of ['infrastructureReady', 'bootstrapReady'] as const) {
          for (const c of f.machine[fact].conditions) {
            const o: Json = { metadata: meta('m'), spec: { clusterName: 'c1' } };
            setAt(o, f.machine[fact].flag, true);
            addCond(o, c);
            expect(readMachine(o, v)[fact], `${fact} from ${c.list} ${c.type}`).to.deep.equal({
              value: true,
              since: T1ms,
            });
          }
        }
        const o: Json = { metadata: meta('m'), spec: { clusterName: 'c1' } };
        addCond(
          o,
          { list: f.machine.ownerConditions, type: 'HealthCheckSucceeded' },
          { status: 'False', reason: 'JoinTimeout' },
        );
        addCond(
          o,
          { list: f.machine.connectionConditions, type: 'NodeReady' },
          { status: 'Unknown', reason: 'ConnectionDown' },
        );
        const m = readMachine(o, v);
        expect(m.healthCheckSucceeded).to.deep.equal({ status: 'False', reason: 'JoinTimeout', since: T1ms });
        expect(m.nodeConnectionDown).to.equal(true);
        const ref = f.machine.configRefGroup;
        const withRef: Json = {
          metadata: meta('m'),
          spec: { clusterName: 'c1', bootstrap: { configRef: { kind: 'Other', name: 'x' } } },
        };
        setAt(
          withRef,
          'apiGroup' in ref ? ref.apiGroup : ref.apiVersion,
          'apiGroup' in ref ? 'example.com' : 'example.com/v1',
        );
        expect(readMachine(withRef, v).bootstrapConfigRef).to.deep.equal({
          apiGroup: 'example.com',
          kind: 'Other',
          name: 'x',
        });
      });

      it('Cluster: initialized from the flag or a condition, the probe, the ref group', () => {
        const flag: Json = { metadata: meta('c') };
        setAt(flag, f.cluster.controlPlaneInitialized.flag, true);
        expect(readCluster(flag, v).controlPlaneInitialized.value).to.equal(true);
        for (const c of f.cluster.controlPlaneInitialized.conditions) {
          const o: Json = { metadata: meta('c') };
          addCond(o, c);
          expect(readCluster(o, v).controlPlaneInitialized, `${c.list} ${c.type}`).to.deep.equal({
            value: true,
            since: T1ms,
          });
        }
        const o: Json = { metadata: meta('c'), spec: { controlPlaneRef: { kind: 'KubeadmControlPlane', name: 'cp' } } };
        addCond(o, f.cluster.remoteConnectionProbe, { status: 'False' });
        const ref = f.cluster.controlPlaneRefGroup;
        setAt(
          o,
          'apiGroup' in ref ? ref.apiGroup : ref.apiVersion,
          'apiGroup' in ref ? 'controlplane.cluster.x-k8s.io' : 'controlplane.cluster.x-k8s.io/v1beta1',
        );
        const c = readCluster(o, v);
        expect(c.remoteConnection).to.deep.equal({ value: false });
        expect(c.controlPlaneRef).to.deep.equal({
          apiGroup: 'controlplane.cluster.x-k8s.io',
          kind: 'KubeadmControlPlane',
          name: 'cp',
        });
      });

      it('KubeadmControlPlane and MachineHealthCheck: periods in seconds, whatever their form', () => {
        const period = (o: Json, p: Period, seconds: number) =>
          setAt(o, 'seconds' in p ? p.seconds : p.duration, 'seconds' in p ? seconds : `${seconds / 60}m0s`);
        const k: Json = { metadata: meta('k') };
        setAt(k, f.kubeadmControlPlane.initialized, true);
        setAt(k, f.kubeadmControlPlane.maxRetry, 2);
        period(k, f.kubeadmControlPlane.retryPeriod, 300);
        period(k, f.kubeadmControlPlane.minHealthyPeriod, 3600);
        expect(readKubeadmControlPlane(k, v)).to.deep.include({
          initialized: true,
          remediation: { maxRetry: 2, retryPeriodSeconds: 300, minHealthyPeriodSeconds: 3600 },
        });
        const h: Json = { metadata: meta('h'), spec: { clusterName: 'c1', selector: {} } };
        period(h, f.machineHealthCheck.nodeStartupTimeout, 600);
        setAt(h, f.machineHealthCheck.unhealthyMachineConditions, [{ type: 'JoinGuardJoined', status: 'False' }]);
        expect(readMachineHealthCheck(h, v)).to.deep.include({
          nodeStartupTimeoutSeconds: 600,
          watchesJoinGuardCondition: true,
        });
      });
    });
  }
});
