// Fault injection (issue 10, finding 1 and deliverable 5): JoinGuard must never go blind. Behind a fault
// proxy, (a) the kube-apiserver is restarted mid-scenario and (b) every watch is silenced (connections
// open, nothing forwarded). Either way a Machine that becomes stuck afterwards must be marked within
// joinTimeout + the informer liveness bound, and /readyz must not say ready while a watch has been
// without evidence of a current view (bytes delivered, or a list answered) for longer than that bound.
// The bound is seconds here, so a heartbeat keeps every healthy watch busy (see Heartbeat).
import { expect } from 'chai';
import type { Json } from '../../hack/testenv/kube-client.js';
import { conditionOf, joinClockStart, waitFor } from '../support/cluster-view.js';
import type { FaultProxy } from '../support/fault-proxy.js';
import { createCheck } from '../support/joinguard.js';
import {
  ApiserverAvailability,
  describeTraffic,
  figure,
  Heartbeat,
  machineWrites,
  ReadyzSampler,
  scaleDeployment,
  secs,
  sleep,
  useFaultScenario,
} from './harness.js';

const JOIN_TIMEOUT_S = 20;
const LIVENESS_MS = 10_000;
/** Condition times are whole seconds; a reconcile, a re-list and a back-off step take some too. */
const SLACK_MS = 5_000;
/** With the stop and the start around it, clients see the apiserver unanswering for about 20-25 s. */
const DOWN_MS = 12_000;
const SILENCE_MS = 60_000;

