// The executor against a FAKE apiserver (unit test): write-ahead order, and what a 409 on a Machine write
// does. The real apiserver and CAPI's controllers are in e2e/.
import { expect } from 'chai';
import { clusterV1beta2, machineV1beta2, ms, T3 } from '../../api/capi/testdata/fixtures.js';
import { ApiError, type Json, type RestClient } from '../runtime/rest.js';
import { silentLogger } from '../runtime/logger.js';
import type { EventRecorder } from './events.js';
import { execute, type ExecutorDeps } from './executor.js';
import { Registry } from 'prom-client';
import { JoinGuardMetrics } from './metrics.js';
import type { RawSnapshot } from './snapshot.js';

const MACHINE = '/apis/cluster.x-k8s.io/v1beta2/namespaces/default/machines/md-0-abc-xyz';
const CLUSTER = '/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters/c1';
const CHECK_STATUS = '/apis/joinguard.io/v1alpha1/namespaces/default/machinejoinchecks/workers/status';

/** An apiserver of one Machine and one Cluster; `onMachinePatch` decides each status patch of the Machine. */
class FakeApi {
  machine = machineV1beta2();
  readonly calls: string[] = [];
  checkWrites = 0;

  constructor(private readonly onMachinePatch: (n: number, api: FakeApi) => 'ok' | 'conflict') {}

  private patches = 0;

  rest(): RestClient {
    return {
      get: async (path: string) => {
        this.calls.push(`GET ${path}`);
        if (path === MACHINE) return structuredClone(this.machine);
        if (path === CLUSTER) return clusterV1beta2();
        throw new ApiError(404, 'GET', path, 'not found');
      },
      put: async (path: string, body: Json) => {
        this.calls.push(`PUT ${path}`);
        expect(path).to.equal(CHECK_STATUS);
        this.checkWrites++;
        return { ...body, metadata: { ...body.metadata, resourceVersion: `c${this.checkWrites}` } };
      },
      mergePatch: async (path: string, body: Json) => {
        this.calls.push(`PATCH ${path}`);
        expect(path).to.equal(`${MACHINE}/status`);
        const what = this.onMachinePatch(++this.patches, this);
        if (body.metadata?.resourceVersion !== this.machine.metadata.resourceVersion || what === 'conflict') {
          // CAPI wrote the Machine in between: a new resourceVersion, the patch refused.
          this.machine.metadata.resourceVersion = String(Number(this.machine.metadata.resourceVersion) + 1);
          throw new ApiError(409, 'PATCH', path, 'the object has been modified');
        }
        this.machine = { ...this.machine, status: { ...this.machine.status, conditions: body.status.conditions } };
        return structuredClone(this.machine);
      },
    } as unknown as RestClient;
  }
}

function deps(api: FakeApi): ExecutorDeps {
  return {
    rest: api.rest(), apiVersion: 'v1beta2', log: silentLogger(),
    events: { record: async () => undefined } as unknown as EventRecorder,
    metrics: new JoinGuardMetrics(new Registry()),
    remember: () => undefined,
  };
}

function snapshot(api: FakeApi): RawSnapshot {
  return {
    check: {
      apiVersion: 'joinguard.io/v1alpha1', kind: 'MachineJoinCheck',
      metadata: { name: 'workers', namespace: 'default', uid: 'uid-check', resourceVersion: 'c0', generation: 1 },
      spec: { clusterName: 'c1', selector: { matchLabels: { 'cluster.x-k8s.io/deployment-name': 'md-0' } }, joinTimeout: '20m' },
    },
    cluster: clusterV1beta2(),
    machines: [structuredClone(api.machine)],
    mhcs: [], kcps: [], bootstrapConfigs: [],
    capi: { apiVersion: 'v1beta2' },
    now: ms(T3) + 30 * 60_000, // the worker's join clock started at T3: 10 minutes past its deadline
  };
}

const healthCheck = (m: Json) => (m.status.conditions as Json[]).find((c) => c.type === 'HealthCheckSucceeded');

describe('executor (fake apiserver)', () => {
  it('records the request in the check status before it marks the Machine', async () => {
    const api = new FakeApi(() => 'ok');
    const r = await execute(deps(api), snapshot(api));
    const put = api.calls.indexOf(`PUT ${CHECK_STATUS}`);
    const patch = api.calls.indexOf(`PATCH ${MACHINE}/status`);
    expect(put).to.be.greaterThan(-1);
    expect(patch).to.be.greaterThan(put);
    expect(healthCheck(api.machine)).to.include({ status: 'False', reason: 'JoinTimeout' });
    expect(r.requeue).to.equal(false);
  });

  it('on a 409 from the Machine write, re-reads the Machine, decides again and marks it at once', async () => {
    const api = new FakeApi((n) => (n === 1 ? 'conflict' : 'ok'));
    const r = await execute(deps(api), snapshot(api));
    expect(api.calls.filter((c) => c === `PATCH ${MACHINE}/status`)).to.have.length(2);
    expect(healthCheck(api.machine)).to.include({ status: 'False', reason: 'JoinTimeout' });
    expect(api.checkWrites).to.equal(1); // the request was recorded once
    expect(r.requeue).to.equal(false);
  });

  it('does not write when the Machine, re-read after a 409, joined in the meantime', async () => {
    const api = new FakeApi((n, a) => {
      if (n === 1) a.machine.status = { ...a.machine.status, nodeRef: { name: 'node-1' } };
      return 'conflict';
    });
    await execute(deps(api), snapshot(api));
    expect(api.calls.filter((c) => c === `PATCH ${MACHINE}/status`)).to.have.length(1);
    expect(healthCheck(api.machine)).to.equal(undefined);
  });

  it('gives up after a bounded number of conflicts and asks to be run again', async () => {
    const api = new FakeApi(() => 'conflict');
    const r = await execute(deps(api), snapshot(api));
    expect(api.calls.filter((c) => c === `PATCH ${MACHINE}/status`)).to.have.length(4);
    expect(r.requeue).to.equal(true);
  });
});
