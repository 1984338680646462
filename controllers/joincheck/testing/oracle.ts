// The reference judge of the property test (test-only): JoinGuard's safety promises judged from the world's own
// record — every write the fake apiserver accepted, with the Machine as it was at that instant, and the times the
// world knows to be true (creation, readiness, join, the control plane's initialization, the workload connection).
//
// It is written from DESIGN's rules alone and shares no code with the defendant: it imports no product module
// (not verdict-rules.ts, marks.ts, guards.ts, causedMarks, the readers or time.ts); it reads raw objects itself, with the
// world's knowledge of which list each release writes (objects.ts, a test file), and it knows who wrote each
// condition (the world tells it: JoinGuard, an owner, the MachineHealthCheck and why), so "a mark JoinGuard
// caused" is provenance here, not the product's reading of reasons. The only product figure it repeats is the
// 15-minute unanswered bound, a number of the contract.
//
// Each violation is a line starting with its invariant's tag, e.g. "[joined] ...": docs/planner.md lists them.
import { getCond, isFalse, REMEDIATE_MACHINE, type Json, type Release } from './objects.js';
import { Runs, type FailureKind } from './oracle-runs.js';
import { specAt } from './oracle-spec.js';

export type Actor = 'joinguard' | 'owner' | 'mhc' | 'fleet';

/** The rules that hold for a whole history; the budgets and the pause are read from the check's spec at each write. */
export interface OracleRules {
  release: Release;
  joinTimeoutMs: number;
  provisionTimeoutMs?: number;
  consecutiveJoinFailures: number;
  probeIntervalMs: number;
  maxProbeIntervalMs: number;
  neverJoinedLimit: number;
  connectionGraceMs: number;
  firstControlPlane: 'Remediate' | 'Report';
  dryRun: boolean;
  unansweredMs: number;
  /** A joined Machine carrying JoinGuard's mark is clean after at most this many clean passes that see the join. */
  passes: number;
}

/** What the world knows to be true of a Machine (whole seconds, as the apiserver stores times). */
export interface MachineTruth {
  uid: string;
  name: string;
  owner: string;
  controlPlane: boolean;
  /** Created by KCP as the init Machine (its KubeadmConfig has no joinConfiguration). */
  init: boolean;
  created: number;
  /** Infrastructure and bootstrap data ready (the earliest time CAPI said so: the join clock's start). */
  readyAt?: number;
  /** When the apiserver first showed it ready (a provision timeout is judged by what could be seen). */
  readySeenAt?: number;
  /** When it got its Node (nodeRef). */
  joinedAt?: number;
}

export interface ClusterTruth {
  initializedAt?: number;
  /** The workload connection's outages (RemoteConnectionProbe False), oldest first. */
  outages: { down: number; up?: number }[];
  /** Paused now (spec.paused): CAPI's controllers and JoinGuard leave its Machines alone. */
  paused: boolean;
}

/** The MachineHealthCheck as it is now. */
export interface MhcTruth {
  paused: boolean;
  selects(m: Json): boolean;
}

export interface Truth {
  machine(uid: string): MachineTruth;
  cluster(): ClusterTruth;
  mhc(): MhcTruth | undefined;
  /** Every Machine the world ever had; `live`: still there. */
  machines(): (MachineTruth & { live: boolean })[];
}

/** The check as stored when a write was accepted. */
export interface CheckAt {
  uid: string;
  annotations: Record<string, string>;
  deleting: boolean;
  requests: Json[];
  spec: Json;
}

export interface MachineWrite {
  t: number;
  by: Actor;
  uid: string;
  before: Json;
  /** undefined: the write deleted it (a deletionTimestamp, or gone). */
  after: Json;
  verb: 'status' | 'metadata' | 'delete';
  check?: CheckAt;
  /** A MachineHealthCheck write: whether JoinGuard's annotation or condition made it mark the Machine. */
  becauseOfJoinGuard?: boolean;
}

interface Track {
  owner: string;
  /** HealthCheckSucceeded=False in the owners' list, there because of JoinGuard. */
  hc: boolean;
  annotation: boolean;
  /** JoinGuardJoined=False (JoinGuard alone writes it). */
  condition: boolean;
  /** Deleting because JoinGuard deleted it or an owner acted on JoinGuard's mark. */
  deletedForJoinGuard: boolean;
  deleting: boolean;
  /** The check incarnation whose controller wrote the mark. */
  check?: string;
  visibleAt?: number;
  answeredAt?: number;
  /** The check incarnations that withdrew their mark from it (a new check starts with no memory). */
  withdrawnBy: Set<string>;
  /** When the world first stored its request open, in which epoch, under which per-owner budget. */
  recorded?: { t: number; epoch: number; maxPerOwner: number; windowMs: number };
  /** Its first mark went to the failure memory's judge. */
  judgedInRuns?: boolean;
  /** The stored status holds its request open (since `recorded`). */
  openRecorded?: boolean;
  /** The check recorded the request withdrawn while withdraw-all held or the check was going: the write may come later. */
  withdrawalDecidedForAll?: boolean;
  cleanPasses: number;
}

