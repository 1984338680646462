// The deliberate defects the tests must catch (issues 16 and 28): each a search-and-replace on anchors of the product's
// code, applied to a throwaway copy by run.ts. An anchor that no longer occurs exactly once fails loudly
// (mutants.test.ts checks it in every unit run), so a refactor that moves the code updates the mutant with it.
//
// `tests` are the named tests that must kill it, every one of them: a spec file, or `file#title` (mocha --grep). The
// property test, when listed, runs with the mutant's own fixed `seed`, so the same tree gives the same verdict on every
// run; `expect` is the oracle invariant's tag it should fail with.

export interface Edit {
  /** Another file than the mutant's own (a defect that spans two rooms). */
  file?: string;
  find: string;
  replace: string;
}

export interface Mutant {
  name: string;
  /** The defect, in a sentence. */
  what: string;
  file: string;
  /** Exact text that must occur exactly once in `file`. */
  find: string;
  replace: string;
  /** Further edits, each an anchor that must occur exactly once (in `file` unless it names another). */
  more?: Edit[];
  /** The named tests that must kill it, each of them. */
  tests: string[];
  /** The property test's seed for this mutant (when `tests` lists it). */
  seed?: number;
  /** The invariant tag the property test should fail with. */
  expect?: string;
}

export const PROPERTY = 'controllers/joincheck/property.test.ts';
const GUARDS = 'controllers/joincheck/guards/guards.test.ts';
const MARKS = 'controllers/joincheck/requests/marks.test.ts';

