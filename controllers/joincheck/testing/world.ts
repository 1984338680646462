// An in-memory world for the property test (a FAKE of the apiserver and of CAPI's owners, test-only): raw
// v1beta2 Machines, a Cluster and a check, served to the real executor through a RestClient stand-in that can
// fail, conflict, lose or crash on any write; a MachineSet owner that remediates on CAPI's contract (or defers,
// as a MachineDeployment's remediation.maxInFlight does); a MachineHealthCheck for the Auto path; and a log of
// every write, from which the invariants are judged.
import { readCluster, readMachine } from '../../../api/capi/readers.js';
import { clusterV1beta2 } from '../../../api/capi/testdata/fixtures.js';
import type { MachineFacts, MachineHealthCheckFacts } from '../../../api/capi/model.js';
import { parseSettings } from '../../../api/v1alpha1/settings.js';
import type { MachineJoinCheck, MachineJoinCheckSpec } from '../../../api/v1alpha1/types.js';
import { ApiError, type Json, type RestClient } from '../../runtime/rest.js';
import type { Live, SnapshotSource } from '../executor.js';
import { causedMarks } from '../marks.js';
import { MachineIndex, namedUids } from '../machine-index.js';
import { iso } from '../time.js';
import type { PreviousView, Snapshot } from '../types.js';

export type Fault = 'ok' | 'fail' | 'conflict' | 'lost' | 'crash';
export class Crash extends Error {}

const NS = 'default';
const CAPI = 'cluster.x-k8s.io/v1beta2';
const MACHINES = `/apis/${CAPI}/namespaces/${NS}/machines/`;
const CLUSTER = `/apis/${CAPI}/namespaces/${NS}/clusters/c1`;
const CHECK = `/apis/joinguard.io/v1alpha1/namespaces/${NS}/machinejoinchecks/mjc`;
const OWN_REASONS = new Set(['JoinTimeout', 'ProvisionTimeout']);

export interface MarkWrite {
  t: number;
  uid: string;
  owner: string;
}

const cond = (type: string, status: string, reason: string, t: number, message = '') => ({ type, status, reason, message, lastTransitionTime: iso(t), observedGeneration: 1 });

export class World {
  t: number;
  machines = new Map<string, Json>();
  cluster: Json = clusterV1beta2();
  check: Json;
  mhc: MachineHealthCheckFacts | undefined;
  deferring = false;
  private rv = 100;
  private serial = 0;
  /** Faults for the next writes, in order (then ok). */
  faults: Fault[] = [];
  /** Every JoinGuard write that put a mark on a Machine for the first time for its uid, and every withdrawal. */
  readonly firstMarks: MarkWrite[] = [];
  readonly withdrawnUids = new Set<string>();
  /** uids whose remediate-machine annotation JoinGuard set (and has not removed). */
  readonly annotatedByJoinGuard = new Set<string>();
  readonly violations: string[] = [];
  writes = 0;

  constructor(t0: number, spec: MachineJoinCheckSpec, o: { mhc?: MachineHealthCheckFacts } = {}) {
    this.t = t0;
    this.check = { apiVersion: 'joinguard.io/v1alpha1', kind: 'MachineJoinCheck', metadata: { name: 'mjc', namespace: NS, uid: 'uid-mjc', resourceVersion: '1', generation: 1 }, spec };
    this.mhc = o.mhc;
    this.cluster.metadata.name = 'c1';
    this.cluster.metadata.namespace = NS;
  }

  private nextRv(): string {
    return String(++this.rv);
  }

  // ---- CAPI's side ----