const SKIPS = ['joinguard.io/skip', 'cluster.x-k8s.io/skip-remediation', 'cluster.x-k8s.io/paused'];
/** DESIGN's marker inside a condition's message: `JoinGuard (MachineJoinCheck <ns>/<name>, uid <uid>): ...`. */
const MESSAGE_MARKER = /^JoinGuard \(MachineJoinCheck [^\s,()]+, uid ([A-Za-z0-9-]+)\): /;
const REQUESTED_BY = 'joinguard.io/requested-by';
const WAITING = 'WaitingForRemediation';

export class Oracle {
  readonly violations: string[] = [];
  private readonly tracks = new Map<string, Track>();
  private epoch = 0;
  /** The stored status's writes, counted: the order of what they stored (the world's clock may not move between). */
  private statusWrites = 0;
  /** The status write whose resume (lastResume changed) began each epoch. */
  private readonly resumedAt = new Map<number, number>();
  /** The status write in which a Machine's failure first showed (recentFailures): counted by then. */
  private readonly failureStored = new Map<string, number>();
  /** The failure memory's judge (oracle-runs.ts). */
  readonly runs: Runs;
  /** Counted for the printed figures. */
  readonly counts = {
    marks: 0,
    withdrawals: 0,
    answered: 0,
    ownerDeletesOfJoined: 0,
    /** Of those: the Machine joined after JoinGuard's mark became visible (the join-against-owner race). */
    joinedAfterMark: 0,
    judgedWrites: 0,
    pausedWrites: 0,
    rolloutJudged: 0,
    rolloutSuspects: 0,
  };

  constructor(
    private readonly rules: OracleRules,
    private readonly truth: Truth,
  ) {
    this.runs = new Runs(rules);
  }

  private fail(tag: string, t: number, what: string): void {
    this.violations.push(`[${tag}] ${new Date(t).toISOString()}: ${what}`);
  }

  private track(uid: string): Track {
    let k = this.tracks.get(uid);
    if (k === undefined)
      this.tracks.set(
        uid,
        (k = {
          owner: this.truth.machine(uid).owner,
          hc: false,
          annotation: false,
          condition: false,
          deletedForJoinGuard: false,
          deleting: false,
          withdrawnBy: new Set(),
          cleanPasses: 0,
        }),
      );
    return k;
  }

  /** JoinGuard's mark is on it (not counting a deletion). */
  private marked(k: Track): boolean {
    return k.hc || k.annotation || k.condition;
  }

  // ---- what the raw objects say (read here, not through the product's readers) ----

  private hcFalse(m: Json): Json | undefined {
    const c = getCond(m, this.rules.release, 'owner', 'HealthCheckSucceeded');
    return isFalse(c) ? c : undefined;
  }

  private ownerAnswer(m: Json): string | undefined {
    for (const list of ['owner', 'v2'] as const) {
      const c = getCond(m, this.rules.release, list, 'OwnerRemediated');
      if (c !== undefined && (c.status === 'True' || (c.reason !== undefined && c.reason !== WAITING)))
        return `${c.status}/${c.reason ?? ''}`;
    }
    return undefined;
  }

  // ---- the record ----

