// Item-at-a-time JSON for lists and watches, so that no list page is ever held as one string or one object
// tree. The bytes of an answer go through a small scanner (strings, escapes, nesting and keys only) that cuts
// out each value the caller wants and parses that value alone:
// - a LIST page (`{"kind":…,"metadata":{…},"items":[{…},{…}]}`): each element of `items`, and the other
//   top-level fields (metadata: resourceVersion, continue);
// - a watch stream (one event object after another): each event.
// Values the model never reads are dropped before they are parsed: their bytes are replaced by `null` in the
// value's text (`metadata.managedFields`, 45 % of a Machine's bytes, and kubectl's last-applied copy).
// Why not a library: docs/decisions/watchlist-and-lists-read-item-by-item.md.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const NULL = Buffer.from('null');
const EMPTY = Buffer.alloc(0);

/** Paths (object keys) below each listed object whose values are dropped before it is parsed. */
export const DROPPED_PATHS: readonly (readonly string[])[] = [
  ['metadata', 'managedFields'],
  ['metadata', 'annotations', 'kubectl.kubernetes.io/last-applied-configuration'],
];

export interface ScannerOptions {
  /**
   * `list`: each element of the top-level `items` array goes to `onItem`, each other top-level field to
   * `onField`. `stream`: each top-level value (a watch event) goes to `onItem`.
   */
  mode: 'list' | 'stream';
  onItem: (value: any) => void;
  onField?: (key: string, value: unknown) => void;
  /**
   * Paths below each emitted value whose values are replaced by null. Default: DROPPED_PATHS below each item
   * (list), below each event's `object` (stream).
   */
  drop?: readonly (readonly string[])[];
}

/** Bytes that are not JSON of the expected shape. */
export class JsonStreamError extends Error {}

const NEWLINE = 0x0a;
/** A stream's event longer than this without its newline is scanned byte by byte (its drops then bound memory). */
const MAX_PENDING = 4 * 2 ** 20;
const FAIL = Symbol('not JSON');
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function parseOrFail(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return FAIL;
  }
}

/** The chunk's last byte that is not JSON whitespace is `}` (a value may have ended there). */
function endsWithBrace(chunk: Buffer): boolean {
  let k = chunk.length - 1;
  while (k >= 0 && (chunk[k] === 0x20 || chunk[k] === 0x0a || chunk[k] === 0x0d || chunk[k] === 0x09)) k--;
  return k >= 0 && chunk[k] === 0x7d;
}

/** Keys are remembered this deep (every dropped path is shallower). */
const MAX_KEY_DEPTH = 8;

type Kind = 'container' | 'string' | 'scalar';

export class JsonItemScanner {
  /** Open containers, outermost first: true for an object. depth = stack.length. */
  private readonly stack: boolean[] = [];
  /** keys[d]: the current key of the object opened at depth d (it is stack[d - 1]). */
  private readonly keys: (string | undefined)[] = [];
  private expectKey = false;
  private inString = false;
  private escaped = false;
  /** In a key string whose text is kept (not inside a dropped value, not too deep): its pieces so far. */
  private keepKey = false;
  private isKey = false;
  private keyPieces: Buffer[] = [];
  /** In a number or a literal (true, false, null): it ends at the next delimiter. */
  private inScalar = false;
  /** The value being cut out: the depth it started at, its pieces so far, where its current piece starts. */
  private capture?: { depth: number; kind: Kind; key?: string; pieces: Buffer[]; from: number };
  /** A value inside the capture that is being dropped, and how many containers are open inside it. */
  private dropping?: { depth: number; kind: Kind };
  private dropNest = 0;
  private readonly drop: readonly (readonly string[])[];
  /**
   * stream: a watch event is one line (the apiserver writes `{…}\n`). An event whose line parses as JSON is parsed
   * whole, then its dropped paths are nulled: the same value as scanning it, at a third of the CPU (the byte loop
   * cost more than parsing the managedFields it spares). A line that does not parse (pretty JSON, two values on
   * a line, bad bytes) is scanned byte by byte as before. `pending`: the start of an event whose line has not
   * ended in the chunks so far; `replaying` while such bytes are scanned byte by byte after all.
   */
  private pending?: Buffer[];
  private pendingBytes = 0;
  private replaying = false;
  /** The chunk being scanned. */
  private chunk: Buffer = Buffer.alloc(0);

