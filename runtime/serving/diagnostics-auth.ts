// Who may read the diagnostics endpoint, decided as controller-runtime's filters.WithAuthenticationAndAuthorization
// decides it (the filter CAPI's managers put in front of /metrics):
// - authentication: the bearer token goes to the apiserver in a TokenReview (no anonymous access, no client
//   certificates); answers are cached for 1 minute, authenticated or not; errors are not cached;
// - authorization: a SubjectAccessReview for the non-resource URL and the request's verb (`get /metrics`);
//   allowed answers are cached for 5 minutes, denied ones for 30 seconds; errors are not cached;
// - a failed review is retried 5 times, 0.5 s apart growing ×1.5 with 20 % jitter (apiserver's webhook backoff).
// 401 without a valid token, 403 without the permission, 500 when the apiserver could not answer.
import { createHash } from 'node:crypto';

type Json = Record<string, any>;

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export type AuthDecision = { code: 200; user: UserInfo } | { code: 401 | 403 | 500; message: string };

export interface DelegatingAuthOptions {
  /** POSTs a review to the apiserver and returns the answer; throws `{ code }` (0: no answer) when it fails. */
  post: (path: string, body: Json) => Promise<Json>;
  tokenTtlMs?: number;
  allowTtlMs?: number;
  denyTtlMs?: number;
  /** First retry delay (default 500 ms); tests shorten it. */
  retryBaseMs?: number;
  now?: () => number;
}

const TOKEN_REVIEWS = '/apis/authentication.k8s.io/v1/tokenreviews';
const ACCESS_REVIEWS = '/apis/authorization.k8s.io/v1/subjectaccessreviews';
const MAX_ENTRIES = 4096;

/** A bounded map whose entries expire; the oldest go first when full. */
class TtlCache<V> {
  private readonly m = new Map<string, { v: V; until: number }>();
  constructor(private readonly now: () => number) {}

  get(k: string): V | undefined {
    const e = this.m.get(k);
    if (!e) return undefined;
    if (e.until > this.now()) return e.v;
    this.m.delete(k);
    return undefined;
  }

  set(k: string, v: V, ttlMs: number): void {
    this.m.delete(k);
    if (this.m.size >= MAX_ENTRIES) this.m.delete(this.m.keys().next().value!);
    this.m.set(k, { v, until: this.now() + ttlMs });
  }
}

const retryable = (e: unknown): boolean => {
  const code = (e as { code?: unknown })?.code;
  return typeof code !== 'number' || code === 0 || code === 429 || code >= 500;
};

export class DelegatingAuth {
  private readonly now: () => number;
  private readonly tokens: TtlCache<UserInfo | null>;
  private readonly decisions: TtlCache<{ allowed: boolean; reason: string }>;
  private readonly inflight = new Map<string, Promise<unknown>>();

  constructor(private readonly o: DelegatingAuthOptions) {
    this.now = o.now ?? Date.now;
    this.tokens = new TtlCache(this.now);
    this.decisions = new TtlCache(this.now);
  }

  /** Decides one request: its method, path and Authorization header. */
  async check(method: string, path: string, authorization: string | undefined): Promise<AuthDecision> {
    const m = /^bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!m) return { code: 401, message: 'Unauthorized' };
    let user: UserInfo | null;
    try {
      user = await this.authenticate(m[1]!);
    } catch {
      return { code: 500, message: 'Authentication failed' };
    }
    if (!user) return { code: 401, message: 'Unauthorized' };
    const verb = method.toLowerCase();
    try {
      const d = await this.authorize(user, verb, path);
      if (!d.allowed) return { code: 403, message: `Authorization denied for user ${user.username}` };
    } catch {
      return { code: 500, message: `Authorization for user ${user.username} failed` };
    }
    return { code: 200, user };
  }

  private async authenticate(token: string): Promise<UserInfo | null> {
    const key = createHash('sha256').update(token).digest('hex');
    const cached = this.tokens.get(key);
    if (cached !== undefined) return cached;
    return this.once(`t:${key}`, async () => {
      const r = await this.review(TOKEN_REVIEWS, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec: { token },
      });
      const s = r.status ?? {};
      let user: UserInfo | null = null;
      if (s.authenticated === true && typeof s.user?.username === 'string') {
        const groups: string[] = Array.isArray(s.user.groups) ? s.user.groups : [];
        // apiserver's AuthenticatedGroupAdder: every authenticated user is in system:authenticated.
        if (!groups.includes('system:authenticated')) groups.push('system:authenticated');
        user = {
          username: s.user.username,
          ...(s.user.uid ? { uid: s.user.uid } : {}),
          groups,
          ...(s.user.extra ? { extra: s.user.extra } : {}),
        };
      }
      this.tokens.set(key, user, this.o.tokenTtlMs ?? 60_000);
      return user;
    });
  }

  private async authorize(user: UserInfo, verb: string, path: string): Promise<{ allowed: boolean; reason: string }> {
    const spec = {
      user: user.username,
      uid: user.uid,
      groups: user.groups,
      extra: user.extra,
      nonResourceAttributes: { path, verb },
    };
    const key = JSON.stringify(spec);
    const cached = this.decisions.get(key);
    if (cached) return cached;
    return this.once(`a:${key}`, async () => {
      const r = await this.review(ACCESS_REVIEWS, {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec,
      });
      const d = {
        allowed: r.status?.allowed === true && r.status?.denied !== true,
        reason: String(r.status?.reason ?? ''),
      };
      this.decisions.set(key, d, d.allowed ? (this.o.allowTtlMs ?? 5 * 60_000) : (this.o.denyTtlMs ?? 30_000));
      return d;
    });
  }

  /** Concurrent identical reviews share one request (as the apiserver's cached authenticator does). */
  private once<T>(key: string, f: () => Promise<T>): Promise<T> {
    let p = this.inflight.get(key) as Promise<T> | undefined;
    if (!p) {
      p = f().finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }

  private async review(path: string, body: Json): Promise<Json> {
    let delay = this.o.retryBaseMs ?? 500;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.o.post(path, body);
      } catch (e) {
        if (attempt >= 5 || !retryable(e)) throw e;
        await new Promise((r) => setTimeout(r, delay * (1 + Math.random() * 0.2)));
        delay *= 1.5;
      }
    }
  }
}