  machineWrite(w: MachineWrite): void {
    this.counts.judgedWrites++;
    const k = this.track(w.uid);
    const b = w.before;
    const a = w.after;
    const hcBefore = this.hcFalse(b);
    const hcAfter = this.hcFalse(a);
    const annBefore = REMEDIATE_MACHINE in (b.metadata.annotations ?? {});
    const annAfter = REMEDIATE_MACHINE in (a.metadata.annotations ?? {});
    const condBefore = isFalse(getCond(b, this.rules.release, 'owner', 'JoinGuardJoined'));
    const condAfter = isFalse(getCond(a, this.rules.release, 'owner', 'JoinGuardJoined'));
    const hcNew = hcAfter !== undefined && (hcBefore === undefined || hcBefore.reason !== hcAfter.reason);
    const deletedNow =
      w.verb === 'delete' || (a.metadata.deletionTimestamp !== undefined && b.metadata.deletionTimestamp === undefined);
    const wasMarked = this.marked(k);

    if (w.by === 'joinguard') {
      // [paused] nothing at all is written to a paused Cluster's Machines (clusterctl move copies them meanwhile).
      if (this.truth.cluster().paused) {
        this.counts.pausedWrites++;
        this.fail(
          'paused',
          w.t,
          `JoinGuard wrote ${this.truth.machine(w.uid).name} (${w.verb}) while its Cluster was paused`,
        );
      }
      const marks =
        (hcNew ? 1 : 0) + (annAfter && !annBefore ? 1 : 0) + (condAfter && !condBefore ? 1 : 0) + (deletedNow ? 1 : 0);
      const unmarks =
        (hcBefore !== undefined && hcAfter === undefined && k.hc ? 1 : 0) +
        (annBefore && !annAfter && k.annotation ? 1 : 0) +
        (condBefore && !condAfter ? 1 : 0);
      if (marks > 0) this.judgeMark(w, k, deletedNow);
      if (unmarks > 0) this.judgeWithdrawal(w, k);
    }

    // Provenance: who put each mark there.
    if (hcAfter === undefined) k.hc = false;
    else if (hcNew) k.hc = w.by === 'joinguard' || (w.by === 'mhc' && w.becauseOfJoinGuard === true);
    if (!annAfter) k.annotation = false;
    else if (!annBefore) k.annotation = w.by === 'joinguard';
    k.condition = condAfter;
    if (w.by === 'mhc' && w.becauseOfJoinGuard === true && hcNew) this.answer(k, w.t);
    if (
      w.by === 'owner' &&
      wasMarked &&
      this.ownerAnswer(a) !== undefined &&
      this.ownerAnswer(b) !== this.ownerAnswer(a)
    )
      this.answer(k, w.t);
    if (deletedNow) {
      k.deleting = true;
      k.deletedForJoinGuard = w.by === 'joinguard' || (w.by === 'owner' && wasMarked);
      if (wasMarked || w.by === 'joinguard') this.answer(k, w.t);
      if (w.by === 'owner' && wasMarked && b.status?.nodeRef?.name) {
        this.counts.ownerDeletesOfJoined++;
        const joinedAt = this.truth.machine(w.uid).joinedAt;
        if (k.visibleAt !== undefined && joinedAt !== undefined && joinedAt >= k.visibleAt)
          this.counts.joinedAfterMark++;
      }
    }
    if (w.by === 'joinguard' && ((this.marked(k) && !wasMarked) || deletedNow)) k.check = w.check?.uid;
  }

  private answer(k: Track, t: number): void {
    if (k.answeredAt === undefined && k.visibleAt !== undefined) {
      k.answeredAt = t;
      this.counts.answered++;
    }
  }

