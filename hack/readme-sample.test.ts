// The README's `kubectl get mjc` sample shows the columns kubectl prints: the CRD's additionalPrinterColumns of
// priority 0 (NAME first), in order, and a row whose cells line up under them. Unit test on the files.
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect } from 'chai';
import { parse } from 'yaml';

const root = resolve(import.meta.dirname, '..');

describe('README: the kubectl get mjc sample', () => {
  it('has the CRD printer columns kubectl shows by default, in order, with a value under each', () => {
    const crd = parse(readFileSync(join(root, 'manifests', 'crd', 'joinguard.io_machinejoinchecks.yaml'), 'utf8')) as {
      spec: { versions: { additionalPrinterColumns?: { name: string; priority?: number }[] }[] };
    };
    const columns = [
      'NAME',
      ...(crd.spec.versions[0]!.additionalPrinterColumns ?? [])
        .filter((c) => !c.priority)
        .map((c) => c.name.toUpperCase()),
    ];
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const block = /\$ kubectl get mjc[^\n]*\n([^\n]+)\n([^\n]+)\n```/.exec(readme);
    expect(block, 'a kubectl get mjc sample in README.md').to.not.equal(null);
    const [header, row] = [block![1]!, block![2]!];
    expect(header.trim().split(/ {2,}/)).to.deep.equal(columns);
    // kubectl aligns each cell at its column's start.
    const starts = columns.map((c) => header.indexOf(c));
    const cells = starts.map((s, i) => row.slice(s, starts[i + 1] ?? undefined).trim());
    expect(
      cells.every((c) => c !== '' && !c.includes('  ')),
      JSON.stringify(cells),
    ).to.equal(true);
  });
});
