// Readers of the persisted memory's records (memory.ts sanitize): they never throw; a bad value is dropped or
// clamped, with a note that names the field by its full path (the status is user-editable).
import type {
  FailureRecord,
  FirstControlPlaneStatus,
  MachineJoinCheckStatus,
  MachineObservation,
  OwnerWindow,
  RemediationRecord,
  RequestRecord,
  RolloutEvidence,
  SuspicionStatus,
} from '../../../api/v1alpha1/types.js';
import {
  FAILURE_KINDS,
  REMEDIATION_OUTCOMES,
  REMEDIATION_PATHS,
  REQUEST_STATES,
  STATUS_LIMITS,
  WITHDRAWN_REASONS,
} from '../../../api/v1alpha1/types.js';
import { iso, ms } from '../time.js';

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

// The words a status may hold, from api/'s one list of each: a word unknown there is dropped on read.
const PATHS = new Set<string>(REMEDIATION_PATHS);
const KINDS = new Set<string>(FAILURE_KINDS);
const PROVISION_ONLY = new Set<string>(['ProvisionTimeout']);
const STATES = new Set<string>(REQUEST_STATES);
const WITHDRAWN = new Set<string>(WITHDRAWN_REASONS);
const OUTCOMES = new Set<string>(REMEDIATION_OUTCOMES);

/** Field readers that never throw: a bad value is dropped (or clamped) with a note naming it. */
export class Fields {
  constructor(
    readonly now: number,
    private readonly notes: string[],
    private readonly where: string,
  ) {}

  /** The same readers for a nested object, whose fields the notes name by their full path. */
  in(field: string): Fields {
    return new Fields(this.now, this.notes, `${this.where}.${field}`);
  }

  note(field: string, what: string): void {
    if (this.notes.length < 20) this.notes.push(`${field === '' ? this.where : `${this.where}.${field}`}: ${what}`);
  }

  drop<T>(at: string): T | undefined {
    this.note(at, 'an entry of the wrong shape, ignored');
    return undefined;
  }

  str(o: Obj, k: string): string | undefined {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'string') return v;
    this.note(k, 'not a string, ignored');
    return undefined;
  }

  bool(o: Obj, k: string): boolean | undefined {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'boolean') return v;
    this.note(k, 'not true or false, ignored');
    return undefined;
  }

  /** A count: an integer in [0, int32 max]; anything else is clamped or dropped, with a note. */
  count(o: Obj, k: string): number | undefined {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      this.note(k, 'not a number, ignored');
      return undefined;
    }
    const c = Math.min(Math.max(Math.trunc(v), 0), STATUS_LIMITS.count);
    if (c !== v) this.note(k, `${v} is out of range, read as ${c}`);
    return c;
  }

  oneOf(o: Obj, k: string, allowed: ReadonlySet<string>): string | undefined {
    const v = this.str(o, k);
    if (v === undefined || allowed.has(v)) return v;
    this.note(k, `unknown value ${JSON.stringify(v)}, entry ignored`);
    return undefined;
  }

  /** An RFC 3339 time; one in the future comes back as now (it was not written by a clock that JoinGuard keeps). */
  time(o: Obj, k: string, futureAllowed = false): string | undefined {
    const v = this.str(o, k);
    return v === undefined ? undefined : this.timeValue(v, k, futureAllowed);
  }

  timeValue(v: string, field: string, futureAllowed = false): string | undefined {
    const t = ms(v);
    if (t === undefined) {
      this.note(field, `${JSON.stringify(v)} is not a time, ignored`);
      return undefined;
    }
    if (!futureAllowed && t > this.now) {
      this.note(field, `${v} is in the future, read as now`);
      return iso(this.now);
    }
    return iso(t);
  }

  owner(o: Obj): { owner?: { kind: string; name: string } } {
    const w = o['owner'];
    if (isObj(w) && typeof w['kind'] === 'string' && typeof w['name'] === 'string')
      return { owner: { kind: w['kind'], name: w['name'] } };
    return {};
  }

  optional(o: Obj, ...keys: string[]): Record<string, string> {
    const out: Record<string, string> = {};
    for (const k of keys) {
      const v = this.str(o, k);
      if (v !== undefined) out[k] = v;
    }
    return out;
  }

  list<T>(o: Obj, k: string, limit: number, read: (e: Obj, f: Fields) => T | undefined): T[] | undefined {
    const v = o[k];
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v)) {
      this.note(k, 'not a list, ignored');
      return undefined;
    }
    const out: T[] = [];
    v.forEach((e, i) => {
      const r = isObj(e) ? read(e, this.in(`${k}[${i}]`)) : this.drop<T>(`${k}[${i}]`);
      if (r !== undefined) out.push(r);
    });
    if (out.length > limit) this.note(k, `${out.length} entries, the newest ${limit} kept`);
    return out.slice(-limit);
  }
}