export const MUTANTS: Mutant[] = [
  {
    name: 'cached-machine',
    what: 'the executor does not decide again on a Machine its write found changed (409): it reads it live, then writes the old decision with the live resourceVersion',
    file: 'controllers/joincheck/act/executor.ts',
    find: '    this.latest = next;\n    return next.intents.find((x) => x.machine.uid === intent.machine.uid);',
    replace: '    this.latest = next;\n    return intent;',
    // The live-Cluster gate plans again on the Machine as read after the 409 too: both homes of the new decision go.
    more: [
      {
        file: 'controllers/joincheck/act/machine-converge.ts',
        find: '    const { cluster: _cached, ...rest } = judged;',
        replace: '    const { cluster: _cached, ...rest } = this.on ?? judged;',
      },
    ],
    tests: ['controllers/joincheck/act/executor.test.ts#a Machine that joined after the cache saw it', PROPERTY],
    seed: 1,
    expect: '[joined]',
  },
  {
    name: 'no-max-in-flight',
    what: 'the maxInFlight check is removed from the budget guard',
    file: 'controllers/joincheck/guards/budgets.ts',
    find: 'if (flying.length >= limit) {',
    replace: 'if (false) {',
    tests: [`${GUARDS}#maxInFlight: one at a time`, PROPERTY],
    seed: 1,
    expect: '[in-flight]',
  },
  {
    name: 'in-flight-in-scope-only',
    what: 'maxInFlight counts only the Machines in the selector: a marked Machine that left it is forgotten (issue 28 §2)',
    file: 'controllers/joincheck/plan/remediate.ts',
    find: '  const flying = inFlight(\n    st.ofCluster,',
    replace: '  const flying = inFlight(\n    st.inScope,',
    // The property test no longer meets a marked Machine leaving the selector before a second mark at seed 1 (since
    // 047d0ef placed block-move first, every history's requests shifted), nor at seeds 2 and 3 (2,000 histories each):
    // the named guard test is its proof.
    tests: [`${GUARDS}#left the selector`],
  },
  {
    name: 'windows-newest-only',
    what: 'per-owner windows keep only the newest maxPerOwner times: lowered then raised, maxPerOwner forgets older requests (issue 28 §3)',
    file: 'controllers/joincheck/plan/remediate.ts',
    find: 'trimWindows(next.ownerWindows, keptFrom(now, settings, next.lastResume?.time)),',
    replace:
      'trimWindows(next.ownerWindows, keptFrom(now, settings, next.lastResume?.time)).map((x) => ({ ...x, times: x.times.slice(-settings.maxPerOwner) })),',
    // The property test (seed 1, 2,000 histories) did not catch it: the named test is its proof.
    tests: [`${GUARDS}#lowered from 3 to 1`],
  },
  {
    name: 'status-refusal-blocks-withdrawals',
    what: 'a refused status write (403 on /status) aborts the pass before any Machine write: a joined Machine keeps its mark (issue 28 §1)',
    file: 'controllers/joincheck/act/status-write.ts',
    find: "      if (!isConflict(e)) return { outcome: 'refused', s, p, error: e as Error };",
    replace: '      if (!isConflict(e)) throw e;',
    // The property test (seed 1, 2,000 histories) did not catch it: the named spec is its proof.
    tests: ['controllers/joincheck/act/executor-refusals.test.ts#status write refused for good'],
  },
  {
    name: 'no-withdrawal',
    what: 'withdrawal skipped: no withdraw intent for a Machine whose request was withdrawn (it joined, was opted out, ...)',
    file: 'controllers/joincheck/requests/marks.ts',
    find: '  if (!withdrawing && !unremembered) return undefined;',
    replace: '  if (true) return undefined;',
    tests: [MARKS, PROPERTY],
    seed: 1,
    expect: '[clean-within-N]',
  },
  {
    name: 'provision-from-creation',
    what: "every Machine's provision clock starts at its creation (workers do not wait for the control plane's initialization)",
    file: 'controllers/joincheck/rules/clocks.ts',
    find: 'return latest(m.createdAt, firstControlPlane ? undefined : controlPlaneInitializedAt) as number;',
    replace: 'return m.createdAt;',
    tests: ['controllers/joincheck/rules/verdict-rules.test.ts', PROPERTY],
    seed: 1,
    expect: '[not-before-deadline]',
  },
  {
    name: 'cp-init-moved-trusted',
    what: "the Cluster's ControlPlaneInitialized time that moved later while it stayed True is trusted (issue 28 item 6)",
    file: 'controllers/joincheck/rules/clocks.ts',
    find: '  if (before !== undefined && since > before) return { at: before, seen: iso(before) }; // moved later: not trusted\n',
    replace: '',
    tests: ['controllers/joincheck/rules/verdict-rules.test.ts#moves later while it stays True'],
  },
  {
    name: 'v1beta1-answers-only',
    what: "on CAPI v1.10 the owner's answer is read from the v1beta1 conditions only (not status.v1beta2.conditions)",
    file: 'api/capi/machine.ts',
    find: 'const or = toCond(lists.first(f.ownerAnswer));',
    replace: "const or = toCond(conds.get('OwnerRemediated'));",
    tests: ["api/capi/machine.test.ts#the owner's answer is read where"],
  },
  {
    name: 'rollout-any-previous',
    what: 'RolloutSuspect takes the revision before the suspect one as "previous" whether or not any of its Machines joined',
    file: 'controllers/joincheck/rules/rollout-suspect.ts',
    find: 'const previous = all.slice(1).find((x) => joined(w, ofSet(x.name)) !== undefined);',
    replace: 'const previous = all[1];',
    tests: [
      'controllers/joincheck/rules/rollout-suspect.test.ts#does not fire when the previous revision never joined',
    ],
  },
  {
    name: 'rollout-never-over',
    what: 'a RolloutSuspect never clears when its MachineDeployment is rolled back (only a join or a resume clears it)',
    file: 'controllers/joincheck/rules/rollout-suspect.ts',
    find: '  if (current === undefined || current.name === e.machineSet) return undefined;',
    replace: '  return undefined;',
    tests: ['controllers/joincheck/rules/rollout-suspect.test.ts#a rollback clears it'],
  },
  {
    name: 'suspicion-one-late',
    what: 'the suspicion is raised one failure late (`<` -> `<=` on the threshold): the failure that reaches it is rebuilt',
    file: 'controllers/joincheck/guards/failures.ts',
    find: 'if (threshold <= 0 || next.consecutiveJoinFailures < threshold) return false;',
    replace: 'if (threshold <= 0 || next.consecutiveJoinFailures <= threshold) return false;',
    tests: [`${GUARDS}#raises the suspicion and is not rebuilt`, PROPERTY],
    seed: 1,
    expect: '[suspicion]',
  },
  {
    name: 'canary-not-doubled',
    what: 'the canary wait is not doubled: every canary after probeInterval',
    file: 'controllers/joincheck/guards/failures.ts',
    find: 'return Math.min(settings.probeIntervalMs * 2 ** Math.min(spent, 40), settings.maxProbeIntervalMs);',
    replace: 'return Math.min(settings.probeIntervalMs, settings.maxProbeIntervalMs);',
    tests: [`${GUARDS}#canaryDelay doubles`, PROPERTY],
    // (seed 1 found it after 1,419 histories with each request applied when made; once the world interleaves requests in
    // flight together it no longer does within 2,000 — seed 3 does after 309: issue 37 item 4)
    seed: 3,
    expect: '[canary]',
  },
  {
    name: 'never-joined-one-late',
    what: 'the never-joined stop comes one failure late: the failure that reaches neverJoinedLimit is rebuilt',
    file: 'controllers/joincheck/guards/guards.ts',
    find: '(status.failuresSinceResume ?? 0) >= settings.neverJoinedLimit',
    replace: '(status.failuresSinceResume ?? 0) > settings.neverJoinedLimit',
    // The property test (seed 1, 2,000 histories) did not catch it: the named test is its proof.
    tests: [`${GUARDS}#never joined: the failure that reaches`],
  },
  {
    name: 'paused-cluster-ignored',
    what: 'a paused Cluster is ignored by the can-act rule and the writes: requests decided before the pause are written to its Machines (clusterctl move copies them meanwhile)',
    file: 'controllers/joincheck/plan/observe.ts',
    find: 'const canAct = !settings.paused && !cluster.paused && !cluster.deleting && !st.withdrawAll;',
    replace: 'const canAct = !settings.paused && !cluster.deleting && !st.withdrawAll;',
    more: [
      {
        file: 'controllers/joincheck/plan/describe.ts',
        find: 'const intents = cluster.paused ? [] : wanted;',
        replace: 'const intents = wanted;',
      },
    ],
    tests: [`${MARKS}#a paused Cluster: no write at all`, PROPERTY],
    seed: 1,
    expect: '[paused]',
  },
  {
    name: 'paused-mhc-ignored',
    what: 'a request recorded before its MachineHealthCheck was paused is still asked through it (the annotation written)',
    file: 'controllers/joincheck/plan/describe.ts',
    find: '      const why = asks ? pausedMhcOf(s, i.machine.uid) : undefined;',
    replace: '      const why: string | undefined = undefined;',
    // The property test at seed 1 no longer meets this history (since 047d0ef every history's requests shifted;
    // 2,000 histories): the named marks test is its proof.
    tests: [`${MARKS}#paused after the request was recorded`],
  },
  {
    name: 'no-finalizer',
    what: 'the finalizer is never added to a check: deleting it leaves its marks behind',
    file: 'controllers/joincheck/requests/deletion.ts',
    find: '  if (deletion === undefined) return !has && !clusterPaused ? { addFinalizer: true } : {};',
    replace: '  if (deletion === undefined) return {};',
    tests: ['controllers/joincheck/requests/deletion.test.ts', PROPERTY],
    seed: 1,
    expect: '[deleted-check]',
  },
  {
    name: 'abort-on-refusal',
    what: 'one refused write (403/422, any error but 404/409) aborts the pass, on every pass (no back-off to step over it): every Machine after it waits',
    file: 'controllers/joincheck/act/executor.ts',
    find: '      deps.emit(refusedEvent(intent, f), this.s.check);\n      return;',
    replace: '      deps.emit(refusedEvent(intent, f), this.s.check);\n      throw r.error;',
    more: [
      {
        find: '    return this.refusals.waiting(uid, this.deps.now()) ? undefined : intent;',
        replace: '    return intent;',
      },
    ],
    tests: ['controllers/joincheck/act/executor-refusals.test.ts'],
  },
  {
    name: 'plan-of-a-gone-check',
    what: 'a check whose status PUT answers 404 still hands back its plan: the Machines newly settled in that pass count as planned with',
    file: 'controllers/joincheck/act/executor.ts',
    find: "  if (written.outcome === 'gone') return {};",
    replace: "  if (written.outcome === 'gone') return { plan: p };",
    tests: ['controllers/joincheck/act/executor.test.ts#a check gone'],
  },
  {
    name: 'no-write-gate',
    what: 'the write gate is removed from the REST client: a leader that lost its Lease still writes',
    file: 'runtime/client/rest.ts',
    find: "    if (method !== 'GET' && this.o.writeGate && !this.o.writeGate()) throw new WritesForbiddenError(method, path);",
    replace: '',
    tests: ['runtime/client/rest.test.ts#write gate'],
  },
  {
    name: 'held-answer-coalesced',
    what: "an owner's answer that holds a request back (deferred, refused) waits with the display-only changes instead of being written at once",
    file: 'controllers/joincheck/act/status-write.ts',
    find: "new Set(['Deferred', 'Refused', 'Unanswered'])",
    replace: 'new Set([])',
    tests: ['controllers/joincheck/act/executor.test.ts#holds the request back'],
  },
  {
    name: 'write-guarded-by-rebuilt',
    what: 'after the write-ahead the snapshot is rebuilt from the caches: a Machine that joined while the PUT was in flight is marked or deleted with its post-join resourceVersion (issue 35 §1)',
    file: 'controllers/joincheck/act/status-write.ts',
    find: "return { outcome: 'written', s: withCheck(s, written), p, judged: s };",
    replace: "return { outcome: 'written', s: src.build(live) ?? s, p, judged: s };",
    // (After a 409 the snapshot is rebuilt from the caches on purpose, and the new decision made on it: the
    // re-decision test no longer tells this mutant apart, since the live-Cluster gate made one home of that.)
    tests: [
      'controllers/joincheck/act/executor.test.ts#while the write-ahead was in flight, its Node cached meanwhile',
    ],
  },
  {
    name: 'first-cp-request-skips-due',
    what: 'a first control-plane request not made is written after the control plane reports initialized (issue 35 §2)',
    file: 'controllers/joincheck/plan/describe.ts',
    find: "if (r.state !== 'Open') continue;",
    replace: "if (r.state !== 'Open' || r.firstControlPlane === true) continue;",
    tests: ['controllers/joincheck/rules/first-control-plane.test.ts#recorded but not made is not written once'],
  },
  {
    name: 'first-cp-request-kept-before-init',
    what: "a first control-plane request not made is written as decided while the control plane is not initialized: its mark's 409 read showing it provisioned at its provision deadline still marks it ProvisionTimeout (property seed 8)",
    file: 'controllers/joincheck/plan/describe.ts',
    find: "if (r.state !== 'Open') continue;",
    replace: "if (r.state !== 'Open' || (r.firstControlPlane === true && !st.initialized)) continue;",
    tests: ['controllers/joincheck/rules/first-control-plane.test.ts#recorded on a stale view'],
  },
  {
    name: 'refused-request-holds-budget',
    what: 'a request whose mark is refused for good still counts in flight: the next stuck Machine is held by maxInFlight forever (issue 35 §3)',
    file: 'controllers/joincheck/plan/remediate.ts',
    find: '    (next.requests ?? []).filter((r) => !refused.has(r.uid)),',
    replace: '    next.requests ?? [],',
    tests: ['controllers/joincheck/act/executor-refusals.test.ts#a mark refused for good does not hold maxInFlight'],
  },
  {
    name: 'live-cluster-cached',
    what: 'a Cluster read live is put in the caches: a live "paused" pins them, and a joined Machine keeps its mark after the unpause until the informer says so (issue 35 §5, [clean-within-N])',
    file: 'controllers/joincheck/act/live-reads.ts',
    find: '    live.cluster = cluster ?? null;\n',
    replace: "    live.cluster = cluster ?? null;\n    if (cluster) deps.remember('cluster', cluster);\n",
    tests: ['controllers/joincheck/act/executor.test.ts#never pins the cache'],
  },
  {
    name: 'cluster-not-read-after-write-ahead',
    what: "the Cluster is not read live after the check's status write: a pause stored while it was in flight is not seen and the mark goes out (issue 35 §6)",
    file: 'controllers/joincheck/act/status-write.ts',
    find: '    checkWritten(live);\n    try {\n      // PUT on /status',
    replace: '    try {\n      // PUT on /status',
    tests: ['controllers/joincheck/act/executor.test.ts#read before the write-ahead and paused while it was in flight'],
  },
  {
    name: 'finalizer-on-cached-cluster',
    what: "the check's metadata follows the plan made on the cached Cluster: a deleted check whose bound passes while its Cluster is paused goes with its mark left on a Machine",
    file: 'controllers/joincheck/act/executor.ts',
    find: 'if (decided !== undefined) this.p = { ...this.p, check: decided.check };',
    replace: '',
    tests: ['controllers/joincheck/act/executor.test.ts#past its bound on a Cluster paused live'],
  },
  {
    name: 'former-first-marked',
    what: 'once the control plane says initialized, the Machine that initialized it is judged like any control-plane Machine: asked of KCP',
    file: 'controllers/joincheck/rules/first-control-plane.ts',
    find: '  if (!initialized) return undefined;\n  const init =',
    replace: '  if (initialized || !initialized) return undefined;\n  const init =',
    tests: ['controllers/joincheck/rules/first-control-plane.test.ts#the Machine that initialized it is never marked'],
  },
  {
    name: 'paused-cluster-can-act',
    what: 'a paused Cluster left out of the can-act rule alone (its verdicts still Skipped, its intents still dropped): a resume is acted on while it is paused (issue 35 item 8)',
    file: 'controllers/joincheck/plan/observe.ts',
    find: 'const canAct = !settings.paused && !cluster.paused && !cluster.deleting && !st.withdrawAll;',
    replace: 'const canAct = !settings.paused && !cluster.deleting && !st.withdrawAll;',
    tests: ['controllers/joincheck/guards/guards.test.ts#a resume while the Cluster is paused waits'],
  },
  {
    name: 'unrecorded-withdrawal-written',
    what: "while the check's status is refused, a withdrawal that needs its record (a skip annotation, withdraw-all, unanswered) is written anyway (issue 35 item 8)",
    file: 'controllers/joincheck/act/executor.ts',
    find: "    if (intent.needsRecord === true && stored.get(intent.machine.uid) === 'Open') continue;",
    replace: '',
    tests: ['controllers/joincheck/act/executor-refusals.test.ts#a withdrawal that needs its record'],
  },
  {
    name: 'memory-dropped-while-status-refused',
    what: "while the check's status is refused, block-move replaces the memory annotation it carried: the memory is lost",
    file: 'controllers/joincheck/act/executor.ts',
    find: 'const { removeResume: _notRecorded, blockMove: _notStored, ...check } = (again ?? p).check;',
    replace: 'const { removeResume: _notRecorded, ...check } = (again ?? p).check;',
    tests: ['controllers/joincheck/property.test.ts#replays the'],
  },
  {
    name: 'cluster-stale-only-when-answered',
    what: "only a status PUT that answered makes the Cluster read stale: after a 409 that showed another writer's record, or a PUT whose reply was lost (it landed), a Machine is written on the Cluster read before it",
    file: 'controllers/joincheck/act/status-write.ts',
    find: '    checkWritten(live);\n    try {\n      // PUT on /status',
    replace: '    try {\n      // PUT on /status',
    more: [
      {
        find: "      live.check = written;\n      deps.remember('check', written);\n      deps.writeMetric('status', 'ok');",
        replace:
          "      checkWritten(live);\n      live.check = written;\n      deps.remember('check', written);\n      deps.writeMetric('status', 'ok');",
      },
    ],
    tests: ['controllers/joincheck/property.test.ts#replays the'],
  },
  {
    name: 'gate-never-replans',
    what: 'the live-Cluster gate keeps the first plan it made in a pass: after a 409 whose new decision is recorded, the next Machine is written on the Cluster read before that record',
    file: 'controllers/joincheck/act/machine-converge.ts',
    find: 'if (this.allowed !== undefined && this.on === judged && !clusterStale(this.live))',
    replace: 'if (this.allowed !== undefined)',
    tests: ['controllers/joincheck/act/executor-refusals.test.ts#recorded while the Cluster is paused'],
  },
  {
    name: 'marks-before-withdrawals-settle',
    what: "a pass's Machine writes go out at once without waiting for the withdrawals: a mark is sent while a withdrawal is still in flight (DESIGN: withdrawals go first; issue 37 item 4)",
    file: 'controllers/joincheck/act/executor.ts',
    find: "    await this.inParallel(ordered.filter((i) => i.want === 'withdraw'));\n    await this.inParallel(ordered.filter((i) => i.want !== 'withdraw'));",
    replace: '    await this.inParallel(ordered);',
    tests: ['controllers/joincheck/act/executor-parallel.test.ts#every withdrawal is answered before the first mark'],
  },
  {
    name: 'gate-read-per-writer',
    what: 'the live-Cluster gate is not shared by the concurrent writes: each writer that finds it stale reads the Cluster itself (a re-read per write, issue 37 item 4)',
    file: 'controllers/joincheck/act/machine-converge.ts',
    find: '      if (this.replanning !== undefined) {\n        await this.replanning;\n        continue;\n      }\n',
    replace: '',
    tests: ['controllers/joincheck/act/executor-parallel.test.ts#once for all of them'],
  },
  {
    name: 're-decision-beside-writes-in-flight',
    what: "a 409's re-read and new decision (and its record on the check) run while other Machine writes are in flight and new ones go out, on the plan it is replacing (issue 37 item 4)",
    file: 'controllers/joincheck/act/machine-converge.ts',
    find: '      const again = await lanes.exclusively(async () => {',
    replace: '      const again = await (async <T>(f: () => Promise<T>) => f())(async () => {',
    tests: ['controllers/joincheck/act/executor-parallel.test.ts#a 409 mid-batch'],
  },
  {
    name: 'block-move-after-status',
    what: "clusterctl's block-move is placed only after the check's status write: a status refused, or a crash between the two writes, leaves a recorded suspicion on a check a move does not wait for (issue 35, seed 256435908)",
    file: 'controllers/joincheck/act/executor.ts',
    find: 'if (p.check.blockMove === true && !(ANNOTATION_MEMORY in (s.check.metadata.annotations ?? {}))) {',
    replace: 'if (p.check.blockMove === true && s.now < 0) {',
    tests: [
      'controllers/joincheck/act/executor.test.ts#in one patch before the status',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'no-read-back-after-lost-reply',
    what: "a Machine write whose reply is lost (it may have landed) is taken as not made: the caches keep the Machine's version before the mark, and a later pass counts it out of flight (issue 35, seed 233753310)",
    file: 'controllers/joincheck/act/machine-converge.ts',
    find: "if (typeof result === 'object' && outcomeUnknown(result.error)) {",
    replace: "if (typeof result === 'object' && outcomeUnknown(result.error) && s.now < 0) {",
    tests: [
      'controllers/joincheck/act/executor.test.ts#reply is lost',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'unrecorded-re-decision-writes-on',
    what: 'after a 409 whose new decision cannot be recorded (refused, reply lost), the pass writes the next Machines from the old plan on a snapshot rebuilt from the caches: a Machine that joined meanwhile is deleted (seed 191426184)',
    file: 'controllers/joincheck/act/executor.ts',
    find: '        this.gate.close();\n        this.requeue = Math.min(this.requeue ?? 100, 100);\n        return undefined;',
    replace: '        this.requeue = Math.min(this.requeue ?? 100, 100);\n        return undefined;',
    // The kept history stopped reaching it once a pass's writes went out at once (its order changed); the table test
    // holds the rule directly.
    tests: ['controllers/joincheck/act/executor-refusals.test.ts#after a 409 whose re-decision cannot be recorded'],
  },
  {
    name: 'paused-mhc-holds-moved-marker',
    what: "a paused MachineHealthCheck holds the rewrite of a moved mark's marker too: after clusterctl move the mark names the pre-move check for good (seed 191426148)",
    file: 'controllers/joincheck/plan/describe.ts',
    find: "const asks = i.want === 'mark' && i.path === 'RemediateAnnotation' && !visibleMark(s, i);",
    replace: "const asks = i.want === 'mark' && i.path === 'RemediateAnnotation';",
    tests: ['controllers/joincheck/property.test.ts#replays the'],
  },
  {
    name: 'answer-no-clock-skew',
    what: "an owner's answer is compared with the request time to the second: a manager one second behind has its answer ignored, the request withdrawn as Unanswered (issue 35 §9a)",
    file: 'controllers/joincheck/requests/owner-answer.ts',
    find: 'or.since < asked - ANSWER_CLOCK_SKEW_MS',
    replace: 'or.since < asked',
    tests: ['controllers/joincheck/requests/marks.test.ts#clock is a second behind'],
  },
  {
    name: 'moved-stripped-watched',
    what: "a Machine re-created by clusterctl move that the carried memory did not watch is remembered as not joined while its status is stripped: CAPI's rebuilt nodeRef then counts as a join and clears the suspicion",
    file: 'controllers/joincheck/plan/remediate-memory.ts',
    find: 'const unwatched = !watchAll || (w.movedWithCheck(m) && !w.prevObs.has(m.uid));',
    replace: 'const unwatched = !watchAll;',
    tests: ['controllers/joincheck/plan/planner.test.ts#clusterctl move strips status'],
  },
  {
    name: 'unanswered-clock-runs-paused',
    what: 'the unanswered clock runs while the Cluster or the acting MachineHealthCheck is paused: the first pass after the unpause withdraws a mark nobody could answer',
    file: 'controllers/joincheck/requests/marks.ts',
    find: 'if (!r.answered && i.clockStopped?.(r, m) === true) delete r.markedTime;\n      else if (r.marked',
    replace: 'if (r.marked',
    tests: [
      `${MARKS}#time while the Cluster is paused does not count`,
      `${MARKS}#time while the acting MachineHealthCheck is paused does not count`,
    ],
  },
  {
    name: 'marked-time-from-now',
    what: "a request's markedTime is the first pass that sees the mark, not the mark's own time on the Machine: it differs with the pass, so a status write 30 s after every mark says only that (the fifth request per mark, issue 37 item 3)",
    file: 'controllers/joincheck/requests/marks.ts',
    find: 'r.markedTime = iso(markedFrom(r0, m, i.now) ?? i.now);',
    replace: 'r.markedTime = iso(i.now);',
    tests: [
      'controllers/joincheck/act/executor.test.ts#an isolated mark costs 4 requests',
      `${MARKS}#the unanswered clock runs from the mark's own time`,
    ],
  },
  {
    name: 'stopped-clock-display-only',
    what: "an unanswered clock stopped by a pause (marked, its time dropped) is coalesced like display: a pause met before the mark's own time was written goes unrecorded, and after it the clock runs from the mark, the paused time counted",
    file: 'controllers/joincheck/act/status-write.ts',
    find: "r.state === 'Open' && marked === true && markedTime === undefined && r.answered !== true",
    replace: 'false',
    tests: ['controllers/joincheck/act/executor.test.ts#a stopped unanswered clock'],
  },
  {
    name: 'moved-answer-taken-as-silence',
    what: "a request that follows its Machine's new uid after clusterctl move keeps its clock: the answer the move wiped is taken as silence",
    file: 'controllers/joincheck/memory/memory.ts',
    find: "if ('markedTime' in r) {",
    replace: 'if (false) {',
    tests: [`${MARKS}#the memory carried with its clock`],
  },
  {
    name: 'owner-times-window-only',
    what: 'per-owner request times are kept for the window only, not the longer of the window and a day: a window lowered and raised again within a day forgets the requests in between',
    file: 'controllers/joincheck/guards/budgets.ts',
    find: 'return latest(now - Math.max(settings.windowMs, OWNER_TIMES_KEPT_MS), ms(lastResume)) as number;',
    replace: 'return latest(now - settings.windowMs, ms(lastResume)) as number;',
    tests: [`${GUARDS}#remediation.window lowered from 2h to 10m and raised back`],
  },
  {
    name: 'paused-message-cache-order',
    what: 'the Paused condition names the requests a paused MachineHealthCheck holds in cache order: the status changes with the order the caches list Machines in',
    file: 'controllers/joincheck/plan/describe.ts',
    find: 'pausedMhcs: [...pausedMhcs].sort(compareText),',
    replace: 'pausedMhcs,',
    tests: [
      'controllers/joincheck/plan/planner.test.ts#is deterministic with requests held by a paused MachineHealthCheck',
    ],
  },
  {
    name: 'resume-recounts-held',
    what: 'a resume forgets which Machines were counted: the Machines the suspicion held count again as new failures and raise it again at once',
    file: 'controllers/joincheck/plan/remediate.ts',
    find: '(o.failedAt !== undefined ? [[uid, o.failedAt]] : [])',
    replace: "(o.failedAt !== undefined && o.failedAt >= (next.lastResume?.time ?? '') ? [[uid, o.failedAt]] : [])",
    tests: [`${GUARDS}#after a resume the Machines the suspicion held are rebuilt within maxInFlight`],
  },
  {
    name: 'settled-view-sees-planned',
    what: "the settled view looks up a Machine the plan also reads: its cache copy (joined) beside the plan's live read (not yet), so the partitioned plan differs from the full one",
    file: 'controllers/joincheck/world/machine-index.ts',
    find: 'key !== undefined && !inPlan.has(key) && this.known.get(key)?.settled === true;',
    replace: 'key !== undefined && this.known.get(key)?.settled === true;',
    tests: [
      'controllers/joincheck/world/machine-index.test.ts#is not looked up through the settled view too',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'orphan-on-joined-in-scope-only',
    what: "a deleted check's mark is withdrawn only where a live check's scope holds the Machine, even once it joined: a re-created check with another selector leaves the mark on a joined Machine",
    file: 'controllers/joincheck/requests/marks.ts',
    find: 'if (orphan && r === undefined && o.inScope?.has(m.uid) !== true && !joined) continue;',
    replace: 'if (orphan && r === undefined && o.inScope?.has(m.uid) !== true) continue;',
    // The kept history that found it no longer reaches it: its orphan came from a bound that left a mark nothing
    // refused (fixed in cdbe11c); deletion.test.ts keeps the orphan itself.
    tests: [
      "controllers/joincheck/requests/deletion.test.ts#a deleted check's mark on a joined Machine outside this check's scope",
    ],
  },
  {
    name: 'orphan-annotation-answer-unrecognised',
    what: "with no record, only the remediate-machine annotation says a marked mark is the annotation path's: once a cut withdrawal removed the annotation alone, the MachineHealthCheck's answer is taken for an owner's and the marker goes without it",
    file: 'controllers/joincheck/requests/marks.ts',
    find: "if (marked && (m.remediateAnnotation || answersAnnotation(m))) return 'RemediateAnnotation';",
    replace: "if (marked && m.remediateAnnotation) return 'RemediateAnnotation';",
    // The kept history that found it no longer reaches it: its orphan came from a bound that left a mark nothing
    // refused (fixed in cdbe11c); deletion.test.ts keeps the orphan itself.
    tests: [
      "controllers/joincheck/requests/deletion.test.ts#a deleted check's annotation-path withdrawal cut after the annotation",
    ],
  },
  {
    name: 'suspicion-evidence-trimmed-from-front',
    what: 'failures after the raise are appended to suspicion.machines and the list trimmed from the front: past 10, the Machines that raised the suspicion are no longer named',
    file: 'controllers/joincheck/guards/failures.ts',
    find: 'if (!machines.includes(m.name) && machines.length < STATUS_LIMITS.suspectMachines)\n      next.suspicion = { ...next.suspicion, machines: [...machines, m.name] };',
    replace:
      'if (!machines.includes(m.name))\n      next.suspicion = { ...next.suspicion, machines: [...machines, m.name].slice(-STATUS_LIMITS.suspectMachines) };',
    tests: [
      'controllers/joincheck/guards/guards.test.ts#the failures that raised the suspicion stay first',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'check-metadata-from-stale-replan',
    what: 'after a re-decision on the live Cluster met a 409 and was made again on the check as it is now, the check metadata (the carried memory) is still taken from the decision made on the check as judged',
    file: 'controllers/joincheck/act/executor.ts',
    find: '        decided = w.p;',
    replace: '',
    tests: ['controllers/joincheck/property.test.ts#replays the'],
  },
  {
    name: 'settled-taken-in-unseen',
    what: "a settled Machine that an edited selector takes into a check's scope is only counted, never planned with: a join it made out of scope is seen by the plan over every Machine and not by the partitioned one",
    file: 'controllers/joincheck/world/machine-index.ts',
    find: 'if (!same || (inScope && !this.matches(v, k.labels))) fresh.recent.add(key);',
    replace: 'if (!same) fresh.recent.add(key);',
    tests: [
      'controllers/joincheck/world/machine-index.test.ts#a settled Machine a new selector or its own new labels take in',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'unmade-out-of-scope-marked',
    what: "a request not made yet whose Machine left the check's scope is not held while it is not due: a 409's read that shows it relabelled and not due still marks it",
    file: 'controllers/joincheck/plan/describe.ts',
    find: '    if (t?.inScope !== true) {\n      out.add(r.uid);\n      continue;\n    }',
    replace: '    if (t?.inScope !== true) continue;',
    tests: [
      'controllers/joincheck/act/executor.test.ts#the live Machine has left the selector',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'bound-leaves-unrefused-marks',
    what: "past its bound a deleted check's finalizer goes whatever its withdrawals met: a 409 (or a write not tried yet after a move's pause) leaves a mark behind that nothing refused",
    file: 'controllers/joincheck/requests/deletion.ts',
    find: 'now >= deletion.until && !unrefused ?',
    replace: 'now >= deletion.until ?',
    tests: [
      'controllers/joincheck/requests/deletion.test.ts#bounded in time: past the bound the finalizer goes',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'metadata-409-not-reread',
    what: "a 409 on the check's metadata patch ends the pass without reading the check again: a cache that never gets the check's event meets the same 409 on every pass",
    file: 'controllers/joincheck/act/check-metadata.ts',
    find: 'if (isConflict(e)) await rememberLiveCheck(deps, meta.namespace, meta.name);',
    replace: '',
    tests: [
      'controllers/joincheck/act/executor.test.ts#reads the check again and remembers it',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'moved-same-second-observed',
    what: 'a check moved in the second its failures were recorded is not taken for a moved one when its Machines are observed: a stripped joined Machine is remembered as not joined, and its rebuilt Node clears the suspicion',
    file: 'controllers/joincheck/plan/observe.ts',
    find: '.some((x) => (ms(x.time) ?? Infinity) <= checkCreated);',
    replace: '.some((x) => (ms(x.time) ?? Infinity) < checkCreated);',
    tests: [
      'controllers/joincheck/plan/planner.test.ts#also when moved in the second its failures were recorded',
      'controllers/joincheck/property.test.ts#replays the',
    ],
  },
  {
    name: 'moved-same-second-join',
    what: 'a check moved in the second its failures were recorded counts its moved Machines created after the failure as joins: the rebuilt Node of a joined one clears the suspicion',
    file: 'controllers/joincheck/plan/judge.ts',
    find: 'checkCreated !== undefined && checkCreated >= newestFailure ?',
    replace: 'checkCreated !== undefined && checkCreated > newestFailure ?',
    tests: ['controllers/joincheck/plan/planner.test.ts#also when moved in the second its failures were recorded'],
  },
  {
    name: 'dry-run-stalls-ready',
    what: 'STOP_MEANINGS says a dry run turns Ready False: a mode the user chose reads as a stall (readyCondition derives from it)',
    file: 'api/v1alpha1/types.ts',
    find: "DryRun: { ready: 'Ready', hold: null, stallAlert: 'quiet' },",
    replace: "DryRun: { ready: 'NotReady', hold: null, stallAlert: 'quiet' },",
    tests: [`${GUARDS}#dry run is no stall`],
  },
  {
    name: 'dry-run-fires-stall-alert',
    what: 'STOP_MEANINGS says the stall alert fires for a dry run (the alert derives its quiet reasons from it)',
    file: 'api/v1alpha1/types.ts',
    find: "DryRun: { ready: 'Ready', hold: null, stallAlert: 'quiet' },",
    replace: "DryRun: { ready: 'Ready', hold: null, stallAlert: 'fires' },",
    tests: ["manifests/observability.test.ts#the stall alert's reasons come from STOP_MEANINGS"],
  },
  {
    name: 'annotation-mark-not-withdrawn',
    what: 'a withdrawal removes no annotation mark: the remediate-machine annotation JoinGuard wrote stays on a joined Machine (annotationMarks, from MARKS)',
    file: 'controllers/joincheck/requests/paths.ts',
    find: "return c[k] && 'annotation' in removed ? [removed.annotation] : [];",
    replace: 'return [];',
    tests: ['controllers/joincheck/act/executor.test.ts#the annotation path: the annotation and its marker'],
  },
];

/** The edits of a mutant, by file (its own file first). */
export function editsByFile(m: Mutant): Map<string, Edit[]> {
  const out = new Map<string, Edit[]>([[m.file, [{ find: m.find, replace: m.replace }]]]);
  for (const e of m.more ?? []) {
    const f = e.file ?? m.file;
    out.set(f, [...(out.get(f) ?? []), e]);
  }
  return out;
}

/** Applies a mutant's edits of one file to its text; throws unless each anchor occurs exactly once. */
export function mutate(text: string, m: Mutant, file: string = m.file): string {
  let out = text;
  for (const e of editsByFile(m).get(file) ?? []) {
    const first = out.indexOf(e.find);
    if (first < 0)
      throw new Error(
        `mutant ${m.name}: its anchor is not in ${file} any more (the code moved: update the mutant)\n${e.find}`,
      );
    if (out.indexOf(e.find, first + 1) >= 0)
      throw new Error(`mutant ${m.name}: its anchor occurs more than once in ${file} (make it unique)\n${e.find}`);
    out = out.slice(0, first) + e.replace + out.slice(first + e.find.length);
  }
  return out;
}
