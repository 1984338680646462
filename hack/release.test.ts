// hack/release.sh without Docker buildx (a stand-in `docker` that has none, first on PATH, so the test never
// builds an image even where Docker runs): it writes the release files and their checksums, says the image was
// not built, and exits 0; it refuses a version that is not package.json's.
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';

const run = promisify(execFile);
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;

describe('hack/release.sh', function () {
  this.timeout(60_000);
  let dir: string;
  let env: NodeJS.ProcessEnv;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'joinguard-release-'));
    mkdirSync(join(dir, 'bin'));
    writeFileSync(join(dir, 'bin', 'docker'), '#!/bin/sh\nexit 1\n');
    chmodSync(join(dir, 'bin', 'docker'), 0o755);
    env = { ...process.env, PATH: `${join(dir, 'bin')}:${process.env['PATH'] ?? ''}`, OUT_DIR: join(dir, 'out') };
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('writes the components, metadata, observability files and checksums, and says no image was built', async () => {
    const { stdout, stderr } = await run('bash', [join(root, 'hack', 'release.sh'), version], { cwd: root, env });
    expect(stderr).to.match(new RegExp(`no Docker buildx here: the image ghcr.io/joinguard/joinguard:v${version.replace(/\./g, '\\.')} was NOT built`));
    const sums = readFileSync(join(dir, 'out', 'checksums.txt'), 'utf8');
    expect(sums.split('\n').filter(Boolean).map((l) => l.split(/\s+/)[1])).to.deep.equal([
      'addon-components.yaml', 'metadata.yaml', 'observability-components.yaml', 'grafana-dashboard.json',
    ]);
    await run('sha256sum', ['-c', 'checksums.txt'], { cwd: join(dir, 'out') });
    expect(readFileSync(join(dir, 'out', 'addon-components.yaml'), 'utf8')).to.include(`image: ghcr.io/joinguard/joinguard:v${version}`);
    expect(stdout).to.include('observability-components.yaml');
  });

  it('refuses a version other than package.json\'s, and a malformed one', async () => {
    const other = await run('bash', [join(root, 'hack', 'release.sh'), '9.9.9'], { cwd: root, env }).catch((e: { code: number; stderr: string }) => e);
    expect(other).to.deep.include({ code: 1 });
    expect((other as { stderr: string }).stderr).to.match(/not package\.json's version/);
    const bad = await run('bash', [join(root, 'hack', 'release.sh'), 'v1'], { cwd: root, env }).catch((e: { code: number }) => e);
    expect(bad).to.deep.include({ code: 64 });
  });
});
