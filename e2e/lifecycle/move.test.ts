// `clusterctl move` of a Cluster whose MachineJoinCheck suspects the join credential, between two local
// management clusters, with clusterctl itself. What clusterctl v1.14 does (cmd/clusterctl/client/cluster):
// - it refuses to start while any Machine of the moved namespace has no nodeRef (mover.go
//   checkProvisioningCompleted), and a suspected pool always has one: the operator scales the pool to zero
//   first (the suspicion is memory, not a Machine, and stays);
// - it finds MachineJoinChecks because the CRD carries clusterctl's labels (objectgraph.go
//   getDiscoveryTypes), moves them with their Cluster (ownerReference, or the CRD's `move` label);
// - it creates each object on the target without its status (createTargetObject only Creates), so the
//   memory that decides must travel another way: the core's block-move protocol (JoinGuard holds
//   `clusterctl.cluster.x-k8s.io/block-move` until the paused check has written its memory into the
//   `joinguard.io/memory` annotation, and the target restores it).
// The spec shows the suspicion still stalls rebuilding on the target: a Machine that never joins there is
// not rebuilt. Each management cluster runs real cert-manager (fleet.ts), which issues the add-on's certificate
// its webhook serves: move creates the check on the target through that webhook.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterctl, localRepository, type Repository } from './clusterctl-env.js';
import { issuedCertificates } from './addon-webhook.js';
import {
  CAPI,
  checkOf,
  condition,
  createFleet,
  getJson,
  initAddon,
  provisionEveryMachine,
  reportProviderState,
  scaleMachineSet,
  startManagementCluster,
  until,
  type Fleet,
  type Json,
  type ManagementCluster,
} from './fleet.js';
import { machinesOf } from '../install/stand-in-providers.js';

const log = (line: string) => process.stderr.write(`${line}\n`);
const fleet: Fleet = { namespace: 'fleet', cluster: 'c1', pool: 'c1-md-0', check: 'workers' };
const JOIN_TIMEOUT_S = 15;
const BLOCK_MOVE = 'clusterctl.cluster.x-k8s.io/block-move';

