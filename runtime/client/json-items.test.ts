// The item-at-a-time scanner against JSON.parse of the whole text: any list or watch stream, cut into chunks
// anywhere (property test, seeded), gives the same items with the dropped paths set to null.
import { expect } from 'chai';
import fc from 'fast-check';
import { JsonItemScanner, JsonStreamError, type ScannerOptions } from './json-items.js';

type Json = Record<string, any>;

function scan(
  text: string | Buffer,
  cuts: number[],
  o: Omit<ScannerOptions, 'onItem' | 'onField'>,
): { items: unknown[]; fields: Record<string, unknown> } {
  const items: unknown[] = [];
  const fields: Record<string, unknown> = {};
  const s = new JsonItemScanner({ ...o, onItem: (v) => items.push(v), onField: (k, v) => (fields[k] = v) });
  const buf = Buffer.isBuffer(text) ? text : Buffer.from(text);
  let at = 0;
  for (const c of [...cuts.filter((x) => x > 0 && x < buf.length)].sort((a, b) => a - b)) {
    s.write(buf.subarray(at, c));
    at = c;
  }
  s.write(buf.subarray(at));
  s.end();
  return { items, fields };
}

/** What the scanner must give for an object: the dropped paths set to null (where they exist). */
function dropped(o: unknown, prefix: string[] = []): unknown {
  const c = structuredClone(o) as Json;
  const at = (path: string[]) => {
    let x: any = c;
    for (const k of [...prefix, ...path.slice(0, -1)]) {
      if (x === null || typeof x !== 'object' || Array.isArray(x) || !(k in x)) return;
      x = x[k];
    }
    const last = path.at(-1)!;
    if (x !== null && typeof x === 'object' && !Array.isArray(x) && last in x) x[last] = null;
  };
  at(['metadata', 'managedFields']);
  at(['metadata', 'annotations', 'kubectl.kubernetes.io/last-applied-configuration']);
  return c;
}

const machine = (name: string): Json => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'Machine',
  metadata: {
    name,
    namespace: 'ns',
    resourceVersion: '42',
    labels: { 'cluster.x-k8s.io/cluster-name': 'c "quoted" \\ back' },
    annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"big":"copy"}', keep: 'me' },
    managedFields: [{ manager: 'capi', fieldsV1: { 'f:metadata': { 'f:labels': { '.': {} } }, 'f:status': {} } }],
  },
  spec: {
    clusterName: 'c',
    managedFields: 'not dropped: not under metadata',
    n: -1.5e3,
    ok: true,
    none: null,
    list: [1, [2, { a: 'é😀' }]],
  },
  status: { conditions: [{ type: 'Ready', status: 'True', message: 'line\nbreak\t"x"' }] },
});

