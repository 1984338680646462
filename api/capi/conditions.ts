// Condition lists as CAPI writes them: metav1.Condition (v1beta2 `status.conditions`, v1beta1
// `status.v1beta2.conditions`) and CAPI's own v1beta1 Condition (v1beta1 `status.conditions`, with
// severity). Both share type/status/reason/message/lastTransitionTime, which is all JoinGuard reads.
import type { Cond, TimedFact } from './model.js';
import { isObj, kindOf, parseTime, type ObjectReader } from './reader.js';

export interface ParsedCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason?: string;
  message?: string;
  severity?: string;
  /** lastTransitionTime in epoch ms. */
  since?: number;
  observedGeneration?: number;
}

const STATUSES = new Set(['True', 'False', 'Unknown']);

/** The conditions at `path` by type; absent is empty. Each malformed entry throws naming its field. */
export function readConditions(r: ObjectReader, path: string): Map<string, ParsedCondition> {
  const list = r.list(path) ?? [];
  const out = new Map<string, ParsedCondition>();
  list.forEach((c, i) => {
    const at = `${path}[${i}]`;
    if (!isObj(c)) r.fail(at, `must be a condition object, found ${kindOf(c)}`);
    const type = c['type'];
    if (typeof type !== 'string' || type === '')
      r.fail(`${at}.type`, `is required (a non-empty string), found ${kindOf(type)}`);
    out.set(type, parseEntry(r, c, at, type));
  });
  return out;
}

function parseEntry(r: ObjectReader, c: Record<string, unknown>, at: string, type: string): ParsedCondition {
  const field = (k: string) => r.at(k, c, at);
  const status = field('status');
  if (typeof status !== 'string' || !STATUSES.has(status))
    r.fail(`${at}.status`, `must be True, False or Unknown, found ${kindOf(status)}`);
  const pc: ParsedCondition = { type, status: status as ParsedCondition['status'] };
  for (const k of ['reason', 'message', 'severity'] as const) {
    const v = field(k);
    if (v === undefined) continue;
    if (typeof v !== 'string') r.fail(`${at}.${k}`, `must be a string, found ${kindOf(v)}`);
    pc[k] = v;
  }
  const ltt = field('lastTransitionTime');
  if (ltt !== undefined) {
    const t = typeof ltt === 'string' ? parseTime(ltt) : undefined;
    if (t === undefined) r.fail(`${at}.lastTransitionTime`, `must be an RFC 3339 time, found ${kindOf(ltt)}`);
    pc.since = t;
  }
  const og = field('observedGeneration');
  if (og !== undefined) {
    if (typeof og !== 'number' || !Number.isInteger(og))
      r.fail(`${at}.observedGeneration`, `must be an integer, found ${kindOf(og)}`);
    pc.observedGeneration = og;
  }
  return pc;
}

export function toCond(c: ParsedCondition | undefined): Cond | undefined {
  if (!c) return undefined;
  const out: Cond = { status: c.status };
  if (c.reason !== undefined && c.reason !== '') out.reason = c.reason;
  if (c.message !== undefined && c.message !== '') out.message = c.message;
  if (c.since !== undefined) out.since = c.since;
  return out;
}

/**
 * A boolean fact and when it became true. The boolean field, when the object has it, is the fact (the
 * phase is computed from it); the condition gives the time, and only while it is True.
 */
export function timedFact(flag: boolean | undefined, c: ParsedCondition | undefined): TimedFact {
  const value = flag ?? c?.status === 'True';
  const fact: TimedFact = { value };
  if (value && c?.status === 'True' && c.since !== undefined) fact.since = c.since;
  return fact;
}
