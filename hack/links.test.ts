// The link check of README.md and docs/*.md (runs with the unit tests, so in CI): no link leaves the
// repository, every relative link and anchor resolves. Also: every Progressing and Ready=False reason, and every alert the
// PrometheusRule links, has its section in docs/runbook.md — condition messages and alerts point there.
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { anchorsOf, checkLinks, documents, format, linksOf, slug } from './links.js';
import { PausedReason, ProgressingReason, ReadyReason } from '../api/v1alpha1/types.js';
import { alertRules } from '../manifests/observability.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

describe('links: README.md, docs/*.md and docs/decisions/*.md', () => {
  const docs = documents(root, readdirSync);

  it('checks README.md and at least the install guide, the runbook, the design and the decisions (one file each)', () => {
    expect(docs).to.include.members([
      'README.md',
      'docs/install.md',
      'docs/runbook.md',
      'docs/design.md',
      'docs/decisions/README.md',
    ]);
    expect(docs.filter((f) => f.startsWith('docs/decisions/')).length).to.be.greaterThan(40);
  });

  it('the decisions index lists every decision file of docs/decisions/', () => {
    const index = readFileSync(join(root, 'docs', 'decisions', 'README.md'), 'utf8');
    const unlisted = readdirSync(join(root, 'docs', 'decisions'))
      .filter((f) => f.endsWith('.md') && f !== 'README.md')
      .filter((f) => !index.includes(`](${f})`));
    expect(unlisted).to.deep.equal([]);
  });

  it('every link stays in the repository and resolves, anchors included', () => {
    const problems = docs.flatMap((f) => checkLinks(root, f));
    expect(problems.map(format)).to.deep.equal([]);
    // Not vacuous: the documents do link each other, with anchors.
    const all = docs.flatMap((f) => linksOf(f, readFileSync(join(root, f), 'utf8')));
    expect(all.length).to.be.greaterThan(20);
    expect(all.some((l) => l.target.includes('#'))).to.equal(true);
  });

  it('the runbook has a section for every Progressing reason (condition messages link <reason in lower case>)', () => {
    const anchors = anchorsOf(readFileSync(join(root, 'docs', 'runbook.md'), 'utf8'));
    const missing = Object.values(ProgressingReason).filter((r) => !anchors.has(r.toLowerCase()));
    expect(missing).to.deep.equal([]);
  });

  it('the runbook has a section for every Ready=False reason, and the Paused one (issue 19 item 8)', () => {
    const anchors = anchorsOf(readFileSync(join(root, 'docs', 'runbook.md'), 'utf8'));
    const missing = Object.values(ReadyReason).filter((r) => r !== ReadyReason.Ready && !anchors.has(r.toLowerCase()));
    expect(missing).to.deep.equal([]);
    expect(anchors.has(PausedReason.Paused.toLowerCase())).to.equal(true);
  });

  it('the runbook has the sections the alerts link (no leader, webhook unavailable, reconcile errors)', () => {
    const anchors = anchorsOf(readFileSync(join(root, 'docs', 'runbook.md'), 'utf8'));
    const linked = alertRules('0.0.0')
      .map((r) => r.annotations.runbook_url.split('#')[1]!)
      .filter((a) => !a.includes('{{'));
    expect(linked).to.include.members(['no-leader', 'webhook-unavailable', 'reconcile-errors']);
    expect(linked.filter((a) => !anchors.has(a))).to.deep.equal([]);
  });
});

describe('links: the checker itself', () => {
  let dir: string;
  const problems = (text: string) => {
    writeFileSync(join(dir, 'docs', 'a.md'), text);
    return checkLinks(dir, 'docs/a.md').map((p) => p.problem);
  };

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'joinguard-links-'));
    mkdirSync(join(dir, 'docs'));
    writeFileSync(
      join(dir, 'docs', 'b.md'),
      '# Upgrade, move & uninstall\n\n## Webhook unavailable\n\n## Webhook unavailable\n<a name="custom"></a>\n',
    );
    writeFileSync(join(dir, 'README.md'), '# Top\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("makes GitHub's anchors", () => {
    expect(slug('Upgrade, move & uninstall')).to.equal('upgrade-move--uninstall');
    expect(slug('`joinguard.io/resume`')).to.equal('joinguardioresume');
    expect([...anchorsOf(readFileSync(join(dir, 'docs', 'b.md'), 'utf8'))]).to.deep.equal([
      'upgrade-move--uninstall',
      'webhook-unavailable',
      'webhook-unavailable-1',
      'custom',
    ]);
  });

  it('accepts files and anchors that exist', () => {
    expect(
      problems(
        '[b](b.md) [s](b.md#webhook-unavailable-1) [c](b.md#custom) [up](../README.md#top) [self](#here)\n# Here\n',
      ),
    ).to.deep.equal([]);
  });

  it('refuses a link out of the repository: a URL, bare or not, or a path that climbs out', () => {
    expect(problems('[x](https://example.org/a)')).to.have.length(1);
    expect(problems('see https://example.org/a for more')).to.have.length(1);
    expect(problems('<https://example.org/a>')).to.have.length(1);
    expect(problems('[d](../../shared/DESIGN.md)')[0]).to.match(/leaves the repository/);
    expect(problems('[ref]: mailto:someone@example.org')).to.have.length(1);
  });

  it('refuses a missing file or anchor, an absolute path', () => {
    expect(problems('[x](c.md)')[0]).to.match(/no such file/);
    expect(problems('[x](b.md#nope)')[0]).to.match(/no heading or anchor #nope/);
    expect(problems('[x](/docs/b.md)')[0]).to.match(/absolute path/);
  });

  it('ignores what is code: fenced blocks and inline spans', () => {
    expect(problems('```sh\ncurl https://example.org\n```\nrun `curl https://example.org` [ok](b.md)\n')).to.deep.equal(
      [],
    );
  });
});
