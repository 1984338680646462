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
import { releaseProblems, type Workflow as PolicyWorkflow } from './release-policy.js';

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
    expect(release.jobs['publish']!.permissions).to.include({ 'id-token': 'write' });
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

// The release's two jobs: the tests never run where the write permissions and the signing identity are held.
describe('.github/workflows/release.yaml: the tests apart from the signing identity', () => {
  const release = () =>
    parse(readFileSync(join(root, '.github', 'workflows', 'release.yaml'), 'utf8')) as PolicyWorkflow;
  const CHECKOUT = { uses: 'actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1' };
  const TESTS = { name: 'tests', run: 'bash .ci/run' };
  const SIGN = { run: 'cosign sign --yes "ghcr.io/joinguard/joinguard@$(cat out/image-digest.txt)"' };
  const WRITE = { contents: 'write', packages: 'write', 'id-token': 'write' };
  const twoJobs = (): PolicyWorkflow => ({
    permissions: { contents: 'read' },
    jobs: {
      test: { permissions: { contents: 'read' }, steps: [CHECKOUT, TESTS] },
      publish: { needs: 'test', permissions: { ...WRITE }, steps: [CHECKOUT, SIGN] },
    },
  });

  it('keeps the rule: a read-only test job; one publishing job that needs it, runs no test and no install script', () => {
    expect(releaseProblems(release())).to.deep.equal([]);
    const r = release();
    expect(r.jobs['test']!.permissions).to.deep.equal({ contents: 'read' });
    expect(r.jobs['publish']!.needs).to.equal('test');
    expect(releaseProblems(twoJobs())).to.deep.equal([]);
  });

  it('fails the one-job release it replaced: the tests ran beside id-token, packages and contents write', () => {
    const oneJob: PolicyWorkflow = {
      permissions: { contents: 'read' },
      jobs: { release: { permissions: { ...WRITE }, steps: [CHECKOUT, TESTS, SIGN] } },
    };
    expect(releaseProblems(oneJob)).to.deep.equal([
      'job release runs the tests and holds write: contents, packages, id-token',
    ]);
  });

  it('fails a test job that gets a write permission, its own or inherited', () => {
    const own = twoJobs();
    own.jobs['test']!.permissions = { contents: 'read', packages: 'write' };
    expect(releaseProblems(own)).to.include('job test runs the tests and holds write: packages');
    const inherited = twoJobs();
    inherited.permissions = 'write-all';
    delete inherited.jobs['test']!.permissions;
    expect(releaseProblems(inherited)).to.include('job test runs the tests and holds write: *');
    const unstated = twoJobs();
    delete unstated.permissions;
    delete unstated.jobs['test']!.permissions;
    expect(releaseProblems(unstated)[0]).to.match(
      /^job test runs the tests and holds write: \* \(no permissions stated/,
    );
  });

  it('fails a publishing job that runs the tests, skips them, or runs what it does not need', () => {
    const cases: [string, (w: PolicyWorkflow) => void, string][] = [
      [
        'runs npm test',
        (w) => w.jobs['publish']!.steps!.push({ run: 'npm test' }),
        'job publish runs the tests and holds write: contents, packages, id-token',
      ],
      [
        'runs .ci/run',
        (w) => w.jobs['publish']!.steps!.push(TESTS),
        'job publish runs the tests and holds write: contents, packages, id-token',
      ],
      [
        'does not need the tests',
        (w) => delete w.jobs['publish']!.needs,
        'job publish holds write but does not need test',
      ],
      [
        'runs install scripts',
        (w) => w.jobs['publish']!.steps!.push({ run: 'npm ci --no-audit' }),
        'job publish runs install scripts: "npm ci --no-audit"',
      ],
      [
        'rebuilds every package',
        (w) => w.jobs['publish']!.steps!.push({ run: 'npm ci --ignore-scripts && npm rebuild' }),
        'job publish runs install scripts: "npm rebuild" (only node@24\'s)',
      ],
      [
        'sets up Go',
        (w) => w.jobs['publish']!.steps!.push({ uses: 'actions/setup-go@b7ad1dad31e06c5925ef5d2fc7ad053ef454303e' }),
        'job publish uses actions/setup-go: not needed to build or sign',
      ],
      [
        'builds the test control plane',
        (w) => w.jobs['publish']!.steps!.push({ name: 'testenv', run: 'bash hack/testenv/build.sh --all' }),
        'job publish installs or builds test tooling: testenv',
      ],
      [
        'shares the write with a second job',
        (w) => (w.jobs['notes'] = { needs: 'test', permissions: { contents: 'write' }, steps: [] }),
        'one job must hold the write and OIDC permissions; 2 do (publish, notes)',
      ],
    ];
    for (const [what, wrong, problem] of cases) {
      const w = twoJobs();
      wrong(w);
      expect(releaseProblems(w), what).to.include(problem);
    }
  });
});
