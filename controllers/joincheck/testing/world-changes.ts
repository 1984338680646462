// Changes of the in-memory world beside the fleet's life (test-only): the user edits the check (its selector, its
// budgets, spec.paused), pauses the Cluster or the MachineHealthCheck, relabels a Machine in place (a
// MachineDeployment's template labels, which CAPI copies onto its Machines), refuses the check's status writes (RBAC
// on /status), and `clusterctl move` re-creates every object with a new uid and without its status (clusterctl v1.14
// mover.go: createTargetObject creates the object; the status subresource is not written: a Machine's status is
// empty; the Cluster and KCP keep only what their readers need: not initialized, no condition), the Cluster paused until
// CAPI's controllers rebuild the status on unpause (new condition times: the Cluster's initialization time moves).
import type { Json } from '../../../runtime/client/rest.js';
import { iso } from '../time.js';
import { initializeCluster, isProvisioned, provisionMachine, setCond, setKcpInitialized } from './objects.js';
import { count, type World } from './world.js';

/** The check's spec edited (a new generation): the next write of the check meets a 409. */
export function editSpec(w: World, change: (spec: Json) => void, what: string): void {
  const c = w.check;
  if (c === undefined || c.metadata.deletionTimestamp !== undefined) return;
  const spec = structuredClone(c.spec);
  change(spec);
  if (JSON.stringify(spec) === JSON.stringify(c.spec)) return;
  w.check = {
    ...c,
    spec,
    metadata: { ...c.metadata, generation: (c.metadata.generation ?? 1) + 1, resourceVersion: w.nextRv() },
  };
  count(what);
}

export const SELECTORS: Json[] = [
  { matchLabels: { pool: 'a' } },
  { matchExpressions: [{ key: 'pool', operator: 'Exists' }] },
  { matchLabels: { pool: 'b' } },
];

export function pause(w: World, what: 'cluster' | 'check' | 'mhc', on: boolean): void {
  if (what === 'check')
    return editSpec(w, (s) => (on ? (s.paused = true) : delete s.paused), on ? 'checks paused' : 'checks unpaused');
  const o = what === 'cluster' ? w.cluster : w.mhc;
  if (o === undefined) return;
  if (what === 'cluster') {
    if ((o.spec.paused === true) === on) return;
    if (on) o.spec.paused = true;
    else delete o.spec.paused;
  } else {
    const a = (o.metadata.annotations ??= {});
    if ('cluster.x-k8s.io/paused' in a === on) return;
    if (on) a['cluster.x-k8s.io/paused'] = '';
    else delete a['cluster.x-k8s.io/paused'];
  }
  o.metadata.resourceVersion = w.nextRv();
  count(`${what === 'cluster' ? 'Clusters' : 'MachineHealthChecks'} ${on ? 'paused' : 'unpaused'}`);
  if (what === 'cluster' && !on && w.rebuild !== undefined) rebuildAfterMove(w);
}

/** A worker's pool label changed in place (CAPI copies a MachineDeployment's template labels onto its Machines). */
export function relabel(w: World, m: Json, pool: 'a' | 'b'): void {
  if (m.metadata.labels['cluster.x-k8s.io/control-plane'] !== undefined) return;
  if (w.change(m, 'fleet', () => (m.metadata.labels = { ...m.metadata.labels, pool }))) count('Machines relabelled');
}

/**
 * clusterctl move. The Cluster paused first (clusterctl pauses it, then waits for every block-move annotation to go:
 * JoinGuard writes the check's memory and releases it); then every object is re-created with a new uid and no status
 * (Machines being deleted are gone first), the check with its annotations (the memory) and its finalizer. The Cluster
 * stays paused until `unpause` (clusterctl unpauses it once everything is there), when CAPI rebuilds the status.
 * Returns whether the objects were re-created (the driver starts the target's JoinGuard then).
 */
