// The PrometheusRule JoinGuard ships, read by Prometheus's own promtool (built from its Go module by
// hack/testenv/promtool/build.sh when missing, with progress on stderr): `promtool check rules` accepts it,
// and `promtool test rules` shows each alert fires on the series it is written for and stays quiet on the
// ones it must ignore (a dry run, budget pacing, a refusal cleared by the retries, a leader present, a replica that
// runs alone without leader election, the webhook served), on series labelled as either shipped scrape setup labels
// them (the cases: alert-tests.ts).
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { parse, stringify } from 'yaml';
import { MANIFESTS_DIR, renderProviderFiles } from '../../manifests/render.js';
import { alertRules, runbookBase } from '../../manifests/observability.js';
import { annotationsFor, ruleTests, VERSION } from './alert-tests.js';
import { dashboardQueryCount, dashboardRuleFile, dashboardTests } from './dashboard-queries.js';

const run = promisify(execFile);
const BUILD = resolve(MANIFESTS_DIR, '..', 'hack', 'testenv', 'promtool', 'build.sh');

/** Runs the build script (a no-op when cached), passing its progress lines through; resolves to the binary. */
function buildPromtool(): Promise<string> {
  return new Promise((ok, fail) => {
    const child = spawn('bash', [BUILD], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => process.stderr.write(c));
    child.on('error', fail);
    child.on('close', (code) =>
      code === 0 ? ok(out.trim().split('\n').at(-1)!) : fail(new Error(`${BUILD} exited ${code}`)),
    );
  });
}

describe('lifecycle: the shipped PrometheusRule passes promtool', function () {
  // A cold build of promtool takes about 4-5 minutes on 2 cores; cached, nothing.
  this.timeout(15 * 60_000);
  let promtool: string;
  let dir: string;

  before(async () => {
    promtool = await buildPromtool();
    dir = await mkdtemp(join(tmpdir(), 'joinguard-promtool-'));
    // The rules exactly as shipped: taken from the built observability file's PrometheusRule.
    const { observability } = await renderProviderFiles(VERSION);
    const rule = observability
      .split(/^---$/m)
      .map((d) => parse(d) as { kind?: string; spec?: unknown })
      .find((o) => o?.kind === 'PrometheusRule');
    expect(rule, 'a PrometheusRule in observability-components.yaml').to.exist;
    await writeFile(join(dir, 'rules.yaml'), stringify(rule!.spec));
    await writeFile(join(dir, 'tests.yaml'), stringify(ruleTests()));
    await writeFile(join(dir, 'dashboard.yaml'), dashboardRuleFile());
    await writeFile(join(dir, 'dashboard-tests.yaml'), stringify(dashboardTests()));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it(`promtool check rules: SUCCESS, ${alertRules(VERSION).length} alerts`, async () => {
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'rules.yaml')]);
    expect(stdout).to.include(`SUCCESS: ${alertRules(VERSION).length} rules found`);
  });

  it('every alert has a case where it fires and one where it must not', () => {
    const cases = ruleTests().tests.flatMap((g) => g.alert_rule_test);
    const missing = alertRules(VERSION).flatMap((r) => [
      ...(cases.some((c) => c.alertname === r.alert && c.exp_alerts.length > 0) ? [] : [`${r.alert} never fires`]),
      ...(cases.some((c) => c.alertname === r.alert && c.exp_alerts.length === 0) ? [] : [`${r.alert} never quiet`]),
    ]);
    expect(missing).to.deep.equal([]);
  });

  it('promtool test rules: each alert fires when it should and only then', async () => {
    const res = await run(promtool, ['test', 'rules', join(dir, 'tests.yaml')], { cwd: dir }).catch(
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(`${res.stdout}${res.stderr}`, `${res.stdout}${res.stderr}`).to.match(/SUCCESS/);
  });

  it("the dashboard's queries: each one parses, and the fleet's panels answer on the series the controller exports", async () => {
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'dashboard.yaml')]);
    expect(stdout).to.include(`SUCCESS: ${dashboardQueryCount()} rules found`);
    const res = await run(promtool, ['test', 'rules', join(dir, 'dashboard-tests.yaml')], { cwd: dir }).catch(
      (e: { stdout: string; stderr: string }) => e,
    );
    expect(`${res.stdout}${res.stderr}`, `${res.stdout}${res.stderr}`).to.match(/SUCCESS/);
  });

  it("the stalled alert links the runbook section of the check's reason", () => {
    const a = annotationsFor('JoinGuardCheckStalled', { reason: 'RemediationBudgetExhausted' });
    expect(a['runbook_url']).to.equal(`${runbookBase(VERSION)}#remediationbudgetexhausted`);
  });

  it('every alert links a runbook section of this release', async () => {
    const { observability } = await renderProviderFiles(VERSION);
    const urls = [...observability.matchAll(/runbook_url: (\S+)/g)].map((m) => m[1]!);
    expect(urls).to.have.length(alertRules(VERSION).length);
    for (const u of urls) expect(u.startsWith(`${runbookBase(VERSION)}#`), u).to.equal(true);
  });
});