  constructor(private readonly o: ScannerOptions) {
    this.drop = o.drop ?? (o.mode === 'stream' ? DROPPED_PATHS.map((p) => ['object', ...p]) : DROPPED_PATHS);
  }

  write(chunk: Buffer): void {
    let from = 0;
    if (this.pending) {
      from = this.continuePending(chunk);
      if (from < 0) return;
    }
    this.scan(chunk, from);
  }

  /** The byte scanner, from byte `from` of the chunk. */
  private scan(chunk: Buffer, from: number): void {
    this.chunk = chunk;
    if (this.capture) this.capture.from = from;
    const n = chunk.length;
    for (let i = from; i < n; i++) {
      if (this.inString) {
        // Most bytes are inside strings: jump to the closing quote.
        const q = this.closingQuote(chunk, i);
        if (this.keepKey) this.keyPieces.push(chunk.subarray(i, q < 0 ? n : q));
        if (q < 0) break;
        i = q;
        this.inString = false;
        if (this.isKey) this.endKey();
        else this.valueEnds('string', i + 1);
        continue;
      }
      if (this.dropping?.kind === 'container') {
        i = this.skipDropped(chunk, i);
        continue;
      }
      const b = chunk[i]!;
      if (b === 0x7b && this.o.mode === 'stream' && this.stack.length === 0 && !this.inScalar && !this.replaying) {
        const j = this.lineValue(chunk, i);
        if (j >= 0) {
          i = j;
          continue;
        }
      }
      switch (b) {
        case 0x20:
        case 0x0a:
        case 0x0d:
        case 0x09:
          if (this.inScalar) this.scalarEnds(i);
          break;
        case QUOTE:
          this.inString = true;
          this.isKey = this.expectKey;
          if (this.isKey) {
            this.keepKey = this.dropping === undefined && this.wantsKey(this.stack.length);
            this.keyPieces = [];
          } else {
            this.keepKey = false;
            this.valueStarts('string', i);
          }
          break;
        case 0x7b: // {
        case 0x5b: // [
          if (this.inScalar) throw new JsonStreamError(`unexpected ${String.fromCharCode(b)} after a scalar`);
          this.valueStarts('container', i);
          this.stack.push(b === 0x7b);
          this.expectKey = b === 0x7b;
          if (this.stack.length <= MAX_KEY_DEPTH) this.keys[this.stack.length] = undefined;
          break;
        case 0x7d: // }
        case 0x5d: // ]
          if (this.inScalar) this.scalarEnds(i);
          if (this.stack.pop() !== (b === 0x7d)) throw new JsonStreamError(`unexpected ${String.fromCharCode(b)}`);
          this.expectKey = false;
          this.valueEnds('container', i + 1);
          break;
        case 0x2c: // ,
          if (this.inScalar) this.scalarEnds(i);
          this.expectKey = this.stack.at(-1) === true;
          break;
        case 0x3a: // :
          break;
        default:
          if (!this.inScalar) {
            this.inScalar = true;
            this.valueStarts('scalar', i);
          }
      }
    }
    const cap = this.capture;
    if (cap && this.dropping === undefined && cap.from < n) cap.pieces.push(chunk.subarray(cap.from));
    this.chunk = EMPTY;
  }

  /** The end of the input: every value must be complete. */
  end(): void {
    if (this.pending) this.replay([]);
    if (this.inScalar) this.scalarEnds(0);
    if (this.inString || this.stack.length > 0 || this.capture)
      throw new JsonStreamError('the JSON ended inside a value');
  }

