import { expect } from 'chai';
import { MalformedObjectError } from './model.js';
import { ObjectReader } from './reader.js';

describe('api/capi ObjectReader.at', () => {
  const r = ObjectReader.of({ metadata: { name: 'm', namespace: 'ns' }, spec: { a: 'text', n: null } }, 'Machine');
  const fieldOf = (f: () => unknown): string => {
    try {
      f();
    } catch (e) {
      expect(e).to.be.instanceOf(MalformedObjectError);
      return (e as MalformedObjectError).field;
    }
    throw new Error('did not throw');
  };

  it('reads a path; absent or null parents are undefined; the same path twice reads the same', () => {
    expect(r.at('spec.a')).to.equal('text');
    expect(r.at('spec.a')).to.equal('text');
    expect(r.at('spec.n.x')).to.equal(undefined);
    expect(r.at('status.x.y')).to.equal(undefined);
  });

  it('names the walked prefix when a parent is not an object, after the caller prefix', () => {
    expect(fieldOf(() => r.at('spec.a.b.c'))).to.equal('spec.a');
    expect(fieldOf(() => r.at('x.y', { x: 5 }, 'status.conditions[0]'))).to.equal('status.conditions[0].x');
    expect(fieldOf(() => r.at('x.y', [] as never, 'status.conditions[1]'))).to.equal('status.conditions[1]');
    expect(fieldOf(() => r.at('x', 'str' as never))).to.equal('');
  });
});