  private judgeMark(w: MachineWrite, k: Track, deleting: boolean): void {
    const m = w.before;
    const tr = this.truth.machine(w.uid);
    const what = `${deleting ? 'JoinGuard deleted' : 'JoinGuard marked'} ${tr.name}`;
    this.counts.marks++;
    // [joined] the promise users care about most: never a mark or a delete on a Machine that has a Node.
    if (m.status?.nodeRef?.name)
      this.fail('joined', w.t, `${what}, which had nodeRef ${m.status.nodeRef.name} at the time of the write`);
    if (m.metadata.deletionTimestamp !== undefined)
      this.fail('mark-allowed', w.t, `${what} while it was being deleted`);
    const skip = SKIPS.find((s) => s in (m.metadata.annotations ?? {}));
    if (skip !== undefined) this.fail('mark-allowed', w.t, `${what}, which carried ${skip}`);
    if (this.rules.dryRun) this.fail('mark-allowed', w.t, `${what} in a dry run`);
    const spec = specAt(w.check?.spec);
    // [paused] nothing is asked while the check is paused (its withdrawals still go: owners are not paused).
    if (spec.paused) this.fail('paused', w.t, `${what} while the check's spec.paused was true`);
    // [paused-mhc] nothing is asked through a paused MachineHealthCheck.
    const mhc = this.truth.mhc();
    const annotated =
      REMEDIATE_MACHINE in (w.after.metadata.annotations ?? {}) &&
      !(REMEDIATE_MACHINE in (m.metadata.annotations ?? {}));
    if (annotated && mhc !== undefined && mhc.paused && mhc.selects(m))
      this.fail(
        'paused-mhc',
        w.t,
        `${what} with ${REMEDIATE_MACHINE} while the MachineHealthCheck selecting it was paused`,
      );
    const hc = this.hcFalse(m);
    if (hc !== undefined && !k.hc)
      this.fail('mark-allowed', w.t, `${what} over someone else's mark (HealthCheckSucceeded=False/${hc.reason})`);
    if (deleting && tr.controlPlane)
      this.fail(
        'first-control-plane',
        w.t,
        `${what}: a control-plane Machine is never deleted, only its provider replaces it`,
      );
    if (k.withdrawnBy.has(w.check?.uid ?? ''))
      this.fail('asked-twice', w.t, `${what} again after the same check had withdrawn its mark`);
    // [not-before-deadline] from the world's times, by DESIGN's clocks.
    const failedAt = this.failedAt(tr);
    if (failedAt === undefined || w.t < failedAt) {
      this.fail(
        'not-before-deadline',
        w.t,
        `${what} before its deadline (${failedAt === undefined ? 'none has passed: ' + this.clockStory(tr) : new Date(failedAt).toISOString()})`,
      );
    }
    const first = tr.init && this.truth.cluster().initializedAt === undefined;
    // [first-control-plane] once the Cluster reports its control plane initialized, the Machine that was the first
    // control-plane one is never marked again (a request recorded before, written after, is no exception).
    if (tr.init && !first)
      this.fail(
        'first-control-plane',
        w.t,
        `${what}, the first control-plane Machine, after the Cluster reported its control plane initialized (${new Date(this.truth.cluster().initializedAt!).toISOString()})`,
      );
    if (first && this.rules.firstControlPlane === 'Report')
      this.fail('first-control-plane', w.t, `${what}, the first control-plane Machine, with firstControlPlane: Report`);
    if (!first) this.judgeConnection(w.t, what);
    // [write-ahead] the request is in the stored status before the Machine carries its mark.
    if (!w.check?.requests.some((r) => r.uid === w.uid && r.state === 'Open'))
      this.fail('write-ahead', w.t, `${what} with no open request for it in the stored status`);
    this.judgeMarker(w);
    if (k.visibleAt === undefined) k.visibleAt = Math.floor(w.t / 1000) * 1000; // whole seconds, as status times
    const toRuns = k.judgedInRuns !== true;
    k.recorded ??= { t: w.t, epoch: this.epoch, maxPerOwner: spec.maxPerOwner, windowMs: spec.windowMs };
    this.checkPerOwner(w.t, k);
    if (toRuns) {
      k.judgedInRuns = true;
      const kind = this.kindOf(w);
      const due = this.joinDeadline(tr);
      // Judged when it was decided: when its request was recorded (a mark a refusal held back is written later).
      // A Machine the suspicion held, rebuilt after a resume: its failure was stored before the resume, so it was
      // counted then and is not counted again (docs/decisions/resume-rebuilds-held-machines.md).
      const stored = this.failureStored.get(w.uid);
      const resumed = this.resumedAt.get(k.recorded.epoch);
      const x = {
        t: k.recorded.t,
        uid: w.uid,
        name: tr.name,
        kind,
        epoch: k.recorded.epoch,
        ...(due !== undefined ? { due } : {}),
        ...(stored !== undefined && resumed !== undefined && stored < resumed ? { heldOver: true } : {}),
      };
      for (const v of this.runs.mark(x))
        this.violations.push(
          `${v.slice(0, v.indexOf(']') + 1)} ${new Date(w.t).toISOString()}: ${v.slice(v.indexOf(']') + 2)}`,
        );
    }
  }

  /**
   * The failure a mark answers, as the mark carries it (its reason on the condition paths) or as its request records
   * it (the annotation and delete paths carry none): what the product counted.
   */
  private kindOf(w: MachineWrite): FailureKind {
    const said = (r: string | undefined): FailureKind | undefined =>
      r === 'JoinTimeout' ? 'join' : r === 'ProvisionTimeout' ? 'provision' : undefined;
    const a = w.after;
    return (
      said(this.hcFalse(a)?.reason) ??
      said(getCond(a, this.rules.release, 'owner', 'JoinGuardJoined')?.reason) ??
      said(w.check?.requests.find((r) => r.uid === w.uid)?.kind) ??
      'unknown'
    );
  }

  /** The uid a condition's message names as its marker. */
  private messageMarker(c: Json | undefined): string | undefined {
    return typeof c?.message === 'string' ? MESSAGE_MARKER.exec(c.message)?.[1] : undefined;
  }

  /** The check a Machine's JoinGuard mark names: inside its condition's message, else the annotation. */
  private markerOf(m: Json): string | undefined {
    return (
      this.messageMarker(this.hcFalse(m)) ??
      this.messageMarker(
        isFalse(getCond(m, this.rules.release, 'owner', 'JoinGuardJoined'))
          ? getCond(m, this.rules.release, 'owner', 'JoinGuardJoined')
          : undefined,
      ) ??
      m.metadata.annotations?.[REQUESTED_BY]
    );
  }

