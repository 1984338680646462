// An in-memory world for the property test (a FAKE of the apiserver and of CAPI, test-only): a Cluster whose
// control plane may initialize during the history, Machines of two MachineSets and of a KubeadmControlPlane, a
// MachineHealthCheck, and the check — served through CAPI v1.14's v1beta2 API or v1.10's v1beta1 API. The real
// executor reaches it through a RestClient stand-in that can fail (500), conflict (409), lose an answer, crash the
// controller, refuse one Machine's writes for good (403/422, as a policy webhook), or let the Machine change
// between the live read and the write (a real 409). The owners (owners.ts) act on CAPI's contract as CAPI's code
// does. Every accepted write goes to the oracle (oracle.ts) with the Machine as it was, and the world keeps the
// times it knows to be true, from which the oracle computes deadlines. Requests in flight together may be taken in a
// seeded order (interleave): the executor's concurrent Machine writes interleave at the apiserver.
import type { BootstrapConfigFacts } from '../../../api/capi/model.js';
import type { MachineJoinCheckSpec } from '../../../api/v1alpha1/types.js';
import { ApiError, type Json, type RestClient } from '../../../runtime/client/rest.js';
import { iso } from '../time.js';
import {
  cluster,
  initializeCluster,
  isProvisioned,
  jsonPatch,
  kubeadmControlPlane,
  machine,
  machineHealthCheck,
  machineSet,
  mhcSelects,
  mergePatch,
  NS,
  provisionMachine,
  REMEDIATE_MACHINE,
  setCond,
  setKcpInitialized,
  versionOf,
  type Release,
} from './objects.js';
import { Oracle, type Actor, type CheckAt, type ClusterTruth, type MachineTruth, type OracleRules } from './oracle.js';

export type Fault = 'ok' | 'fail' | 'conflict' | 'lost' | 'crash';
export class Crash extends Error {}

/**
 * What happens in the world during a reconcile, right after its write-ahead status write is accepted, and reaches the
 * writer's caches before its Machine writes: a Machine joins (one of the requests just recorded, if it can), the
 * Cluster is paused, or the control plane reports initialized.
 */
export type Midway = 'join' | 'pause' | 'initialize';

/** A JoinGuard process's caches as the world feeds them (the driver hands them over by process name). */
export interface CacheFeed {
  /** One informer event: the object's current state reaches the cache (`machine:<ns>/<name>`, cluster, kcp, check). */
  deliver(what: string): void;
  /** An informer event carrying this (older) copy of the object. */
  remember(kind: 'check' | 'machine', raw: Json): void;
}

/** The longest back-off after which JoinGuard must try a once-refused Machine again (the liveness clock waits for it). */
export const REFUSAL_BACKOFF_MS = 10 * 60 * 1000;

export const CHECK_PATH = `/apis/joinguard.io/v1alpha1/namespaces/${NS}/machinejoinchecks/mjc`;

export interface WorldSetup {
  release: Release;
  spec: MachineJoinCheckSpec;
  /** The control plane is initialized at the start (an existing fleet); otherwise KCP creates the first Machine. */
  initialized: boolean;
  kcp: { replicas: number; maxRetry?: number; retryPeriodSeconds?: number; minHealthyPeriodSeconds?: number };
  mhc?: { nodeStartupTimeoutSeconds?: number; watchesJoinGuardCondition: boolean; selectsControlPlane: boolean };
  /** The MachineDeployment's remediation.maxInFlight over its MachineSets' remediations (unset: no limit). */
  mdMaxInFlight?: number;
  oracle: Omit<OracleRules, 'release'>;
}

/** What the world exercised, for the printed figures. */
export const exercised: Record<string, number> = {};
export const count = (what: string, n = 1): void => {
  exercised[what] = (exercised[what] ?? 0) + n;
};

