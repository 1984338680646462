// Runs the real clusterctl, when one is at hand, for its variable substitution (`clusterctl generate yaml
// --from`): the tests compare it with substitute.ts and the install test uses it. Looked up in
// $JOINGUARD_CLUSTERCTL, then the test control plane's bin folder (hack/testenv/build.sh builds it there),
// then PATH. It is isolated from the user's clusterctl config and never checks for a newer version online.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { MANIFESTS_DIR } from './render.js';

const run = promisify(execFile);

export async function findClusterctl(): Promise<string | undefined> {
  const env = process.env['JOINGUARD_CLUSTERCTL'];
  if (env) return existsSync(env) ? env : undefined;
  try {
    const build = resolve(MANIFESTS_DIR, '..', 'hack', 'testenv', 'build.sh');
    const { stdout } = await run('bash', [build, '--print'], { timeout: 10_000 });
    const candidate = join(stdout.trim(), 'clusterctl');
    if (existsSync(candidate)) return candidate;
  } catch {
    // no build script or no Go: fall through to PATH
  }
  for (const dir of (process.env['PATH'] ?? '').split(delimiter)) {
    const candidate = join(dir, 'clusterctl');
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/**
 * `clusterctl generate yaml --from <file>` with exactly `vars` as environment (plus PATH/HOME). Rejects with
 * clusterctl's own message when it refuses (a variable without a default left unset).
 */
export async function clusterctlSubstitute(
  clusterctl: string,
  text: string,
  vars: Record<string, string>,
): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'joinguard-clusterctl-'));
  try {
    const file = join(dir, 'in.yaml');
    const config = join(dir, 'clusterctl.yaml');
    await writeFile(file, text);
    await writeFile(config, 'providers: []\n');
    const { stdout } = await run(clusterctl, ['generate', 'yaml', '--from', file, '--config', config], {
      timeout: 60_000,
      maxBuffer: 64 * 1024 * 1024,
      env: {
        PATH: process.env['PATH'] ?? '',
        HOME: dir,
        XDG_CONFIG_HOME: join(dir, 'config'),
        CLUSTERCTL_DISABLE_VERSIONCHECK: 'true',
        ...vars,
      },
    }).catch((e: { stderr?: string; message: string }) => {
      throw new Error((e.stderr ?? '').trim() || e.message);
    });
    return stdout;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
