// The running JoinGuard's version, as CAPI's managers log it at start ("Version: v1.14.2 (git commit: …)") and as
// joinguard_build_info carries it: the release (api/v1alpha1 RELEASE, held equal to package.json's version by a
// test) and the git commit from build-info.json, which the image build writes beside package.json (Dockerfile);
// a source checkout has none. Read once, at import.
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
