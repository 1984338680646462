// The thin executor: performs one check's Plan. Before any Machine write it re-reads the targeted Machines
// and the Cluster live and plans again against the same previous status (a Machine that joined in the
// meantime is left alone, cluster-api #12870). It writes the check's status first (write-ahead: every
// request is recorded before it is made), then the Machine writes, each guarded by the resourceVersion
// the decision was made on (and the uid, for deletes). 404 on delete is done; 409 anywhere means
// "re-read and decide again". Events never fail a reconcile.
import { isDeepStrictEqual } from 'node:util';
import { connect } from 'node:tls';
import type { Logger } from 'winston';
import { markForRemediation, removeJoinGuardCondition, setJoinGuardCondition, statusPatch, withdrawMark } from '../../api/capi/remediation-writes.js';
import { capiResource } from '../../api/capi/resources.js';
import type { CapiApiVersion } from '../../api/capi/model.js';
import { ANNOTATION_RESUME, API_VERSION, CAPI_ANNOTATION_REMEDIATE_MACHINE, KIND, PLURAL, GROUP, VERSION } from '../../api/v1alpha1/types.js';
import { isConflict, isNotFound, pathOf, type Json, type Resource, type RestClient } from '../runtime/rest.js';
import type { EventRecorder } from './events.js';
import type { JoinGuardMetrics } from './metrics.js';
import { plan } from './planner.js';
import { buildSnapshot, type Problem, type RawSnapshot } from './snapshot.js';
import { MACHINE_WRITES, type Action, type MachineTarget, type Plan } from './types.js';

export const CHECKS: Resource = { group: GROUP, version: VERSION, plural: PLURAL, namespaced: true };

export interface ExecutorDeps {
  rest: RestClient;
  apiVersion: CapiApiVersion;
  log: Logger;
  events: EventRecorder;
  metrics: JoinGuardMetrics;
  /** Fresher objects read or written by the executor go back into the caches. */
  remember: (kind: 'check' | 'machine' | 'cluster', obj: Json) => void;
}

export interface Result {
  /** Epoch ms of the next deadline, if any. */
  wakeAt?: number;
  /** Run again now (a conflict, or an answer the plan waits for). */
  requeue: boolean;
  /** The endpoint probe's answer, for the next snapshot. */
  probe?: { reachable: boolean; at: number };
  problems: Problem[];
  plan?: Plan;
}