export class World {
  t: number;
  readonly release: Release;
  readonly v: 'v1beta2' | 'v1beta1';
  readonly machines = new Map<string, Json>();
  readonly configs = new Map<string, BootstrapConfigFacts>();
  cluster: Json;
  kcp: Json;
  mhc: Json | undefined;
  check: Json | undefined;
  readonly oracle: Oracle;
  readonly truths = new Map<string, MachineTruth & { joinedAt?: number }>();
  readonly clusterTruth: Omit<ClusterTruth, 'paused'> = { outages: [] };
  /** The MachineSets of the MachineDeployment `md` (ms-a revision 1, ms-b revision 2, another bootstrap template). */
  readonly machineSets: Json[];
  /** The check's status writes are refused (403: RBAC on /status, an admission policy). */
  statusRefused = false;
  /** After clusterctl move, until the Cluster is unpaused: what CAPI's controllers rebuild then (by Machine name). */
  rebuild: { machines: Map<string, { provisioned: boolean; joined: boolean }>; initialized: boolean } | undefined;
  /** Moves done (clusterctl move re-created every object). */
  moves = 0;
  /** Machines that can never join (an expired credential, a broken template): Setup.neverJoin. */
  neverJoins: (m: Json) => boolean = () => false;
  /** Faults for the next writes, in order (then ok). */
  faults: Fault[] = [];
  /** Machines (by name) whose JoinGuard writes a webhook refuses for good. */
  readonly refused = new Map<string, 403 | 422>();
  /** Live reads of a Machine after which the Machine changes before JoinGuard writes (a real 409). */
  races = 0;
  /** Armed for the next reconcile: what changes right after its write-ahead, delivered into its caches at once. */
  midway: { what: Midway; i: number } | undefined;
  /**
   * Armed for the next reconcile: after its accepted writes (this many of its Machines'), the object as it was before the write
   * reaches the writer's caches (a watch event older than the write's answer the cache already holds), before its
   * next request.
   */
  staleAfterWrite = 0;
  /**
   * Armed for the next reconcile: the seed of the order in which its requests in flight together reach the apiserver.
   * Each request then waits for its turn (the ones sent together are taken in a seeded random order, one at a time, each
   * applied and answered before the next is taken): the executor's concurrent Machine writes — and two leaders'
   * requests — interleave, reproducibly. Unset: each request is applied when it is made (the kept histories' world).
   */
  interleave: number | undefined;
  private turns: { go: () => void; machineWrite: string | undefined }[] = [];
  private taking = false;
  private draw = 0;
  /** The owners' and the MachineHealthCheck's clocks against the world's (ms, a few seconds either way). */
  ownerSkewMs = 0;
  /** The caches of the JoinGuard process of that name (set by the driver): where mid-reconcile events go. */
  cacheOf: (who: string) => CacheFeed | undefined = () => undefined;
  private staleQueue: { who: string; kind: 'check' | 'machine'; raw: Json }[] = [];
  /** The MachineSets' preflight checks fail (they defer every remediation). */
  preflightBlocked = false;
  /** The control-plane endpoint answers a TCP probe. */
  endpointAnswers = false;
  /** uids whose remediate-machine annotation JoinGuard set (the MachineHealthCheck marks them because of it). */
  readonly annotatedByJoinGuard = new Set<string>();
  /** When each Machine's refusal was lifted (uid): its writes may wait out the product's back-off after that. */
  private readonly refusalLifted = new Map<string, number>();
  /** When a JoinGuard write to each Machine (uid) last failed (500, lost answer, refused). */
  private readonly writeFailed = new Map<string, number>();
  writes = 0;
  private rv = 100;
  private serial = 0;
  private checkSerial = 0;

  constructor(
    t0: number,
    readonly setup: WorldSetup,
  ) {
    this.t = t0;
    this.release = setup.release;
    this.v = versionOf(setup.release);
    this.cluster = cluster(this.release, setup.initialized, t0);
    if (setup.initialized) this.clusterTruth.initializedAt = this.whole(t0 - 3_600_000);
    this.kcp = kubeadmControlPlane(this.release, setup.kcp);
    if (setup.initialized) setKcpInitialized(this.kcp, this.release);
    const m = setup.mhc;
    if (m !== undefined) {
      const selector = m.selectsControlPlane
        ? { matchExpressions: [{ key: 'pool', operator: 'Exists' }] }
        : { matchLabels: { pool: 'a' } };
      this.mhc = machineHealthCheck(this.release, {
        selector,
        watchesJoinGuardCondition: m.watchesJoinGuardCondition,
        ...(m.nodeStartupTimeoutSeconds !== undefined
          ? { nodeStartupTimeoutSeconds: m.nodeStartupTimeoutSeconds }
          : {}),
      });
    }
    this.machineSets = (['ms-a', 'ms-b'] as const).map((name, i) => machineSet(this.release, name, i + 1));
    this.oracle = new Oracle(
      { ...setup.oracle, release: this.release },
      {
        machine: (uid) => this.truthOf(uid),
        cluster: () => ({ ...this.clusterTruth, paused: this.clusterPaused }),
        mhc: () =>
          this.mhc === undefined
            ? undefined
            : {
                paused: 'cluster.x-k8s.io/paused' in (this.mhc.metadata.annotations ?? {}),
                selects: (m) => mhcSelects(this.mhc!, m),
              },
        machines: () =>
          [...this.truths.values()].map((x) => ({
            ...x,
            live: this.machines.has(x.name) && this.machines.get(x.name)!.metadata.uid === x.uid,
          })),
      },
    );
    this.createCheck();
  }