  /**
   * [marker] a mark never exists without its marker: the write that makes it names the check that asked — inside the
   * condition it writes (its message), or, for the annotation, `joinguard.io/requested-by` in the same patch.
   */
  private judgeMarker(w: MachineWrite): void {
    const a = w.after;
    const b = w.before;
    const uid = w.check?.uid;
    const name = this.truth.machine(w.uid).name;
    const missing: string[] = [];
    const hc = this.hcFalse(a);
    if (hc !== undefined && this.hcFalse(b)?.reason !== hc.reason && this.messageMarker(hc) !== uid)
      missing.push('HealthCheckSucceeded=False without it in its message');
    const jg = getCond(a, this.rules.release, 'owner', 'JoinGuardJoined');
    const jgBefore = getCond(b, this.rules.release, 'owner', 'JoinGuardJoined');
    if (isFalse(jg) && !isFalse(jgBefore) && this.messageMarker(jg) !== uid)
      missing.push('JoinGuardJoined=False without it in its message');
    const ann =
      REMEDIATE_MACHINE in (a.metadata.annotations ?? {}) && !(REMEDIATE_MACHINE in (b.metadata.annotations ?? {}));
    if (ann && a.metadata.annotations?.[REQUESTED_BY] !== uid)
      missing.push(`${REMEDIATE_MACHINE} without ${REQUESTED_BY}`);
    if (missing.length > 0)
      this.fail(
        'marker',
        w.t,
        `JoinGuard marked ${name} without naming its check (${uid}) in the same write: ${missing.join('; ')}`,
      );
  }

  /** Its join deadline by DESIGN's clock and the world's times (none before it is ready, nor before initialization). */
  private joinDeadline(tr: MachineTruth): number | undefined {
    const init = this.truth.cluster().initializedAt;
    if (tr.readyAt === undefined || (!tr.init && init === undefined)) return undefined;
    return Math.max(tr.created, tr.readyAt, tr.init ? tr.created : init!) + this.rules.joinTimeoutMs;
  }

  /** When the Machine failed by DESIGN's clocks: the earlier of its provision and join deadlines that passed. */
  private failedAt(tr: MachineTruth): number | undefined {
    const init = this.truth.cluster().initializedAt;
    // Every clock but the init Machine's waits for the control plane: nothing else is due before it exists.
    const gate = tr.init ? undefined : init;
    if (!tr.init && init === undefined) return undefined;
    const out: number[] = [];
    if (this.rules.provisionTimeoutMs !== undefined) {
      const d = Math.max(tr.created, gate ?? tr.created) + this.rules.provisionTimeoutMs;
      if (tr.readySeenAt === undefined || tr.readySeenAt > d) out.push(d);
    }
    if (tr.readyAt !== undefined)
      out.push(Math.max(tr.created, tr.readyAt, gate ?? tr.created) + this.rules.joinTimeoutMs);
    return out.length === 0 ? undefined : Math.min(...out);
  }

  private clockStory(tr: MachineTruth): string {
    const iso = (t: number | undefined) => (t === undefined ? 'never' : new Date(t).toISOString());
    return `created ${iso(tr.created)}, ready ${iso(tr.readyAt)}, control plane initialized ${iso(this.truth.cluster().initializedAt)}`;
  }

  /** [unobservable] no verdict while CAPI cannot see the workload cluster, nor within the grace after it is back. */
  private judgeConnection(t: number, what: string): void {
    for (const o of this.truth.cluster().outages) {
      if (o.down <= t && (o.up === undefined || t < o.up + this.rules.connectionGraceMs)) {
        this.fail(
          'unobservable',
          t,
          `${what} while the workload connection was down since ${new Date(o.down).toISOString()}${o.up !== undefined ? ` (back at ${new Date(o.up).toISOString()}, grace ${this.rules.connectionGraceMs / 1000}s)` : ''}`,
        );
      }
    }
  }

  /** [withdrawn-only-when] a mark is taken back only from a Machine that joined or was opted out, when all are, or when nobody answered it. */
  private judgeWithdrawal(w: MachineWrite, k: Track): void {
    const m = w.before;
    this.counts.withdrawals++;
    // Only a check's own mark counts: clearing a deleted check's leftover mark is not this check's ask taken back.
    if (w.check !== undefined && (k.check === undefined || k.check === w.check.uid)) k.withdrawnBy.add(w.check.uid);
    if (m.status?.nodeRef?.name) return;
    if (SKIPS.some((s) => s in (m.metadata.annotations ?? {}))) return;
    const c = w.check;
    if (
      c === undefined ||
      c.deleting ||
      'joinguard.io/withdraw-all' in c.annotations ||
      (k.check !== undefined && c.uid !== k.check)
    )
      return;
    // Decided and recorded under withdraw-all (or while the check was going), written once a refusal let it through.
    if (k.withdrawalDecidedForAll === true) return;
    const name = this.truth.machine(w.uid).name;
    // Answered within the bound: JoinGuard reads the Machine live before it calls a request unanswered. (An answer
    // that came later may meet a withdrawal decided, and recorded, before it.)
    if (
      k.answeredAt !== undefined &&
      k.visibleAt !== undefined &&
      k.answeredAt < k.visibleAt + this.rules.unansweredMs
    ) {
      this.fail(
        'withdrawn-only-when',
        w.t,
        `JoinGuard withdrew its mark from ${name}, not joined, which its owner had answered at ${new Date(k.answeredAt).toISOString()}`,
      );
    } else if (k.visibleAt !== undefined && w.t < k.visibleAt + this.rules.unansweredMs) {
      this.fail(
        'withdrawn-only-when',
        w.t,
        `JoinGuard withdrew its mark from ${name}, not joined, as unanswered only ${Math.round((w.t - k.visibleAt) / 1000)}s after the mark became visible`,
      );
    }
  }

