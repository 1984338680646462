// Writes manifests/crd/joinguard.io_machinejoinchecks.yaml from schema.ts: `npm run crd`.
// With --check it writes nothing and exits 1 when the committed file is stale.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderCrdYaml } from './crd.js';

export const CRD_PATH = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'manifests',
  'crd',
  'joinguard.io_machinejoinchecks.yaml',
);

async function main(): Promise<void> {
  const text = renderCrdYaml();
  const shown = relative(process.cwd(), CRD_PATH);
  if (process.argv.includes('--check')) {
    const current = await readFile(CRD_PATH, 'utf8').catch(() => '');
    if (current !== text) {
      process.stderr.write(`${shown} is stale: run npm run crd\n`);
      process.exitCode = 1;
    }
    return;
  }
  await mkdir(dirname(CRD_PATH), { recursive: true });
  await writeFile(CRD_PATH, text);
  process.stdout.write(`wrote ${shown}\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