export function failure(f: Fields, e: Obj): FailureRecord | undefined {
  const machine = f.str(e, 'machine');
  const uid = f.str(e, 'uid');
  const kind = f.oneOf(e, 'kind', KINDS);
  const time = f.time(e, 'time');
  if (!machine || !uid || !kind || !time) return f.drop('');
  return {
    machine,
    uid,
    kind: kind as FailureRecord['kind'],
    time,
    ...f.owner(e),
    ...f.optional(e, 'bootstrapConfig', 'dataSecretName', 'version'),
    ...(e['controlPlane'] === true ? { controlPlane: true } : {}),
  };
}

export function remediation(f: Fields, e: Obj): RemediationRecord | undefined {
  const machine = f.str(e, 'machine');
  const uid = f.str(e, 'uid');
  const path = f.oneOf(e, 'path', PATHS);
  const outcome = f.oneOf(e, 'outcome', OUTCOMES);
  const kind = f.oneOf(e, 'kind', KINDS);
  const time = f.time(e, 'time');
  if (!machine || !uid || !path || !outcome || !kind || !time) return f.drop('');
  const finished = f.time(e, 'finishedTime');
  return {
    machine,
    uid,
    time,
    path: path as RemediationRecord['path'],
    outcome: outcome as RemediationRecord['outcome'],
    kind: kind as RemediationRecord['kind'],
    ...f.owner(e),
    ...f.optional(e, 'ownerReason', 'ownerMessage'),
    ...(finished !== undefined ? { finishedTime: finished } : {}),
    ...(e['canary'] === true ? { canary: true } : {}),
    ...(e['firstControlPlane'] === true ? { firstControlPlane: true } : {}),
  };
}

export function request(f: Fields, e: Obj): RequestRecord | undefined {
  const machine = f.str(e, 'machine');
  const uid = f.str(e, 'uid');
  const path = f.oneOf(e, 'path', PATHS);
  const kind = f.oneOf(e, 'kind', KINDS);
  const state = f.oneOf(e, 'state', STATES);
  const time = f.time(e, 'time');
  if (!machine || !uid || !path || !kind || !state || !time) return f.drop('');
  const withdrawn = f.oneOf(e, 'withdrawn', WITHDRAWN);
  const markedTime = f.time(e, 'markedTime');
  const flags = ['marked', 'answered', 'canary', 'firstControlPlane'] as const;
  return {
    machine,
    uid,
    path: path as RequestRecord['path'],
    kind: kind as RequestRecord['kind'],
    state: state as RequestRecord['state'],
    time,
    ...f.owner(e),
    ...(withdrawn !== undefined ? { withdrawn: withdrawn as RequestRecord['withdrawn'] } : {}),
    ...Object.fromEntries(flags.filter((k) => e[k] === true).map((k) => [k, true])),
    ...(markedTime !== undefined && e['marked'] === true ? { markedTime } : {}),
  };
}

export function ownerWindow(f: Fields, e: Obj): OwnerWindow | undefined {
  const kind = f.str(e, 'kind');
  const name = f.str(e, 'name');
  if (!kind || !name || !Array.isArray(e['times'])) return f.drop('');
  const times = e['times']
    .map((t) => (typeof t === 'string' ? f.timeValue(t, 'times') : undefined))
    .filter((t): t is string => t !== undefined)
    .sort()
    .slice(-STATUS_LIMITS.ownerWindows);
  return { kind, name, times };
}

