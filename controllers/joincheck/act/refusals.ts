// Machines whose writes are refused (403, a policy webhook's 422, the conditions list at maxItems, any error but
// 404/409), per check, in this process: each is retried on its own with back-off and reported (the check's
// Progressing message, a WriteRefused event, joinguard_write_refused_machines), and never holds back another
// Machine. In-process like a work queue's rate limiter: a restart tries every Machine again at once.
import type { RefusedKind, RefusedWrite } from '../types.js';
import { compareText } from '../words.js';

const FIRST_BACKOFF_MS = 1_000;
const MAX_BACKOFF_MS = 5 * 60_000;
const MAX_MESSAGE = 300;

export class Refusals {
  private readonly byUid = new Map<string, RefusedWrite>();

  /** Records a refused write and returns it, with its next retry: 1 s, doubling, at most 5 min. */
  refused(
    t: { uid: string; name: string },
    write: RefusedKind,
    err: Error & { code?: unknown; reason?: unknown },
    now: number,
  ): RefusedWrite {
    const prev = this.byUid.get(t.uid);
    // An ApiError's reason is the apiserver's message (an admission webhook names itself there); its code the HTTP
    // status.
    const text =
      typeof err.code === 'number' && typeof err.reason === 'string' ? `${err.code} ${err.reason}` : err.message;
    const attempts = (prev?.attempts ?? 0) + 1;
    const r: RefusedWrite = {
      uid: t.uid,
      machine: t.name,
      write,
      ...(typeof err.code === 'number' ? { code: err.code } : {}),
      message: text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text,
      since: prev?.since ?? now,
      attempts,
      retryAt: now + Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (attempts - 1)),
    };
    this.byUid.set(t.uid, r);
    return r;
  }

  /** The Machine's write went through, or it needs none any more. */
  cleared(uid: string): void {
    this.byUid.delete(uid);
  }

  /** A write of this Machine's was refused and has not gone through since. */
  known(uid: string): boolean {
    return this.byUid.has(uid);
  }

  /** Within its back-off: not tried in this pass. */
  waiting(uid: string, now: number): boolean {
    const r = this.byUid.get(uid);
    return r !== undefined && now < r.retryAt;
  }

  /** Forgets Machines the plan no longer writes (gone, or nothing left to write). */
  keepOnly(uids: ReadonlySet<string>): void {
    for (const uid of this.byUid.keys()) if (!uids.has(uid)) this.byUid.delete(uid);
  }

  list(): RefusedWrite[] {
    return [...this.byUid.values()].sort((a, b) => compareText(a.machine, b.machine));
  }

  nextRetryAt(): number | undefined {
    let at: number | undefined;
    for (const r of this.byUid.values()) at = at === undefined ? r.retryAt : Math.min(at, r.retryAt);
    return at;
  }

  get size(): number {
    return this.byUid.size;
  }
}