  /** An accepted write of the check's status: requests it records (per-owner windows) and resumes (new windows). */
  statusWrite(
    t: number,
    before: Json | undefined,
    after: Json,
    check: { uid: string; annotations: Record<string, string>; deleting: boolean; spec: Json },
  ): void {
    if (check.deleting || 'joinguard.io/withdraw-all' in check.annotations) {
      const was = new Map<string, string>((before?.requests ?? []).map((r: Json) => [r.uid, r.state]));
      for (const r of after.requests ?? []) {
        const k = this.tracks.get(r.uid);
        if (r.state === 'Withdrawn' && was.get(r.uid) !== 'Withdrawn' && k !== undefined)
          k.withdrawalDecidedForAll = true;
      }
    }
    const sb = before?.suspicion;
    const sa = after.suspicion;
    if (sa !== undefined && (sb === undefined || sb.since !== sa.since)) this.judgeRollout(t, sa);
    const lb = before?.lastResume;
    const la = after.lastResume;
    const n = ++this.statusWrites;
    for (const f of after.recentFailures ?? []) if (!this.failureStored.has(f.uid)) this.failureStored.set(f.uid, n);
    // A resume acted on: a new time or value, or the same one recorded afresh after it was seen removed (the same
    // value written again acts again, within the same second too: seed 220707144).
    const again = lb?.removed === true && la?.removed !== true;
    if (la !== undefined && (lb === undefined || lb.time !== la.time || lb.value !== la.value || again))
      this.resumedAt.set(++this.epoch, n);
    // [suspicion] a move never clears a suspicion, nor loses it: the stripped status rebuilt after the unpause is no
    // join, and the moved check carries its memory. The suspicion the check's lineage last stored (a move keeps it, a
    // new check does not) is judged where the world leaves no doubt: gone with no resume since, after a move since it
    // was raised, every join the world knows before it and shown by the controller's caches before it too (a
    // credential suspicion: a RolloutSuspect also ends with its rollout).
    const kept = this.suspicionKept;
    const resumeKey = la === undefined ? undefined : `${la.time}/${la.value}`;
    if (
      kept !== undefined &&
      kept.check === check.uid &&
      sa === undefined &&
      resumeKey === kept.resume &&
      kept.reason !== 'RolloutSuspect' &&
      !check.deleting &&
      !('joinguard.io/withdraw-all' in check.annotations)
    ) {
      const since = Date.parse(kept.since);
      if (this.lastMoveAt >= since && this.runs.allSeenBefore(since))
        this.fail(
          'suspicion',
          t,
          `the suspicion raised at ${kept.since} (${kept.machines}) is gone from the stored status after a move, with no resume and no Machine joined since it was raised`,
        );
    }
    this.suspicionKept =
      sa === undefined
        ? undefined
        : {
            check: check.uid,
            since: sa.since,
            reason: sa.reason,
            machines: (sa.machines ?? []).join(', '),
            ...(resumeKey !== undefined ? { resume: resumeKey } : {}),
          };
    const spec = specAt(check.spec);
    const asked: string[] = [];
    // A request leaves the stored status open only when it is forgotten before it was made (remediate.ts notDue): asked
    // again, it is a new decision. (A moved check's first write has no status before it: nothing left.)
    const open = new Set<string>(
      (after.requests ?? []).filter((r: Json) => r.state === 'Open').map((r: Json) => r.uid),
    );
    for (const r of before?.requests ?? []) {
      const k = this.tracks.get(r.uid);
      if (r.state === 'Open' && !open.has(r.uid) && k !== undefined && k.visibleAt === undefined)
        k.openRecorded = false;
    }
    // (A request kept for a Machine gone — while the Cluster is paused, clusterctl move may be copying it — asks nothing.)
    const live = new Set(
      this.truth
        .machines()
        .filter((x) => x.live)
        .map((x) => x.uid),
    );
    for (const r of after.requests ?? []) {
      if (r.state !== 'Open' || !live.has(r.uid)) continue;
      const k = this.tracks.get(r.uid) ?? (this.tryTruth(r.uid) ? this.track(r.uid) : undefined);
      if (k === undefined || k.openRecorded === true) continue;
      k.openRecorded = true;
      if (k.visibleAt === undefined || k.recorded === undefined)
        k.recorded = { t, epoch: this.epoch, maxPerOwner: spec.maxPerOwner, windowMs: spec.windowMs };
      if (!this.flying(k, check.uid)) asked.push(this.truth.machine(r.uid).name);
    }
    if (asked.length > 0) this.checkInFlight(t, check.uid, asked, spec.maxInFlight);
  }

