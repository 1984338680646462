// The one version of the running JoinGuard (controllers/version.ts): the start-up line and the User-Agent read the
// same BUILD, the release package.json names. Unit tests.
import fs from 'node:fs';
import { expect } from 'chai';
import { BUILD, defaultUserAgent, goPlatform, versionLine } from './version.js';

describe('version: one source for the start-up line, joinguard_build_info and the User-Agent', () => {
  const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

  it("the release is package.json's, the same in the version line and the User-Agent", () => {
    expect(BUILD.version).to.equal(`v${pkg.version}`);
    expect(versionLine()).to.equal(`Version: v${pkg.version} (git commit: ${BUILD.gitCommit})`);
    const commit = BUILD.gitCommit === '' ? 'unknown' : BUILD.gitCommit.slice(0, 7);
    expect(defaultUserAgent()).to.equal(`joinguard/v${pkg.version} (${goPlatform()}) joinguard.io/${commit}`);
    expect(defaultUserAgent()).to.match(
      /^joinguard\/v\d+\.\d+\.\d+ \((linux|darwin|windows)\/(amd64|arm64)\) joinguard\.io\/(unknown|[0-9a-f]{7})$/,
    );
  });

  it("the User-Agent follows BUILD: a stamped commit cut to 7, none is unknown, a pre-release suffix dropped (client-go's adjustVersion)", () => {
    expect(defaultUserAgent({ version: 'v1.2.3', gitCommit: 'abcdef1234567890' })).to.match(
      /^joinguard\/v1\.2\.3 \(\w+\/\w+\) joinguard\.io\/abcdef1$/,
    );
    expect(defaultUserAgent({ version: 'v1.2.3-rc.1', gitCommit: '' })).to.match(
      /^joinguard\/v1\.2\.3 \(\w+\/\w+\) joinguard\.io\/unknown$/,
    );
    expect(versionLine({ version: 'v1.2.3', gitCommit: 'abcdef1234567890' })).to.equal(
      'Version: v1.2.3 (git commit: abcdef1234567890)',
    );
  });

  it('spells platforms as Go does (GOOS/GOARCH)', () => {
    expect([
      goPlatform('linux', 'x64'),
      goPlatform('linux', 'arm64'),
      goPlatform('win32', 'x64'),
      goPlatform('darwin', 'arm64'),
    ]).to.deep.equal(['linux/amd64', 'linux/arm64', 'windows/amd64', 'darwin/arm64']);
  });
});