/** What the executor does: plan from the cache, re-read and re-plan live, write status, then act. */
export async function execute(deps: ExecutorDeps, raw: RawSnapshot): Promise<Result> {
  const machineRes = toResource(capiResource('Machine', deps.apiVersion));
  const clusterRes = toResource(capiResource('Cluster', deps.apiVersion));
  let built = buildSnapshot(raw);
  let p = plan(built.snapshot);

  // Re-read live whatever a Machine write targets, and decide again on what is true now.
  const live = new Map<string, Json>();
  let current = raw;
  for (let round = 0; round < 3 && unreadTargets(p, live).length > 0; round++) {
    current = await reread(deps, current, unreadTargets(p, live), live, machineRes, clusterRes);
    built = buildSnapshot(current);
    p = plan(built.snapshot);
  }
  if (unreadTargets(p, live).length > 0) return { requeue: true, problems: built.problems, plan: p };

  const check = raw.check;
  const ref = { check: check.metadata.name, namespace: check.metadata.namespace, cluster: check.spec?.clusterName };
  const next = JSON.parse(JSON.stringify(p.status)) as Json;
  if (!isDeepStrictEqual(next, check.status ?? {})) {
    try {
      // PUT on /status: the status stanza is replaced exactly (a merge patch could not remove fields),
      // everything else in the body is ignored by the apiserver; the resourceVersion guards it.
      const written = await deps.rest.put(pathOf(CHECKS, ref.namespace, ref.check, 'status'), { ...check, status: next });
      deps.remember('check', written);
      deps.metrics.write('status', 'ok');
    } catch (e) {
      if (isConflict(e)) {
        deps.metrics.write('status', 'conflict');
        deps.log.debug('status conflict, deciding again', ref);
        return { requeue: true, problems: built.problems, plan: p };
      }
      if (isNotFound(e)) return { requeue: false, problems: built.problems, plan: p };
      throw e;
    }
  }
  deps.metrics.observe({ namespace: ref.namespace, check: ref.check, cluster: ref.cluster ?? '' }, p.verdicts, check.status ?? {}, p.status, raw.now);

  let requeue = false;
  let probe: Result['probe'];
  for (const a of p.actions) {
    if (MACHINE_WRITES.has(a.type)) {
      let action: Action | undefined = a;
      let r = await machineWrite(deps, machineRes, action, live, ref);
      // 409: CAPI changed the Machine since it was read (it patches status often). Re-read it and decide
      // again against the same previous status; if the decision stands, write now rather than leave the
      // recorded request to the planner's REQUEST_RETRY_MS.
      for (let retry = 0; r === 'conflict' && retry < CONFLICT_RETRIES; retry++) {
        const t: MachineTarget = (action as { machine: MachineTarget }).machine;
        live.delete(t.uid);
        current = await reread(deps, current, [t], live, machineRes, clusterRes);
        action = plan(buildSnapshot(current).snapshot).actions.find((x) => x.type === a.type && (x as { machine?: MachineTarget }).machine?.uid === t.uid);
        if (action === undefined) {
          r = 'gone';
          deps.log.info(`${a.type}: decided again on the changed Machine, nothing to write now`, { ...ref, machine: t.name });
          break;
        }
        r = await machineWrite(deps, machineRes, action, live, ref);
      }
      requeue ||= r === 'conflict';
      continue;
    }
    switch (a.type) {
      case 'RemoveResumeAnnotation':
        requeue ||= (await removeResume(deps, check, a.value, ref)) === 'conflict';
        break;
      case 'ProbeEndpoint':
        probe = { reachable: await tlsAnswers(a.host, a.port, 3000), at: Date.now() };
        deps.log.info(`control-plane endpoint ${a.host}:${a.port} ${probe.reachable ? 'answers' : 'does not answer'}`, { ...ref, endpoint: `${a.host}:${a.port}` });
        requeue = true;
        break;
      case 'MachineEvent':
        await deps.events.record({ apiVersion: machineRes.group + '/' + machineRes.version, kind: 'Machine', name: a.machine.name, namespace: a.machine.namespace, uid: a.machine.uid }, a.reason, a.message, a.warning);
        deps.log.info(a.message, { ...ref, machine: a.machine.name, event: a.reason });
        break;
      case 'CheckEvent':
        await deps.events.record({ apiVersion: API_VERSION, kind: KIND, name: ref.check, namespace: ref.namespace, uid: check.metadata.uid }, a.reason, a.message, a.warning);
        deps.log.info(a.message, { ...ref, event: a.reason });
        break;
    }
  }
  return { ...(p.wakeAt !== undefined ? { wakeAt: p.wakeAt } : {}), requeue, ...(probe ? { probe } : {}), problems: built.problems, plan: p };
}

type WriteResult = 'ok' | 'gone' | 'conflict';

const CONFLICT_RETRIES = 3;

/** Reads the targeted Machines and the Cluster live into `live` and returns the snapshot input with them. */
async function reread(deps: ExecutorDeps, current: RawSnapshot, targets: MachineTarget[], live: Map<string, Json>, machineRes: Resource, clusterRes: Resource): Promise<RawSnapshot> {
  const machines = [...current.machines];
  for (const t of targets) {
    const i = machines.findIndex((m) => m.metadata?.uid === t.uid);
    try {
      const obj = await deps.rest.get(pathOf(machineRes, t.namespace, t.name));
      deps.remember('machine', obj);
      live.set(t.uid, obj);
      if (obj.metadata?.uid !== t.uid) {
        if (i >= 0) machines.splice(i, 1);
        machines.push(obj); // a new Machine with the same name
      } else if (i >= 0) machines[i] = obj;
      else machines.push(obj);
    } catch (e) {
      if (!isNotFound(e)) throw e;
      live.set(t.uid, {});
      if (i >= 0) machines.splice(i, 1);
    }
  }
  let cluster = current.cluster;
  if (cluster?.metadata?.name) {
    try {
      const fresh = await deps.rest.get(pathOf(clusterRes, cluster.metadata.namespace, cluster.metadata.name));
      deps.remember('cluster', fresh);
      cluster = fresh;
    } catch (e) {
      if (!isNotFound(e)) throw e;
      cluster = undefined;
    }
  }
  return { ...current, machines, ...(cluster ? { cluster } : { cluster: undefined }) };
}

