// Which intents the describe stage holds back (describe.ts): a request recorded but not due, a mark already there
// under another marker (clusterctl move), a paused MachineHealthCheck.
import type { RequestRecord } from '../../../api/v1alpha1/types.js';
import { made } from '../requests/marks.js';
import { PATHS, selectingMhcs } from '../requests/paths.js';
import { judge, readiness } from '../rules/verdict-rules.js';
import type { MarkIntent, Snapshot } from '../types.js';
import { part, type ActiveState } from './state.js';

/**
 * The requests recorded and not made yet (their mark never seen) whose Machine is not due: decided on the Machine as
 * the caches had it, their write met a 409 whose read shows it was not (DESIGN: "a 409 is a live re-read and a new
 * decision"). Their write waits until the Machine is due — or it joins, and the request is withdrawn. Judged on the
 * times the status keeps, not on this process's memory of earlier ones, so that a restart decides the same.
 */
export function notDueYet(st: ActiveState, requests: readonly RequestRecord[]): Set<string> {
  const w = part(st, 'observed');
  const out = new Set<string>();
  for (const r of requests) {
    // A first control-plane request too: its 409 read may show it provisioned after all (Joining, not due; property
    // seed 8), and once the control plane says initialized no Machine is first (issue 35, 2). The judge applies the
    // first control-plane clocks (from creation) while it is first.
    if (r.state !== 'Open') continue;
    const m = st.byUid.get(r.uid);
    if (m === undefined || made(r, m)) continue;
    // The Machine that initialized the control plane is never marked once it says so, whatever was recorded before
    // (in the selector or not).
    if (w.formerFirst?.uid === m.uid) {
      out.add(r.uid);
      continue;
    }
    const t = st.targets.get(m.uid);
    if (t?.inScope !== true) continue;
    const ready = t.provisioned ? readiness(m, w.prevObs.get(m.uid), undefined, st.now).at : undefined;
    const ctx = { ...w.ctx, readyAt: new Map(ready !== undefined ? [[m.uid, ready]] : []) };
    if (judge(m, ctx).state !== 'Stuck') out.add(r.uid);
  }
  return out;
}

export function visibleMark(s: Snapshot, i: Extract<MarkIntent, { want: 'mark' }>): boolean {
  const m = s.machines.find((x) => x.uid === i.machine.uid);
  return m !== undefined && PATHS[i.path].visible(m) && i.marker !== undefined && m.requestedBy !== i.marker;
}

/** "MachineHealthCheck h selects it and is paused" when every MachineHealthCheck that selects the Machine is paused. */
export function pausedMhcOf(s: Snapshot, uid: string): string | undefined {
  const m = s.machines.find((x) => x.uid === uid);
  const sel = m === undefined ? [] : selectingMhcs(m, s.mhcs);
  if (sel.length === 0 || sel.some((h) => !h.paused)) return undefined;
  return `MachineHealthCheck ${sel.map((h) => h.name).join(', ')} selects it and is paused`;
}
