// Fault injection (issue 10, finding 6 and deliverable 6): a deposed leader writes nothing. Two replicas of
// the real `joinguard` command run with --leader-elect, each behind its own fault proxy that speaks to the
// apiserver as its own identity (client certificates joinguard-a and joinguard-b). The leader is frozen
// (SIGSTOP) the moment it sends the write-ahead record of a remediation, stays frozen past its lease until
// the other replica holds the Lease, and is thawed (SIGCONT). The apiserver's audit log (blocking mode,
// every write) is the judge: no write from the first replica once the second acquired the Lease; the
// first exits non-zero.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { issueCert } from '../../hack/testenv/certs.js';
import { waitFor } from '../support/cluster-view.js';
import { FaultProxy, type ProxiedRequest } from '../support/fault-proxy.js';
import { createCheck } from '../support/joinguard.js';
import { useScenario } from '../support/scenario.js';
import { readAuditWrites, type AuditWrite } from './audit-writes.js';
import { figure, scaleDeployment, secs, sleep } from './harness.js';
import { Replica } from './replica.js';

const JOIN_TIMEOUT_S = 20;
/** The command's default Lease name, in its --namespace. */
const LEASE_ID = 'joinguard-leader';
/** Short lease timings (client-go's ratios: renew deadline 3/4 of the lease, retry well below it). */
const LEASE = { durationS: 8, renewDeadlineS: 6, retryPeriodS: 1 };