  /**
   * Inside a dropped container only strings and nesting matter: returns the index of the byte that closes it
   * (after ending the drop), or the chunk's length.
   */
  private skipDropped(chunk: Buffer, i: number): number {
    const n = chunk.length;
    for (; i < n; i++) {
      const b = chunk[i]!;
      if (b === QUOTE) {
        const q = this.closingQuote(chunk, i + 1);
        if (q < 0) {
          this.inString = true;
          this.isKey = false;
          this.keepKey = false;
          return n;
        }
        i = q;
      } else if (b === 0x7b || b === 0x5b) this.dropNest++;
      else if (b === 0x7d || b === 0x5d) {
        if (this.dropNest > 0) {
          this.dropNest--;
          continue;
        }
        this.stack.pop();
        this.expectKey = false;
        this.valueEnds('container', i + 1);
        return i;
      }
    }
    return n;
  }

  /**
   * Whether the key of the object at depth d is needed: top-level keys (to find `items`), and keys that continue
   * a dropped path below the captured value (decoding every key of every object cost a third of the time).
   */
  private wantsKey(d: number): boolean {
    const cap = this.capture;
    if (!cap) return d === 1;
    const rel = d - cap.depth; // this key is component rel-1 of a path
    if (rel > MAX_KEY_DEPTH) return false;
    for (const p of this.drop) {
      if (p.length < rel) continue;
      let k = 0;
      while (k < rel - 1 && this.keys[cap.depth + k + 1] === p[k]) k++;
      if (k === rel - 1) return true;
    }
    return false;
  }

  /**
   * A stream's top-level `{` at byte i: parses its line whole when the newline is in this chunk (returns the
   * newline's index), keeps the rest of the chunk pending when not (returns the last index), or -1 (scan it).
   */
  private lineValue(chunk: Buffer, i: number): number {
    const nl = chunk.indexOf(NEWLINE, i);
    if (nl < 0) {
      this.pending = [chunk.subarray(i)];
      this.pendingBytes = chunk.length - i;
      if (endsWithBrace(chunk)) this.tryPending();
      return chunk.length - 1;
    }
    const value = parseOrFail(chunk.toString('utf8', i, nl));
    if (value === FAIL) return -1;
    this.emitWhole(value);
    return nl;
  }

  /**
   * A chunk after pending bytes: returns where the byte scanner goes on in it, or -1 when the whole chunk is
   * pending (or was scanned).
   */
  private continuePending(chunk: Buffer): number {
    const nl = chunk.indexOf(NEWLINE);
    const upto = nl < 0 ? chunk.length : nl;
    this.pending!.push(chunk.subarray(0, upto));
    this.pendingBytes += upto;
    if (nl < 0) {
      if (this.pendingBytes > MAX_PENDING) this.replay([]);
      else if (endsWithBrace(chunk)) this.tryPending();
      return -1;
    }
    if (!this.tryPending()) this.replay([]);
    return nl;
  }

  /** Parses the pending bytes as one value: true (emitted) or false (still pending). */
  private tryPending(): boolean {
    const p = this.pending!;
    const value = parseOrFail((p.length === 1 ? p[0]! : Buffer.concat(p)).toString('utf8'));
    if (value === FAIL) return false;
    this.pending = undefined;
    this.pendingBytes = 0;
    this.emitWhole(value);
    return true;
  }

  /** Scans the pending bytes byte by byte, as if no line had been tried. */
  private replay(more: Buffer[]): void {
    const pieces = [...this.pending!, ...more];
    this.pending = undefined;
    this.pendingBytes = 0;
    this.replaying = true;
    try {
      for (const piece of pieces) this.scan(piece, 0);
    } finally {
      this.replaying = false;
    }
  }

  /** A value parsed whole: its dropped paths become null, as the scanner would have written them. */
  private emitWhole(value: unknown): void {
    for (const p of this.drop) {
      let cur: unknown = value;
      for (let k = 0; k < p.length && isObject(cur); k++) {
        if (!Object.hasOwn(cur, p[k]!)) break;
        if (k === p.length - 1) cur[p[k]!] = null;
        else cur = cur[p[k]!];
      }
    }
    this.o.onItem(value);
  }