async function machineWrite(deps: ExecutorDeps, res: Resource, a: Action, live: Map<string, Json>, ref: Json): Promise<WriteResult> {
  const t = (a as { machine: MachineTarget }).machine;
  const obj = live.get(t.uid);
  const log = { ...ref, machine: t.name, action: a.type };
  if (!obj || obj.metadata?.uid !== t.uid) return 'gone';
  if (obj.metadata?.resourceVersion !== t.resourceVersion) return 'conflict';
  const now = new Date();
  const path = pathOf(res, t.namespace, t.name);
  try {
    switch (a.type) {
      case 'MarkOwnerRemediated': {
        const w = markForRemediation(obj, deps.apiVersion, { kind: a.kind, message: a.message, now, setOwnerRemediated: a.setOwnerRemediated });
        deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(obj, w)));
        break;
      }
      case 'SetJoinGuardCondition': {
        const w = setJoinGuardCondition(obj, deps.apiVersion, { status: 'False', reason: a.kind, message: a.message, now });
        deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(obj, w)));
        break;
      }
      case 'AnnotateRemediate':
        deps.remember('machine', await deps.rest.mergePatch(path, { metadata: { resourceVersion: t.resourceVersion, annotations: { [CAPI_ANNOTATION_REMEDIATE_MACHINE]: '' } } }));
        break;
      case 'DeleteMachine':
        await deps.rest.deleteWithPreconditions(path, t.uid, t.resourceVersion);
        break;
      case 'Withdraw':
        if (a.path === 'OwnerRemediated') {
          deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(obj, withdrawMark(obj, deps.apiVersion, now))));
        } else if (a.path === 'MachineCondition') {
          deps.remember('machine', await deps.rest.mergePatch(`${path}/status`, statusPatch(obj, removeJoinGuardCondition(obj, deps.apiVersion))));
        } else if (a.path === 'RemediateAnnotation') {
          deps.remember('machine', await deps.rest.mergePatch(path, { metadata: { resourceVersion: t.resourceVersion, annotations: { [CAPI_ANNOTATION_REMEDIATE_MACHINE]: null } } }));
        }
        break;
    }
    deps.metrics.write(a.type, 'ok');
    deps.log.info(`${a.type} written`, log);
    return 'ok';
  } catch (e) {
    if (isNotFound(e)) {
      deps.metrics.write(a.type, 'gone');
      deps.log.info(`${a.type}: the Machine is already gone`, log);
      return 'gone';
    }
    if (isConflict(e)) {
      deps.metrics.write(a.type, 'conflict');
      deps.log.info(`${a.type}: the Machine changed since the decision, deciding again`, log);
      return 'conflict';
    }
    deps.metrics.write(a.type, 'error');
    throw e;
  }
}

async function removeResume(deps: ExecutorDeps, check: Json, value: string, ref: Json): Promise<WriteResult> {
  const p = `/metadata/annotations/${ANNOTATION_RESUME.replace(/~/g, '~0').replace(/\//g, '~1')}`;
  try {
    // `test` first: a value written after the one acted on is left for the next reconcile.
    deps.remember('check', await deps.rest.jsonPatch(pathOf(CHECKS, ref.namespace, ref.check), [{ op: 'test', path: p, value }, { op: 'remove', path: p }]));
    deps.log.info('resume annotation acted on and removed', ref);
    return 'ok';
  } catch (e) {
    if (isNotFound(e)) return 'gone';
    // A failed `test` is 422 (Invalid): the annotation changed; decide again.
    if (isConflict(e) || (e as { code?: number }).code === 422) return 'conflict';
    throw e;
  }
}

function unreadTargets(p: Plan, live: Map<string, Json>): MachineTarget[] {
  const out: MachineTarget[] = [];
  for (const a of p.actions) {
    if (!MACHINE_WRITES.has(a.type)) continue;
    const t = (a as { machine: MachineTarget }).machine;
    if (!live.has(t.uid)) out.push(t);
  }
  return out;
}

function toResource(r: { group: string; version: string; plural: string }): Resource {
  return { group: r.group, version: r.version, plural: r.plural, namespaced: true };
}

/** Whether something completes a TLS handshake at host:port (any certificate: this asks "is it up"). */
export function tlsAnswers(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, servername: /^[\d.]+$|:/.test(host) ? undefined : host, rejectUnauthorized: false, timeout: timeoutMs });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('secureConnect', () => done(true));
    socket.once('timeout', () => done(false));
    socket.once('error', () => done(false));
  });
}