describe('faults (a, b): JoinGuard is never blind', function () {
  this.timeout(420_000);
  const cluster = 'fb';
  const stuckPool = `${cluster}-stuck`;
  const f = useFaultScenario({
    prefix: 'jg-fb',
    cluster,
    checkName: 'workers',
    waitJoined: true,
    workers: [
      { name: 'md', replicas: 1, labels: { role: 'worker' } },
      { name: 'stuck', replicas: 0, labels: { role: 'worker' } },
    ],
  });
  const { s, seen } = f;
  let sampler: ReadyzSampler | undefined;
  let heartbeat: Heartbeat | undefined;

  before(async function () {
    this.timeout(60_000);
    // Every Machine of the `stuck` pool never joins; the `md` pool joined (so the check has seen a join).
    s.sim.policy.neverJoin((m) => m.namespace === s.namespace && m.machineName.startsWith(`${stuckPool}-`));
    await createCheck(s.kube, s.namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { role: 'worker' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      maxInFlight: 5,
      remediation: { maxPerOwner: 50 },
      suspicion: { consecutiveJoinFailures: 0 },
      neverJoinedLimit: 0,
    });
    heartbeat = await Heartbeat.start(s.kube, s.namespace, cluster, 'workers');
  });

  after(() => heartbeat?.stop());

  afterEach(async function () {
    this.timeout(120_000);
    sampler?.stop();
    await f.stopAll();
    await scaleDeployment(s.kube, s.namespace, stuckPool, 0);
    await waitFor('the stuck pool empty', async () => (await stuckMachines()).length === 0, {
      timeoutMs: 90_000,
      describe: seen,
    });
  });

  const stuckMachines = async () =>
    (await s.workers()).filter((m) => m.metadata.labels?.['cluster.x-k8s.io/deployment-name'] === stuckPool);

  /** JoinGuard in this process behind a fresh proxy, reconciling, with its /readyz sampled. */
  async function startBehindProxy(): Promise<{ proxy: FaultProxy; sampler: ReadyzSampler }> {
    const p = await f.startBehindProxy({ watchLivenessMs: LIVENESS_MS });
    await waitFor('JoinGuard watching through the proxy', async () => p.find({ watch: true }).length >= 4, {
      timeoutMs: 30_000,
      describe: seen,
    });
    sampler = new ReadyzSampler(s.jg!.controller.healthPort!, p).start();
    return { proxy: p, sampler };
  }

  /** A new Machine of the stuck pool (created at or after `since`) and its join deadline, once provisioned. */
  async function nextStuck(since: number, exclude: string[] = []): Promise<{ m: Json; deadline: number }> {
    return waitFor(
      'a provisioned Machine of the stuck pool',
      async () => {
        const m = (await stuckMachines()).find(
          (x) => Date.parse(x.metadata.creationTimestamp) >= since - 1000 && !exclude.includes(x.metadata.name),
        );
        if (
          !m ||
          conditionOf(m, 'InfrastructureReady')?.status !== 'True' ||
          conditionOf(m, 'BootstrapConfigReady')?.status !== 'True'
        )
          return undefined;
        const cl = await s.kube.get(s.capi.path('Cluster', s.namespace, cluster));
        return { m, deadline: joinClockStart(s.capi, m, cl) + JOIN_TIMEOUT_S * 1000 };
      },
      { timeoutMs: 150_000, describe: seen },
    );
  }

  /** When JoinGuard first wrote the Machine (its mark), waiting up to the bound plus 15 s to tell late from never. */
  async function markOf(p: FaultProxy, name: string, deadline: number): Promise<number | undefined> {
    const giveUp = deadline + LIVENESS_MS + SLACK_MS + 15_000;
    for (;;) {
      const w = machineWrites(p, s.namespace, name)[0];
      if (w) return w.answeredAt ?? w.at;
      if (Date.now() > giveUp) return undefined;
      await sleep(200);
    }
  }

  it('(a) the apiserver restarted: a Machine stuck after the restart is marked within joinTimeout + liveness; /readyz failed meanwhile', async () => {
    const { proxy: p, sampler: rz } = await startBehindProxy();
    const problems: string[] = [];
    const t0 = Date.now();

    // M0 is stuck before the restart and its deadline falls inside the outage.
    await scaleDeployment(s.kube, s.namespace, stuckPool, 1);
    const m0 = await nextStuck(t0);
    await sleep(m0.deadline - DOWN_MS / 2 - Date.now());
    const availability = new ApiserverAvailability(s.env).start();
    const restartAt = Date.now();
    await s.env.restartApiserver({ downMs: DOWN_MS });
    const restarted = Date.now();
    await sleep(1_000);
    availability.stop();
    // The outage as clients saw it (the restart call also waits for the stop and for /readyz).
    const { downAt = restartAt, backAt = restarted } = availability.outage();
    figure(
      'a',
      `apiserver unanswering for ${secs(backAt - downAt)} (restart call ${secs(restarted - restartAt)}, ${secs(DOWN_MS)} of it down); ` +
        `M0 ${m0.m.metadata.name} deadline ${secs(m0.deadline - downAt)} into the outage`,
    );

    // M1 becomes stuck after the restart.
    await scaleDeployment(s.kube, s.namespace, stuckPool, 2);
    const m1 = await nextStuck(backAt, [m0.m.metadata.name]);
    const mark1 = await markOf(p, m1.m.metadata.name, m1.deadline);
    const mark0 = machineWrites(p, s.namespace, m0.m.metadata.name)[0];
    // For the figure: when /readyz said ready again (the informers' back-off decides; not judged).
    const readyBy = (mark1 ?? Date.now()) + LIVENESS_MS + SLACK_MS;
    while (Date.now() < readyBy && !rz.samples.some((x) => x.at > backAt && x.code === 200)) await sleep(250);
    const firstList = p
      .find({ since: backAt, method: 'GET', watch: false })
      .find((r) => r.code === 200 && p.watchEvidence().has(r.path));
    // Each cache live again: its first LIST or watch (WatchList included) answered 200 after the apiserver was back.
    const liveAt = [...p.watchEvidence().keys()].map(
      (path) => p.find({ since: backAt, method: 'GET' }).find((r) => r.path === path && r.code === 200)?.answeredAt,
    );
    const lives = liveAt.filter((t): t is number => t !== undefined);
    figure(
      'a',
      `caches live again after the apiserver was back: first ${lives.length ? secs(Math.min(...lives) - backAt) : 'never'}, last ${lives.length === liveAt.length && lives.length ? secs(Math.max(...lives) - backAt) : 'never (some)'} ` +
        `(${liveAt.length} caches; 429 answers to JoinGuard after back: ${p.find({ since: backAt }).filter((r) => r.code === 429).length})`,
    );
    const readyAgain = rz.samples.find((x) => x.at > backAt && x.code === 200);
    const marks = [mark0?.answeredAt, mark1].filter((x): x is number => x !== undefined && x >= backAt);
    figure(
      'a',
      `apiserver back -> JoinGuard's first list ${firstList ? secs(firstList.at - backAt) : 'never'}; -> /readyz 200 again ${readyAgain ? secs(readyAgain.at - backAt) : 'never'}; ` +
        `-> first mark ${marks.length ? secs(Math.min(...marks) - backAt) : 'none'} (M0, deadline passed while down: ${mark0?.answeredAt ? `${secs(mark0.answeredAt - backAt)} after back` : 'not marked'}); ` +
        `M1 ${m1.m.metadata.name}: created ${secs(Date.parse(m1.m.metadata.creationTimestamp) - backAt)} after back, deadline ${secs(m1.deadline - backAt)} after back, mark ${mark1 ? `${secs(mark1 - m1.deadline)} after its deadline` : 'never'}`,
    );
    figure('a', `during the outage: ${rz.describe(downAt, backAt)}`);
    figure('a', `after it: ${rz.describe(backAt)}`);

    if (mark1 === undefined)
      problems.push(`M1 ${m1.m.metadata.name} (stuck after the restart) never marked; ${describeTraffic(p, backAt)}`);
    else if (mark1 > m1.deadline + LIVENESS_MS + SLACK_MS)
      problems.push(
        `M1 marked ${secs(mark1 - m1.deadline)} after its deadline (bound ${secs(LIVENESS_MS + SLACK_MS)})`,
      );
    if (rz.notReady(downAt, backAt).length === 0)
      problems.push(`/readyz never failed while the apiserver was down (${rz.describe(downAt, backAt)})`);
    const blind = rz.readyWhileBlind(LIVENESS_MS + SLACK_MS);
    if (blind.length)
      problems.push(
        `/readyz said ready ${blind.length} times while a watch had no evidence for over ${secs(LIVENESS_MS + SLACK_MS)} (first at +${secs(blind[0]!.at - t0)}: ${blind[0]!.stalePath} ${secs(blind[0]!.staleMs)})`,
      );
    expect(problems, await seen()).to.deep.equal([]);
  });

  it('(b) every watch silenced: a Machine stuck meanwhile is marked within joinTimeout + liveness; /readyz never ready while blind', async () => {
    const { proxy: p, sampler: rz } = await startBehindProxy();
    const problems: string[] = [];
    const silencedAt = Date.now();
    const rule = p.addRule({ watch: true, fault: 'silence', until: silencedAt + SILENCE_MS });

    await scaleDeployment(s.kube, s.namespace, stuckPool, 1);
    const m2 = await nextStuck(silencedAt);
    const mark = await markOf(p, m2.m.metadata.name, m2.deadline);
    const relists = p
      .find({ since: silencedAt, method: 'GET', watch: false })
      .filter((r) => r.code === 200 && p.watchEvidence().has(r.path));
    figure(
      'b',
      `watches silenced at 0s (${rule.matched.length} streams silenced); JoinGuard's first re-list ${relists[0] ? secs(relists[0].at - silencedAt) : 'never'}, ` +
        `${relists.length} re-lists in all; M2 ${m2.m.metadata.name}: deadline at ${secs(m2.deadline - silencedAt)}, mark ${mark ? `${secs(mark - m2.deadline)} after its deadline` : 'never'}`,
    );
    figure('b', rz.describe(silencedAt));

    if (mark === undefined) problems.push(`M2 ${m2.m.metadata.name} never marked; ${describeTraffic(p, silencedAt)}`);
    else if (mark > m2.deadline + LIVENESS_MS + SLACK_MS)
      problems.push(`M2 marked ${secs(mark - m2.deadline)} after its deadline (bound ${secs(LIVENESS_MS + SLACK_MS)})`);
    const blind = rz.readyWhileBlind(LIVENESS_MS + SLACK_MS);
    if (blind.length)
      problems.push(
        `/readyz said ready ${blind.length} times while a watch had no evidence for over ${secs(LIVENESS_MS + SLACK_MS)} (first at +${secs(blind[0]!.at - silencedAt)}: ${blind[0]!.stalePath} ${secs(blind[0]!.staleMs)})`,
      );
    expect(problems, await seen()).to.deep.equal([]);
  });
});