  /**
   * The index of the quote that closes the string in which byte i lies, or -1 when the string goes on past the
   * chunk (then whether its last byte escapes the next one is kept). A plain loop: a Kubernetes object's strings
   * are short, and a call of Buffer.indexOf per string cost more than the bytes it skipped.
   */
  private closingQuote(chunk: Buffer, i: number): number {
    const n = chunk.length;
    if (this.escaped) {
      this.escaped = false;
      i++;
    }
    while (i < n) {
      const b = chunk[i]!;
      if (b === QUOTE) return i;
      i += b === BACKSLASH ? 2 : 1;
    }
    // A backslash as the chunk's last byte escapes the first byte of the next chunk.
    this.escaped = i > n;
    return -1;
  }

  private endKey(): void {
    this.expectKey = false;
    if (!this.keepKey) return;
    const raw = (this.keyPieces.length === 1 ? this.keyPieces[0]! : Buffer.concat(this.keyPieces)).toString('utf8');
    this.keyPieces = [];
    this.keys[this.stack.length] = raw.includes('\\') ? (JSON.parse(`"${raw}"`) as string) : raw;
  }

  private scalarEnds(i: number): void {
    this.inScalar = false;
    this.valueEnds('scalar', i);
  }

  /** A value starts at byte i of the chunk. */
  private valueStarts(kind: Kind, i: number): void {
    const d = this.stack.length;
    const cap = this.capture;
    if (cap) {
      if (this.dropping === undefined && this.isDropped(cap.depth, d)) {
        cap.pieces.push(this.chunk.subarray(cap.from, i), NULL);
        this.dropping = { depth: d, kind };
        this.dropNest = 0;
      }
      return;
    }
    if (this.emits(d))
      this.capture = { depth: d, kind, pieces: [], from: i, ...(d === 1 ? { key: this.keys[1] ?? '' } : {}) };
  }

  /** A value of `kind` at the current depth ended just before byte `end`. */
  private valueEnds(kind: Kind, end: number): void {
    const cap = this.capture;
    if (!cap) return;
    const d = this.stack.length;
    if (this.dropping) {
      if (this.dropping.depth === d && this.dropping.kind === kind) {
        this.dropping = undefined;
        cap.from = end;
      }
      return;
    }
    if (cap.depth === d && cap.kind === kind) this.finish(end);
  }

  /** stream: every top-level value. list: the top-level fields, and each element of the `items` array. */
  private emits(d: number): boolean {
    if (this.o.mode === 'stream') return d === 0;
    if (d === 1) return this.stack[0] === true && this.keys[1] !== 'items';
    return d === 2 && this.stack[0] === true && this.stack[1] === false && this.keys[1] === 'items';
  }

  /** The value starting at depth d is at a dropped path below the captured value (which started at depth c). */
  private isDropped(c: number, d: number): boolean {
    const rel = d - c;
    for (const p of this.drop) {
      if (p.length !== rel) continue;
      let k = 0;
      while (k < rel && this.stack[c + k] === true && this.keys[c + k + 1] === p[k]) k++;
      if (k === rel) return true;
    }
    return false;
  }

  /** The captured value ends before byte `end` of the current chunk: parse it alone and hand it on. */
  private finish(end: number): void {
    const cap = this.capture!;
    this.capture = undefined;
    if (end > cap.from) cap.pieces.push(this.chunk.subarray(cap.from, end));
    const text = (cap.pieces.length === 1 ? cap.pieces[0]! : Buffer.concat(cap.pieces)).toString('utf8');
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      throw new JsonStreamError(`not JSON: ${(e as Error).message}`);
    }
    if (this.o.mode === 'list' && cap.depth === 1) this.o.onField?.(cap.key ?? '', value);
    else this.o.onItem(value);
  }
}
