// The running JoinGuard's version: the one home of it. CAPI's managers log it at start ("Version: v1.14.2 (git
// commit: …)"), joinguard_build_info carries it, and every request's User-Agent names it. The release is
// api/v1alpha1 RELEASE (held equal to package.json's version by manifests/observability.test.ts), so it is compiled
// in; the git commit comes from build-info.json, which the image build writes beside package.json (Dockerfile); a
// source checkout has none. Read once, at import.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { RELEASE } from '../api/v1alpha1/types.js';

export interface BuildInfo {
  /** `v0.1.0`, as the image tag and the release name spell it. */
  version: string;
  /** The git commit the image was built from; empty in a source checkout (as CAPI's dev builds print it). */
  gitCommit: string;
}

/** build-info.json in the first of the folders above this file that has one (/app in the image). */
function gitCommit(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 3; i++, dir = dirname(dir)) {
    try {
      const v = (JSON.parse(readFileSync(join(dir, 'build-info.json'), 'utf8')) as { gitCommit?: unknown }).gitCommit;
      return typeof v === 'string' && /^[0-9a-f]{7,40}$/.test(v) ? v : '';
    } catch {
      // not here
    }
  }
  return '';
}

export const BUILD: BuildInfo = { version: RELEASE, gitCommit: gitCommit() };

/** CAPI's start-up line: `Version: v1.14.2 (git commit: 1a2b3c)`. */
export const versionLine = (b: BuildInfo = BUILD): string => `Version: ${b.version} (git commit: ${b.gitCommit})`;

/** Node's platform and arch in Go's GOOS/GOARCH spelling (x64 -> amd64, win32 -> windows). */
export function goPlatform(platform: string = process.platform, arch: string = process.arch): string {
  const os = platform === 'win32' ? 'windows' : platform;
  const goArch =
    (
      { x64: 'amd64', ia32: '386', arm: 'arm', arm64: 'arm64', ppc64: 'ppc64le', s390x: 's390x' } as Record<
        string,
        string
      >
    )[arch] ?? arch;
  return `${os}/${goArch}`;
}

/**
 * The User-Agent, shaped as client-go's DefaultKubernetesUserAgent (`<command>/<version> (<os>/<arch>)
 * kubernetes/<commit>`): `joinguard/v0.1.0 (linux/amd64) joinguard.io/<commit>`, so the apiserver's audit log,
 * apiserver_request_total and APF's flow distinguishers tell JoinGuard apart, release by release. As client-go: a
 * pre-release suffix is dropped (adjustVersion), the commit cut to 7 characters or `unknown` (adjustCommit).
 */
export function defaultUserAgent(b: BuildInfo = BUILD): string {
  const version = `v${b.version.replace(/^v/, '').split('-')[0]}`;
  const commit = b.gitCommit === '' ? 'unknown' : b.gitCommit.slice(0, 7);
  return `joinguard/${version} (${goPlatform()}) joinguard.io/${commit}`;
}
