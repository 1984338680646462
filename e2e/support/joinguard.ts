// JoinGuard in an e2e run: its CRD on the test control plane, the controller started in-process (the
// same startController the `joinguard` command uses) and the check's status read back.
import { Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import winston from 'winston';
import { clusterAccessFromKubeconfig } from '../../runtime/client/kubeconfig.js';
import { buildCrd } from '../../api/v1alpha1/crd.js';
import type { Condition, MachineJoinCheck, MachineJoinCheckSpec } from '../../api/v1alpha1/types.js';
import { startController } from '../../controllers/manager.js';
import { installCrds } from '../../hack/testenv/crds.js';
import type { KubeClient } from '../../hack/testenv/kube-client.js';
import type { ControllerOptions, RunningController } from '../../controllers/options.js';

export const checksPath = (namespace: string) =>
  `/apis/joinguard.io/v1alpha1/namespaces/${namespace}/machinejoinchecks`;

/** Creates (or updates) the MachineJoinCheck CRD from api/v1alpha1 and waits until it is served. */
export function installJoinGuardCrd(kube: KubeClient): Promise<void> {
  return installCrds(kube, [buildCrd()]);
}

/** Log lines kept in memory (and printed with JOINGUARD_E2E_LOG=1), so a failing spec can show them. */
export class CapturedLog {
  readonly lines: string[] = [];
  readonly logger: winston.Logger;

  constructor(level = 'debug') {
    const sink = this.lines;
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        sink.push(chunk.toString().trimEnd());
        if (sink.length > 5000) sink.splice(0, 1000);
        if (process.env['JOINGUARD_E2E_LOG']) process.stderr.write(chunk);
        done();
      },
    });
    this.logger = winston.createLogger({
      level,
      format: winston.format.json(),
      transports: [new winston.transports.Stream({ stream })],
    });
  }

  tail(n = 30): string {
    return this.lines.slice(-n).join('\n');
  }
}

/** Starts JoinGuard for one namespace, metrics and probes on free ports, not waiting for leadership. */
export async function startJoinGuard(
  kubeConfig: KubeConfig,
  namespace: string,
  extra: Partial<ControllerOptions> = {},
): Promise<{ controller: RunningController; log: CapturedLog }> {
  const log = new CapturedLog();
  const controller = await startController({
    access: clusterAccessFromKubeconfig(kubeConfig.exportConfig()),
    namespace,
    logger: log.logger,
    metricsBindAddress: '127.0.0.1:0',
    healthProbeBindAddress: '127.0.0.1:0',
    collectDefaultMetrics: false,
    connectionGraceMs: 2000,
    ...extra,
  });
  await controller.ready();
  return { controller, log };
}

export async function createCheck(
  kube: KubeClient,
  namespace: string,
  name: string,
  spec: MachineJoinCheckSpec,
): Promise<void> {
  await kube.create(checksPath(namespace), {
    apiVersion: 'joinguard.io/v1alpha1',
    kind: 'MachineJoinCheck',
    metadata: { name, namespace },
    spec,
  });
}

export async function getCheck(kube: KubeClient, namespace: string, name: string): Promise<MachineJoinCheck> {
  const c = await kube.get(`${checksPath(namespace)}/${name}`);
  if (!c) throw new Error(`MachineJoinCheck ${namespace}/${name} not found`);
  return c as MachineJoinCheck;
}

export const checkCondition = (c: MachineJoinCheck, type: string): Condition | undefined =>
  c.status?.conditions?.find((x) => x.type === type);

/** A short account of the check for failure messages. */
export function describeCheck(c: MachineJoinCheck): string {
  const s = c.status ?? {};
  const conds = (s.conditions ?? [])
    .map((x) => `${x.type}=${x.status}/${x.reason}: ${x.message.slice(0, 300)}`)
    .join('\n    ');
  const rem = (s.remediations ?? [])
    .map((r) => `${r.machine} ${r.path} ${r.outcome}${r.canary ? ' canary' : ''}`)
    .join(', ');
  return (
    `check ${c.metadata.name}: expected=${s.expectedMachines} joined=${s.joinedMachines} stuck=${s.stuckMachines} ` +
    `consecutive=${s.consecutiveJoinFailures} suspicion=${s.suspicion ? JSON.stringify(s.suspicion) : '-'}\n  remediations: ${rem || '-'}\n    ${conds}`
  );
}