  /** The Cluster is paused (spec.paused): CAPI's controllers, the owners and the MachineHealthCheck do nothing. */
  get clusterPaused(): boolean {
    return this.cluster.spec.paused === true;
  }

  /** The time on the owners' and the MachineHealthCheck's clocks (the condition times they write). */
  ownerNow(): number {
    return this.t + this.ownerSkewMs;
  }

  whole(t: number): number {
    return Date.parse(iso(t));
  }

  nextRv(): string {
    return String(++this.rv);
  }

  truthOf(uid: string): MachineTruth & { joinedAt?: number } {
    const x = this.truths.get(uid);
    if (x === undefined) throw new Error(`no Machine ${uid} in the world`);
    return x;
  }

  get initialized(): boolean {
    return this.clusterTruth.initializedAt !== undefined;
  }

  // ---- the check: created, deleted (a finalizer holds it), created again with a new uid ----

  createCheck(): void {
    if (this.check !== undefined) return;
    const n = ++this.checkSerial;
    this.check = {
      apiVersion: 'joinguard.io/v1alpha1',
      kind: 'MachineJoinCheck',
      metadata: {
        name: 'mjc',
        namespace: NS,
        uid: n === 1 ? 'uid-mjc' : `uid-mjc-${n}`,
        resourceVersion: this.nextRv(),
        generation: 1,
        creationTimestamp: iso(this.t),
      },
      spec: structuredClone(this.setup.spec),
    };
    this.oracle?.checkCreated();
  }

  deleteCheck(): void {
    if (this.check === undefined || this.check.metadata.deletionTimestamp !== undefined) return;
    this.check = {
      ...this.check,
      metadata: { ...this.check.metadata, deletionTimestamp: iso(this.t), resourceVersion: this.nextRv() },
    };
    this.checkFinalized();
  }

  /** The apiserver removes an object whose deletion is requested once no finalizer is left. */
  private checkFinalized(): void {
    const c = this.check;
    if (c === undefined || c.metadata.deletionTimestamp === undefined || (c.metadata.finalizers ?? []).length > 0)
      return;
    this.check = undefined;
    count('checks gone');
    this.oracle.checkGone(c.metadata.uid, this.t, (uid) => this.refusedForLiveness(uid));
  }

  /** clusterctl move re-creates the check: a new uid, no status (the memory rides in its annotation). */
  moveCheck(n: number): { from: string; to: string } | undefined {
    const c = this.check;
    if (c === undefined) return undefined;
    const from = c.metadata.uid;
    const to = `${from.replace(/-mv\d+$/, '')}-mv${n}`;
    const { deletionTimestamp: _gone, ...metadata } = c.metadata;
    this.check = {
      apiVersion: c.apiVersion,
      kind: c.kind,
      metadata: { ...metadata, uid: to, resourceVersion: this.nextRv(), creationTimestamp: iso(this.t) },
      spec: c.spec,
    };
    return { from, to };
  }

  /** A Machine's new uid (clusterctl move): what the world knows of it follows. */
  rekey(from: string, to: string): void {
    const tr = this.truths.get(from);
    if (tr !== undefined) {
      this.truths.delete(from);
      this.truths.set(to, { ...tr, uid: to });
    }
    for (const m of [this.refusalLifted, this.writeFailed]) {
      const v = m.get(from);
      if (v !== undefined) m.set(to, v);
    }
    if (this.annotatedByJoinGuard.delete(from)) this.annotatedByJoinGuard.add(to);
  }

  annotateCheck(key: string, value: string | undefined): void {
    if (this.check === undefined) return;
    const a = { ...(this.check.metadata.annotations ?? {}) };
    if (value === undefined) delete a[key];
    else a[key] = value;
    this.check = {
      ...this.check,
      metadata: { ...this.check.metadata, annotations: a, resourceVersion: this.nextRv() },
    };
  }

  checkAt(): CheckAt | undefined {
    const c = this.check;
    if (c === undefined) return undefined;
    return {
      uid: c.metadata.uid,
      annotations: c.metadata.annotations ?? {},
      deleting: c.metadata.deletionTimestamp !== undefined,
      requests: c.status?.requests ?? [],
      spec: c.spec,
    };
  }

  // ---- the fleet ----