  create(owner: string): Json {
    const n = ++this.serial;
    const name = `${owner}-m${n}`;
    const m: Json = {
      apiVersion: CAPI,
      kind: 'Machine',
      metadata: {
        name,
        namespace: NS,
        uid: `uid-${name}`,
        resourceVersion: this.nextRv(),
        generation: 1,
        creationTimestamp: iso(this.t),
        labels: { 'cluster.x-k8s.io/cluster-name': 'c1', pool: 'a' },
        annotations: {},
        ownerReferences: [{ apiVersion: CAPI, kind: 'MachineSet', name: owner, uid: `uid-${owner}`, controller: true }],
      },
      spec: { clusterName: 'c1', bootstrap: { configRef: { apiGroup: 'bootstrap.cluster.x-k8s.io', kind: 'KubeadmConfig', name }, dataSecretName: name }, providerID: `sim://${name}` },
      status: { phase: 'Provisioning', initialization: { infrastructureProvisioned: false, bootstrapDataSecretCreated: false }, conditions: [] },
    };
    this.machines.set(name, m);
    return m;
  }

  live(): Json[] {
    return [...this.machines.values()];
  }

  private touch(m: Json): void {
    m.metadata.resourceVersion = this.nextRv();
  }

  provision(m: Json, readyAt: number): void {
    m.status.initialization = { infrastructureProvisioned: true, bootstrapDataSecretCreated: true };
    m.status.phase = 'Provisioned';
    setCondition(m, cond('InfrastructureReady', 'True', 'Ready', readyAt));
    setCondition(m, cond('BootstrapConfigReady', 'True', 'Ready', readyAt));
    this.touch(m);
  }

  /** InfrastructureReady briefly not True: its transition time moves, its flag stays true. */
  flicker(m: Json): void {
    if (!m.status.initialization?.infrastructureProvisioned) return;
    setCondition(m, cond('InfrastructureReady', 'True', 'Ready', this.t));
    this.touch(m);
  }

  join(m: Json): void {
    if (m.status.nodeRef) return;
    m.status.nodeRef = { name: `node-${m.metadata.name}` };
    m.status.phase = 'Running';
    this.touch(m);
  }

  skip(m: Json): void {
    m.metadata.annotations = { ...m.metadata.annotations, 'joinguard.io/skip': '' };
    this.touch(m);
  }

  /** The MachineSet, on CAPI's contract: cleans OwnerRemediated once HealthCheckSucceeded is True; defers or deletes. */
  ownerStep(): void {
    for (const m of this.live()) {
      const hc = getCondition(m, 'HealthCheckSucceeded');
      const or = getCondition(m, 'OwnerRemediated');
      if (m.metadata.deletionTimestamp) continue;
      if (hc?.status === 'True' && or?.status === 'False') {
        removeCondition(m, 'OwnerRemediated');
        this.touch(m);
      } else if (hc?.status === 'False' && or?.status === 'False') {
        if (this.deferring) {
          if (or.reason !== 'RemediationDeferred') {
            setCondition(m, cond('OwnerRemediated', 'False', 'RemediationDeferred', this.t, 'MachineDeployment remediation.maxInFlight reached'));
            this.touch(m);
          }
        } else {
          setCondition(m, cond('OwnerRemediated', 'False', 'MachineDeleting', this.t));
          m.metadata.deletionTimestamp = iso(this.t);
          this.touch(m);
        }
      }
    }
  }

  /** A deleting Machine is gone; its MachineSet makes a replacement. */
  gone(m: Json): void {
    if (!m.metadata.deletionTimestamp) return;
    this.machines.delete(m.metadata.name);
    this.create(m.metadata.ownerReferences[0].name);
  }

  /** The MachineHealthCheck of the Auto path: the annotation marks; a healthy Node clears a False it no longer backs. */
  mhcStep(healthy: boolean): void {
    if (this.mhc === undefined) return;
    for (const m of this.live()) {
      if (m.metadata.deletionTimestamp) continue;
      const hc = getCondition(m, 'HealthCheckSucceeded');
      if ('cluster.x-k8s.io/remediate-machine' in (m.metadata.annotations ?? {})) {
        if (hc?.status !== 'False' || hc.reason !== 'HasRemediateAnnotation') {
          setCondition(m, cond('HealthCheckSucceeded', 'False', 'HasRemediateAnnotation', this.t));
          const or = getCondition(m, 'OwnerRemediated');
          if (or === undefined || or.status === 'True') setCondition(m, cond('OwnerRemediated', 'False', 'WaitingForRemediation', this.t));
          this.touch(m);
        }
      } else if (m.status.nodeRef && healthy && hc?.status !== 'True') {
        setCondition(m, cond('HealthCheckSucceeded', 'True', 'HealthCheckSucceeded', this.t));
        this.touch(m);
      }
    }
  }

