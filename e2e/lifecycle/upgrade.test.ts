// `clusterctl upgrade apply` from this release's components to the next: a local repository holds v0.1.0
// and v0.2.0, both built from this tree's manifests (the next release differs in its version, image tag
// and release series). clusterctl deletes the provider's old components except the CRD and installs the
// new ones; the MachineJoinCheck must stay the same object, with its spec and its status (the memory that
// decides) untouched, and the new release's controller must go on from that status. cert-manager is real
// (fleet.ts): clusterctl finds it working and leaves it alone, and it issues the add-on's serving certificate.
import { X509Certificate } from 'node:crypto';
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADDON_NAMESPACE, clusterctl, inventory, localRepository, type Repository } from './clusterctl-env.js';
import { issuedCertificates, webhookConfigurations } from './addon-webhook.js';
import {
  checkOf,
  createFleet,
  getJson,
  initAddon,
  provisionEveryMachine,
  startManagementCluster,
  until,
  type Fleet,
  type Json,
  type ManagementCluster,
} from './fleet.js';

const log = (line: string) => process.stderr.write(`${line}\n`);
const fleet: Fleet = { namespace: 'fleet', cluster: 'c1', pool: 'c1-md-0', check: 'workers' };

describe('lifecycle: clusterctl upgrade apply v0.1.0 -> v0.2.0 keeps checks and their status', function () {
  this.timeout(600_000);
  let mc: ManagementCluster;
  let repo: Repository;
  let repoDir: string;
  let provisioner: { stop(): void } | undefined;
  let recorded: Json;
  let initOutput: string;

  before(async () => {
    repoDir = await mkdtemp(join(tmpdir(), 'joinguard-repo-'));
    repo = await localRepository(repoDir, ['0.1.0', '0.2.0']);
    mc = await startManagementCluster('upgrade', log);
    initOutput = await initAddon(mc, repo, '0.1.0');
    await createFleet(mc, fleet, 1, { joinTimeout: '15s', remediation: { strategy: 'OwnerRemediated' } });
    provisioner = provisionEveryMachine(mc, fleet);
    await mc.startJoinGuard();
    // Memory worth keeping: a Machine that timed out joining was replaced, and recorded as such.
    recorded = await until('a remediation recorded as Replaced', 180_000, async () => {
      const c = await checkOf(mc, fleet);
      return ((c?.status?.remediations ?? []) as Json[]).some((r) => r.outcome === 'Replaced') ? c : undefined;
    });
    // The old release stops (clusterctl scales its Deployment down); nothing writes the status meanwhile.
    await mc.stopJoinGuard();
    recorded = (await checkOf(mc, fleet))!;
  });

  after(async () => {
    provisioner?.stop();
    await mc?.stop();
    if (repoDir) await rm(repoDir, { recursive: true, force: true });
  });

  it('clusterctl init installed v0.1.0 and recorded it in the inventory', async () => {
    expect(await inventory(mc.admin)).to.include('addon-joinguard@v0.1.0');
    const d = await getJson(
      mc.admin,
      '/apis/apps/v1/namespaces/joinguard-system/deployments/joinguard-controller-manager',
    );
    expect(d!.spec.template.spec.containers[0].image).to.equal('ghcr.io/joinguard/joinguard:v0.1.0');
  });

  it("clusterctl init found cert-manager working and cert-manager issued the add-on's serving certificate", async () => {
    // clusterctl's own check (cert_manager.go waitForAPIReady): its test Issuer and Certificate created on the first
    // try; had that failed, it would have tried to download cert-manager (no network here) and failed.
    expect(initOutput).to.include('Skipping installing cert-manager as it is already installed');
    const [certificate] = await issuedCertificates(mc.admin);
    expect(certificate!.spec.secretName).to.equal(mc.webhook!.secret);
    const secret = (await getJson(mc.admin, `/api/v1/namespaces/${ADDON_NAMESPACE}/secrets/${mc.webhook!.secret}`))!;
    const cert = new X509Certificate(Buffer.from(secret.data['tls.crt'] as string, 'base64'));
    expect(cert.subjectAltName).to.include(`DNS:joinguard-webhook-service.${ADDON_NAMESPACE}.svc`);
    // cainjector put the certificate's CA into the webhook configuration clusterctl installed.
    for (const c of await webhookConfigurations(mc.admin))
      for (const w of c.webhooks as Json[]) expect(w.clientConfig.caBundle).to.equal(secret.data['ca.crt']);
  });

  it('clusterctl upgrade plan offers v0.2.0 and leaves cert-manager alone (not installed by clusterctl)', async () => {
    const plan = await clusterctl(repo, ['upgrade', 'plan', '--kubeconfig', mc.env.kubeconfigPath]);
    expect(plan.stdout).to.match(/addon-joinguard\s+joinguard-system\s+AddonProvider\s+v0\.1\.0\s+v0\.2\.0/);
    // No object of it carries clusterctl's cert-manager label: clusterctl counts it externally managed.
    expect(plan.stdout).not.to.match(/Cert-Manager/i);
  });

  it('clusterctl upgrade apply --addon joinguard-system/joinguard:v0.2.0 replaces the components', async () => {
    const crdBefore = await getJson(
      mc.admin,
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machinejoinchecks.joinguard.io',
    );
    await clusterctl(repo, [
      'upgrade',
      'apply',
      '--kubeconfig',
      mc.env.kubeconfigPath,
      '--addon',
      'joinguard-system/joinguard:v0.2.0',
    ]);
    expect(await inventory(mc.admin))
      .to.include('addon-joinguard@v0.2.0')
      .and.not.include('addon-joinguard@v0.1.0');
    const d = await getJson(
      mc.admin,
      '/apis/apps/v1/namespaces/joinguard-system/deployments/joinguard-controller-manager',
    );
    expect(d!.spec.template.spec.containers[0].image).to.equal('ghcr.io/joinguard/joinguard:v0.2.0');
    // The CRD was updated in place, never deleted (a deletion would have taken every check with it).
    const crdAfter = await getJson(
      mc.admin,
      '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/machinejoinchecks.joinguard.io',
    );
    expect(crdAfter!.metadata.uid).to.equal(crdBefore!.metadata.uid);
    // clusterctl re-created the ServiceAccount, the Service, the Certificate and the webhook configurations: the new
    // release's pod serves the webhook (cert-manager's certificate, cainjector's caBundle, called through the Service).
    await mc.serveWebhook();
  });

  it('the check is the same object, with the same spec and the same status', async () => {
    const after = (await checkOf(mc, fleet))!;
    expect(after.metadata.uid).to.equal(recorded.metadata.uid);
    expect(after.spec).to.deep.equal(recorded.spec);
    expect(after.status).to.deep.equal(recorded.status);
  });

  it("the new release's controller goes on from that status (the record stays, nothing is asked twice)", async () => {
    await mc.startJoinGuard();
    const replaced = ((recorded.status.remediations ?? []) as Json[])
      .filter((r) => r.outcome === 'Replaced')
      .map((r) => r.uid as string);
    const c = await until('a reconcile by the new controller', 60_000, async () => {
      const x = await checkOf(mc, fleet);
      return x && x.metadata.resourceVersion !== recorded.metadata.resourceVersion ? x : undefined;
    });
    const records = (c.status.remediations ?? []) as Json[];
    for (const uid of replaced) {
      const mine = records.filter((r) => r.uid === uid);
      expect(mine, `the record of ${uid}`).to.have.length(1);
      expect(mine[0]!.outcome).to.equal('Replaced');
    }
    expect(c.status.recentFailures?.length ?? 0).to.be.at.least(recorded.status.recentFailures?.length ?? 0);
  });

  it('clusterctl delete --addon joinguard removes the add-on and keeps the CRD and the checks (docs/install.md)', async () => {
    await mc.stopJoinGuard();
    await clusterctl(repo, ['delete', '--kubeconfig', mc.env.kubeconfigPath, '--addon', 'joinguard']);
    expect(await inventory(mc.admin)).not.to.include('addon-joinguard@v0.2.0');
    expect(
      await getJson(mc.admin, '/apis/apps/v1/namespaces/joinguard-system/deployments/joinguard-controller-manager'),
    ).to.equal(undefined);
    expect(
      await getJson(
        mc.admin,
        '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/joinguard-validating-webhook-configuration',
      ),
    ).to.equal(undefined);
    expect((await checkOf(mc, fleet))?.metadata.uid).to.equal(recorded.metadata.uid);
  });
});