  create(
    owner: string,
    o: { controlPlane?: boolean; init?: boolean; annotations?: Record<string, string> } = {},
  ): Json {
    const n = ++this.serial;
    const name = `${owner}-m${n}`;
    const cp = o.controlPlane === true;
    const m = machine(this.release, {
      name,
      uid: `uid-${name}`,
      ownerKind: cp ? 'KubeadmControlPlane' : 'MachineSet',
      owner,
      controlPlane: cp,
      labels: { pool: cp ? 'cp' : 'a' },
      ...(o.annotations ? { annotations: o.annotations } : {}),
      t: this.t,
      rv: this.nextRv(),
    });
    this.machines.set(name, m);
    const init = cp && o.init === true;
    this.configs.set(name, {
      kind: 'KubeadmConfig',
      name,
      namespace: NS,
      hasJoinConfiguration: !init,
      joinsControlPlane: cp && !init,
    });
    this.truths.set(m.metadata.uid, {
      uid: m.metadata.uid,
      name,
      owner,
      controlPlane: cp,
      init,
      created: this.whole(this.t),
    });
    count(cp ? 'control-plane Machines' : 'worker Machines');
    return m;
  }

  live(): Json[] {
    return [...this.machines.values()];
  }

  /** A change by CAPI's controllers or the user: a new resourceVersion, and the oracle is told who wrote what. */
  change(
    m: Json,
    by: Actor,
    f: () => void,
    o: { becauseOfJoinGuard?: boolean; verb?: 'status' | 'metadata' | 'delete' } = {},
  ): boolean {
    const before = structuredClone(m);
    f();
    if (JSON.stringify(before) === JSON.stringify(m)) return false;
    m.metadata.resourceVersion = this.nextRv();
    if (by !== 'fleet') {
      const check = this.checkAt();
      this.oracle.machineWrite({
        t: this.t,
        by,
        uid: m.metadata.uid,
        before,
        after: m,
        verb: o.verb ?? 'status',
        ...(check ? { check } : {}),
        ...(o.becauseOfJoinGuard !== undefined ? { becauseOfJoinGuard: o.becauseOfJoinGuard } : {}),
      });
    }
    return true;
  }

  /** Bootstrap data and infrastructure ready; workers (and joining control-plane Machines) only once the control plane is initialized. */
  provision(m: Json, lag: number): void {
    const tr = this.truthOf(m.metadata.uid);
    if (
      this.clusterPaused ||
      isProvisioned(m, this.release) ||
      m.metadata.deletionTimestamp !== undefined ||
      (!tr.init && !this.initialized)
    )
      return;
    const at = this.t - lag; // CAPI's controllers saw it `lag` ago (negative: a clock ahead of ours)
    this.change(m, 'fleet', () => provisionMachine(m, this.release, at));
    tr.readyAt = Math.min(this.whole(at), this.whole(this.t));
    tr.readySeenAt = this.t;
    count(lag < 0 ? 'provisioned (clock ahead)' : 'provisioned');
  }

  /** InfrastructureReady briefly not True: its transition time moves later, its flag stays true. */
  flicker(m: Json): void {
    if (this.clusterPaused || !isProvisioned(m, this.release)) return;
    this.change(m, 'fleet', () => {
      for (const list of this.release === 'v1.14' ? (['v2'] as const) : (['owner', 'v2'] as const)) {
        setCond(m, this.release, list, { type: 'InfrastructureReady', status: 'False', reason: 'Flicker' }, this.t);
        setCond(
          m,
          this.release,
          list,
          { type: 'InfrastructureReady', status: 'True', ...(list === 'v2' ? { reason: 'Ready' } : {}) },
          this.t,
        );
      }
    });
    count('flickers');
  }

  /** The Node appears and CAPI sets nodeRef (not while the Cluster is paused: its Machine controller waits). */
  join(m: Json): void {
    if (
      this.clusterPaused ||
      this.neverJoins(m) ||
      m.status.nodeRef ||
      m.metadata.deletionTimestamp !== undefined ||
      !isProvisioned(m, this.release)
    )
      return;
    this.change(m, 'fleet', () => {
      m.status.nodeRef = { name: `node-${m.metadata.name}` };
      m.status.phase = 'Running';
    });
    const tr = this.truthOf(m.metadata.uid);
    tr.joinedAt = this.t;
    this.oracle.runs.joined(m.metadata.uid, this.t);
    count('joins');
    if (tr.init && !this.initialized) this.initialize(0);
  }