export function suspicion(f: Fields, e: Obj): SuspicionStatus | undefined {
  const since = f.time(e, 'since');
  if (since === undefined) return f.drop('');
  // The next canary is ahead by nature; the guard bounds it by maxProbeInterval.
  const next = f.time(e, 'nextCanaryTime', true);
  const machines = Array.isArray(e['machines'])
    ? e['machines'].filter((x): x is string => typeof x === 'string').slice(0, STATUS_LIMITS.suspectMachines)
    : [];
  // RolloutSuspect only with its evidence: without it, it is the credential suspicion (same guard, same canaries).
  const rollout =
    e['reason'] === 'RolloutSuspect' && isObj(e['rollout'])
      ? rolloutEvidence(f.in('rollout'), e['rollout'])
      : undefined;
  return {
    reason: rollout !== undefined ? 'RolloutSuspect' : 'BootstrapCredentialSuspect',
    since,
    ...(next !== undefined ? { nextCanaryTime: next } : {}),
    canariesSpent: f.count(e, 'canariesSpent') ?? 0,
    machines,
    ...(rollout !== undefined ? { rollout } : {}),
  };
}

function rolloutEvidence(f: Fields, e: Obj): RolloutEvidence | undefined {
  const { owner } = f.owner(e);
  const revision = f.str(e, 'revision');
  const previousRevision = f.str(e, 'previousRevision');
  if (owner === undefined || !revision || !previousRevision) return f.drop('');
  const changes = Array.isArray(e['changes'])
    ? e['changes'].filter((x): x is string => typeof x === 'string').slice(0, STATUS_LIMITS.rolloutChanges)
    : [];
  return { owner, revision, previousRevision, ...f.optional(e, 'machineSet', 'previousMachineSet'), changes };
}

export function joinDurations(f: Fields, e: Obj): MachineJoinCheckStatus['joinDurations'] {
  const recent = Array.isArray(e['recentSeconds'])
    ? e['recentSeconds']
        .filter((x): x is number => typeof x === 'number' && Number.isFinite(x) && x >= 0)
        .slice(-STATUS_LIMITS.joinDurationSamples)
    : [];
  const out: NonNullable<MachineJoinCheckStatus['joinDurations']> = {
    count: Math.max(f.count(e, 'count') ?? 0, recent.length),
    recentSeconds: recent,
  };
  for (const k of ['p50Seconds', 'p95Seconds', 'maxSeconds'] as const) {
    const v = f.count(e, k);
    if (v !== undefined) out[k] = v;
  }
  const sug = f.str(e, 'suggestedJoinTimeout');
  if (sug !== undefined) out.suggestedJoinTimeout = sug;
  return out;
}

export function observation(f: Fields, e: Obj): MachineObservation | undefined {
  const machine = f.str(e, 'machine');
  const uid = f.str(e, 'uid');
  if (!machine || !uid) return f.drop('');
  const readySeen = f.time(e, 'readySeen');
  const failedAt = f.time(e, 'failedAt');
  const failedKind = f.oneOf(e, 'failedKind', PROVISION_ONLY);
  return {
    machine,
    uid,
    ...(readySeen !== undefined ? { readySeen } : {}),
    ...(failedAt !== undefined ? { failedAt } : {}),
    ...(failedAt !== undefined && failedKind === 'ProvisionTimeout' ? { failedKind } : {}),
  };
}

export function firstControlPlane(f: Fields, e: Obj): FirstControlPlaneStatus {
  const out: FirstControlPlaneStatus = {};
  const r = e['replaced'];
  if (isObj(r) && typeof r['machine'] === 'string' && typeof r['uid'] === 'string') {
    const time = f.time(r, 'time');
    const gone = f.time(r, 'goneTime');
    if (time !== undefined)
      out.replaced = { machine: r['machine'], uid: r['uid'], time, ...(gone !== undefined ? { goneTime: gone } : {}) };
  }
  const forUid = f.str(e, 'extendedFor');
  // An extension is one joinTimeout from when it was given; a later value is not JoinGuard's.
  const until = f.time(e, 'extendedUntil', true);
  if (forUid !== undefined && until !== undefined) Object.assign(out, { extendedFor: forUid, extendedUntil: until });
  const probe = f.time(e, 'probeRequested');
  if (probe !== undefined) out.probeRequested = probe;
  const mis = e['misconfigured'];
  if (isObj(mis) && typeof mis['message'] === 'string')
    out.misconfigured = { since: f.time(mis, 'since') ?? iso(f.now), message: mis['message'] };
  return out;
}
