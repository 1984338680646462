// The User-Agent as client-go shapes it, from package.json's version.
import fs from 'node:fs';
import { expect } from 'chai';
import { buildInfo, defaultUserAgent, goPlatform } from './user-agent.js';

describe('User-Agent', () => {
  it('is joinguard/<version> (<os>/<arch>) joinguard.io/<commit>, the version from package.json', () => {
    const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(buildInfo().version).to.equal(`v${pkg.version}`);
    expect(defaultUserAgent()).to.equal(`joinguard/v${pkg.version} (${goPlatform()}) joinguard.io/${buildInfo().commit}`);
    expect(defaultUserAgent()).to.match(/^joinguard\/v\d+\.\d+\.\d+ \((linux|darwin|windows)\/(amd64|arm64)\) joinguard\.io\/(unknown|[0-9a-f]{1,7})$/);
  });

  it("spells platforms as Go does (GOOS/GOARCH) and drops a pre-release suffix as client-go's adjustVersion", () => {
    expect([goPlatform('linux', 'x64'), goPlatform('linux', 'arm64'), goPlatform('win32', 'x64'), goPlatform('darwin', 'arm64')]).to.deep.equal(['linux/amd64', 'linux/arm64', 'windows/amd64', 'darwin/arm64']);
    expect(defaultUserAgent({ version: 'v1.2.3', commit: 'abcdef1' })).to.match(/^joinguard\/v1\.2\.3 \(\w+\/\w+\) joinguard\.io\/abcdef1$/);
  });
});
