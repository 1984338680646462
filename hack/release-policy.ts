// The rule of the release workflow, on its parsed YAML: code that tests run (every development dependency, with its
// install scripts) never runs next to a write permission or the OIDC token that signs the release. So: a job that
// runs the tests holds no write permission (its own, or inherited from the workflow or GitHub's default); the one job
// that holds the write and OIDC permissions needs the test jobs, runs no test, runs no dependency's install script,
// and installs nothing beyond what building and signing need. hack/release.test.ts holds .github/workflows to it.

export interface Step {
  name?: string;
  uses?: string;
  run?: string;
  with?: Record<string, unknown>;
}
export type Permissions = string | Record<string, string> | undefined;
export interface Job {
  needs?: string | string[];
  permissions?: Permissions;
  steps?: Step[];
}
export interface Workflow {
  permissions?: Permissions;
  jobs: Record<string, Job>;
}

/** A step that runs the tests: .ci/run, npm test (or test:*), mocha. */
const RUNS_TESTS = /(^|[\s;&|(])(bash\s+)?\.ci\/run\b|\bnpm\s+(run\s+)?test\b|\bnpm\s+run\s+test:|\bmocha\b/m;
/** npm installing packages; acceptable in the publishing job only with --ignore-scripts. */
const NPM_INSTALL = /\bnpm\s+(ci|install|i)\b[^\n;&|]*/g;
/** npm rebuild runs install scripts: only node@24's (it fetches the Node binary npm scripts run on). */
const NPM_REBUILD = /\bnpm\s+rebuild\b([^\n;&|]*)/g;
/** What the publishing job may use: the checkout, the image builder and the registry login, the signer. */
export const PUBLISH_ACTIONS = [
  'actions/checkout',
  'docker/setup-qemu-action',
  'docker/setup-buildx-action',
  'docker/login-action',
  'sigstore/cosign-installer',
];
/** Tools of the tests, not of building or signing. */
const TEST_TOOLING = /\bapt-get\b|\bgo\s+(build|install|get)\b|hack\/testenv\/|hack\/image\//;

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
    for (const s of job.steps ?? []) {
      const what = s.name ?? s.uses ?? s.run ?? '?';
      if (s.uses && !PUBLISH_ACTIONS.some((a) => s.uses!.startsWith(`${a}@`)))
        problems.push(`job ${name} uses ${s.uses.split('@')[0]}: not needed to build or sign`);
      for (const m of (s.run ?? '').matchAll(NPM_INSTALL))
        if (!m[0].includes('--ignore-scripts')) problems.push(`job ${name} runs install scripts: "${m[0].trim()}"`);
      for (const m of (s.run ?? '').matchAll(NPM_REBUILD))
        if (m[1]!.trim() !== 'node')
          problems.push(`job ${name} runs install scripts: "${m[0].trim()}" (only node@24's)`);
      if (TEST_TOOLING.test(s.run ?? '')) problems.push(`job ${name} installs or builds test tooling: ${what}`);
    }
  }
  return problems;
}
