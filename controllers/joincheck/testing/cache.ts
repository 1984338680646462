// One JoinGuard process's caches in the in-memory world (test-only): a copy of each object as last delivered by its
// informer. Delivery lags per object — `deliver(i)` brings one stale object up to date, `sync()` all of them — and
// what the executor reads or writes goes back in at once (as the informers' upsert does). Machines go through the
// product's MachineIndex, so the settled partition is exercised by every history. The snapshot is built from the
// raw objects through the product's readers, for the release the world serves.
import {
  readCluster,
  readKubeadmControlPlane,
  readMachine,
  readMachineHealthCheck,
} from '../../../api/capi/readers.js';
import { readMachineSet } from '../../../api/capi/machine-set.js';
import type { MachineFacts } from '../../../api/capi/model.js';
import { parseSettings } from '../../../api/v1alpha1/settings.js';
import type { MachineJoinCheck } from '../../../api/v1alpha1/types.js';
import { older, versionOf } from '../../../runtime/client/objects.js';
import type { Json } from '../../../runtime/client/rest.js';
import { MachineIndex, namedUids } from '../world/machine-index.js';
import type { PreviousView, Snapshot, Live, SnapshotSource } from '../types.js';
import type { World } from './world.js';

const keyOf = (o: Json): string => `${o.metadata.namespace}/${o.metadata.name}`;

export class Cache implements SnapshotSource {
  readonly machines = new Map<string, Json>();
  cluster: Json | undefined;
  kcp: Json | undefined;
  check: Json | undefined;
  previous?: PreviousView;
  /** The check incarnation (uid) the in-process view belongs to: another check of the same name starts without it. */
  previousFor?: string;
  /** The check uid of the last snapshot built. */
  lastBuiltFor?: string;
  lastStatusWrite?: number;
  probe?: { reachable: boolean; at: number };
  private readonly facts = new Map<string, MachineFacts>();
  private readonly index = new MachineIndex((key) => this.facts.get(key));

  constructor(private readonly w: World) {
    this.sync();
  }

  /** Objects whose cached copy is not the world's (new, changed or gone), in a stable order. */
  stale(): string[] {
    const out: string[] = [];
    for (const m of this.w.live())
      if (this.machines.get(keyOf(m))?.metadata.resourceVersion !== m.metadata.resourceVersion)
        out.push(`machine:${keyOf(m)}`);
    for (const k of this.machines.keys()) if (!this.w.machines.has(k.split('/')[1]!)) out.push(`machine:${k}`);
    if (this.cluster?.metadata.resourceVersion !== this.w.cluster.metadata.resourceVersion) out.push('cluster');
    if (this.kcp?.metadata.resourceVersion !== this.w.kcp.metadata.resourceVersion) out.push('kcp');
    if (this.check?.metadata.resourceVersion !== this.w.check?.metadata.resourceVersion) out.push('check');
    return out.sort();
  }

  /** One informer event: the object's current state (or its deletion) reaches this cache. */
  deliver(what: string): void {
    if (what === 'cluster') this.cluster = structuredClone(this.w.cluster);
    else if (what === 'kcp') this.kcp = structuredClone(this.w.kcp);
    else if (what === 'check') this.setCheck(this.w.check === undefined ? undefined : structuredClone(this.w.check));
    else {
      const key = what.slice('machine:'.length);
      const m = this.w.machines.get(key.split('/')[1]!);
      if (m === undefined) {
        this.machines.delete(key);
        this.facts.delete(key);
        this.index.update(key, undefined, undefined, false);
      } else this.upsert(m);
    }
  }

  sync(): void {
    for (const s of this.stale()) this.deliver(s);
  }

  /**
   * This cache shows why JoinGuard must withdraw its mark from the Machine (the oracle's liveness clock starts then):
   * it holds the check that exists, and the Machine's join or skip annotation, or the check's withdraw-all or
   * deletion.
   */
  seesWhy(uid: string): boolean {
    const c = this.check;
    // Only with the check that exists in this cache: a check not delivered yet (created again after its predecessor
    // went with a mark left behind) has no reconcile that could withdraw anything (seed 1269545085).
    if (c === undefined || c.metadata.uid !== this.w.check?.metadata.uid) return false;
    // Nor while this cache shows the Cluster paused: nothing happens on a paused Cluster, and a pass acts on what its
    // cache shows — the unpause event is what lets it (seed 191426165; the live read never pins a pause: 01b4fc9).
    if (this.cluster?.spec?.paused === true) return false;
    if (c.metadata.deletionTimestamp !== undefined || 'joinguard.io/withdraw-all' in (c.metadata.annotations ?? {}))
      return true;
    for (const m of this.machines.values())
      if (m.metadata.uid === uid)
        return Boolean(m.status?.nodeRef?.name) || 'joinguard.io/skip' in (m.metadata.annotations ?? {});
    return false;
  }