  /** In flight for the check: carrying its mark, or being deleted because of it. */
  private flying(k: Track, checkUid: string): boolean {
    return (this.marked(k) || (k.deleting && k.deletedForJoinGuard)) && (k.check === undefined || k.check === checkUid);
  }

  /** After a pass of the controller: the joined Machines its caches show (what it cannot have missed since). */
  controllerSaw(t: number, joined: ReadonlySet<string>): void {
    this.seenJoined = joined;
    this.runs.controllerSaw(t, joined);
  }

  private seenJoined: ReadonlySet<string> = new Set();
  /** When the last clusterctl move re-created the objects. */
  private lastMoveAt = -Infinity;
  /** The suspicion the check last stored (its check's uid, a move's new one), with the resume stored beside it. */
  private suspicionKept:
    { check: string; since: string; reason: string; machines: string; resume?: string } | undefined;

  /**
   * [rollout-suspect] a suspicion raised names the failures that raised it; which kind it is follows from the world:
   * RolloutSuspect when they all come from the MachineDeployment's newest revision (ms-b) of which no Machine ever
   * joined while a Machine of the revision before (ms-a) did — the product's caches show that one, since a pass —;
   * BootstrapCredentialSuspect otherwise. Judged both ways, only where the world leaves no doubt.
   */
  private judgeRollout(t: number, suspicion: Json): void {
    const all = this.truth.machines();
    // The failures that raised it come first (later ones of the same pass are appended).
    const names: string[] = (suspicion.machines ?? []).slice(0, this.rules.consecutiveJoinFailures);
    const owners = names.map((n) => all.find((x) => x.name === n)?.owner);
    const fromB = owners.length > 0 && owners.every((o) => o === 'ms-b');
    const bEverJoined = all.some((x) => x.owner === 'ms-b' && x.joinedAt !== undefined && x.joinedAt <= t);
    const seen = (owner: string) => all.some((x) => x.owner === owner && x.live && this.seenJoined.has(x.uid));
    this.counts.rolloutJudged++;
    if (suspicion.reason === 'RolloutSuspect') {
      this.counts.rolloutSuspects++;
      if (!fromB || seen('ms-b') || !all.some((x) => x.owner === 'ms-a' && x.joinedAt !== undefined))
        this.fail(
          'rollout-suspect',
          t,
          `RolloutSuspect raised on ${names.join(', ')} (owners ${owners.join(', ')}): not all of the newest revision ms-b, or one of ms-b joined, or none of ms-a ever did`,
        );
    } else if (fromB && !bEverJoined && seen('ms-a'))
      this.fail(
        'rollout-suspect',
        t,
        `${suspicion.reason} raised on ${names.join(', ')}, all of the newest revision ms-b of which none ever joined while ms-a's did: the new template is the suspect (RolloutSuspect)`,
      );
  }

