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
import { readdirSync } from 'node:fs';
import { parse } from 'yaml';

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
    expect(stderr).to.match(
      new RegExp(
        `no Docker buildx here: the image ghcr.io/joinguard/joinguard:v${version.replace(/\./g, '\\.')} was NOT built`,
      ),
    );
    const sums = readFileSync(join(dir, 'out', 'checksums.txt'), 'utf8');
    expect(
      sums
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(/\s+/)[1]),
    ).to.deep.equal([
      'addon-components.yaml',
      'metadata.yaml',
      'observability-components.yaml',
      'grafana-dashboard.json',
      'shard-components.yaml',
    ]);
    await run('sha256sum', ['-c', 'checksums.txt'], { cwd: join(dir, 'out') });
    expect(readFileSync(join(dir, 'out', 'addon-components.yaml'), 'utf8')).to.include(
      `image: ghcr.io/joinguard/joinguard:v${version}`,
    );
    expect(stdout).to.include('observability-components.yaml');
  });

  it("refuses a version other than package.json's, and a malformed one", async () => {
    const other = await run('bash', [join(root, 'hack', 'release.sh'), '9.9.9'], { cwd: root, env }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    expect(other).to.deep.include({ code: 1 });
    expect((other as { stderr: string }).stderr).to.match(/not package\.json's version/);
    const bad = await run('bash', [join(root, 'hack', 'release.sh'), 'v1'], { cwd: root, env }).catch(
      (e: { code: number }) => e,
    );
    expect(bad).to.deep.include({ code: 64 });
  });
});

// The workflows cannot run here (no GitHub, no Docker): what they say is checked instead.
describe('.github/workflows: the release supply chain', () => {
  const dir = join(root, '.github', 'workflows');
  const files = readdirSync(dir).filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'));
  const text = (f: string) => readFileSync(join(dir, f), 'utf8');
  type Step = { uses?: string; run?: string; with?: Record<string, unknown> };
  type Workflow = {
    on: Record<string, unknown>;
    permissions?: unknown;
    jobs: Record<string, { permissions?: Record<string, string>; steps: Step[] }>;
  };
  const workflow = (f: string) => parse(text(f)) as Workflow;
  const steps = (f: string) => Object.values(workflow(f).jobs).flatMap((j) => j.steps);

  it('pins every action by a full commit SHA, with its tag in a comment', () => {
    const loose: string[] = [];
    for (const f of files) {
      for (const line of text(f)
        .split('\n')
        .filter((l) => /^\s*-?\s*uses:/.test(l))) {
        if (!/uses: [\w.-]+\/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$/.test(line.trim().replace(/^- /, '')))
          loose.push(`${f}: ${line.trim()}`);
      }
    }
    expect(files).to.include.members(['ci.yaml', 'release.yaml', 'security-scan.yaml']);
    expect(loose).to.deep.equal([]);
  });

  it('signs the image by digest and every release file keylessly (cosign, OIDC), and generates the release notes', () => {
    const release = workflow('release.yaml');
    expect(release.jobs['release']!.permissions).to.include({ 'id-token': 'write' });
    const runs = steps('release.yaml')
      .map((s) => s.run ?? '')
      .join('\n');
    expect(steps('release.yaml').some((s) => s.uses?.startsWith('sigstore/cosign-installer@'))).to.equal(true);
    expect(runs).to.match(/cosign sign --yes "ghcr\.io\/joinguard\/joinguard@\$\(cat out\/image-digest\.txt\)"/);
    expect(runs).to.include('cosign sign-blob --yes --bundle');
    // Every file the release attaches is signed.
    const attached = /gh release create[\s\S]*$/.exec(runs)![0];
    for (const f of [
      'addon-components.yaml',
      'metadata.yaml',
      'observability-components.yaml',
      'grafana-dashboard.json',
      'shard-components.yaml',
      'checksums.txt',
    ]) {
      expect(attached, f).to.include(`out/${f}`);
      expect(runs, `${f} signed`).to.match(new RegExp(`for f in [^;]*${f.replace('.', '\\.')}`));
    }
    expect(attached).to.include('--generate-notes').and.include('out/*.sigstore.json');
    expect(runs).not.to.match(/cosign .*--key/);
  });

  it('scans for vulnerabilities on a schedule, with least privilege', () => {
    const scan = workflow('security-scan.yaml');
    expect((scan.on['schedule'] as { cron: string }[])[0]!.cron).to.match(/^\S+ \S+ \* \* \S+$/);
    expect(scan.permissions).to.deep.equal({});
    const s = steps('security-scan.yaml');
    expect(
      s.filter((x) => x.uses?.startsWith('aquasecurity/trivy-action@')).map((x) => x.with?.['scan-type']),
    ).to.deep.equal(['fs', 'image']);
    expect(s.some((x) => /npm audit --omit=dev/.test(x.run ?? ''))).to.equal(true);
  });

  it('never leaves the checkout token on disk for later steps', () => {
    for (const f of files)
      for (const st of steps(f).filter((x) => x.uses?.startsWith('actions/checkout@')))
        expect(st.with?.['persist-credentials'], f).to.equal(false);
  });
});
