// Shared parts of the executor's unit-test FAKE apiservers (act/executor*.test.ts): the worker Machines they hold,
// JoinGuard's earlier requests, the check's /status write with its resourceVersion check, and a SnapshotSource like
// the controller's, and the executor's deps around a fake's RestClient. These stay fakes — no real apiserver, no CAPI controllers; the real ones are in e2e/.
import { readCluster, readMachine } from '../../../api/capi/readers.js';
import { clusterV1beta2, machineV1beta2, T3 } from '../../../api/capi/testdata/fixtures.js';
import { parseSettings } from '../../../api/v1alpha1/settings.js';
import type { MachineJoinCheck } from '../../../api/v1alpha1/types.js';
import { silentLogger } from '../../../runtime/logger.js';
import { ApiError, type Json, type RestClient } from '../../../runtime/client/rest.js';
import type { ExecutorDeps } from '../act/deps.js';
import type { Refusals } from '../act/refusals.js';
import type { PlannedEvent, RefusedWrite, Snapshot, Live, SnapshotSource } from '../types.js';

/** How JoinGuard's mark on a joined worker reads: its OwnerRemediated reason and message, its observedGeneration. */
export interface MarkShape {
  ownerReason: string;
  ownerMessage: string;
  observedGeneration?: number;
}

/** A worker of the fixture's MachineSet, named and uid'd; joined and carrying JoinGuard's mark (`mark`) when given. */
export function worker(name: string, mark?: MarkShape): Json {
  const m = machineV1beta2();
  Object.assign(m.metadata, { name, uid: `uid-${name}` });
  if (mark) {
    const gen = mark.observedGeneration === undefined ? {} : { observedGeneration: mark.observedGeneration };
    m.status.nodeRef = { name: `node-${name}` };
    m.status.conditions.push(
      {
        type: 'HealthCheckSucceeded',
        status: 'False',
        reason: 'JoinTimeout',
        message: 'JoinGuard',
        lastTransitionTime: T3,
        ...gen,
      },
      {
        type: 'OwnerRemediated',
        status: 'False',
        reason: mark.ownerReason,
        message: mark.ownerMessage,
        lastTransitionTime: T3,
        ...gen,
      },
    );
  }
  return m;
}

/** A request JoinGuard made earlier for `name`, its mark seen. */
export const openRequest = (name: string) => ({
  machine: name,
  uid: `uid-${name}`,
  owner: { kind: 'MachineSet', name: 'md-0-abc' },
  path: 'OwnerRemediated',
  kind: 'JoinTimeout',
  time: T3,
  state: 'Open',
  marked: true,
  markedTime: T3,
});

/** `n` worker names md-0-NN, from `from`. */
export const names = (n: number, from = 0) =>
  Array.from({ length: n }, (_, i) => `md-0-${String(from + i).padStart(2, '0')}`);

/** The check after a PUT of its /status: the body's status, the resourceVersion one on; a stale one is a 409. */
export function putStatus(check: Json, path: string, body: Json): Json {
  if (body.metadata.resourceVersion !== check.metadata.resourceVersion)
    throw new ApiError(409, 'PUT', path, 'modified');
  return {
    ...check,
    status: body.status,
    metadata: { ...check.metadata, resourceVersion: String(Number(check.metadata.resourceVersion) + 1) },
  };
}

/** What the caches hold: the objects as they were when this was called. */
export function cachedOf(api: { check: Json; machines: Map<string, Json> }): { check: Json; machines: Json[] } {
  return {
    check: structuredClone(api.check),
    machines: [...api.machines.values()].map((m) => structuredClone(m)),
  };
}

/** A SnapshotSource like the controller's: the objects as cached when it was made, the live ones in their place. */
export function snapshotSource(
  cached: { check: Json; machines: Json[] },
  now: number,
  refusedWrites?: () => RefusedWrite[],
): SnapshotSource {
  return {
    build: (live: Live): Snapshot | undefined => {
      const check = (live.check ?? cached.check) as MachineJoinCheck;
      const machines = cached.machines.flatMap((m) => {
        const l = live.machines.has(m.metadata.uid) ? live.machines.get(m.metadata.uid) : m;
        return l ? [readMachine(l, 'v1beta2')] : [];
      });
      return {
        check,
        settings: parseSettings(check.spec).settings!,
        cluster: readCluster(live.cluster ?? clusterV1beta2(), 'v1beta2'), // the live one when read
        machines,
        malformed: [],
        bootstrapConfigs: new Map(),
        mhcs: [],
        capi: { apiVersion: 'v1beta2', minor: 14 },
        ...(refusedWrites ? { refusedWrites: refusedWrites() } : {}),
        now,
      };
    },
  };
}

/** The executor's deps around a fake's RestClient: a silent log, no metrics, the events it emits collected; `o` wins. */
export function fakeDeps(
  rest: RestClient,
  refusals: Refusals,
  now: number,
  o: Partial<ExecutorDeps> = {},
): { events: PlannedEvent[]; deps: ExecutorDeps } {
  const events: PlannedEvent[] = [];
  const deps: ExecutorDeps = {
    rest,
    apiVersion: 'v1beta2',
    log: silentLogger(),
    emit: (e) => events.push(e),
    writeMetric: () => undefined,
    remember: () => undefined,
    refusals,
    now: () => now,
    ...o,
  };
  return { events, deps };
}

/** The MachineJoinCheck `workers` of cluster c1 over md-0's workers: `spec` and `metadata` add to it; a status if given. */
export function fakeCheck(spec: Json = {}, metadata: Json = {}, status?: Json): Json {
  return {
    apiVersion: 'joinguard.io/v1alpha1',
    kind: 'MachineJoinCheck',
    metadata: {
      name: 'workers',
      namespace: 'default',
      uid: 'uid-check',
      resourceVersion: '1',
      generation: 1,
      ...metadata,
    },
    spec: {
      clusterName: 'c1',
      selector: { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' } },
      joinTimeout: '20m',
      ...spec,
    },
    ...(status === undefined ? {} : { status }),
  };
}