  private tryTruth(uid: string): boolean {
    try {
      this.truth.machine(uid);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * [per-owner] at each mark, the Machines of its owner JoinGuard marked (by when their request was recorded, in the
   * same epoch) inside the window are at most maxPerOwner — the budget in force when this request was recorded (an old
   * request whose write a refusal held back is not judged by a budget lowered since). A second's margin: status times
   * are whole seconds.
   */
  private checkPerOwner(t: number, k: Track): void {
    const r = k.recorded!;
    const mine = [...this.tracks.values()].filter(
      (x) =>
        x.owner === k.owner &&
        x.visibleAt !== undefined &&
        x.recorded !== undefined &&
        x.recorded.epoch === r.epoch &&
        x.recorded.t <= r.t &&
        r.t - x.recorded.t < r.windowMs - 1000,
    );
    if (mine.length > r.maxPerOwner)
      this.fail(
        'per-owner',
        t,
        `${mine.length} Machines of ${k.owner} marked within the window (maxPerOwner ${r.maxPerOwner} per ${r.windowMs / 60000}m when its request was recorded)`,
      );
  }

  /**
   * [in-flight] when the world stores new requests: the Machines carrying the check's mark, or being deleted because of
   * it — in the selector or not — with those newly asked, are at most the maxInFlight in force then.
   */
  private checkInFlight(t: number, checkUid: string, asked: string[], maxInFlight: number): void {
    const flying = [...this.tracks.entries()]
      .filter(([, k]) => this.flying(k, checkUid))
      .map(([uid]) => this.truth.machine(uid).name);
    if (flying.length + asked.length > maxInFlight)
      this.fail(
        'in-flight',
        t,
        `${asked.join(', ')} asked with ${flying.length} in flight (${flying.sort().join(', ')}), maxInFlight ${maxInFlight}`,
      );
  }

  /**
   * clusterctl move: every object re-created with a new uid and without its status (the marks in conditions go; the
   * annotations stay), the check with its memory: nothing else is forgotten — not the epoch, not a Machine's track.
   */
  moved(machines: ReadonlyMap<string, string>, check: { from: string; to: string } | undefined, t: number): void {
    this.lastMoveAt = t;
    if (this.suspicionKept !== undefined && check !== undefined && this.suspicionKept.check === check.from)
      this.suspicionKept.check = check.to;
    for (const [from, to] of machines) {
      const k = this.tracks.get(from);
      this.runs.moved(from, to);
      const stored = this.failureStored.get(from);
      if (stored !== undefined) this.failureStored.set(to, stored);
      if (k === undefined) continue;
      this.tracks.delete(from);
      k.hc = false;
      k.condition = false;
      if (check !== undefined && k.check === check.from) k.check = check.to;
      this.tracks.set(to, k);
    }
  }

  /** A check is created (again): a new incarnation starts with no memory, so its per-owner windows start afresh. */
  checkCreated(): void {
    this.epoch++;
    for (const k of this.tracks.values()) k.openRecorded = false;
  }

  machineGone(uid: string): void {
    this.tracks.delete(uid);
  }

  /**
   * [deleted-check] a check that goes leaves no mark it caused on a Machine that is not being deleted — but on one
   * whose writes were refused (the finalizer waits a bounded time, then says what it leaves).
   */
  checkGone(checkUid: string, t: number, refused: (uid: string) => boolean): void {
    for (const [uid, k] of this.tracks) {
      if (k.check === checkUid && this.marked(k) && !k.deleting && !refused(uid))
        this.fail(
          'deleted-check',
          t,
          `the check ${checkUid} is gone and ${this.truth.machine(uid).name} still carries its mark (${this.describe(k)})`,
        );
    }
  }

  /**
   * [clean-within-N] after a pass of the leader: a Machine carrying JoinGuard's mark that must lose it — it joined, it
   * was opted out, or every mark is withdrawn (withdraw-all, the check deleted) — and that the leader's cache shows
   * so, whose own writes are not refused, is clean after at most `passes` clean passes, whatever another Machine's
   * writes do.
   */
  afterPass(
    t: number,
    clean: boolean,
    seenInCache: (uid: string) => boolean,
    refused: (uid: string) => boolean,
    mustBeClean: (uid: string) => boolean,
  ): void {
    for (const [uid, k] of this.tracks) {
      if (!this.marked(k) || k.deleting || !mustBeClean(uid) || !seenInCache(uid) || refused(uid)) {
        k.cleanPasses = 0;
        continue;
      }
      if (!clean) continue;
      k.cleanPasses++;
      if (k.cleanPasses > this.rules.passes) {
        this.fail(
          'clean-within-N',
          t,
          `${this.truth.machine(uid).name} must lose JoinGuard's mark and still carries it (${this.describe(k)}) after ${k.cleanPasses} clean passes that saw why`,
        );
        k.cleanPasses = -1_000_000; // once per Machine
      }
    }
  }

  /**
   * [requested-by] once converged, every Machine carrying JoinGuard's mark says which check asked (its marker, in the
   * message of JoinGuard's condition or `joinguard.io/requested-by`): a mark is recognised from the Machine alone.
   */
  checkMarkers(t: number, live: readonly Json[]): void {
    for (const m of live) {
      const k = this.tracks.get(m.metadata.uid);
      if (k === undefined || !this.marked(k) || k.deleting || k.check === undefined) continue;
      const said = this.markerOf(m);
      if (said !== k.check)
        this.fail(
          'requested-by',
          t,
          `${m.metadata.name} carries JoinGuard's mark (${this.describe(k)}) whose marker is ${said === undefined ? 'absent' : `"${said}"`}, not the uid of the check that asked (${k.check})`,
        );
    }
  }

  /** JoinGuard's marks still on a Machine (for the convergence check at the end of a history). */
  marksOf(uid: string): string | undefined {
    const k = this.tracks.get(uid);
    return k !== undefined && this.marked(k) ? this.describe(k) : undefined;
  }

  private describe(k: Track): string {
    return [
      k.hc ? 'HealthCheckSucceeded=False' : '',
      k.annotation ? REMEDIATE_MACHINE : '',
      k.condition ? 'JoinGuardJoined=False' : '',
    ]
      .filter((x) => x !== '')
      .join(', ');
  }
}