describe('lifecycle: clusterctl move of a Cluster whose check suspects the join credential', function () {
  this.timeout(900_000);
  let source: ManagementCluster;
  let target: ManagementCluster;
  let repo: Repository;
  let repoDir: string;
  const provisioners: { stop(): void }[] = [];
  let suspectedOnSource: Json;
  const initOutputs: string[] = [];

  const move = (mc: ManagementCluster, to: ManagementCluster) =>
    clusterctl(
      repo,
      [
        'move',
        '--kubeconfig',
        mc.env.kubeconfigPath,
        '--to-kubeconfig',
        to.env.kubeconfigPath,
        '--namespace',
        fleet.namespace,
      ],
      420_000,
    );

  before(async () => {
    repoDir = await mkdtemp(join(tmpdir(), 'joinguard-repo-'));
    repo = await localRepository(repoDir, ['0.1.0']);
    source = await startManagementCluster('source', log);
    target = await startManagementCluster('target', log);
    initOutputs.push(await initAddon(source, repo, '0.1.0'));
    initOutputs.push(await initAddon(target, repo, '0.1.0'));
    await createFleet(source, fleet, 1, {
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      remediation: { strategy: 'OwnerRemediated' },
    });
    provisioners.push(provisionEveryMachine(source, fleet));
    await source.startJoinGuard();
    suspectedOnSource = await until('the suspicion on the source', 240_000, async () => {
      const c = await checkOf(source, fleet);
      return c?.status?.suspicion ? c : undefined;
    });
  });

  after(async () => {
    for (const p of provisioners) p.stop();
    await source?.stop();
    await target?.stop();
    if (repoDir) await rm(repoDir, { recursive: true, force: true });
  });

  it("on both, clusterctl init found cert-manager working; its certificate serves the add-on's webhook", async () => {
    for (const out of initOutputs)
      expect(out).to.include('Skipping installing cert-manager as it is already installed');
    for (const mc of [source, target]) {
      const [certificate] = await issuedCertificates(mc.admin);
      expect(certificate!.spec.secretName, mc.name).to.equal(mc.webhook!.secret);
    }
  });

  it('on the source, two join failures in a row raise the suspicion and stall rebuilding', async () => {
    expect(condition(suspectedOnSource, 'Progressing')).to.deep.include({
      status: 'False',
      reason: 'BootstrapCredentialSuspect',
    });
    // The failure that raised it is not rebuilt: its Machine is still there, unmarked.
    const failing = suspectedOnSource.status.suspicion.machines as string[];
    const left = await machinesOf(source.admin, fleet.namespace, fleet.pool);
    const last = left.find((m) => failing.includes(m.metadata.name));
    expect(last, `one of ${failing.join(', ')} still exists`).to.exist;
    expect(condition(last, 'HealthCheckSucceeded')?.status).not.to.equal('False');
  });

  it('clusterctl refuses to move while a Machine has no Node (mover.go checkProvisioningCompleted)', async () => {
    let err: Error | undefined;
    await move(source, target).catch((e: Error) => (err = e));
    expect(err?.message).to.match(/still provisioning the node/);
  });

  it('scaled to zero, the pool has no Machine left and the check keeps its suspicion', async () => {
    await scaleMachineSet(source, fleet, 0);
    await until('the Machines to be gone', 120_000, async () =>
      (await machinesOf(source.admin, fleet.namespace, fleet.pool)).length === 0 ? true : undefined,
    );
    const c = (await checkOf(source, fleet))!;
    expect(c.status.suspicion?.since).to.equal(suspectedOnSource.status.suspicion.since);
  });

  it('the check holds clusterctl block-move while its Cluster is not paused (core: block-move protocol)', async () => {
    const c = (await checkOf(source, fleet))!;
    expect(c.metadata.annotations ?? {}, 'annotations of the check on the source').to.have.property(BLOCK_MOVE);
  });

  it('clusterctl move moves the Cluster and the check to the target, and deletes them on the source', async () => {
    const out = await move(source, target);
    log(`[move] ${out.stderr.trim().split('\n').slice(-6).join('\n[move] ')}`);
    expect(
      await getJson(target.admin, `${CAPI}/namespaces/${fleet.namespace}/clusters/${fleet.cluster}`),
      'Cluster on the target',
    ).to.exist;
    expect(await checkOf(target, fleet), 'check on the target').to.exist;
    await until('the check to be gone from the source', 60_000, async () =>
      (await checkOf(source, fleet)) === undefined ? true : undefined,
    );
    await source.stopJoinGuard();
    await reportProviderState(target, fleet);
    await until('the Cluster on the target to be observable (RemoteConnectionProbe=True)', 120_000, async () =>
      condition(
        await getJson(target.admin, `${CAPI}/namespaces/${fleet.namespace}/clusters/${fleet.cluster}`),
        'RemoteConnectionProbe',
      )?.status === 'True'
        ? true
        : undefined,
    );
  });

  it("on the target the check is owned by its Cluster (ownerReference with the target's uid)", async () => {
    const cluster = (await getJson(target.admin, `${CAPI}/namespaces/${fleet.namespace}/clusters/${fleet.cluster}`))!;
    const c = (await checkOf(target, fleet))!;
    // clusterctl rebuilds ownerReferences with the owner's new uid (mover.go buildOwnerChain).
    const refs = ((c.metadata.ownerReferences ?? []) as Json[]).filter(
      (r) => r.kind === 'Cluster' && r.name === fleet.cluster,
    );
    expect(
      refs,
      `ownerReferences of the moved check: ${JSON.stringify(c.metadata.ownerReferences ?? [])}`,
    ).to.have.length(1);
    expect(refs[0]).to.deep.include({ apiVersion: 'cluster.x-k8s.io/v1beta2', uid: cluster.metadata.uid });
    expect(refs[0]!.controller ?? false, 'not a controller reference (as MachineHealthChecks)').to.equal(false);
  });

  it('on the target the check has its memory back: the same suspicion', async () => {
    await target.startJoinGuard();
    const c = await until('JoinGuard on the target to write the check status', 60_000, async () => {
      const x = await checkOf(target, fleet);
      return x?.status?.observedGeneration !== undefined ? x : undefined;
    });
    expect(c.status.suspicion, 'status.suspicion on the target (memory carried across the move)').to.exist;
    expect(c.status.suspicion.since).to.equal(suspectedOnSource.status.suspicion.since);
    expect(condition(c, 'Progressing')).to.deep.include({ status: 'False', reason: 'BootstrapCredentialSuspect' });
  });

  it('a Machine that never joins on the target is not rebuilt: the suspicion still stalls rebuilding', async () => {
    if (!target.joinguard) await target.startJoinGuard();
    provisioners.push(provisionEveryMachine(target, fleet));
    await scaleMachineSet(target, fleet, 1);
    const machine = await until(
      'a Machine on the target',
      60_000,
      async () => (await machinesOf(target.admin, fleet.namespace, fleet.pool))[0],
    );
    // Past its join deadline, JoinGuard decides on it (counted stuck, or marked if the memory was lost).
    const decided = await until('JoinGuard to decide on the Machine', 120_000, async () => {
      const m = await getJson(target.admin, `${CAPI}/namespaces/${fleet.namespace}/machines/${machine.metadata.name}`);
      if (!m || condition(m, 'HealthCheckSucceeded')?.status === 'False') return 'rebuilt';
      const c = await checkOf(target, fleet);
      return (c?.status?.stuckMachines ?? 0) >= 1 ? 'held' : undefined;
    });
    // Give a wrong decision time to show.
    await new Promise((r) => setTimeout(r, 10_000));
    const m = await getJson(target.admin, `${CAPI}/namespaces/${fleet.namespace}/machines/${machine.metadata.name}`);
    const marked = !m || condition(m, 'HealthCheckSucceeded')?.status === 'False';
    expect(
      decided === 'rebuilt' || marked,
      'the Machine was marked for rebuild on the target: the suspicion was lost in the move',
    ).to.equal(false);
    const c = (await checkOf(target, fleet))!;
    // The suspicion is still there; the third failure of a pool that never joined also reaches neverJoinedLimit
    // (3), which takes precedence in Progressing: both stall rebuilding.
    expect(c.status?.suspicion?.reason).to.equal('BootstrapCredentialSuspect');
    expect(condition(c, 'Progressing')?.status).to.equal('False');
    expect(['BootstrapCredentialSuspect', 'NeverJoined']).to.include(condition(c, 'Progressing')?.reason);
  });
});