  connection(up: boolean): void {
    setCondition(this.cluster, cond('RemoteConnectionProbe', up ? 'True' : 'False', up ? 'ProbeSucceeded' : 'ProbeFailed', this.t));
    this.cluster.metadata.resourceVersion = this.nextRv();
  }

  annotateCheck(key: string, value: string | undefined): void {
    const a = { ...(this.check.metadata.annotations ?? {}) };
    if (value === undefined) delete a[key];
    else a[key] = value;
    this.check = { ...this.check, metadata: { ...this.check.metadata, annotations: a, resourceVersion: this.nextRv() } };
  }

  // ---- judging ----

  /** Machines in scope, not gone, carrying a mark JoinGuard caused (the world's own count of what is in flight). */
  inFlight(): string[] {
    const requests = new Map<string, string>((this.check.status?.requests ?? []).map((r: Json) => [r.uid, r.path]));
    return this.live()
      .filter((m) => {
        const facts = readMachine(m, 'v1beta2');
        const path = this.annotatedByJoinGuard.has(facts.uid) ? 'RemediateAnnotation' : requests.get(facts.uid);
        const c = causedMarks(facts, path as never);
        const deletedByJoinGuard = m.metadata.deletionTimestamp && requests.get(facts.uid) === 'Delete';
        return c.healthCheck || c.annotation || c.condition || deletedByJoinGuard;
      })
      .map((m) => m.metadata.name);
  }

  // ---- the apiserver, as JoinGuard's RestClient sees it ----

  private fault(): Fault {
    return this.faults.shift() ?? 'ok';
  }

  private machineAt(path: string): Json | undefined {
    const name = decodeURIComponent(path.slice(MACHINES.length).split('/')[0] ?? '');
    return this.machines.get(name);
  }

  /** Applies a write (unless the fault says it never lands) and answers as the fault says. */
  private write<T>(method: string, path: string, apply: () => T): T {
    this.writes++;
    const f = this.fault();
    if (f === 'fail') throw new ApiError(500, method, path, 'etcdserver: request timed out');
    if (f === 'conflict') throw new ApiError(409, method, path, 'the object has been modified');
    if (f === 'crash') throw new Crash(`crash before ${method} ${path}`);
    const out = apply();
    if (f === 'lost') throw new ApiError(0, method, path, 'the response was lost');
    return out;
  }

