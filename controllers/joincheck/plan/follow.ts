// The planner's follow stage (DESIGN: "What JoinGuard does each pass"): each request of the check's memory brought
// up to what its Machine shows now (marks.ts followRequests), and the history with it.
import { followRequests } from '../requests/marks.js';
import { actingMhcPaused } from '../requests/paths.js';
import { assign, type PlanState } from './state.js';

/** follow's part: nothing but the status fields it writes (requests, remediations); no wake of its own. */
export interface Followed {
  /** The deletion's bound, the one moment follow knows the plan changes with no event. */
  wakes: (number | undefined)[];
}

export function follow(st: PlanState): { followed: Followed } {
  const { snap: s, next, now } = st;
  const followed = followRequests({
    requests: next.requests ?? [],
    history: next.remediations ?? [],
    machinesByUid: st.anyMachine,
    unreadable: st.unreadable,
    joined: st.joined,
    dryRun: s.settings?.dryRun ?? false,
    // While the Cluster is paused clusterctl move may be copying its Machines: one not there yet is not gone.
    keepMissing: st.cluster?.paused === true,
    clockStopped: (r, m) => st.cluster?.paused === true || actingMhcPaused(r.path, m, s.mhcs),
    withdrawAll: st.withdrawAll,
    ...(s.unansweredAfterMs !== undefined ? { unansweredAfterMs: s.unansweredAfterMs } : {}),
    now,
  });
  assign(next, 'requests', followed.requests);
  assign(next, 'remediations', followed.history);
  return { followed: { wakes: [st.deletion?.until] } };
}
