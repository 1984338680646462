// SimMachine reconciler (test-only): a pretend VM. It follows a real provider's order: wait for the
// Machine's bootstrap data, "create the VM" (providerID, addresses, provisioned/ready after `provisionDelayMs`),
// "boot" it (`bootDelayMs`), then ask the join policy whether kubelet registers its Node in the workload
// cluster. The boot record (status.boot) survives a sim restart; a failed join is final for the VM, as a
// kubeadm join that gave up is. On deletion the VM "goes away" after `deleteDelayMs` (or once the policy's
// deletion hold is lifted), taking its Node.
import {
  clusterOf,
  condition,
  isControlPlaneMachine,
  ownerMachine,
  SIM_FINALIZER,
  type Requeue,
  type SimContext,
} from './context.js';
import { SIM_MACHINE } from './crds.js';
import { pathOf, type Json } from '../../hack/testenv/kube-client.js';
import type { JoinCandidate, JoinRole } from './policy.js';
import { createMirrorPods, deleteNode, leaveEtcdLearner, nodeNameOf, registerNode } from './workload.js';

const HOLD_RECHECK_MS = 1000;
const ADDRESS = '127.0.0.1'; // nothing dials a sim VM; loopback is refused at once if something tries
const DEFAULT_VERSION = 'v1.36.3';

const providerIdOf = (namespace: string, name: string) => `sim://${namespace}/${name}`;

export async function reconcileSimMachine(ctx: SimContext, namespace: string, name: string): Promise<Requeue> {
  const sm = ctx.caches.simMachines.get(namespace, name);
  if (!sm) return undefined;
  const path = pathOf(SIM_MACHINE, namespace, name);
  if (sm.metadata.deletionTimestamp) return deleteVm(ctx, sm, path);

  const machine = ownerMachine(ctx, sm);
  if (!machine) return undefined; // the Machine's watch event brings us back once CAPI set the owner
  const finalizers = (sm.metadata.finalizers ?? []) as string[];
  if (!finalizers.includes(SIM_FINALIZER)) {
    await ctx.kube.mergePatch(path, {
      metadata: { resourceVersion: sm.metadata.resourceVersion, finalizers: [...finalizers, SIM_FINALIZER] },
    });
    return undefined;
  }
  if (!machine.spec?.bootstrap?.dataSecretName) return undefined; // a real provider needs the data to boot
  const boot = (sm.status?.boot ?? {}) as Json;
  const clusterName = machine.spec.clusterName as string;

  if (!boot.dataSeenAt) {
    const role = await roleOf(ctx, machine);
    await patchStatus(ctx, sm, path, { boot: { dataSeenAt: new Date().toISOString(), role, phase: 'Waiting' } });
    return undefined;
  }
  if (!ctx.capi.isProvisioned(sm)) {
    const waited = Date.now() - Date.parse(boot.dataSeenAt);
    if (waited < ctx.opts.provisionDelayMs) return ctx.opts.provisionDelayMs - waited;
    const providerID = providerIdOf(namespace, name);
    if (sm.spec?.providerID !== providerID) {
      await ctx.kube.mergePatch(path, {
        metadata: { resourceVersion: sm.metadata.resourceVersion },
        spec: { providerID },
      });
      return undefined;
    }
    await patchStatus(ctx, sm, path, {
      ...ctx.capi.provisionedStatus(),
      addresses: [
        { type: 'InternalIP', address: ADDRESS },
        { type: 'Hostname', address: nodeNameOf(namespace, machine.metadata.name) },
      ],
      conditions: [condition('Ready', 'True', 'Provisioned')],
      boot: { provisionedAt: new Date().toISOString() },
    });
    ctx.emit({
      type: 'MachineProvisioned',
      namespace,
      name: machine.metadata.name,
      cluster: clusterName,
      message: `providerID ${providerID}`,
    });
    return undefined;
  }
  if (boot.phase === 'Joined' || boot.phase === 'Failed') return undefined;
  const booted = Date.now() - Date.parse(boot.provisionedAt ?? sm.metadata.creationTimestamp);
  if (booted < ctx.opts.bootDelayMs) return ctx.opts.bootDelayMs - booted;
  return join(ctx, sm, machine, path, boot);
}

