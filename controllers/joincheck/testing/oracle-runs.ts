// The oracle's judge of the failure memory (test-only, no product import): the suspicion, its canaries and the
// never-joined stop, from JoinGuard's marks as the world recorded them and the joins the world knows happened.
//
// The judge cannot know which failures the product counted (some are held, some it never saw), so it reasons on a
// lower bound: every Machine JoinGuard marked for a join timeout is a failure it counted, before the mark and no
// sooner than its deadline. A run is broken by a join; the product learns of a join only once its caches show it, so
// the judge breaks a run at the latest moment the product could have: when the controller's caches first showed the
// join after a pass (or at the mark itself, if they had not yet). The run's marks are those whose deadline came after
// that break (a failure counted before it, held, may be rebuilt after it). Each mark is judged at its decision — when
// its request was recorded, before the mark (write-ahead; a refusal may hold the write back) — and in that order: by
// the time the n-th was recorded, n failures of the run were counted (T = consecutiveJoinFailures, P =
// probeInterval, M = maxProbeInterval):
// - [suspicion] the T-th is marked no sooner than P after the first: it is the failure that reaches the threshold,
//   which is never rebuilt, or a canary — the first canary waits P after the suspicion, raised no sooner than the
//   first failure of the run (or the first of the run is a canary already, and the next waits longer still);
// - [canary] each later one waits P doubling to M after the one before (the product spends at least as many canaries
//   as the judge sees, and a canary it spent in between only makes the wait longer);
// - [never-joined] while no Machine of the world ever joined, the neverJoinedLimit-th mark of any kind is one too
//   many (the failure that reaches the limit is not rebuilt, and none after it).
// A resume acted on, or a new check, starts a new epoch (a moved check keeps its own); a Machine whose failure the
// stored status held before the resume that began its epoch is rebuilt after it without counting again (heldOver). Provision timeouts neither
// count nor break a run; a mark whose kind the world cannot tell (ready seen after its provision deadline) is left
// out, which only makes the judge more lenient.

export type FailureKind = 'join' | 'provision' | 'unknown';

export interface RunMark {
  /** When the product decided it: its request recorded in the stored status (write-ahead). */
  t: number;
  uid: string;
  name: string;
  kind: FailureKind;
  epoch: number;
  /** The Machine's join deadline by the world's times: its failure was counted no sooner. */
  due?: number;
  /**
   * Its failure was in the stored status before the resume that began its epoch: counted before the resume and not
   * again after it (a resume rebuilds the Machines the suspicion held within the budget, not as new failures).
   */
  heldOver?: boolean;
}

export interface RunRules {
  consecutiveJoinFailures: number;
  probeIntervalMs: number;
  maxProbeIntervalMs: number;
  neverJoinedLimit: number;
}

interface Join {
  t: number;
  uid: string;
  /** The end of the first pass after which the controller's caches showed it joined. */
  seenAt?: number;
}

export class Runs {
  private readonly marks: RunMark[] = [];
  private readonly joins: Join[] = [];
  /** Counted for the printed figures. */
  readonly counts = { judged: 0, reachedThreshold: 0, canaries: 0, neverJoinedJudged: 0 };

  constructor(private readonly rules: RunRules) {}

  joined(uid: string, t: number): void {
    this.joins.push({ t, uid });
  }

  /** A Machine's uid changed (clusterctl move): its join is the same join. */
  moved(from: string, to: string): void {
    for (const j of this.joins) if (j.uid === from) j.uid = to;
    for (const m of this.marks) if (m.uid === from) m.uid = to;
  }

  /** After a pass of the controller: the joined Machines its caches show. */
  controllerSaw(t: number, joined: ReadonlySet<string>): void {
    for (const j of this.joins) if (j.seenAt === undefined && joined.has(j.uid)) j.seenAt = t;
  }

  /** Every join the world knows came before `t`, and the controller's caches had shown it by then. */
  allSeenBefore(t: number): boolean {
    return this.joins.every((j) => j.t < t && j.seenAt !== undefined && j.seenAt < t);
  }

  /** A Machine JoinGuard marked (its first mark, or its deletion): the violations it makes, by tag. */
  mark(x: RunMark): string[] {
    this.marks.push(x);
    return [...this.neverJoined(x), ...this.suspicion(x)];
  }

  private neverJoined(x: RunMark): string[] {
    const limit = this.rules.neverJoinedLimit;
    if (limit <= 0 || this.joins.some((j) => j.t <= x.t)) return [];
    this.counts.neverJoinedJudged++;
    const mine = this.distinct(this.marks.filter((m) => m.epoch === x.epoch && m.t <= x.t && m.heldOver !== true));
    if (mine.length < limit) return [];
    return [
      `[never-joined] ${x.name} marked while no Machine ever joined, as failure ${mine.length} or later ` +
        `(neverJoinedLimit ${limit}: the failure that reaches it is not rebuilt): ${mine.map((m) => m.name).join(', ')}`,
    ];
  }

  private suspicion(x: RunMark): string[] {
    const T = this.rules.consecutiveJoinFailures;
    if (T < 2 || x.kind !== 'join') return [];
    // The latest moment the product may have broken the run before this mark; a failure counted in the run is one
    // that fell due after it (a failure counted before the break and held may be rebuilt after it, as it should).
    let from = -Infinity;
    for (const j of this.joins) if (j.t <= x.t) from = Math.max(from, Math.min(j.seenAt ?? Infinity, x.t));
    const inRun = (m: RunMark) =>
      m.kind === 'join' && m.epoch === x.epoch && m.due !== undefined && m.due > from && m.heldOver !== true;
    if (!inRun(x)) return [];
    const run = this.distinct(this.marks.filter((m) => inRun(m) && m.t <= x.t && m !== x));
    run.push(x);
    const c = run.length;
    if (c < T) return [];
    const P = this.rules.probeIntervalMs;
    const iso = (t: number) => new Date(t).toISOString();
    const names = run.map((m) => `${m.name} ${iso(m.t)}`).join(', ');
    if (c === T) {
      this.counts.reachedThreshold++;
      if (x.t >= run[0]!.t + P) return [];
      return [
        `[suspicion] ${x.name} marked as join failure ${c} in a row (consecutiveJoinFailures ${T}), ` +
          `${Math.round((x.t - run[0]!.t) / 1000)}s after the first: the failure that reaches the threshold is not ` +
          `rebuilt, and no canary comes before probeInterval (${P / 60_000}m). Run: ${names}`,
      ];
    }
    this.counts.canaries++;
    const wait = Math.min(P * 2 ** (c - T), this.rules.maxProbeIntervalMs);
    const prev = run[c - 2]!;
    if (x.t >= prev.t + wait) return [];
    return [
      `[canary] ${x.name} marked as a canary ${Math.round((x.t - prev.t) / 1000)}s after the canary ${prev.name}: ` +
        `canary ${c - T + 1} of the suspicion waits at least ${wait / 60_000}m (probeInterval doubling to ` +
        `maxProbeInterval). Run: ${names}`,
    ];
  }

  /** One mark per Machine (its first), in time order. */
  private distinct(ms: RunMark[]): RunMark[] {
    const seen = new Set<string>();
    return ms.filter((m) => !seen.has(m.uid) && seen.add(m.uid) !== undefined).sort((a, b) => a.t - b.t);
  }
}
