import { expect } from 'chai';
import { readMachine } from './machine.js';
import {
  markedMessage,
  markerIn,
  markForRemediation,
  setJoinGuardCondition,
  withdrawMark,
} from './remediation-writes.js';
import { MalformedObjectError, type CapiApiVersion } from './model.js';
import { cpMachineV1beta2, machineV1beta1, machineV1beta2, ms, T0, T1, T2 } from './testdata/fixtures.js';

type Json = Record<string, any>;
const fixtures: Record<CapiApiVersion, () => Json> = { v1beta2: machineV1beta2, v1beta1: machineV1beta1 };
const cond = (m: Json, type: string, path = 'status.conditions'): Json =>
  path
    .split('.')
    .reduce((o, k) => o[k], m)
    .find((c: Json) => c.type === type);

describe('api/capi readMachine', () => {
  for (const v of ['v1beta2', 'v1beta1'] as const) {
    describe(v, () => {
      it('reads a joining worker of a MachineSet', () => {
        const m = readMachine(fixtures[v](), v);
        expect(m).to.deep.include({
          name: 'md-0-abc-xyz',
          namespace: 'default',
          uid: 'uid-m-1',
          resourceVersion: '1001',
          generation: 2,
          createdAt: ms(T0),
          clusterName: 'c1',
          controlPlane: false,
          phase: 'Provisioned',
          providerID: 'docker:////c1-md-0-abc-xyz',
          infrastructureReady: { value: true, since: ms(T1) },
          bootstrapReady: { value: true, since: ms(T2) },
          bootstrapConfigRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name: 'md-0-abc-xyz' },
          dataSecretName: 'md-0-abc-xyz',
          nodeConnectionDown: false,
          remediateAnnotation: false,
          machinePool: false,
        });
        expect(m.owner).to.deep.equal({
          kind: 'MachineSet',
          rawKind: 'MachineSet',
          name: 'md-0-abc',
          uid: 'uid-ms-1',
          controlPlane: false,
        });
        for (const k of [
          'nodeName',
          'deletingSince',
          'skipReason',
          'healthCheckSucceeded',
          'ownerRemediated',
          'joinGuardJoined',
        ]) {
          expect(m, k).not.to.have.property(k);
        }
      });

      it('reads the Node, deletion, annotations and remediation conditions', () => {
        const o = fixtures[v]();
        o.status.nodeRef =
          v === 'v1beta2' ? { name: 'node-1' } : { apiVersion: 'v1', kind: 'Node', name: 'node-1', uid: 'n1' };
        o.metadata.deletionTimestamp = T2;
        o.metadata.annotations['cluster.x-k8s.io/remediate-machine'] = '';
        o.metadata.annotations['cluster.x-k8s.io/paused'] = '';
        o.status.conditions.push(
          {
            type: 'HealthCheckSucceeded',
            status: 'False',
            reason: 'JoinTimeout',
            message: 'no Node',
            lastTransitionTime: T1,
            ...(v === 'v1beta1' ? { severity: 'Warning' } : {}),
          },
          {
            type: 'OwnerRemediated',
            status: 'False',
            reason: 'RemediationDeferred',
            message: 'preflight',
            lastTransitionTime: T2,
          },
          { type: 'JoinGuardJoined', status: 'False', reason: 'JoinTimeout', message: '', lastTransitionTime: T2 },
        );
        const m = readMachine(o, v);
        expect(m.nodeName).to.equal('node-1');
        expect(m.deletingSince).to.equal(ms(T2));
        expect(m.remediateAnnotation).to.equal(true);
        expect(m.skipReason).to.equal('cluster.x-k8s.io/paused');
        expect(m.healthCheckSucceeded).to.deep.equal({
          status: 'False',
          reason: 'JoinTimeout',
          message: 'no Node',
          since: ms(T1),
        });
        expect(m.ownerRemediated).to.deep.equal({
          status: 'False',
          reason: 'RemediationDeferred',
          message: 'preflight',
          since: ms(T2),
        });
        expect(m.joinGuardJoined).to.deep.equal({ status: 'False', reason: 'JoinTimeout', since: ms(T2) });
      });

      it('keeps only the annotations JoinGuard reads (joinguard.io/, cluster.x-k8s.io/, controlplane.cluster.x-k8s.io/)', () => {
        const o = fixtures[v]();
        o.metadata.annotations = {
          'joinguard.io/skip': '',
          'cluster.x-k8s.io/remediate-machine': '',
          'controlplane.cluster.x-k8s.io/remediation-for': '{}',
          'machine.cluster.x-k8s.io/exclude-node-draining': '',
          'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(10_000),
          'example.com/cluster.x-k8s.io/paused': '',
        };
        expect(readMachine(o, v).annotations).to.deep.equal({
          'joinguard.io/skip': '',
          'cluster.x-k8s.io/remediate-machine': '',
          'controlplane.cluster.x-k8s.io/remediation-for': '{}',
        });
        expect(readMachine(o, v).labels).to.deep.equal(o.metadata.labels); // labels whole: selectors need them
      });

      it("parses KCP's remediation-for annotation (RemediationData), and notes one it cannot parse", () => {
        const o = fixtures[v]();
        expect(readMachine(o, v)).not.to.have.property('remediationFor');
        // As KCP's RemediationData.Marshal writes it (metav1.Time in RFC 3339, UTC).
        o.metadata.annotations['controlplane.cluster.x-k8s.io/remediation-for'] = JSON.stringify({
          machine: 'c1-cp-old',
          timestamp: T1,
          retryCount: 2,
        });
        expect(readMachine(o, v).remediationFor).to.deep.equal({
          machine: 'c1-cp-old',
          timestamp: ms(T1),
          retryCount: 2,
        });
        // The zero time marshals as null: KCP then treats its periods as expired.
        o.metadata.annotations['controlplane.cluster.x-k8s.io/remediation-for'] =
          '{"machine":"c1-cp-old","timestamp":null,"retryCount":0}';
        expect(readMachine(o, v).remediationFor).to.deep.equal({ machine: 'c1-cp-old', retryCount: 0 });
        o.metadata.annotations['controlplane.cluster.x-k8s.io/remediation-for'] = 'not json';
        expect(readMachine(o, v).remediationFor).to.deep.equal({});
      });

      it('has no time for a fact whose condition is not True, and falls back to the condition without the flag', () => {
        const o = fixtures[v]();
        const infra = cond(o, 'InfrastructureReady');
        infra.status = 'False';
        let m = readMachine(o, v);
        expect(m.infrastructureReady).to.deep.equal({ value: true }); // the flag says ready; no time to trust
        if (v === 'v1beta2') delete o.status.initialization;
        else {
          delete o.status.infrastructureReady;
          delete o.status.bootstrapReady;
        }
        m = readMachine(o, v);
        expect(m.infrastructureReady).to.deep.equal({ value: false });
        expect(m.bootstrapReady).to.deep.equal({ value: true, since: ms(T2) });
      });

      it('sees the workload connection down on NodeReady/NodeHealthy reason ConnectionDown', () => {
        const o = fixtures[v]();
        const path = v === 'v1beta2' ? 'status.conditions' : 'status.v1beta2.conditions';
        Object.assign(cond(o, 'NodeReady', path), {
          status: 'Unknown',
          reason: 'ConnectionDown',
          message: 'Remote connection probe failed',
        });
        expect(readMachine(o, v).nodeConnectionDown).to.equal(true);
      });

      const skips: [string, string][] = [
        ['joinguard.io/skip', 'joinguard.io/skip'],
        ['cluster.x-k8s.io/skip-remediation', 'cluster.x-k8s.io/skip-remediation'],
      ];
      for (const [annotation, reason] of skips) {
        it(`skips on ${annotation}, before a pause`, () => {
          const o = fixtures[v]();
          o.metadata.annotations = { 'cluster.x-k8s.io/paused': '', [annotation]: '' };
          expect(readMachine(o, v).skipReason).to.equal(reason);
        });
      }

      it('classifies owners by their controller reference', () => {
        const table: [Json[], Json][] = [
          [[], { kind: 'None', controlPlane: false }],
          [
            [{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet', name: 'x', uid: 'u', controller: false }],
            { kind: 'None', controlPlane: false },
          ],
          [
            [{ apiVersion: `cluster.x-k8s.io/${v}`, kind: 'MachinePool', name: 'mp', uid: 'u', controller: true }],
            { kind: 'MachinePool', rawKind: 'MachinePool', name: 'mp', uid: 'u', controlPlane: false },
          ],
          [
            [{ apiVersion: 'example.com/v1', kind: 'MachineSet', name: 'x', uid: 'u', controller: true }],
            { kind: 'Other', rawKind: 'MachineSet', name: 'x', uid: 'u', controlPlane: false },
          ],
          [
            [
              { apiVersion: 'cluster.x-k8s.io/v1beta1', kind: 'Cluster', name: 'c1', uid: 'c' },
              { apiVersion: `cluster.x-k8s.io/${v}`, kind: 'MachineSet', name: 'ms', uid: 'u', controller: true },
            ],
            { kind: 'MachineSet', rawKind: 'MachineSet', name: 'ms', uid: 'u', controlPlane: false },
          ],
        ];
        for (const [refs, owner] of table) {
          const o = fixtures[v]();
          o.metadata.ownerReferences = refs;
          expect(readMachine(o, v).owner, JSON.stringify(refs)).to.deep.equal(owner);
        }
        const pool = fixtures[v]();
        pool.metadata.ownerReferences = [
          { apiVersion: `cluster.x-k8s.io/${v}`, kind: 'MachinePool', name: 'mp', uid: 'u', controller: true },
        ];
        expect(readMachine(pool, v).machinePool).to.equal(true);
        const labelled = fixtures[v]();
        labelled.metadata.labels['cluster.x-k8s.io/pool-name'] = 'mp';
        expect(readMachine(labelled, v).machinePool).to.equal(true);
      });

      it('takes the cluster name from the label when spec.clusterName is empty', () => {
        const o = fixtures[v]();
        o.spec.clusterName = '';
        expect(readMachine(o, v).clusterName).to.equal('c1');
      });

      // Malformed objects: the error names the field.
      const malformed: [string, (o: Json) => void, string][] = [
        ['missing metadata.uid', (o) => delete o.metadata.uid, 'metadata.uid'],
        ['empty metadata.name', (o) => (o.metadata.name = ''), 'metadata.name'],
        ['missing metadata.resourceVersion', (o) => delete o.metadata.resourceVersion, 'metadata.resourceVersion'],
        [
          'creationTimestamp not a time',
          (o) => (o.metadata.creationTimestamp = 'yesterday'),
          'metadata.creationTimestamp',
        ],
        [
          'creationTimestamp a number',
          (o) => (o.metadata.creationTimestamp = 1714557600),
          'metadata.creationTimestamp',
        ],
        [
          'deletionTimestamp not a time',
          (o) => (o.metadata.deletionTimestamp = '2026-13-01T00:00:00Z'),
          'metadata.deletionTimestamp',
        ],
        ['conditions not a list', (o) => (o.status.conditions = { Ready: 'True' }), 'status.conditions'],
        ['a condition without type', (o) => delete o.status.conditions[1].type, 'status.conditions[1].type'],
        [
          'a condition status not True/False/Unknown',
          (o) => (o.status.conditions[2].status = 'Yes'),
          'status.conditions[2].status',
        ],
        [
          'a condition time not a time',
          (o) => (o.status.conditions[0].lastTransitionTime = 'now'),
          'status.conditions[0].lastTransitionTime',
        ],
        ['a condition entry not an object', (o) => (o.status.conditions[3] = 'Ready'), 'status.conditions[3]'],
        ['labels not a map of strings', (o) => (o.metadata.labels['x'] = 1), 'metadata.labels["x"]'],
        ['status not an object', (o) => (o.status = 'Running'), 'status'],
        ['phase not a string', (o) => (o.status.phase = 3), 'status.phase'],
        [
          'owner reference without uid',
          (o) => delete o.metadata.ownerReferences[0].uid,
          'metadata.ownerReferences[0].uid',
        ],
        [
          'no cluster name at all',
          (o) => (delete o.spec.clusterName, delete o.metadata.labels['cluster.x-k8s.io/cluster-name']),
          'spec.clusterName',
        ],
        ['nodeRef not an object', (o) => (o.status.nodeRef = 'node-1'), 'status.nodeRef'],
      ];
      for (const [name, change, field] of malformed) {
        it(`refuses ${name}, naming ${field}`, () => {
          const o = fixtures[v]();
          change(o);
          let err: unknown;
          try {
            readMachine(o, v);
          } catch (e) {
            err = e;
          }
          expect(err).to.be.instanceOf(MalformedObjectError);
          expect((err as MalformedObjectError).field).to.equal(field);
          expect((err as MalformedObjectError).message).to.match(
            new RegExp(`^Machine (default/md-0-abc-xyz|\\(unnamed\\)): field ${field.replace(/[[\]."]/g, '\\$&')}: `),
          );
        });
      }
    });
  }

  it('v1beta2 flags: a missing initialization.infrastructureProvisioned must be a boolean when present', () => {
    const o = machineV1beta2();
    o['status'].initialization.infrastructureProvisioned = 'true';
    expect(() => readMachine(o, 'v1beta2')).to.throw(
      MalformedObjectError,
      /status\.initialization\.infrastructureProvisioned: must be true or false/,
    );
  });

  it('v1beta1: NodeHealthy Unknown/NodeInspectionFailed is a Node CAPI cannot see', () => {
    const o = machineV1beta1();
    Object.assign(cond(o, 'NodeHealthy'), {
      status: 'Unknown',
      reason: 'NodeInspectionFailed',
      message: 'Failed to get the Node for this Machine by ProviderID',
    });
    delete o['status'].v1beta2;
    expect(readMachine(o, 'v1beta1').nodeConnectionDown).to.equal(true);
  });

  it('v1beta1: the remediation conditions come from status.conditions (what v1.8-v1.10 owners read)', () => {
    const o = machineV1beta1();
    o['status'].v1beta2.conditions.push({
      type: 'HealthCheckSucceeded',
      status: 'True',
      reason: 'HealthCheckSucceeded',
      message: '',
      lastTransitionTime: T1,
    });
    expect(readMachine(o, 'v1beta1').healthCheckSucceeded).to.equal(undefined);
  });

  it("v1beta1: the owner's answer is read where v1.9/v1.10 owners write it, status.v1beta2.conditions", () => {
    // v1.10's MachineSet and KCP write RemediationDeferred / CannotBeRemediated / MachineDeleting only into the
    // v1beta2 list (machineset_controller.go patchMachineConditions, KCP remediation.go); v1beta1's OwnerRemediated
    // keeps WaitingForRemediation (JoinGuard's own write, or KCP's) or says True.
    const o = machineV1beta1();
    o['status'].conditions.push(
      {
        type: 'HealthCheckSucceeded',
        status: 'False',
        severity: 'Warning',
        reason: 'JoinTimeout',
        message: 'x',
        lastTransitionTime: T1,
      },
      {
        type: 'OwnerRemediated',
        status: 'False',
        severity: 'Warning',
        reason: 'WaitingForRemediation',
        lastTransitionTime: T1,
      },
    );
    o['status'].v1beta2.conditions.push({
      type: 'OwnerRemediated',
      status: 'False',
      reason: 'RemediationDeferred',
      message: 'Waiting because there are already too many remediations in progress',
      lastTransitionTime: T2,
    });
    const m = readMachine(o, 'v1beta1');
    expect(m.ownerRemediated).to.include({ status: 'False', reason: 'RemediationDeferred' });
    expect(m.healthCheckSucceeded).to.include({ status: 'False', reason: 'JoinTimeout' });
    // No v1beta2 answer yet: JoinGuard's own v1beta1 write is what there is.
    o['status'].v1beta2.conditions.pop();
    expect(readMachine(o, 'v1beta1').ownerRemediated).to.include({ status: 'False', reason: 'WaitingForRemediation' });
  });

  it('reads joinguard.io/requested-by: the uid of the check whose mark the Machine carries (the annotation path, the previous layout)', () => {
    const o = machineV1beta2();
    expect(readMachine(o, 'v1beta2').requestedBy).to.equal(undefined);
    o['metadata'].annotations['joinguard.io/requested-by'] = 'uid-check-1';
    expect(readMachine(o, 'v1beta2')).to.include({ requestedBy: 'uid-check-1', markerAnnotation: 'uid-check-1' });
  });

  for (const v of ['v1beta2', 'v1beta1'] as const) {
    it(`${v}: the marker inside the mark's condition message (HealthCheckSucceeded or JoinGuardJoined, False) is the mark's check; it goes with the withdrawal`, () => {
      const o = v === 'v1beta2' ? machineV1beta2() : machineV1beta1();
      const check = { namespace: 'default', name: 'workers', uid: 'uid-check-2' };
      const write = markForRemediation(o, v, {
        kind: 'JoinTimeout',
        message: markedMessage(check, 'JoinTimeout, requested at 2026-03-01T00:00:00Z'),
        now: new Date(ms(T2)),
        setOwnerRemediated: true,
      });
      o['status'].conditions = write.conditions;
      const marked = readMachine(o, v);
      expect(marked).to.include({ requestedBy: 'uid-check-2' });
      expect(marked.markerAnnotation).to.equal(undefined);
      // The previous layout beside it: the marker inside the message is the mark's.
      o['metadata'].annotations['joinguard.io/requested-by'] = 'uid-check-1';
      expect(readMachine(o, v)).to.include({ requestedBy: 'uid-check-2', markerAnnotation: 'uid-check-1' });
      delete o['metadata'].annotations['joinguard.io/requested-by'];
      o['status'].conditions = withdrawMark(o, v, new Date(ms(T2))).conditions;
      expect(readMachine(o, v).requestedBy).to.equal(undefined);
      const jg = machineV1beta2();
      jg['status'].conditions = setJoinGuardCondition(jg, 'v1beta2', {
        status: 'False',
        reason: 'JoinTimeout',
        message: markedMessage(check, 'JoinTimeout'),
        now: new Date(ms(T2)),
      }).conditions;
      expect(readMachine(jg, 'v1beta2').requestedBy).to.equal('uid-check-2');
      expect(markerIn('JoinGuard (MachineJoinCheck default/workers): JoinTimeout'), 'no uid, no marker').to.equal(
        undefined,
      );
    });
  }

  it('a KubeadmControlPlane Machine is a control-plane Machine with a control-plane owner', () => {
    const m = readMachine(cpMachineV1beta2(), 'v1beta2');
    expect(m.controlPlane).to.equal(true);
    expect(m.owner).to.deep.equal({
      kind: 'KubeadmControlPlane',
      rawKind: 'KubeadmControlPlane',
      name: 'c1-cp',
      uid: 'uid-kcp-1',
      controlPlane: true,
    });
    const other = cpMachineV1beta2();
    other['metadata'].ownerReferences = [
      { apiVersion: 'controlplane.example.com/v1', kind: 'K3sControlPlane', name: 'x', uid: 'u', controller: true },
    ];
    expect(readMachine(other, 'v1beta2').owner).to.include({
      kind: 'Other',
      rawKind: 'K3sControlPlane',
      controlPlane: true,
    });
  });

  it('refuses what is not an object, naming it', () => {
    expect(() => readMachine(null, 'v1beta2')).to.throw(
      MalformedObjectError,
      /^Machine \(unknown\): field \.: is not an object but null/,
    );
    expect(() => readMachine({ kind: 'Machine' }, 'v1beta2')).to.throw(
      MalformedObjectError,
      /field metadata: is required/,
    );
  });

  it('does not change the object it reads', () => {
    const o = machineV1beta2();
    const before = JSON.stringify(o);
    readMachine(o, 'v1beta2');
    expect(JSON.stringify(o)).to.equal(before);
  });
});
