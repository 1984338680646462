// Typed access to a raw object (plain JSON as the API returns it) by field path. A field of the wrong
// type is not "absent": it throws MalformedObjectError naming the field, so that a Machine JoinGuard
// cannot understand is reported and never acted on. `null` counts as absent, as in the API.
import { MalformedObjectError } from './model.js';

export type Obj = Record<string, unknown>;

export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

// RFC 3339 as metav1.Time and metav1.MicroTime serialise it.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export function parseTime(v: string): number | undefined {
  if (!RFC3339.test(v)) return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}

// Paths are the readers' constants: split once (splitting and naming the walked prefix on every read was a fifth
// of the Machine cache's start-up CPU). Bounded, in case a caller ever builds paths from data.
const PARTS = new Map<string, readonly string[]>();
function partsOf(path: string): readonly string[] {
  let parts = PARTS.get(path);
  if (parts === undefined) {
    parts = path.split('.');
    if (PARTS.size < 1024) PARTS.set(path, parts);
  }
  return parts;
}

/** The field named in an error: `prefix` and the first j parts of the path, dot-joined (an empty prefix left out). */
function walkedTo(prefix: string, parts: readonly string[], j: number): string {
  let walked = prefix;
  for (let k = 0; k < j; k++) walked = walked === '' ? parts[k]! : `${walked}.${parts[k]}`;
  return walked;
}

export class ObjectReader {
  private constructor(
    readonly kind: string,
    readonly obj: Obj,
    readonly objectName: string,
  ) {}

  /** Wraps `obj`, refusing what is not an object with metadata. */
  static of(obj: unknown, kind: string): ObjectReader {
    if (!isObj(obj)) throw new MalformedObjectError(kind, '(unknown)', '.', `is not an object but ${kindOf(obj)}`);
    const meta = obj['metadata'];
    const name = isObj(meta) && typeof meta['name'] === 'string' && meta['name'] !== '' ? meta['name'] : undefined;
    const ns = isObj(meta) && typeof meta['namespace'] === 'string' ? meta['namespace'] : undefined;
    let where = name ?? '(unnamed)';
    if (name !== undefined && ns) where = `${ns}/${name}`;
    const r = new ObjectReader(kind, obj, where);
    if (!isObj(meta)) r.fail('metadata', `is required, found ${kindOf(meta)}`);
    if (name === undefined) r.fail('metadata.name', 'is required (a non-empty string)');
    return r;
  }

  fail(field: string, problem: string): never {
    throw new MalformedObjectError(this.kind, this.objectName, field, problem);
  }

  /** The value at a dot path, undefined when it or a parent is absent; a parent that is not an object throws. */
  at(path: string, from: Obj = this.obj, prefix = ''): unknown {
    const parts = partsOf(path);
    let cur: unknown = from;
    for (let j = 0; j < parts.length; j++) {
      if (cur === undefined || cur === null) return undefined;
      if (!isObj(cur)) this.fail(walkedTo(prefix, parts, j), `must be an object, found ${kindOf(cur)}`);
      cur = cur[parts[j]!];
    }
    return cur === null ? undefined : cur;
  }

  string(path: string): string | undefined {
    const v = this.at(path);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') this.fail(path, `must be a string, found ${kindOf(v)}`);
    return v;
  }

  /** A non-empty string, required. */
  requiredString(path: string): string {
    const v = this.string(path);
    if (v === undefined || v === '') this.fail(path, 'is required (a non-empty string)');
    return v;
  }

  bool(path: string): boolean | undefined {
    const v = this.at(path);
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') this.fail(path, `must be true or false, found ${kindOf(v)}`);
    return v;
  }

  int(path: string): number | undefined {
    const v = this.at(path);
    if (v === undefined) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v)) this.fail(path, `must be an integer, found ${kindOf(v)}`);
    return v;
  }

  time(path: string): number | undefined {
    const v = this.at(path);
    if (v === undefined) return undefined;
    const t = typeof v === 'string' ? parseTime(v) : undefined;
    if (t === undefined) this.fail(path, `must be an RFC 3339 time, found ${kindOf(v)}`);
    return t;
  }

  requiredTime(path: string): number {
    const t = this.time(path);
    if (t === undefined) this.fail(path, 'is required (an RFC 3339 time)');
    return t;
  }

  object(path: string): Obj | undefined {
    const v = this.at(path);
    if (v === undefined) return undefined;
    if (!isObj(v)) this.fail(path, `must be an object, found ${kindOf(v)}`);
    return v;
  }

  list(path: string): unknown[] | undefined {
    const v = this.at(path);
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) this.fail(path, `must be a list, found ${kindOf(v)}`);
    return v;
  }

  /** A map of strings (labels, annotations); absent is empty. */
  stringMap(path: string): Record<string, string> {
    const o = this.object(path);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(o ?? {})) {
      if (typeof v !== 'string') this.fail(`${path}[${JSON.stringify(k)}]`, `must be a string, found ${kindOf(v)}`);
      out[k] = v;
    }
    return out;
  }
}

export function kindOf(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return `the string ${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v)}`;
  return `the ${typeof v} ${String(v)}`;
}