  rest(): RestClient {
    return {
      get: async (path: string) => {
        if (path === CLUSTER) return structuredClone(this.cluster);
        if (path === CHECK) return structuredClone(this.check);
        const m = path.startsWith(MACHINES) ? this.machineAt(path) : undefined;
        if (m) return structuredClone(m);
        throw new ApiError(404, 'GET', path, 'not found');
      },
      put: async (path: string, body: Json) =>
        this.write('PUT', path, () => {
          if (body.metadata.resourceVersion !== this.check.metadata.resourceVersion) throw new ApiError(409, 'PUT', path, 'modified');
          this.check = { ...this.check, status: structuredClone(body.status), metadata: { ...this.check.metadata, resourceVersion: this.nextRv() } };
          return structuredClone(this.check);
        }),
      mergePatch: async (path: string, body: Json) =>
        this.write('PATCH', path, () => {
          if (path === CHECK) {
            if (body.metadata.resourceVersion !== this.check.metadata.resourceVersion) throw new ApiError(409, 'PATCH', path, 'modified');
            const annotations = { ...(this.check.metadata.annotations ?? {}), ...(body.metadata.annotations ?? {}) };
            for (const [k, v] of Object.entries(annotations)) if (v === null) delete annotations[k];
            this.check = { ...this.check, metadata: { ...this.check.metadata, annotations, ...(body.metadata.ownerReferences ? { ownerReferences: body.metadata.ownerReferences } : {}), resourceVersion: this.nextRv() } };
            return structuredClone(this.check);
          }
          const m = this.machineAt(path);
          if (!m) throw new ApiError(404, 'PATCH', path, 'not found');
          if (body.metadata?.resourceVersion !== m.metadata.resourceVersion) throw new ApiError(409, 'PATCH', path, 'modified');
          const before = readMachine(m, 'v1beta2');
          if (path.endsWith('/status')) m.status = { ...m.status, conditions: structuredClone(body.status.conditions) };
          else {
            const a = { ...m.metadata.annotations, ...body.metadata.annotations };
            for (const [k, v] of Object.entries(a)) if (v === null) delete a[k];
            m.metadata.annotations = a;
          }
          this.touch(m);
          this.judgeWrite(before, readMachine(m, 'v1beta2'), m);
          return structuredClone(m);
        }),
      deleteWithPreconditions: async (path: string, uid: string, rv: string) =>
        this.write('DELETE', path, () => {
          const m = this.machineAt(path);
          if (!m) throw new ApiError(404, 'DELETE', path, 'not found');
          if (m.metadata.uid !== uid || m.metadata.resourceVersion !== rv) throw new ApiError(409, 'DELETE', path, 'precondition failed');
          this.recordMark(m.metadata.uid, m.metadata.ownerReferences[0].name);
          m.metadata.deletionTimestamp = iso(this.t);
          this.touch(m);
          return {};
        }),
    } as unknown as RestClient;
  }

  /** What a Machine write did: a first mark (write-ahead, budgets), a withdrawal, a mark after a withdrawal. */
  private judgeWrite(before: ReturnType<typeof readMachine>, after: ReturnType<typeof readMachine>, raw: Json): void {
    const uid = after.uid;
    const owner = raw.metadata.ownerReferences[0].name;
    const marksNow = (f: typeof after) => (f.healthCheckSucceeded?.status === 'False' && OWN_REASONS.has(f.healthCheckSucceeded.reason ?? '')) || f.joinGuardJoined?.status === 'False';
    const annotationAdded = !before.remediateAnnotation && after.remediateAnnotation;
    if (annotationAdded) this.annotatedByJoinGuard.add(uid);
    if (before.remediateAnnotation && !after.remediateAnnotation) this.annotatedByJoinGuard.delete(uid);
    const marked = (!marksNow(before) && marksNow(after)) || annotationAdded;
    if (marked) this.recordMark(uid, owner);
    const unmarked = (before.healthCheckSucceeded?.status === 'False' && after.healthCheckSucceeded?.status === 'True') || (before.remediateAnnotation && !after.remediateAnnotation) || (before.joinGuardJoined?.status === 'False' && after.joinGuardJoined?.status === 'True');
    if (unmarked) this.withdrawnUids.add(uid);
  }

  private recordMark(uid: string, owner: string): void {
    if (this.withdrawnUids.has(uid)) this.violations.push(`${iso(this.t)}: ${uid} marked again after its mark was withdrawn (asked twice)`);
    const open = (this.check.status?.requests ?? []).some((r: Json) => r.uid === uid && r.state === 'Open');
    if (!open) this.violations.push(`${iso(this.t)}: ${uid} marked with no open request in status (not write-ahead)`);
    if (!this.firstMarks.some((x) => x.uid === uid)) this.firstMarks.push({ t: this.t, uid, owner });
  }
}

/**
 * The controller's caches: a copy of the world as of the last sync; live reads replace what they read. Machines go
 * through the product's MachineIndex, so the settled partition is exercised by every history.
 */
export class Cache implements SnapshotSource {
  machines: Json[] = [];
  cluster: Json = {};
  check: Json = {};
  previous?: PreviousView;
  lastStatusWrite?: number;
  private readonly facts = new Map<string, MachineFacts>();
  private readonly index = new MachineIndex((key) => this.facts.get(key));
  private lastPlanned: string[] = [];