  remember(kind: 'check' | 'machine' | 'cluster', raw: Json): void {
    // As the informers' upsert: a copy older than the one cached never replaces it (a write's answer, then the watch
    // event of an earlier change, or a stale copy the world delivers after a write: staleAfterWrite).
    const had = kind === 'check' ? this.check : kind === 'cluster' ? this.cluster : this.machines.get(keyOf(raw));
    if (had !== undefined && older(versionOf(raw), versionOf(had))) return;
    if (kind === 'check') this.setCheck(structuredClone(raw));
    else if (kind === 'cluster') this.cluster = structuredClone(raw);
    else this.upsert(raw);
  }

  /** A check gone, or another with the same name (a new uid): what this process kept of the old one goes (as on a delete event). */
  private setCheck(c: Json | undefined): void {
    if (this.check !== undefined && c?.metadata.uid !== this.check.metadata.uid) {
      this.index.forget(keyOf(this.check));
      delete this.previous;
      delete this.probe;
    }
    this.check = c;
  }

  private upsert(m: Json): void {
    const key = keyOf(m);
    const copy = structuredClone(m);
    this.machines.set(key, copy);
    const f = readMachine(copy, this.w.v);
    this.facts.set(key, f);
    this.index.update(key, `${m.metadata.namespace}/${f.clusterName}`, f, false);
  }

  /** The reconcile succeeded: the newly settled Machines its snapshot read are counted from now on. */
  consumed(): void {
    if (this.check !== undefined) this.index.consumed(keyOf(this.check));
  }

  /** The snapshot a plan reads; `partitioned` false: every cached Machine (what the partition must equal). */
  build(live: Live, partitioned = true): Snapshot | undefined {
    const check = (live.check ?? this.check) as MachineJoinCheck | undefined;
    if (check === undefined) return undefined;
    const v = this.w.v;
    this.lastBuiltFor = check.metadata.uid;
    const parsed = parseSettings(check.spec);
    const ck = `${check.metadata.namespace}/${check.spec.clusterName}`;
    this.index.watch(keyOf(check), ck, parsed.settings?.selector);
    const planned = partitioned
      ? this.index.planned(keyOf(check), ck, namedUids(check.status))
      : [...this.machines.keys()];
    const machines: Json[] = [];
    for (const k of planned) {
      const m = this.machines.get(k);
      if (m === undefined) continue;
      const l = live.machines.get(m.metadata.uid);
      if (l === null) continue;
      machines.push(l ?? m);
    }
    for (const [uid, m] of live.machines)
      if (m !== null && !machines.some((x) => x.metadata.uid === uid)) machines.push(m);
    const included = machines.map(keyOf);
    const cluster = live.cluster === undefined ? this.cluster : live.cluster;
    const facts = machines.map((m) => readMachine(m, v));
    const bootstrapConfigs = new Map(
      facts.flatMap((f) => {
        const c = this.w.configs.get(f.name);
        return c !== undefined ? [[`${c.kind}/${c.name}`, c] as const] : [];
      }),
    );
    return {
      check,
      ...(parsed.settings
        ? { settings: parsed.settings }
        : { settingsError: parsed.errors.map((e) => e.message).join('; ') }),
      ...(cluster ? { cluster: readCluster(cluster, v) } : {}),
      machines: facts,
      malformed: [],
      bootstrapConfigs,
      ...(this.kcp ? { kcp: readKubeadmControlPlane(this.kcp, v) } : {}),
      mhcs: this.w.mhc ? [readMachineHealthCheck(this.w.mhc, v)] : [],
      machineSets: this.w.machineSets.map((x) => readMachineSet(x)),
      capi: { apiVersion: v, minor: this.w.release === 'v1.14' ? 14 : 10 },
      allowMachineDelete: true, // strategy Delete acts in the world (an install with JOINGUARD_ALLOW_MACHINE_DELETE=true)
      ...(this.previous && this.previousFor === check.metadata.uid ? { previous: this.previous } : {}),
      ...(partitioned ? { settled: this.index.settled(keyOf(check), ck, included) } : {}),
      ...(this.probe ? { endpointProbe: this.probe } : {}),
      // The namespace's checks this cache knows (a marker naming none of them is a deleted check's).
      checkUids: new Set([check.metadata.uid, ...(this.check !== undefined ? [this.check.metadata.uid] : [])]),
      connectionGraceMs: 60_000,
      now: this.w.t,
    };
  }
}
