// JoinGuard's version and its User-Agent, shaped as client-go's DefaultKubernetesUserAgent
// (`<command>/<version> (<os>/<arch>) kubernetes/<commit>`): `joinguard/v0.1.0 (linux/amd64) joinguard.io/<commit>`,
// so the apiserver's audit log, its apiserver_request_total{client} and APF's flow distinguishers tell JoinGuard
// apart, release by release. The version is package.json's (the image carries it next to dist/); the commit is
// its optional `gitCommit` field (a release build may stamp it), else `unknown` as client-go writes it.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface BuildInfo {
  /** `v0.1.0` (client-go's adjustVersion: what follows a `-` is dropped). */
  version: string;
  /** Up to 7 characters of the commit, or `unknown`. */
  commit: string;
}

let cached: BuildInfo | undefined;

/** package.json of JoinGuard: the nearest one up from this file whose name is `joinguard`. */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  let version = 'unknown';
  let commit = 'unknown';
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string; gitCommit?: string };
      if (pkg.name === 'joinguard') {
        if (typeof pkg.version === 'string' && pkg.version !== '') version = `v${pkg.version.replace(/^v/, '').split('-')[0]}`;
        if (typeof pkg.gitCommit === 'string' && pkg.gitCommit !== '') commit = pkg.gitCommit.slice(0, 7);
        break;
      }
    } catch {
      // no package.json here
    }
    if (path.dirname(dir) === dir) break;
  }
  return (cached = { version, commit });
}

/** Node's platform and arch in Go's GOOS/GOARCH spelling (x64 -> amd64, win32 -> windows). */
export function goPlatform(platform: string = process.platform, arch: string = process.arch): string {
  const os = platform === 'win32' ? 'windows' : platform;
  const goArch = ({ x64: 'amd64', ia32: '386', arm: 'arm', arm64: 'arm64', ppc64: 'ppc64le', s390x: 's390x' } as Record<string, string>)[arch] ?? arch;
  return `${os}/${goArch}`;
}

/** `joinguard/<version> (<os>/<arch>) joinguard.io/<commit>`. */
export function defaultUserAgent(info: BuildInfo = buildInfo()): string {
  return `joinguard/${info.version} (${goPlatform()}) joinguard.io/${info.commit}`;
}
