// The deliberate defects the tests must catch (issue 16 §4): each a search-and-replace on one anchor of the
// product's code, applied to a throwaway copy by run.ts. An anchor that no longer occurs exactly once fails loudly
// (mutants.test.ts checks it in every unit run), so a refactor that moves the code updates the mutant with it.
//
// `spec` is the test that must fail; `expect` is what should catch it (an oracle invariant's tag for the property
// test, a test title otherwise) — the report says what did.

export interface Mutant {
  name: string;
  /** The defect, in a sentence. */
  what: string;
  file: string;
  /** Exact text that must occur exactly once in `file`. */
  find: string;
  replace: string;
  /** Further edits of the same file, each an anchor that must occur exactly once. */
  more?: { find: string; replace: string }[];
  spec: string;
  /** A named spec run when `spec` passes (a second line of proof for a defect the histories rarely reach). */
  also?: string;
  /** The invariant tag (property test) or test title fragment expected to fail. */
  expect: string;
}

const PROPERTY = 'controllers/joincheck/property.test.ts';

export const MUTANTS: Mutant[] = [
  {
    name: 'cached-machine',
    what: 'the executor decides on the cached Machine: it reads live (a GET, or the marker as the read) but does not plan again on what it read (it writes with the live resourceVersion)',
    file: 'controllers/joincheck/executor.ts',
    find: '    if (!cluster) await readByMarker(deps, machineRes, [...viaMarker.values()], live);\n    s = src.build(live);\n    if (s === undefined) return {};\n    p = plan(s);',
    replace: '    if (!cluster) await readByMarker(deps, machineRes, [...viaMarker.values()], live);',
    spec: PROPERTY,
    expect: '[joined]',
  },
  {
    name: 'no-max-in-flight',
    what: 'the maxInFlight check is removed from the budget guard',
    file: 'controllers/joincheck/budgets.ts',
    find: 'if (flying.length >= limit) {',
    replace: 'if (false) {',
    spec: PROPERTY,
    expect: '[in-flight]',
  },
  {
    name: 'no-withdrawal',
    what: 'withdrawal skipped: no withdraw intent for a Machine whose request was withdrawn (it joined, was opted out, ...)',
    file: 'controllers/joincheck/marks.ts',
    find: '    if (!withdrawing && !unremembered) continue;',
    replace: '    if (true) continue;',
    spec: PROPERTY,
    expect: '[clean-within-N]',
  },
  {
    name: 'provision-from-creation',
    what: "every Machine's provision clock starts at its creation (workers do not wait for the control plane's initialization)",
    file: 'controllers/joincheck/judge.ts',
    find: 'return latest(m.createdAt, firstControlPlane ? undefined : controlPlaneInitializedAt) as number;',
    replace: 'return m.createdAt;',
    spec: PROPERTY,
    expect: '[not-before-deadline]',
  },
  {
    name: 'v1beta1-answers-only',
    what: "on CAPI v1.10 the owner's answer is read from the v1beta1 conditions only (not status.v1beta2.conditions)",
    file: 'api/capi/machine.ts',
    find: 'const or = toCond(lists.first(f.ownerAnswer));',
    replace: "const or = toCond(conds.get('OwnerRemediated'));",
    spec: PROPERTY,
    expect: '[withdrawn-only-when]',
  },
  {
    name: 'rollout-any-previous',
    what: 'RolloutSuspect takes the revision before the suspect one as "previous" whether or not any of its Machines joined',
    file: 'controllers/joincheck/rollout-suspect.ts',
    find: 'const previous = all.slice(1).find((x) => joined(w, ofSet(x.name)) !== undefined);',
    replace: 'const previous = all[1];',
    spec: 'controllers/joincheck/rollout-suspect.test.ts',
    expect: 'does not fire when the previous revision never joined',
  },
  {
    name: 'rollout-never-over',
    what: 'a RolloutSuspect never clears when its MachineDeployment is rolled back (only a join or a resume clears it)',
    file: 'controllers/joincheck/rollout-suspect.ts',
    find: '  if (current === undefined || current.name === e.machineSet) return undefined;',
    replace: '  return undefined;',
    spec: 'controllers/joincheck/rollout-suspect.test.ts',
    expect: 'a rollback clears it',
  },
  {
    name: 'no-finalizer',
    what: 'the finalizer is never added to a check: deleting it leaves its marks behind',
    file: 'controllers/joincheck/deletion.ts',
    find: '  if (deletion === undefined) return !has && !clusterPaused ? { addFinalizer: true } : {};',
    replace: '  if (deletion === undefined) return {};',
    spec: PROPERTY,
    expect: '[deleted-check]',
  },
  {
    name: 'abort-on-refusal',
    what: 'one refused write (403/422, any error but 404/409) aborts the pass, on every pass (no back-off to step over it): every Machine after it waits',
    file: 'controllers/joincheck/executor.ts',
    find: '      deps.emit(refusedEvent(intent, f), s.check);\n      continue;',
    replace: '      deps.emit(refusedEvent(intent, f), s.check);\n      throw r.error;',
    more: [{ find: '    if (refusals.waiting(uid, deps.now())) continue;\n', replace: '' }],
    spec: PROPERTY,
    also: 'controllers/joincheck/executor-refusals.test.ts',
    expect: '[clean-within-N]',
  },
  {
    name: 'plan-of-a-gone-check',
    what: 'a check whose status PUT answers 404 still hands back its plan: the Machines newly settled in that pass count as planned with',
    file: 'controllers/joincheck/executor.ts',
    find: "  if (written.outcome === 'gone') return {};",
    replace: "  if (written.outcome === 'gone') return { plan: p };",
    spec: PROPERTY,
    also: 'controllers/joincheck/executor.test.ts',
    expect: 'the settled partition changes the plan',
  },
  {
    name: 'no-write-gate',
    what: 'the write gate is removed from the REST client: a leader that lost its Lease still writes',
    file: 'runtime/rest.ts',
    find: "    if (method !== 'GET' && this.o.writeGate && !this.o.writeGate()) throw new WritesForbiddenError(method, path);",
    replace: '',
    spec: 'runtime/rest.test.ts',
    expect: 'write gate',
  },
];

/** Applies a mutant to a file's text; throws unless its anchor occurs exactly once. */
export function mutate(text: string, m: Mutant): string {
  let out = text;
  for (const e of [{ find: m.find, replace: m.replace }, ...(m.more ?? [])]) {
    const first = out.indexOf(e.find);
    if (first < 0)
      throw new Error(
        `mutant ${m.name}: its anchor is not in ${m.file} any more (the code moved: update the mutant)\n${e.find}`,
      );
    if (out.indexOf(e.find, first + 1) >= 0)
      throw new Error(`mutant ${m.name}: its anchor occurs more than once in ${m.file} (make it unique)\n${e.find}`);
    out = out.slice(0, first) + e.replace + out.slice(first + e.find.length);
  }
  return out;
}