  /** The control plane comes up: KCP and the Cluster say initialized (the Cluster's condition `lag` ago). */
  initialize(lag: number): void {
    if (this.initialized || this.clusterPaused) return;
    const init = this.live().find(
      (m) =>
        this.truthOf(m.metadata.uid).init &&
        m.metadata.deletionTimestamp === undefined &&
        isProvisioned(m, this.release),
    );
    if (init === undefined) return;
    const at = Math.max(this.t - lag, this.truthOf(init.metadata.uid).readyAt ?? this.t);
    initializeCluster(this.cluster, this.release, at);
    this.cluster.metadata.resourceVersion = this.nextRv();
    setKcpInitialized(this.kcp, this.release);
    this.kcp.metadata.resourceVersion = this.nextRv();
    this.clusterTruth.initializedAt = this.whole(at);
    count('control planes initialized');
  }

  skip(m: Json): void {
    this.change(m, 'fleet', () => (m.metadata.annotations = { ...m.metadata.annotations, 'joinguard.io/skip': '' }));
    count('skip annotations');
  }

  /** A deleting Machine is gone (its MachineSet makes a replacement; KCP scales up on its own step). */
  gone(m: Json): void {
    if (m.metadata.deletionTimestamp === undefined) return;
    this.machines.delete(m.metadata.name);
    this.oracle.machineGone(m.metadata.uid);
    count('Machines gone');
    const owner = m.metadata.ownerReferences[0];
    if (owner.kind === 'MachineSet') this.create(owner.name);
  }

  connection(up: boolean): void {
    if (!this.initialized || this.clusterPaused) return;
    const out = this.clusterTruth.outages;
    const last = out[out.length - 1];
    const down = last !== undefined && last.up === undefined;
    if (down === !up) return;
    setCond(
      this.cluster,
      this.release,
      'v2',
      { type: 'RemoteConnectionProbe', status: up ? 'True' : 'False', reason: up ? 'ProbeSucceeded' : 'ProbeFailed' },
      this.t,
    );
    this.cluster.metadata.resourceVersion = this.nextRv();
    if (up) last!.up = this.whole(this.t);
    else out.push({ down: this.t });
    count(up ? 'connections back' : 'connections lost');
  }

  unrefuseAll(): void {
    for (const name of this.refused.keys()) {
      const m = this.machines.get(name);
      if (m !== undefined) this.refusalLifted.set(m.metadata.uid, this.t);
    }
    this.refused.clear();
  }

  /** JoinGuard must withdraw its mark from this Machine: it joined, was opted out, or every mark is withdrawn. */
  mustBeClean(uid: string): boolean {
    const tr = this.truths.get(uid);
    const m = tr !== undefined ? this.machines.get(tr.name) : undefined;
    if (m === undefined || m.metadata.uid !== uid || this.clusterPaused) return false;
    const c = this.check;
    // With the check's status refused, only withdrawals that need no record go: the Machine joined, the check went.
    if (this.statusRefused) return Boolean(m.status.nodeRef) || c?.metadata.deletionTimestamp !== undefined;
    return (
      Boolean(m.status.nodeRef) ||
      'joinguard.io/skip' in (m.metadata.annotations ?? {}) ||
      (c !== undefined &&
        (c.metadata.deletionTimestamp !== undefined || 'joinguard.io/withdraw-all' in (c.metadata.annotations ?? {})))
    );
  }

  /**
   * Its writes are refused, or one failed less than a back-off ago (JoinGuard retries a Machine whose write failed
   * with back-off, up to 5 minutes): the oracle's liveness clock does not run for it then.
   */
  refusedForLiveness(uid: string): boolean {
    const tr = this.truths.get(uid);
    if (tr !== undefined && this.refused.has(tr.name)) return true;
    const last = Math.max(this.refusalLifted.get(uid) ?? -Infinity, this.writeFailed.get(uid) ?? -Infinity);
    return this.t < last + REFUSAL_BACKOFF_MS;
  }

  // ---- the apiserver, as JoinGuard's RestClient sees it ----

  private machinePath(path: string): { m: Json | undefined; status: boolean } | undefined {
    const prefix = `/apis/cluster.x-k8s.io/${this.v}/namespaces/${NS}/machines/`;
    if (!path.startsWith(prefix)) return undefined;
    const [name, sub] = path.slice(prefix.length).split('/');
    return { m: this.machines.get(decodeURIComponent(name ?? '')), status: sub === 'status' };
  }

  private clusterPath(): string {
    return `/apis/cluster.x-k8s.io/${this.v}/namespaces/${NS}/clusters/c1`;
  }

