// The oracle shares no code with the product (issue 28): every module it reaches, through any import (types too),
// is a file of this testing folder that the product never imports. Walked from the source, so a helper that
// starts importing the product's time helper (as objects.ts once did) fails here.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../../..');
/** What the oracle may reach: its own files and the raw-object helpers written from CAPI's Go types. */
const ALLOWED = new Set(['oracle.ts', 'oracle-runs.ts', 'oracle-spec.ts', 'objects.ts']);

/** Every module reachable from `file` by static imports and re-exports (`import type` included). */
export function importGraph(file: string): Set<string> {
  const seen = new Set<string>();
  const visit = (f: string): void => {
    if (seen.has(f)) return;
    seen.add(f);
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/(?:import|export)\s[^;]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/g)) {
      const spec = m[1] ?? m[2]!;
      if (!spec.startsWith('.')) {
        seen.add(spec); // a package: never allowed
        continue;
      }
      visit(resolve(dirname(f), spec.replace(/\.js$/, '.ts')));
    }
  };
  visit(file);
  return seen;
}

describe('the oracle imports nothing of the product', () => {
  it('every module reachable from testing/oracle.ts is one of its own files', () => {
    const reached = [...importGraph(join(HERE, 'oracle.ts'))].map((f) => (f.startsWith('/') ? relative(HERE, f) : f));
    expect(reached.filter((f) => !ALLOWED.has(f))).to.deep.equal([]);
    expect(reached).to.include('objects.ts');
  });

  it('the walk finds a product import where there is one (the world reaches the product)', () => {
    const reached = [...importGraph(join(HERE, 'world.ts'))].map((f) => relative(ROOT, f));
    expect(reached).to.include('runtime/client/rest.ts');
  });
});