export function move(w: World): boolean {
  if (w.rebuild !== undefined) {
    pause(w, 'cluster', false);
    return false;
  }
  if (!w.clusterPaused) {
    pause(w, 'cluster', true);
    count('moves: Cluster paused');
    return false;
  }
  if (w.check !== undefined && 'clusterctl.cluster.x-k8s.io/block-move' in (w.check.metadata.annotations ?? {})) {
    count('moves waiting for block-move');
    return false;
  }
  for (const m of w.live()) if (m.metadata.deletionTimestamp !== undefined) w.gone(m);
  const n = ++w.moves;
  const uids = new Map<string, string>();
  const machines = new Map<string, { provisioned: boolean; joined: boolean }>();
  for (const m of w.live()) {
    const from = m.metadata.uid;
    const to = `${from.replace(/-mv\d+$/, '')}-mv${n}`;
    uids.set(from, to);
    machines.set(m.metadata.name, { provisioned: isProvisioned(m, w.release), joined: Boolean(m.status.nodeRef) });
    m.metadata = { ...m.metadata, uid: to, resourceVersion: w.nextRv(), creationTimestamp: iso(w.t) };
    // No status at all (the status subresource is not written on create): no nodeRef, no phase, no readiness flags,
    // no condition — neither JoinGuard's mark nor an owner's answer — until CAPI rebuilds it after the unpause.
    m.status = {};
    w.rekey(from, to);
  }
  const initialized = w.initialized;
  w.cluster = {
    ...w.cluster,
    metadata: { ...w.cluster.metadata, uid: `uid-c1-mv${n}`, resourceVersion: w.nextRv(), creationTimestamp: iso(w.t) },
    status:
      w.release === 'v1.14'
        ? { initialization: { infrastructureProvisioned: true, controlPlaneInitialized: false }, conditions: [] }
        : { infrastructureReady: true, controlPlaneReady: false, conditions: [], v1beta2: { conditions: [] } },
  };
  w.kcp = {
    ...w.kcp,
    metadata: { ...w.kcp.metadata, uid: `uid-kcp-mv${n}`, resourceVersion: w.nextRv() },
    status: w.release === 'v1.14' ? { initialization: { controlPlaneInitialized: false } } : { initialized: false },
  };
  if (w.mhc !== undefined)
    w.mhc = { ...w.mhc, metadata: { ...w.mhc.metadata, uid: `uid-mhc-mv${n}`, resourceVersion: w.nextRv() } };
  const check = w.moveCheck(n);
  w.rebuild = { machines, initialized };
  w.oracle.moved(uids, check, w.t);
  count('moves');
  return true;
}

/** The Cluster unpaused after a move: CAPI's controllers rebuild the status they own, with the times of now. */
function rebuildAfterMove(w: World): void {
  const r = w.rebuild!;
  w.rebuild = undefined;
  if (r.initialized) {
    initializeCluster(w.cluster, w.release, w.t);
    const out = w.clusterTruth.outages;
    if (out.length > 0 && out[out.length - 1]!.up === undefined)
      setCond(
        w.cluster,
        w.release,
        'v2',
        { type: 'RemoteConnectionProbe', status: 'False', reason: 'ProbeFailed' },
        w.t,
      );
    w.cluster.metadata.resourceVersion = w.nextRv();
    setKcpInitialized(w.kcp, w.release);
    w.kcp.metadata.resourceVersion = w.nextRv();
  }
  for (const m of w.live()) {
    const was = r.machines.get(m.metadata.name);
    if (was === undefined) continue;
    if (!was.provisioned) {
      w.change(m, 'fleet', () => {
        m.status.phase = 'Provisioning';
        if (w.release === 'v1.14')
          m.status.initialization = { infrastructureProvisioned: false, bootstrapDataSecretCreated: false };
        else Object.assign(m.status, { infrastructureReady: false, bootstrapReady: false });
      });
      continue;
    }
    w.change(m, 'fleet', () => {
      provisionMachine(m, w.release, w.t);
      if (was.joined) {
        m.status.nodeRef = { name: `node-${m.metadata.name}` };
        m.status.phase = 'Running';
        setCond(m, w.release, 'v2', { type: 'Ready', status: 'True', reason: 'Ready' }, w.t);
      }
    });
  }
  count('moves: status rebuilt on unpause');
}