describe('faults (f): the leader frozen past its lease and thawed', function () {
  this.timeout(360_000);
  const cluster = 'ff';
  const stuckPool = `${cluster}-stuck`;
  const s = useScenario({
    prefix: 'jg-ff',
    cluster,
    checkName: 'workers',
    waitJoined: true,
    workers: [
      { name: 'md', replicas: 1, labels: { role: 'worker' } },
      { name: 'stuck', replicas: 0, labels: { role: 'worker' } },
    ],
  });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'joinguard-faults-f-'));
  const replicas: Replica[] = [];
  const proxies: FaultProxy[] = [];
  const seen = s.seen(() => `${replicas.map((r) => r.tail(12)).join('\n')}\n`);

  afterEach(async function () {
    this.timeout(60_000);
    await Promise.all(replicas.map((r) => r.stop()));
    await Promise.all(proxies.map((p) => p.stop()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A replica whose requests reach the apiserver as user `name`, through a proxy of its own. */
  async function startReplica(name: string): Promise<{ replica: Replica; proxy: FaultProxy }> {
    const { env, namespace } = s;
    const cert = path.join(dir, `${name}.crt`);
    const key = path.join(dir, `${name}.key`);
    await issueCert(
      { certFile: env.caCertFile, keyFile: env.caKeyFile },
      { commonName: name, organization: 'system:masters', usage: 'client' },
      cert,
      key,
    );
    const proxy = await FaultProxy.start({
      server: env.server,
      ca: env.caCertPem,
      cert: fs.readFileSync(cert),
      key: fs.readFileSync(key),
    });
    proxies.push(proxy);
    const kubeconfig = path.join(dir, `${name}.kubeconfig`);
    fs.writeFileSync(kubeconfig, proxy.kubeconfigYaml(name));
    const replica = new Replica(
      name,
      [
        `--kubeconfig=${kubeconfig}`,
        `--namespace=${namespace}`,
        '--leader-elect',
        `--leader-elect-lease-duration=${LEASE.durationS}s`,
        `--leader-elect-renew-deadline=${LEASE.renewDeadlineS}s`,
        `--leader-elect-retry-period=${LEASE.retryPeriodS}s`,
        '--diagnostics-address=0',
        '--health-addr=0',
        '--webhook-port=0',
        '--connection-grace=2s',
        '--logging-format=json',
        '-v=4',
      ],
      // The Lease lives in the pod's namespace (controller-runtime's rule); these replicas stand in pods of it.
      { POD_NAMESPACE: namespace },
    );
    replicas.push(replica);
    return { replica, proxy };
  }

  const leasePath = () => `/apis/coordination.k8s.io/v1/namespaces/${s.namespace}/leases/${LEASE_ID}`;
  const holder = async () => (await s.kube.get(leasePath()))?.spec?.holderIdentity as string | undefined;

  it('the deposed leader makes no write after the other replica took the Lease, and exits non-zero', async () => {
    const { kube, sim, namespace, env } = s;
    if (!env.auditLog)
      throw new Error(
        'the test env has no audit log (e2e/support/testenv.ts starts it with one; an attached env must have one too)',
      );
    await createCheck(kube, namespace, 'workers', {
      clusterName: cluster,
      selector: { matchLabels: { role: 'worker' } },
      joinTimeout: `${JOIN_TIMEOUT_S}s`,
      suspicion: { consecutiveJoinFailures: 0 },
    });
    sim.policy.neverJoin((m) => m.namespace === namespace && m.machineName.startsWith(`${stuckPool}-`));

    const a = await startReplica('joinguard-a');
    const leaderA = await waitFor('joinguard-a holding the Lease', holder, { timeoutMs: 60_000, describe: seen });
    const b = await startReplica('joinguard-b');
    await waitFor(
      'joinguard-b campaigning',
      async () => b.proxy.find({ path: new RegExp(`/leases/${LEASE_ID}$`) }).length > 0,
      { timeoutMs: 60_000, describe: seen },
    );

    // The leader is frozen as it sends the write-ahead record of its remediation of the stuck Machine
    // (or the mark itself, whichever comes first): it has writes still to make when it is thawed.
    await scaleDeployment(kube, namespace, stuckPool, 1);
    const stuck = await waitFor(
      'the stuck Machine',
      async () => (await s.workers()).find((m) => m.metadata.name.startsWith(`${stuckPool}-`)),
      { timeoutMs: 60_000, describe: seen },
    );
    let frozen: { at: number; request: ProxiedRequest } | undefined;
    const freeze = (request: ProxiedRequest) => {
      if (frozen) return;
      a.replica.pause();
      frozen = { at: Date.now(), request };
    };
    a.proxy.addRule({
      method: /^(PUT|PATCH)$/,
      path: /\/machinejoinchecks\/workers\/status$/,
      body: new RegExp(`"remediations":\\[[^\\]]*"${stuck.metadata.uid}"`),
      times: 1,
      fault: 'pass',
      onMatch: freeze,
    });
    a.proxy.addRule({
      method: /^(PUT|PATCH)$/,
      path: new RegExp(`/machines/${stuck.metadata.name}(/status)?$`),
      times: 1,
      fault: 'pass',
      onMatch: freeze,
    });
    await waitFor('joinguard-a frozen on its remediation', async () => frozen, { timeoutMs: 120_000, describe: seen });

    const leaderB = await waitFor(
      'joinguard-b holding the Lease',
      async () => {
        const h = await holder();
        return h && h !== leaderA && h;
      },
      { timeoutMs: 90_000, intervalMs: 100, describe: seen },
    );
    const takeoverSeenAt = Date.now();
    await sleep(2_000);
    const thawedAt = Date.now();
    a.replica.resume();
    const exit = await Promise.race([a.replica.exited, sleep(60_000).then(() => undefined)]);
    await sleep(3_000); // what the thawed replica was still going to send has reached the apiserver

    const writes = readAuditWrites(env.auditLog).filter((w) => w.namespace === namespace || w.resource === 'leases');
    const byA = writes.filter((w) => w.user === 'joinguard-a');
    const acquiredB = writes.find(
      (w) => w.user === 'joinguard-b' && w.resource === 'leases' && w.name === LEASE_ID && w.code < 300,
    );
    const lastRenewA = byA
      .filter((w) => w.resource === 'leases' && w.code < 300 && w.at < (acquiredB?.at ?? Infinity))
      .at(-1);
    const lost = acquiredB?.at ?? takeoverSeenAt;
    const afterLoss = byA.filter((w) => w.at >= lost);
    const line = (w: AuditWrite) =>
      `${new Date(w.at).toISOString()} ${w.verb} ${w.resource}${w.subresource ? `/${w.subresource}` : ''} ${w.name ?? ''} -> ${w.code}`;
    figure(
      'f',
      `lease ${LEASE.durationS}s, renew deadline ${LEASE.renewDeadlineS}s, retry ${LEASE.retryPeriodS}s; ` +
        `${leaderA} frozen on ${frozen!.request.method} ${frozen!.request.path}; joinguard-b (${leaderB}) acquired the Lease ` +
        `${acquiredB ? `${secs(acquiredB.at - frozen!.at)} after the freeze (${lastRenewA ? `${secs(acquiredB.at - lastRenewA.at)} after A's last renewal` : "A's last renewal not found"})` : 'NOT in the audit log'}; ` +
        `A thawed ${secs(thawedAt - lost)} after the loss, exited ${exit ? `${exit.code ?? exit.signal} after ${secs(exit.at - thawedAt)}` : 'NOT within 60s'}; writes by A after the loss: ${afterLoss.length}`,
    );
    for (const w of afterLoss.slice(0, 10)) figure('f', `  write after loss: ${line(w)}`);
    if (afterLoss.length) {
      const leaseTraffic = (p: FaultProxy) =>
        p
          .find({ path: /\/leases\//, since: frozen!.at - 3_000 })
          .slice(0, 14)
          .map(
            (r) =>
              `${new Date(r.at).toISOString().slice(17)} ${r.method} ${r.code}${r.answeredAt ? ` (+${r.answeredAt - r.at}ms)` : ''}`,
          )
          .join(', ');
      figure('f', `  A's Lease requests from 3s before the freeze: ${leaseTraffic(a.proxy)}`);
      figure('f', `  B's Lease requests from 3s before the freeze: ${leaseTraffic(b.proxy)}`);
    }

    const problems: string[] = [];
    if (!acquiredB) problems.push('the audit log shows no Lease write by joinguard-b');
    if (afterLoss.length)
      problems.push(
        `joinguard-a wrote ${afterLoss.length} times after joinguard-b acquired the Lease:\n  ${afterLoss.map(line).join('\n  ')}`,
      );
    if (!exit) problems.push('joinguard-a did not exit within 60 s of being thawed');
    else if (exit.code === 0 || exit.code === null)
      problems.push(`joinguard-a exited ${exit.code ?? exit.signal} (want a non-zero code)`);
    expect(problems, await seen()).to.deep.equal([]);
  });
});