  /** Processes (by name) that crashed: a dead process sends nothing more, whatever its code does with the error. */
  readonly crashed = new Set<string>();

  /** One write: a fault may stop it (or lose its answer); a webhook may refuse it; a resourceVersion guards it. */
  private write<T>(who: string, method: string, path: string, rv: string | undefined, apply: () => T): T {
    if (this.crashed.has(who)) throw new Crash(`${who} is dead`);
    this.writes++;
    const f = this.faults.shift() ?? 'ok';
    if (f === 'crash') this.crashed.add(who);
    const target = this.machinePath(path);
    if (target?.m !== undefined && (f === 'fail' || f === 'lost' || this.refused.has(target.m.metadata.name)))
      this.writeFailed.set(target.m.metadata.uid, this.t);
    if (f === 'fail') throw new ApiError(500, method, path, 'etcdserver: request timed out');
    if (f === 'conflict') throw new ApiError(409, method, path, 'the object has been modified');
    if (f === 'crash') throw new Crash(`crash before ${method} ${path}`);
    const refusal = target?.m !== undefined ? this.refused.get(target.m.metadata.name) : undefined;
    if (refusal !== undefined) {
      count('writes refused (403/422)');
      throw new ApiError(
        refusal,
        method,
        path,
        refusal === 403 ? 'forbidden by policy' : 'admission webhook "policy.example.com" denied the request',
      );
    }
    if (rv !== undefined) {
      const current = target !== undefined ? target.m?.metadata.resourceVersion : this.check?.metadata.resourceVersion;
      if (current !== undefined && current !== rv) {
        count('real 409s');
        throw new ApiError(
          409,
          method,
          path,
          'the object has been modified; please apply your changes to the latest version',
        );
      }
    }
    const out = apply();
    if (f === 'lost') throw new ApiError(0, method, path, 'the response was lost');
    return out;
  }

  private machineWrite(
    who: string,
    method: string,
    path: string,
    rv: string | undefined,
    f: (m: Json) => void,
    verb: 'status' | 'metadata' | 'delete',
  ): Json {
    return this.write(who, method, path, rv, () => {
      const m = this.machinePath(path)?.m;
      if (m === undefined) throw new ApiError(404, method, path, 'not found');
      const had = REMEDIATE_MACHINE in (m.metadata.annotations ?? {});
      const before = structuredClone(m);
      if (this.change(m, 'joinguard', () => f(m), { verb })) this.staleLater(who, 'machine', before);
      const has = REMEDIATE_MACHINE in (m.metadata.annotations ?? {});
      if (has && !had) this.annotatedByJoinGuard.add(m.metadata.uid);
      if (!has) this.annotatedByJoinGuard.delete(m.metadata.uid);
      return structuredClone(m);
    });
  }

  private checkWrite(who: string, method: string, path: string, rv: string | undefined, f: (c: Json) => Json): Json {
    return this.write(who, method, path, rv, () => {
      if (this.check === undefined) throw new ApiError(404, method, path, 'not found');
      if (this.statusRefused && path.endsWith('/status')) {
        count('status writes refused (403)');
        throw new ApiError(
          403,
          method,
          path,
          'machinejoinchecks.joinguard.io "mjc" is forbidden: cannot update resource "machinejoinchecks/status"',
        );
      }
      const before = this.check;
      const next = f(structuredClone(before));
      next.metadata = {
        ...next.metadata,
        uid: before.metadata.uid,
        name: before.metadata.name,
        resourceVersion: this.nextRv(),
      };
      if (before.metadata.deletionTimestamp !== undefined)
        next.metadata.deletionTimestamp = before.metadata.deletionTimestamp;
      else delete next.metadata.deletionTimestamp;
      next.spec = before.spec;
      this.check = next;
      this.staleLater(who, 'check', before);
      if (JSON.stringify(before.status) !== JSON.stringify(next.status))
        this.oracle.statusWrite(this.t, before.status, next.status ?? {}, {
          uid: next.metadata.uid,
          annotations: next.metadata.annotations ?? {},
          deleting: next.metadata.deletionTimestamp !== undefined,
          spec: next.spec,
        });
      const out = structuredClone(next);
      this.checkFinalized();
      if (path.endsWith('/status') && this.check !== undefined) this.midwayEvent(who);
      return out;
    });
  }

  /** A request's turn (interleave): once every request made meanwhile waits too, one of them is taken at random. */
  /** `machineWrite`: the process that writes a Machine with this request. */
  private async turn(machineWrite?: string): Promise<void> {
    if (this.interleave === undefined) return;
    await new Promise<void>((r) => {
      this.turns.push({ go: r, machineWrite });
      if (!this.taking) {
        this.taking = true;
        setImmediate(() => this.take());
      }
    });
  }

