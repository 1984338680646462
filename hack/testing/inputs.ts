// Test inputs that live outside the repository (CAPI's sources in the Go module cache, a built clusterctl), and the
// one rule for a test whose input is missing: skipped on a developer's machine, FAILED in CI (CI set, as .ci/run
// sets it), so that a cold CI runner can never pass by running less. hack/run-tests.sh fetches the CAPI sources
// before the unit job (hack/testenv/capi-sources.sh) and runs the clusterctl comparison once v1.14's build is there.
import { execFileSync } from 'node:child_process';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** CI is on unless unset, empty, "0" or "false" (GitHub and GitLab set CI=true; .ci/run does too). */
export function inCI(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = (env['CI'] ?? '').trim().toLowerCase();
  return v !== '' && v !== '0' && v !== 'false';
}

/**
 * Skips the test (or the suite, from a hook) when its input is missing; in CI throws instead, naming what is
 * missing. `ctx` is mocha's `this`.
 */
export function skipOrFail(ctx: Mocha.Context, why: string, env: NodeJS.ProcessEnv = process.env): never {
  if (inCI(env)) throw new Error(`missing test input in CI (a test may skip for it only outside CI): ${why}`);
  return ctx.skip();
}

let modCache: string | undefined;
/** The Go module cache: $GOMODCACHE, else what `go env GOMODCACHE` says, else $GOPATH/pkg/mod or ~/go/pkg/mod. */
export function goModCache(): string {
  if (modCache !== undefined) return modCache;
  const env = process.env['GOMODCACHE'];
  if (env) return (modCache = env);
  try {
    const out = execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8', timeout: 10_000 }).trim();
    if (out) return (modCache = out);
  } catch {
    // no Go here: the default below
  }
  return (modCache = join(process.env['GOPATH'] || join(homedir(), 'go'), 'pkg', 'mod'));
}

/** Where `go mod download` unpacks module@version (capitals escaped as Go does: `!` and the lower case). */
export function goModuleDir(module: string, version: string): string {
  const esc = (s: string) => s.replace(/[A-Z]/g, (c) => `!${c.toLowerCase()}`);
  return join(goModCache(), `${esc(module)}@${esc(version)}`);
}
