// The CRD schema and the TypeScript types describe the same object. `full` is typed DeepRequired: leaving
// out a field of types.ts, or writing one it lacks, fails `tsc`; the walk below then proves that the
// schema has exactly the properties of `full` (both directions) and that each value has the schema's type.
import { expect } from 'chai';
import type { MachineJoinCheck } from './types.js';
import { machineJoinCheckSchema, type JSONSchemaProps } from './schema.js';
import { validateSpec } from './validation.js';

type DeepRequired<T> = T extends (infer U)[]
  ? DeepRequired<U>[]
  : T extends object
    ? { [K in keyof T]-?: DeepRequired<T[K]> }
    : T;

const t = '2026-05-01T10:00:00.000Z';
const owner = { kind: 'MachineSet', name: 'md-0-abc' };

export const full: DeepRequired<MachineJoinCheck> = {
  apiVersion: 'joinguard.io/v1alpha1',
  kind: 'MachineJoinCheck',
  metadata: {
    name: 'workers',
    namespace: 'default',
    uid: 'u-1',
    resourceVersion: '1',
    generation: 1,
    creationTimestamp: t,
    labels: { a: 'b' },
    annotations: { a: 'b' },
    deletionTimestamp: t,
    finalizers: ['joinguard.io/withdraw-marks'],
    ownerReferences: [
      {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Cluster',
        name: 'c1',
        uid: 'u-c1',
        controller: false,
        blockOwnerDeletion: false,
      },
    ],
  },
  spec: {
    clusterName: 'c1',
    selector: {
      matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' },
      matchExpressions: [{ key: 'tier', operator: 'In', values: ['a'] }],
    },
    joinTimeout: '20m',
    provisionTimeout: '30m',
    maxInFlight: 1,
    remediation: { strategy: 'Auto', maxPerOwner: 5, window: '24h' },
    suspicion: { consecutiveJoinFailures: 2, probeInterval: '30m', maxProbeInterval: '8h' },
    neverJoinedLimit: 3,
    firstControlPlane: 'Remediate',
    dryRun: false,
    paused: false,
  },
  status: {
    observedGeneration: 1,
    expectedMachines: 3,
    joinedMachines: 1,
    joiningMachines: 1,
    stuckMachines: 1,
    heldMachines: 1,
    heldReason: 'BootstrapCredentialSuspect',
    timedMachines: [{ machine: 'm2', phase: 'Joining', since: t, until: t, onHold: 'RemediationBudgetExhausted' }],
    everJoined: true,
    consecutiveJoinFailures: 1,
    failuresSinceResume: 1,
    recentFailures: [
      {
        machine: 'm1',
        uid: 'u1',
        owner,
        kind: 'JoinTimeout',
        time: t,
        bootstrapConfig: 'KubeadmConfig/m1',
        dataSecretName: 'm1',
        controlPlane: false,
        version: 'v1.36.3',
      },
    ],
    remediations: [
      {
        machine: 'm1',
        uid: 'u1',
        owner,
        time: t,
        path: 'OwnerRemediated',
        outcome: 'Marked',
        kind: 'JoinTimeout',
        ownerReason: 'RemediationDeferred',
        ownerMessage: 'waiting',
        finishedTime: t,
        canary: false,
        firstControlPlane: false,
      },
    ],
    requests: [
      {
        machine: 'm1',
        uid: 'u1',
        owner,
        path: 'OwnerRemediated',
        kind: 'JoinTimeout',
        time: t,
        state: 'Open',
        withdrawn: 'Joined',
        marked: true,
        markedTime: t,
        answered: true,
        canary: false,
        firstControlPlane: false,
      },
    ],
    ownerWindows: [{ kind: 'MachineSet', name: 'md-0-abc', times: [t] }],
    suspicion: {
      reason: 'RolloutSuspect',
      since: t,
      nextCanaryTime: t,
      canariesSpent: 0,
      machines: ['m1'],
      rollout: {
        owner: { kind: 'MachineDeployment', name: 'md-0' },
        revision: '2',
        machineSet: 'md-0-def',
        previousRevision: '1',
        previousMachineSet: 'md-0-abc',
        changes: ['infrastructure template: A/a -> A/b'],
      },
    },
    joinDurations: {
      count: 2,
      p50Seconds: 61.5,
      p95Seconds: 90,
      maxSeconds: 90,
      suggestedJoinTimeout: '3m',
      recentSeconds: [33, 90],
    },
    observations: [{ machine: 'm1', uid: 'u1', readySeen: t, failedAt: t, failedKind: 'ProvisionTimeout' }],
    firstControlPlane: {
      replaced: { machine: 'cp-1', uid: 'u9', time: t, goneTime: t },
      extendedFor: 'u1',
      extendedUntil: t,
      probeRequested: t,
      misconfigured: { since: t, message: 'the replacement has a join configuration' },
    },
    connectionDownSeen: t,
    connectionRestoredSeen: t,
    controlPlaneInitializedSeen: t,
    lastResume: { value: 'now', time: t, removed: true },
    conditions: [
      {
        type: 'Ready',
        status: 'True',
        reason: 'AsExpected',
        message: '',
        lastTransitionTime: t,
        observedGeneration: 1,
      },
    ],
  },
};