  private take(): void {
    this.taking = false;
    if (this.turns.length === 0) return;
    if (this.turns.length > 1) count('requests interleaved (taken among several in flight)');
    const writers = this.turns.flatMap((x) => (x.machineWrite !== undefined ? [x.machineWrite] : []));
    if (writers.length > 1) count('Machine writes interleaved (several in flight)');
    if (new Set(writers).size < writers.length) count("Machine writes interleaved (one pass's, several in flight)");
    // mulberry32 over the seed and the draw
    let x = ((this.interleave ?? 0) + 0x6d2b79f5 * ++this.draw) | 0;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    const n = ((x ^ (x >>> 14)) >>> 0) % this.turns.length;
    const [go] = this.turns.splice(n, 1);
    go!.go();
    if (this.turns.length > 0) {
      this.taking = true;
      setImmediate(() => this.take());
    }
  }

  rest(who = 'joinguard'): RestClient {
    const trace = (what: string) => process.env['PROPERTY_DEBUG'] === '2' && console.log(`    ${who}: ${what}`);
    const get = async (path: string): Promise<Json> => {
      if (this.interleave !== undefined) await this.turn();
      if (this.crashed.has(who)) throw new Crash(`${who} is dead`);
      this.flushStale(who);
      trace(`GET ${path.split('/').slice(-2).join('/')}`);
      if (path === this.clusterPath()) return structuredClone(this.cluster);
      if (path === CHECK_PATH && this.check !== undefined) return structuredClone(this.check);
      const m = this.machinePath(path)?.m;
      if (m === undefined) throw new ApiError(404, 'GET', path, 'not found');
      const answer = structuredClone(m);
      if (this.races > 0) this.race(m);
      return answer;
    };
    const patch = (method: string, path: string, body: any, json: boolean): Json => {
      this.flushStale(who);
      trace(`${method} ${path.split('/').slice(-2).join('/')} ${JSON.stringify(body).slice(0, 160)}`);
      if (path === CHECK_PATH || path === `${CHECK_PATH}/status`) {
        const rv = json ? undefined : body?.metadata?.resourceVersion;
        return this.checkWrite(who, method, path, rv, (c) =>
          json
            ? jsonPatch(c, body)
            : (mergePatch(c, path.endsWith('/status') ? { status: body.status } : { metadata: body.metadata }) as Json),
        );
      }
      const target = this.machinePath(path);
      if (target === undefined) throw new ApiError(404, method, path, 'not found');
      const rv = json ? undefined : body?.metadata?.resourceVersion;
      const answer = this.machineWrite(
        who,
        method,
        path,
        rv,
        (m) => {
          const next = json
            ? jsonPatch(m, body)
            : (mergePatch(m, target.status ? { status: body.status } : { metadata: body.metadata }) as Json);
          if (target.status) m.status = next.status;
          else m.metadata = { ...next.metadata, resourceVersion: m.metadata.resourceVersion, uid: m.metadata.uid };
        },
        target.status ? 'status' : 'metadata',
      );
      // The answer to a write of the Machine's metadata (the marker) may be JoinGuard's live read of it: CAPI may
      // change the Machine right after it too.
      if (!target.status && this.races > 0 && target.m !== undefined) this.race(target.m);
      return answer;
    };
    return {
      get,
      mergePatch: async (path: string, body: Json) => {
        if (this.interleave !== undefined) await this.turn(this.machinePath(path) !== undefined ? who : undefined);
        return patch('PATCH', path, body, false);
      },
      jsonPatch: async (path: string, ops: Json[]) => {
        if (this.interleave !== undefined) await this.turn();
        return patch('PATCH', path, ops, true);
      },
      put: async (path: string, body: Json) => {
        if (this.interleave !== undefined) await this.turn();
        this.flushStale(who);
        trace(
          `PUT ${path.split('/').slice(-2).join('/')} rv ${body.metadata?.resourceVersion} requests ${JSON.stringify((body.status?.requests ?? []).map((r: Json) => [r.machine, r.state]))}`,
        );
        if (path !== CHECK_PATH && path !== `${CHECK_PATH}/status`)
          throw new ApiError(405, 'PUT', path, 'the world takes PUTs of the check only');
        return this.checkWrite(who, 'PUT', path, body.metadata?.resourceVersion, (c) =>
          path.endsWith('/status')
            ? { ...c, status: structuredClone(body.status) }
            : { ...c, metadata: { ...structuredClone(body.metadata) } },
        );
      },
      deleteWithPreconditions: async (path: string, uid: string, rv: string) => {
        if (this.interleave !== undefined) await this.turn(who);
        this.flushStale(who);
        trace(`DELETE ${path.split('/').slice(-1)} rv ${rv}`);
        return this.machineWrite(
          who,
          'DELETE',
          path,
          rv,
          (m) => {
            if (m.metadata.uid !== uid) throw new ApiError(409, 'DELETE', path, 'precondition failed: uid');
            m.metadata.deletionTimestamp = iso(this.t);
          },
          'delete',
        );
      },
    } as unknown as RestClient;
  }