  constructor(private readonly w: World) {
    this.sync();
  }

  sync(): void {
    const before = new Set(this.facts.keys());
    this.machines = structuredClone(this.w.live());
    this.cluster = structuredClone(this.w.cluster);
    this.check = structuredClone(this.w.check);
    for (const m of this.machines) {
      before.delete(keyOf(m));
      this.indexMachine(m);
    }
    for (const key of before) {
      this.facts.delete(key);
      this.index.update(key, undefined, undefined, false);
    }
  }

  /** What the executor read or wrote goes back into the cache (as the informers' upsert does). */
  remember(kind: 'check' | 'machine' | 'cluster', raw: Json): void {
    if (kind === 'check') this.check = structuredClone(raw);
    else if (kind === 'cluster') this.cluster = structuredClone(raw);
    else {
      this.machines = [...this.machines.filter((m) => m.metadata.uid !== raw.metadata.uid), structuredClone(raw)];
      this.indexMachine(raw);
    }
  }

  /** The reconcile succeeded: the newly settled Machines its snapshot read are counted from now on. */
  consumed(): void {
    this.index.consumed(keyOf(this.check), this.lastPlanned);
  }

  private indexMachine(m: Json): void {
    const f = readMachine(m, 'v1beta2');
    this.facts.set(keyOf(m), f);
    this.index.update(keyOf(m), `${m.metadata.namespace}/${f.clusterName}`, f, false);
  }

  /** The snapshot a plan reads; `partitioned` false: every Machine in `machines` (what the partition must equal). */
  build(live: Live, partitioned = true): Snapshot | undefined {
    const check = (live.check ?? this.check) as MachineJoinCheck;
    const parsed = parseSettings(check.spec);
    const ck = `${check.metadata.namespace}/${check.spec.clusterName}`;
    this.index.watch(keyOf(check), ck, parsed.settings?.selector);
    const planned = partitioned ? this.index.planned(keyOf(check), ck, namedUids(check.status)) : this.machines.map(keyOf);
    if (partitioned) this.lastPlanned = planned;
    const byKey = new Map(this.machines.map((m) => [keyOf(m), m]));
    const cached = planned.map((k) => byKey.get(k)).filter((m): m is Json => m !== undefined);
    const machines = cached.filter((m) => live.machines.get(m.metadata.uid) !== null).map((m) => live.machines.get(m.metadata.uid) ?? m);
    for (const [uid, m] of live.machines) if (m !== null && !machines.some((x) => x.metadata.uid === uid)) machines.push(m);
    const included = machines.map(keyOf);
    const cluster = live.cluster === undefined ? this.cluster : live.cluster;
    return {
      check,
      ...(parsed.settings ? { settings: parsed.settings } : { settingsError: parsed.errors.map((e) => e.message).join('; ') }),
      ...(cluster ? { cluster: readCluster(cluster, 'v1beta2') } : {}),
      machines: machines.map((m) => readMachine(m, 'v1beta2')),
      malformed: [],
      bootstrapConfigs: new Map(),
      mhcs: this.w.mhc ? [this.w.mhc] : [],
      capi: { apiVersion: 'v1beta2', minor: 14 },
      ...(this.previous ? { previous: this.previous } : {}),
      ...(partitioned ? { settled: this.index.settled(keyOf(check), ck, included) } : {}),
      connectionGraceMs: 60_000,
      now: this.w.t,
    };
  }
}

function keyOf(o: Json): string {
  return `${o.metadata.namespace}/${o.metadata.name}`;
}

function getCondition(o: Json, type: string): Json | undefined {
  return (o.status?.conditions ?? []).find((c: Json) => c.type === type);
}

function setCondition(o: Json, c: Json): void {
  const list = (o.status.conditions ?? []).filter((x: Json) => x.type !== c.type);
  o.status.conditions = [...list, c];
}

function removeCondition(o: Json, type: string): void {
  o.status.conditions = (o.status.conditions ?? []).filter((x: Json) => x.type !== type);
}