/** Problems between a value and its schema, by path; `metadata` is the apiserver's (ObjectMeta). */
function walk(value: unknown, s: JSONSchemaProps, path: string, out: string[]): void {
  if (s['x-kubernetes-int-or-string']) {
    if (!(typeof value === 'string' || Number.isInteger(value))) out.push(`${path}: not an int or string`);
    return;
  }
  switch (s.type) {
    case 'object': {
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        out.push(`${path}: schema says object`);
        return;
      }
      if (s.additionalProperties) {
        for (const [k, v] of Object.entries(value)) walk(v, s.additionalProperties, `${path}[${k}]`, out);
        return;
      }
      if (path === 'metadata') return;
      const props = s.properties ?? {};
      for (const [k, v] of Object.entries(value)) {
        if (!(k in props)) out.push(`${path}.${k}: in the types, not in the schema`);
        else walk(v, props[k]!, `${path}.${k}`, out);
      }
      for (const k of Object.keys(props)) if (!(k in value)) out.push(`${path}.${k}: in the schema, not in the types`);
      return;
    }
    case 'array':
      if (!Array.isArray(value) || value.length === 0) out.push(`${path}: schema says a (sampled, non-empty) list`);
      else value.forEach((v, i) => walk(v, s.items!, `${path}[${i}]`, out));
      return;
    case 'string':
      if (typeof value !== 'string') out.push(`${path}: schema says string`);
      else if (s.format === 'date-time' && Number.isNaN(Date.parse(value))) out.push(`${path}: not a date-time`);
      return;
    case 'integer':
      if (!Number.isInteger(value)) out.push(`${path}: schema says integer`);
      return;
    case 'number':
      if (typeof value !== 'number') out.push(`${path}: schema says number`);
      return;
    case 'boolean':
      if (typeof value !== 'boolean') out.push(`${path}: schema says boolean`);
      return;
    default:
      out.push(`${path}: schema node without a type`);
  }
}

describe('api/v1alpha1 schema and types agree', () => {
  it('every property of the types is in the schema and every property of the schema is in the types', () => {
    const out: string[] = [];
    const root = machineJoinCheckSchema.properties!;
    for (const [k, v] of Object.entries(full)) {
      if (!(k in root)) out.push(`${k}: in the types, not in the schema`);
      else walk(v, root[k]!, k, out);
    }
    for (const k of Object.keys(root)) if (!(k in full)) out.push(`${k}: in the schema, not in the types`);
    expect(out).to.deep.equal([]);
  });

  it('the walk notices a field missing on either side', () => {
    const out: string[] = [];
    walk(
      { a: 1, extra: true },
      { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'string' } } },
      'x',
      out,
    );
    expect(out).to.deep.equal(['x.extra: in the types, not in the schema', 'x.b: in the schema, not in the types']);
  });

  it('the fully populated sample spec is valid', () => {
    expect(validateSpec(full.spec)).to.deep.equal([]);
  });
});