  /** Between JoinGuard's live read and its write, CAPI changes the Machine: it joins, or an owner writes a condition. */
  private race(m: Json): void {
    this.races--;
    if (m.metadata.deletionTimestamp !== undefined) return;
    if (!m.status.nodeRef && isProvisioned(m, this.release)) {
      this.join(m);
      count('races: joined after the live read');
    } else {
      this.change(m, 'fleet', () =>
        setCond(
          m,
          this.release,
          'v2',
          {
            type: 'Ready',
            status: m.status.nodeRef ? 'True' : 'False',
            reason: 'Race',
            message: `touched at ${iso(this.t)}`,
          },
          this.t,
        ),
      );
      count('races: changed after the live read');
    }
  }

  /** The armed mid-reconcile event, once, right after `who`'s write-ahead was accepted: the world changes, its caches see it. */
  private midwayEvent(who: string): void {
    const x = this.midway;
    if (x === undefined || this.crashed.has(who)) return;
    this.midway = undefined;
    const feed = this.cacheOf(who);
    if (x.what === 'pause') {
      if (this.clusterPaused) return;
      this.cluster.spec.paused = true;
      this.cluster.metadata.resourceVersion = this.nextRv();
      feed?.deliver('cluster');
      count('mid-reconcile: Cluster paused after the write-ahead');
      return;
    }
    if (x.what === 'initialize') {
      if (this.initialized) return;
      this.initialize(0);
      if (!this.initialized) return;
      feed?.deliver('cluster');
      feed?.deliver('kcp');
      count('mid-reconcile: control plane initialized after the write-ahead');
      return;
    }
    // A Machine joins: one whose request the write-ahead just recorded open, if one can, else any that can.
    const open = new Set<string>(
      (this.check?.status?.requests ?? []).filter((r: Json) => r.state === 'Open').map((r: Json) => r.uid),
    );
    const can = this.live().filter(
      (m) =>
        !m.status.nodeRef &&
        m.metadata.deletionTimestamp === undefined &&
        isProvisioned(m, this.release) &&
        !this.neverJoins(m),
    );
    const asked = can.filter((m) => open.has(m.metadata.uid));
    const pool = asked.length > 0 ? asked : can;
    const m = pool[x.i % Math.max(1, pool.length)];
    if (m === undefined || this.clusterPaused) return;
    this.join(m);
    if (!m.status.nodeRef) return;
    feed?.deliver(`machine:${NS}/${m.metadata.name}`);
    count(`mid-reconcile: joined after the write-ahead${asked.length > 0 ? ' (a request just recorded)' : ''}`);
  }

  /** An accepted write of `who`: the object as it was before may reach its caches after the write's answer. */
  private staleLater(who: string, kind: 'check' | 'machine', before: Json): void {
    if (this.staleAfterWrite <= 0) return;
    if (kind === 'machine') this.staleAfterWrite--; // (the check's writes while armed too, counting Machine writes)
    this.staleQueue.push({ who, kind, raw: before });
  }

  /** The stale copies queued for `who` reach its caches (before its next request, or at the end of the reconcile). */
  flushStale(who?: string): undefined {
    const mine = this.staleQueue.filter((x) => who === undefined || x.who === who);
    this.staleQueue = this.staleQueue.filter((x) => !mine.includes(x));
    for (const x of mine) {
      const feed = this.cacheOf(x.who);
      if (feed === undefined) continue;
      feed.remember(x.kind, x.raw);
      count(`stale ${x.kind === 'check' ? 'checks' : 'Machines'} delivered after a write`);
    }
    return undefined;
  }

  /** The end of a reconcile: what was armed for it and did not happen is dropped; stale copies still queued arrive. */
  reconciled(): void {
    this.midway = undefined;
    this.staleAfterWrite = 0;
    this.flushStale();
  }
}
