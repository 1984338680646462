// The shipped Grafana dashboard against Grafana's dashboard schema: hack/testenv/grafana-schema builds a small checker
// on the Grafana Foundation SDK (Go types generated from the schema Grafana is built on) that decodes the JSON strictly
// — an unknown field, a field of the wrong type, a required field missing, each panel's options and field config by
// its panel type, each query by its data source — then runs the SDK's Validate. No Grafana server or image renderer is
// at hand here (the renderer needs Grafana and a browser), so the dashboard is checked, not rendered.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { MANIFESTS_DIR, renderProviderFiles } from '../../manifests/render.js';
import { dashboardPanels } from '../../manifests/dashboard.js';

const run = promisify(execFile);
const BUILD = resolve(MANIFESTS_DIR, '..', 'hack', 'testenv', 'grafana-schema', 'build.sh');

/** Runs the build script (a no-op when cached), passing its progress lines through; resolves to the binary. */
function buildChecker(): Promise<string> {
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

async function check(checker: string, file: string): Promise<{ ok: boolean; out: string }> {
  return run(checker, [file]).then(
    (r) => ({ ok: true, out: r.stdout }),
    (e: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
  );
}

describe("lifecycle: the shipped Grafana dashboard passes Grafana's dashboard schema", function () {
  // A cold build downloads the SDK and compiles its packages: about 3 minutes on 2 loaded cores; cached, nothing.
  this.timeout(10 * 60_000);
  let checker: string;
  let dir: string;
  let json: string;

  before(async () => {
    checker = await buildChecker();
    dir = await mkdtemp(join(tmpdir(), 'joinguard-grafana-'));
    json = (await renderProviderFiles('0.1.0')).dashboard; // out/grafana-dashboard.json, also the ConfigMap's
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('grafana-dashboard.json decodes strictly and validates, every panel of it', async () => {
    await writeFile(join(dir, 'dashboard.json'), json);
    const r = await check(checker, join(dir, 'dashboard.json'));
    expect(r.ok, r.out).to.equal(true);
    expect(r.out).to.include(`OK ${join(dir, 'dashboard.json')}: ${dashboardPanels().length} panels`);
  });

  it('the checker is strict: an unknown panel option or query field, or a missing required option, is refused', async () => {
    const d = JSON.parse(json) as { panels: Record<string, any>[] };
    const timeline = d.panels.find((p) => p['type'] === 'state-timeline')!;
    const stat = d.panels.find((p) => p['type'] === 'stat')!;
    timeline['options']['rowHeigth'] = 0.9;
    stat['targets'][0]['exp'] = 'up';
    delete stat['options']['reduceOptions'];
    await writeFile(join(dir, 'broken.json'), JSON.stringify(d));
    const r = await check(checker, join(dir, 'broken.json'));
    expect(r.ok).to.equal(false);
    expect(r.out)
      .to.match(/unexpected field 'rowHeigth'/)
      .and.match(/unexpected field 'exp'/)
      .and.match(/reduceOptions: required field is missing/);
  });
});
