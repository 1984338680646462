// README.md, CHANGELOG.md and docs/install.md say what ran and nothing more (issue 38): a CAPI release CI runs only the
// smoke of two specs on is never called tested; no arm64 image is claimed while nothing builds one; no upgrade claim
// about every check while the upgrade spec keeps one. Unit test on the files and on hack/run-tests.sh's job lists.
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { expect } from 'chai';

const root = resolve(import.meta.dirname, '..');
const read = (f: string) => readFileSync(join(root, f), 'utf8');
const DOCS = ['README.md', 'CHANGELOG.md', 'docs/install.md'];

/** The CAPI releases whose CI jobs are SMOKE_SPECS alone (hack/run-tests.sh's RELEASE_SPECS). */
function smokeReleases(): string[] {
  const sh = read('hack/run-tests.sh');
  const table = /declare -A RELEASE_SPECS=\(([^)]*)\)/.exec(sh)?.[1] ?? '';
  return [...table.matchAll(/\[(v[0-9.]+)\]="\$\{SMOKE_SPECS\[\*\]\}"/g)].map((m) => m[1]!);
}

describe('docs: README and CHANGELOG say what ran', () => {
  it('finds the smoke releases in hack/run-tests.sh (v1.12 and v1.13 today)', () => {
    expect(smokeReleases()).to.deep.equal(['v1.12', 'v1.13']);
  });

  it("no smoke release is called tested: the compatibility table's row says smoke only, the README says not tested", () => {
    const install = read('docs/install.md');
    const readme = read('README.md');
    for (const r of smokeReleases()) {
      // The rows whose CAPI column names a patch release of it (not "other ... patch releases": untested).
      const patch = new RegExp(`${r.replace('.', '\\.')}\\.\\d`);
      const rows = install.split('\n').filter((l) => l.startsWith('| 0.1 |') && patch.test(l.split('|')[2]!));
      expect(rows, `a compatibility row for ${r}`).to.have.length.greaterThan(0);
      for (const row of rows) {
        expect(row, r).not.to.include('**tested here**');
        expect(row, r).to.include('smoke only, not tested');
      }
      // Each README paragraph naming the release calls it a smoke, and never "tested" without "not".
      for (const p of readme.split('\n\n').filter((x) => x.includes(`${r}.`))) {
        expect(p, r).to.include('smoke');
        expect(p.replace(/not tested/g, ''), r).not.to.match(/\btested\b/);
      }
    }
  });

  it('no arm64 image is claimed: nothing in CI builds one, and the docs say none was built or started', () => {
    // What CI builds and starts: hack/image (podman, the host's architecture: amd64 here) and the specs; a build for
    // another platform would name it.
    const built = ['hack/image', 'e2e/install']
      .flatMap((d) => readdirSync(join(root, d)).map((f) => join(d, f)))
      .filter((f) => /\.(ts|sh)$/.test(f))
      .some((f) => /--(platform|arch)[ =]\S*(arm64|aarch64)/.test(read(f)));
    expect(built, 'a CI build of arm64: update this test and the docs').to.equal(false);
    expect(read('CHANGELOG.md')).to.include('No linux/arm64 image was ever built or started');
    expect(read('README.md')).to.include('no\narm64 image was ever built or started');
  });

  it('the upgrade is claimed for what its spec kept (one check, e2e/lifecycle/upgrade.test.ts), never every check', () => {
    for (const f of DOCS) expect(read(f), f).not.to.match(/keeps? every check|every check keeps/i);
  });

  it("the README's first command runs in CI: `npm run demo`'s script is the file e2e/demo/demo.test.ts runs, a job", () => {
    const first = /```sh\n([^\n#]+?)\s*#/.exec(read('README.md'))?.[1];
    expect(first).to.equal('npm ci && npm run demo');
    const script = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts['demo'];
    expect(script).to.equal('tsx e2e/demo/demo.ts');
    expect(read('e2e/demo/demo.test.ts')).to.include("'e2e/demo/demo.ts'");
    // hack/run-tests.sh's v1.14 jobs: every e2e/<folder>/*.test.ts but e2e/kind's.
    const sh = read('hack/run-tests.sh');
    expect(sh).to.include("ls e2e/*/*.test.ts bench/*.test.ts | grep -v '^e2e/kind/'");
  });
});
