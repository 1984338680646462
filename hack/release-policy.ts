// The rule of the release workflow, on its parsed YAML: code that tests run (every development dependency, with its
// install scripts) never runs next to a write permission or the OIDC token that signs the release. So: a job that
// runs the tests holds no write permission (its own, or inherited from the workflow or GitHub's default); the one job
// that holds the write and OIDC permissions needs the test jobs, runs no test, and runs only what is listed here: the
// actions of PUBLISH_ACTIONS and, in its `run:` steps, only the exact command lines of PUBLISH_COMMANDS (an
// allow-list: a line not listed is refused, whatever it does). No job that holds `id-token: write` runs npm, npx, tsx
// or esbuild; Node comes from actions/setup-node at an exact 24.x version; the release files are built by a test job
// and handed over as an artifact, attested, and the GitOps base is attached. hack/release.test.ts holds
// .github/workflows to it.

export interface Step {
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
  env?: Record<string, unknown>;
  shell?: string;
}
export type Permissions = string | Record<string, string> | undefined;
export interface Job {
  needs?: string | string[];
  permissions?: Permissions;
  env?: Record<string, unknown>;
  steps?: Step[];
}
export interface Workflow {
  permissions?: Permissions;
  jobs: Record<string, Job>;
}

/** A step that runs the tests: .ci/run, npm test (or test:*), mocha. */
const RUNS_TESTS = /(^|[\s;&|(])(bash\s+)?\.ci\/run\b|\bnpm\s+(run\s+)?test\b|\bnpm\s+run\s+test:|\bmocha\b/m;
/** What the publishing job may use: the checkout, Node, the test job's files, the image builder and the registry login,
 * the signer and the attestation. */
export const PUBLISH_ACTIONS = [
  'actions/checkout',
  'actions/setup-node',
  'actions/download-artifact',
  'docker/setup-qemu-action',
  'docker/setup-buildx-action',
  'docker/login-action',
  'sigstore/cosign-installer',
  'actions/attest-build-provenance',
];
/** The release files, as the test job builds them and the publishing job signs, attests and attaches them. */
export const RELEASE_FILES = [
  'addon-components.yaml',
  'metadata.yaml',
  'observability-components.yaml',
  'grafana-dashboard.json',
  'shard-components.yaml',
  'gitops.tar.gz',
  'checksums.txt',
];
/** Every command line the publishing job may run, exactly (a line continued with a backslash is joined first; runs of
 * spaces count as one). Each script it calls builds nothing with npm: hack/release.test.ts runs them with npm, npx
 * and tsx made to fail. */
export const PUBLISH_COMMANDS = [
  'bash hack/release.sh "${GITHUB_REF_NAME#v}" --push',
  'bash hack/release-smoke.sh "$(cat out/image-digest.txt)" "${GITHUB_REF_NAME#v}"',
  'cosign sign --yes "ghcr.io/joinguard/joinguard@$(cat out/image-digest.txt)"',
  `for f in ${RELEASE_FILES.join(' ')}; do`,
  'cosign sign-blob --yes --bundle "out/${f}.sigstore.json" "out/${f}"',
  'done',
  'bash hack/release-notes.sh > out/release-header.md',
  'gh release create "$GITHUB_REF_NAME" --title "JoinGuard $GITHUB_REF_NAME" --verify-tag --generate-notes ' +
    `--notes-file out/release-header.md ${RELEASE_FILES.map((f) => `out/${f}`).join(' ')} out/*.sigstore.json`,
];
/** The environment a publishing step may set: the GitHub CLI's token. (BASH_ENV, NODE_OPTIONS and the like run code.) */
const PUBLISH_ENV = ['GH_TOKEN'];
/** Development-dependency code, or npm fetching and running packages: never where the OIDC token is held. */
const DEV_CODE =
  /\b(npx|tsx|esbuild|ts-node|mocha)\b|\bnpm\s+(ci|install|i|exec|x|run|run-script|rebuild|test|start)\b|node_modules\//;
/** `npm rebuild node` fetches a Node binary outside the lockfile's integrity: Node comes from setup-node. */
const NPM_REBUILD_NODE = /\bnpm\s+rebuild\s+node\b/;
/** Tools of the tests, not of building or signing. */
const TEST_TOOLING = /\bapt-get\b|\bgo\s+(build|install|get)\b|hack\/testenv\/|hack\/image\//;

/** A `run:` script as command lines: continuations joined, blank and comment lines dropped, spaces collapsed. */
export function commandLines(script: string): string[] {
  return script
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim().replace(/\s+/g, ' '))
    .filter((l) => l !== '' && !l.startsWith('#'));
}

const actionOf = (uses: string): string => uses.split('@')[0]!;

/** The job's permissions as GitHub applies them: its own, else the workflow's, else the repository default. */
export function effectivePermissions(w: Workflow, job: Job): Permissions {
  return job.permissions ?? w.permissions;
}