describe('JsonItemScanner', () => {
  it('list: each item alone, managedFields and the last-applied copy dropped, the other top-level fields', () => {
    const page = {
      kind: 'MachineList',
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      metadata: { resourceVersion: '77', continue: 'abc' },
      items: [machine('a'), machine('b')],
    };
    const { items, fields } = scan(JSON.stringify(page, null, 1), [], { mode: 'list' });
    expect(items).to.deep.equal([dropped(machine('a')), dropped(machine('b'))]);
    expect((items[0] as Json).metadata.managedFields).to.equal(null);
    expect((items[0] as Json).spec.managedFields).to.be.a('string');
    expect(fields).to.deep.equal({
      kind: 'MachineList',
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      metadata: { resourceVersion: '77', continue: 'abc' },
    });
  });

  it('list: the same answer when the bytes arrive one at a time (strings, escapes and UTF-8 cut anywhere)', () => {
    const page = { metadata: { resourceVersion: '1' }, items: [machine('x')], kind: 'List' };
    const buf = Buffer.from(JSON.stringify(page));
    const { items, fields } = scan(
      buf,
      Array.from({ length: buf.length }, (_, i) => i),
      { mode: 'list' },
    );
    expect(items).to.deep.equal([dropped(machine('x'))]);
    expect(fields.metadata).to.deep.equal({ resourceVersion: '1' });
  });

  it('list: empty and null items; items before metadata', () => {
    expect(scan('{"items":[],"metadata":{"resourceVersion":"5"}}', [], { mode: 'list' })).to.deep.equal({
      items: [],
      fields: { metadata: { resourceVersion: '5' } },
    });
    expect(scan('{"kind":"List","items":null}', [], { mode: 'list' })).to.deep.equal({
      items: [],
      fields: { kind: 'List' },
    });
  });

  it("stream: each watch event alone, the object's managedFields dropped", () => {
    const events = [
      { type: 'ADDED', object: machine('a') },
      {
        type: 'BOOKMARK',
        object: { metadata: { resourceVersion: '9', annotations: { 'k8s.io/initial-events-end': 'true' } } },
      },
    ];
    const text = events.map((e) => `${JSON.stringify(e)}\n`).join('');
    const { items } = scan(text, [7, 100, 2000], { mode: 'stream' });
    expect(items).to.deep.equal([{ type: 'ADDED', object: dropped(machine('a')) }, events[1]]);
  });

  it('refuses bytes that end inside a value or close what was not opened', () => {
    expect(() => scan('{"items":[{"a":1}', [], { mode: 'list' })).to.throw(JsonStreamError);
    expect(() => scan('{"items":[{"a":"x]}', [], { mode: 'list' })).to.throw(JsonStreamError);
    expect(() => scan('{"items":[{"a":1]]}', [], { mode: 'list' })).to.throw(JsonStreamError);
    expect(() => scan('{"items":[{"a":tru e}]}', [], { mode: 'list' })).to.throw(JsonStreamError);
  });

  it('property: any list of JSON objects, pretty or not, cut anywhere, equals JSON.parse with the drops (seeded)', () => {
    const meta = fc.record(
      {
        name: fc.string(),
        managedFields: fc.jsonValue(),
        annotations: fc.dictionary(
          fc.constantFrom('kubectl.kubernetes.io/last-applied-configuration', 'a', 'b"c'),
          fc.string(),
        ),
      },
      { requiredKeys: [] },
    );
    const item = fc.tuple(fc.dictionary(fc.string(), fc.jsonValue()), meta).map(([o, m]) => ({ ...o, metadata: m }));
    fc.assert(
      fc.property(
        fc.array(item, { maxLength: 6 }),
        fc.array(fc.nat(4000), { maxLength: 12 }),
        fc.boolean(),
        (items, cuts, pretty) => {
          const text = JSON.stringify(
            { kind: 'List', metadata: { resourceVersion: '3' }, items },
            null,
            pretty ? 2 : undefined,
          );
          const got = scan(text, cuts, { mode: 'list' });
          expect(got.items).to.deep.equal(JSON.parse(JSON.stringify(items.map((i) => dropped(i)))));
          expect(got.fields).to.deep.equal({ kind: 'List', metadata: { resourceVersion: '3' } });
        },
      ),
      { seed: 1807, numRuns: 300 },
    );
  });

  it('stream: an event is handed on by the write that ends it, newline or not; cut after an inner brace', () => {
    const items: unknown[] = [];
    const s = new JsonItemScanner({ mode: 'stream', onItem: (v) => items.push(v) });
    const ev = JSON.stringify({ type: 'ADDED', object: machine('a') });
    const inner = ev.indexOf('}') + 1; // after the first nested object closes
    s.write(Buffer.from(ev.slice(0, inner)));
    expect(items).to.have.length(0);
    s.write(Buffer.from(ev.slice(inner)));
    expect(items).to.deep.equal([{ type: 'ADDED', object: dropped(machine('a')) }]);
    s.write(Buffer.from(`\n${ev}`));
    expect(items).to.have.length(2);
    s.end();
  });

  it('stream: a dropped key written with escapes is dropped; duplicate keys as JSON.parse; a bad line throws', () => {
    const text = '{"type":"ADDED","object":{"metadata":{"manag\\u0065dFields":[1],"name":"a"}}}\n';
    expect(scan(text, [], { mode: 'stream' }).items).to.deep.equal([
      { type: 'ADDED', object: { metadata: { managedFields: null, name: 'a' } } },
    ]);
    const dup = '{"object":{"metadata":{"managedFields":[1]}},"object":{"metadata":{"name":"b"}}}\n';
    expect(scan(dup, [], { mode: 'stream' }).items).to.deep.equal([{ object: { metadata: { name: 'b' } } }]);
    for (const cuts of [[], [20], [5, 30, 41]])
      expect(() => scan('{"type":"ADDED","object":{"a":tru e}}\n', cuts, { mode: 'stream' })).to.throw(JsonStreamError);
  });

  it('property: a stream in any framing (lines, pretty, back to back, CRLF, no last newline), any UTF-8, cut anywhere (seeded)', () => {
    const meta = fc.record(
      {
        name: fc.string({ unit: 'binary' }),
        managedFields: fc.jsonValue(),
        annotations: fc.dictionary(
          fc.constantFrom('kubectl.kubernetes.io/last-applied-configuration', 'a', 'b"c'),
          fc.string({ unit: 'binary' }),
        ),
      },
      { requiredKeys: [] },
    );
    const event = fc.record({
      type: fc.constantFrom('ADDED', 'MODIFIED', 'DELETED'),
      object: fc.tuple(fc.dictionary(fc.string({ unit: 'binary' }), fc.jsonValue()), meta).map(([o, m]) => ({
        ...o,
        metadata: m,
      })),
    });
    const framings = ['line', 'pretty', 'glued', 'crlf', 'space'] as const;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(event, fc.constantFrom(...framings)), { maxLength: 6 }),
        fc.boolean(),
        fc.array(fc.nat(4000), { maxLength: 16 }),
        (events, lastNewline, cuts) => {
          let text = events
            .map(([e, f]) =>
              f === 'pretty'
                ? `${JSON.stringify(e, null, 2)}\n`
                : `${JSON.stringify(e)}${{ line: '\n', glued: '', crlf: '\r\n', space: ' ' }[f]}`,
            )
            .join('');
          if (!lastNewline) text = text.trimEnd();
          const got = scan(Buffer.from(text, 'utf8'), cuts, { mode: 'stream' });
          expect(got.items).to.deep.equal(events.map(([e]) => JSON.parse(JSON.stringify(dropped(e, ['object'])))));
        },
      ),
      { seed: 1809, numRuns: 400 },
    );
  });

  it('property: any stream of events, cut anywhere, equals JSON.parse line by line with the drops (seeded)', () => {
    const event = fc.record({
      type: fc.constantFrom('ADDED', 'MODIFIED', 'DELETED'),
      object: fc.dictionary(fc.string(), fc.jsonValue()),
    });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 6 }), fc.array(fc.nat(3000), { maxLength: 12 }), (events, cuts) => {
        const text = events.map((e) => `${JSON.stringify(e)}\n`).join('');
        const got = scan(text, cuts, { mode: 'stream' });
        expect(got.items).to.deep.equal(events.map((e) => JSON.parse(JSON.stringify(dropped(e, ['object'])))));
      }),
      { seed: 1808, numRuns: 300 },
    );
  });
});
