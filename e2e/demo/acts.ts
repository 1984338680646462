// What each act of `npm run demo` says it ends with: the demo prints these lines only once it has checked each
// (the cluster's Machines and the check's own status), and e2e/demo/demo.test.ts (a CI job) fails on a missing one.
export const ACT_ENDS = [
  "act 1 done: JoinGuard marked it, CAPI's MachineSet replaced it, the replacement joined",
  'act 2 done: two join failures in a row; the first was rebuilt, rebuilding stalled with BootstrapCredentialSuspect',
  'act 3 done: a canary joined and cleared the suspicion; every worker joined; the check says AsExpected',
  'done: the upgrade is rolled out; JoinGuard asked the new MachineSet for the VM that failed, and touched no old Machine',
] as const;

/** Thrown when an act's end is not what its line says: the demo exits 1 with it. */
export class ActNotEnded extends Error {
  constructor(line: string, problems: string[]) {
    super(`did not end as the demo says ("${line}"): ${problems.join('; ')}`);
  }
}

/** Throws ActNotEnded when any problem was found. */
export function actEnded(line: string, problems: (string | false | undefined)[]): void {
  const found = problems.filter((p): p is string => typeof p === 'string');
  if (found.length > 0) throw new ActNotEnded(line, found);
}