/** The scopes granted write (`*` for write-all, or for GitHub's default token where nothing is stated). */
export function writeScopes(p: Permissions): string[] {
  if (p === undefined) return ['* (no permissions stated: the repository default may write)'];
  if (typeof p === 'string') return p === 'write-all' ? ['*'] : [];
  return Object.entries(p)
    .filter(([, v]) => v === 'write')
    .map(([k]) => k);
}

export const runsTests = (job: Job): boolean => (job.steps ?? []).some((s) => RUNS_TESTS.test(s.run ?? ''));

/** Every way the workflow breaks the rule, one line each; empty when it keeps it. */
export function releaseProblems(w: Workflow): string[] {
  const problems: string[] = [];
  const jobs = Object.entries(w.jobs);
  const testJobs = jobs.filter(([, j]) => runsTests(j)).map(([n]) => n);
  const writers = jobs.filter(([, j]) => writeScopes(effectivePermissions(w, j)).length > 0);
  if (testJobs.length === 0) problems.push('no job runs the tests');
  for (const name of testJobs) {
    const scopes = writeScopes(effectivePermissions(w, w.jobs[name]!));
    if (scopes.length > 0) problems.push(`job ${name} runs the tests and holds write: ${scopes.join(', ')}`);
  }
  if (writers.length !== 1)
    problems.push(
      `one job must hold the write and OIDC permissions; ${writers.length} do (${writers.map(([n]) => n).join(', ')})`,
    );
  for (const [name, job] of writers) {
    if (testJobs.includes(name)) continue; // named above
    const needs = typeof job.needs === 'string' ? [job.needs] : (job.needs ?? []);
    for (const t of testJobs) if (!needs.includes(t)) problems.push(`job ${name} holds write but does not need ${t}`);
    const steps = job.steps ?? [];
    for (const k of Object.keys(job.env ?? {})) problems.push(`job ${name} sets env ${k}: not on the allow-list`);
    for (const s of steps) {
      const what = s.name ?? s.uses ?? s.run ?? '?';
      if (s.uses && !PUBLISH_ACTIONS.some((a) => s.uses!.startsWith(`${a}@`)))
        problems.push(`job ${name} uses ${actionOf(s.uses)}: not needed to build or sign`);
      if (s.shell !== undefined) problems.push(`job ${name} sets a shell (${s.shell}): ${what}`);
      for (const k of Object.keys(s.env ?? {}))
        if (!PUBLISH_ENV.includes(k)) problems.push(`job ${name} sets env ${k}: not on the allow-list`);
      for (const line of commandLines(s.run ?? '')) {
        if (NPM_REBUILD_NODE.test(line))
          problems.push(`job ${name} runs "npm rebuild node": a Node binary outside the lockfile's integrity`);
        if (TEST_TOOLING.test(line)) problems.push(`job ${name} installs or builds test tooling: ${what}`);
        if (!PUBLISH_COMMANDS.includes(line))
          problems.push(`job ${name} runs a command not on the allow-list: "${line}"`);
      }
    }
    // Node from setup-node, at an exact 24.x version.
    const node = steps.filter((s) => s.uses?.startsWith('actions/setup-node@'));
    if (node.length === 0) problems.push(`job ${name} has no actions/setup-node: Node must come from it`);
    for (const s of node)
      if (!/^24\.\d+\.\d+$/.test(String(s.with?.['node-version'] ?? '')))
        problems.push(
          `job ${name} sets up Node ${String(s.with?.['node-version'] ?? '(no version)')}: not an exact 24.x.y`,
        );
    // The release files come from a test job, are attested, and are all attached (the GitOps base among them).
    const download = steps.find((s) => s.uses?.startsWith('actions/download-artifact@'));
    const artifact = download?.with?.['name'];
    const uploaded = needs.some((n) =>
      (w.jobs[n]?.steps ?? []).some(
        (s) => s.uses?.startsWith('actions/upload-artifact@') && s.with?.['name'] === artifact,
      ),
    );
    if (!download || !uploaded)
      problems.push(
        `job ${name} does not take the release files from a job it needs (upload-artifact/download-artifact)`,
      );
    const attested = steps
      .filter((s) => s.uses?.startsWith('actions/attest-build-provenance@'))
      .flatMap((s) => String(s.with?.['subject-path'] ?? '').split(/\s+/));
    for (const f of RELEASE_FILES)
      if (!attested.includes(`out/${f}`)) problems.push(`job ${name} does not attest out/${f}`);
    const release = steps.flatMap((s) => commandLines(s.run ?? '')).find((l) => l.startsWith('gh release create '));
    for (const f of RELEASE_FILES)
      if (!release?.split(' ').includes(`out/${f}`))
        problems.push(`job ${name} does not attach out/${f} to the release`);
  }
  // Wherever the OIDC token is held (the one writer, or any other job): no development-dependency code.
  for (const [name, job] of jobs) {
    const p = effectivePermissions(w, job);
    const oidc = p === 'write-all' || (typeof p === 'object' && p['id-token'] === 'write');
    if (!oidc) continue;
    for (const s of job.steps ?? [])
      for (const line of commandLines(s.run ?? ''))
        if (DEV_CODE.test(line))
          problems.push(`job ${name} runs development-dependency code while holding id-token: "${line}"`);
  }
  return problems;
}