async function join(ctx: SimContext, sm: Json, machine: Json, path: string, boot: Json): Promise<Requeue> {
  const namespace = sm.metadata.namespace as string;
  const machineName = machine.metadata.name as string;
  const clusterName = machine.spec.clusterName as string;
  const role = (boot.role ?? 'join') as JoinRole;
  const candidate: JoinCandidate = {
    namespace,
    machineName,
    clusterName,
    role,
    controlPlane: isControlPlaneMachine(machine),
    createdAt: Date.parse(machine.metadata.creationTimestamp),
    dataSeenAt: Date.parse(boot.dataSeenAt),
    ...(typeof sm.spec?.image === 'string' ? { image: sm.spec.image } : {}),
    ...(typeof machine.spec?.version === 'string' ? { version: machine.spec.version } : {}),
  };
  const decision = ctx.policy.decide(candidate);
  const now = new Date().toISOString();
  if (decision.verdict === 'hold') {
    if (boot.phase !== 'Held') {
      await patchStatus(ctx, sm, path, { boot: { phase: 'Held', reason: decision.reason, message: decision.message } });
      ctx.emit({ type: 'JoinHeld', namespace, name: machineName, cluster: clusterName, message: decision.message });
    }
    return HOLD_RECHECK_MS;
  }
  if (decision.verdict === 'fail') {
    if (decision.leftEtcdLearner)
      await leaveEtcdLearner(ctx.kube, namespace, clusterName, nodeNameOf(namespace, machineName));
    await patchStatus(ctx, sm, path, {
      boot: { phase: 'Failed', reason: decision.reason, message: decision.message, attemptedAt: now },
    });
    ctx.emit({
      type: 'JoinFailed',
      namespace,
      name: machineName,
      cluster: clusterName,
      message: `${decision.reason}: ${decision.message}`,
    });
    return undefined;
  }

  const version = (machine.spec.version as string | undefined) ?? DEFAULT_VERSION;
  const cluster = clusterOf(ctx, namespace, clusterName);
  if (role === 'init') {
    const ep = cluster?.spec?.controlPlaneEndpoint;
    const got = await ctx.lease.acquire({ namespace, cluster: clusterName }, version, `${ep?.host}:${ep?.port}`);
    if (got === 'busy') {
      if (boot.reason !== 'InitLockBusy') {
        await patchStatus(ctx, sm, path, {
          boot: {
            phase: 'Waiting',
            reason: 'InitLockBusy',
            message: 'another simulated cluster is initializing (shared kube-system/kubeadm-config)',
          },
        });
      }
      return HOLD_RECHECK_MS;
    }
  }
  const workload = await ctx.workloads.get(namespace, clusterName);
  const nodeName = nodeNameOf(namespace, machineName);
  const controlPlane = candidate.controlPlane;
  await registerNode(workload, {
    name: nodeName,
    providerID: providerIdOf(namespace, sm.metadata.name),
    controlPlane,
    kubeletVersion: version,
    address: ADDRESS,
    hostname: nodeName,
    machineRef: `${namespace}/${machineName}`,
    cluster: { namespace, name: clusterName },
    ...(ctx.opts.kubeletPort !== undefined ? { kubeletPort: ctx.opts.kubeletPort } : {}),
  });
  if (controlPlane && ctx.opts.mirrorPods) {
    const node = await workload.get(`/api/v1/nodes/${nodeName}`);
    await createMirrorPods(workload, nodeName, node?.metadata?.uid, version, ADDRESS);
  }
  await patchStatus(ctx, sm, path, {
    boot: { phase: 'Joined', reason: 'NodeRegistered', message: `Node ${nodeName}`, nodeName, attemptedAt: now },
  });
  ctx.emit({
    type: 'NodeJoined',
    namespace,
    name: machineName,
    cluster: clusterName,
    message: `Node ${nodeName} (${role})`,
  });
  return undefined;
}

async function deleteVm(ctx: SimContext, sm: Json, path: string): Promise<Requeue> {
  const finalizers = (sm.metadata.finalizers ?? []) as string[];
  if (!finalizers.includes(SIM_FINALIZER)) return undefined;
  const waited = Date.now() - Date.parse(sm.metadata.deletionTimestamp);
  if (waited < ctx.opts.deleteDelayMs) return ctx.opts.deleteDelayMs - waited;
  const namespace = sm.metadata.namespace as string;
  const machineRef = ((sm.metadata.ownerReferences ?? []) as Json[]).find((r) => r.kind === 'Machine');
  const machineName = (machineRef?.name as string | undefined) ?? sm.metadata.name;
  if (ctx.policy.deletionHeld(namespace, machineName)) return HOLD_RECHECK_MS;
  const nodeName = sm.status?.boot?.nodeName as string | undefined;
  const clusterName = sm.metadata.labels?.['cluster.x-k8s.io/cluster-name'] as string | undefined;
  if (nodeName && sm.spec?.providerID) {
    // The Machine controller usually deleted the Node already; the management client reaches the same apiserver.
    const kube = clusterName ? await ctx.workloads.get(namespace, clusterName).catch(() => ctx.kube) : ctx.kube;
    if (await deleteNode(kube, nodeName, sm.spec.providerID)) {
      ctx.emit({
        type: 'NodeDeleted',
        namespace,
        name: machineName,
        cluster: clusterName,
        message: `Node ${nodeName}`,
      });
    }
  }
  await ctx.kube.mergePatch(path, {
    metadata: {
      resourceVersion: sm.metadata.resourceVersion,
      finalizers: finalizers.filter((f) => f !== SIM_FINALIZER),
    },
  });
  ctx.emit({ type: 'MachineDeleted', namespace, name: machineName, cluster: clusterName, message: 'VM gone' });
  return undefined;
}

/** init, join-control-plane or join, from the Machine's KubeadmConfig (a joining CP has joinConfiguration.controlPlane). */
async function roleOf(ctx: SimContext, machine: Json): Promise<JoinRole> {
  if (!isControlPlaneMachine(machine)) return 'join';
  const ref = machine.spec?.bootstrap?.configRef as Json | undefined;
  if (ref?.kind !== 'KubeadmConfig') return 'join-control-plane';
  const config = await ctx.kube.get(ctx.capi.path('KubeadmConfig', machine.metadata.namespace, ref.name));
  return config?.spec?.joinConfiguration?.controlPlane !== undefined ? 'join-control-plane' : 'init';
}

/** A merge patch of the SimMachine's status, guarded by the resourceVersion it was decided on. */
function patchStatus(ctx: SimContext, sm: Json, path: string, status: Json): Promise<Json> {
  return ctx.kube.mergePatch(`${path}/status`, { metadata: { resourceVersion: sm.metadata.resourceVersion }, status });
}
