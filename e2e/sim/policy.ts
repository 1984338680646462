// The join policy of the simulation (test-only, pure): decides, at the moment a simulated VM would
// register its Node, whether it joins, waits, or fails. What it models:
//   - neverJoin(match):  the VM's kubeadm join fails (a broken VM). Permanent for that Machine.
//   - holdJoin(match):   the VM keeps retrying without failing (a slow boot); it joins once the hold is lifted.
//   - neverJoinInitControlPlane(match?): `kubeadm init` fails on the VM. Permanent for that Machine.
//   - expireCredential(scope?): the join credential expires now: every Machine whose bootstrap data the sim
//     first saw at or after this instant fails, until rotateCredential(scope?).
//   - rotateCredential(scope?): a fresh credential from now: Machines whose bootstrap data appears later join.
//     A Machine whose data was made while expired keeps the expired token and fails; a Machine that already
//     failed stays failed, like a real VM whose kubeadm join gave up. Only new Machines recover.
//   - holdDeletion(scope): a VM being deleted stays until the hold is lifted (a slow teardown), so that its
//     Machine stays Deleting and its owner counts the remediation in flight.
// A failure is recorded on the SimMachine (status.boot.phase Failed), so it survives a sim restart; the rules
// themselves live in memory.
export type JoinRole = 'init' | 'join-control-plane' | 'join';

/** What the policy knows of a Machine about to join. */
export interface JoinCandidate {
  namespace: string;
  machineName: string;
  clusterName: string;
  role: JoinRole;
  /** Label `cluster.x-k8s.io/control-plane` on the Machine. */
  controlPlane: boolean;
  /** Epoch ms the Machine was created. */
  createdAt: number;
  /** Epoch ms the sim first saw the Machine's bootstrap data. */
  dataSeenAt: number;
  /** The VM's image (SimMachine spec.image, from its template) and the Machine's Kubernetes version. */
  image?: string;
  version?: string;
}

/** Which Machines a rule applies to; every given field must match. A function is the escape hatch. */
export type MachineMatch =
  | string
  | {
      namespace?: string;
      name?: string;
      cluster?: string;
      /** 'worker' = not a control-plane Machine. */
      role?: 'worker' | 'control-plane';
      /** Only Machines created at or after this epoch ms. */
      createdAfter?: number;
      /** Only VMs of this image (a broken image fails every VM made from it). */
      image?: string;
      /** Only Machines of this Kubernetes version. */
      version?: string;
    }
  | ((m: JoinCandidate) => boolean);

export interface RuleOptions {
  /** The rule applies to at most this many Machines, then lifts itself. */
  limit?: number;
  /**
   * neverJoin of a control-plane Machine: kubeadm join added the Machine's etcd member as a learner and failed
   * before promoting it; the learner stays in the etcd cluster after the Machine is gone (cluster-api #13221).
   */
  leaveEtcdLearner?: boolean;
}

/** A rule in force; lift() ends it for Machines that have not attempted to join yet. */
export interface PolicyRule {
  readonly id: number;
  readonly description: string;
  /** Machines the rule has applied to so far. */
  readonly applied: string[];
  lift(): void;
  readonly active: boolean;
}

export type JoinDecision =
  | { verdict: 'join' }
  | { verdict: 'hold'; reason: string; message: string }
  | { verdict: 'fail'; reason: string; message: string; leftEtcdLearner?: boolean };

/** Namespace (and optionally cluster) a credential action applies to; all clusters when omitted. */
export interface CredentialScope {
  namespace?: string;
  cluster?: string;
}

type Kind = 'neverJoin' | 'holdJoin' | 'neverJoinInit';

interface Rule extends PolicyRule {
  kind: Kind;
  matches(m: JoinCandidate): boolean;
  limit?: number;
  leaveEtcdLearner?: boolean;
  appliedSet: Set<string>;
  /** The Machine name of a string match. */
  name?: string;
}

interface ExpiryWindow {
  scope: CredentialScope;
  from: number;
  until?: number;
}

export function matchMachine(match: MachineMatch, m: JoinCandidate): boolean {
  if (typeof match === 'string') return m.machineName === match;
  if (typeof match === 'function') return match(m);
  if (match.namespace !== undefined && match.namespace !== m.namespace) return false;
  if (match.name !== undefined && match.name !== m.machineName) return false;
  if (match.cluster !== undefined && match.cluster !== m.clusterName) return false;
  if (match.role === 'worker' && m.controlPlane) return false;
  if (match.role === 'control-plane' && !m.controlPlane) return false;
  if (match.createdAfter !== undefined && m.createdAt < match.createdAfter) return false;
  if (match.image !== undefined && match.image !== m.image) return false;
  if (match.version !== undefined && match.version !== m.version) return false;
  return true;
}

function describe(match: MachineMatch): string {
  if (typeof match === 'string') return `Machine ${match}`;
  if (typeof match === 'function') return 'Machines matching a predicate';
  const parts = Object.entries(match).map(([k, v]) => `${k}=${v}`);
  return parts.length ? `Machines with ${parts.join(', ')}` : 'all Machines';
}

const inScope = (s: CredentialScope, m: JoinCandidate) =>
  (s.namespace === undefined || s.namespace === m.namespace) &&
  (s.cluster === undefined || s.cluster === m.clusterName);

/** Which deleting VMs a deletion hold keeps: a namespace, optionally one Machine. */
export interface DeletionScope {
  namespace: string;
  name?: string;
}

export class JoinPolicy {
  private rules: Rule[] = [];
  private deletionHolds: { scope: DeletionScope; active: boolean }[] = [];
  private windows: ExpiryWindow[] = [];
  private nextId = 1;

  constructor(
    private readonly now: () => number = Date.now,
    /** Called whenever a rule changes, so that held Machines are looked at again. */
    private readonly changed: () => void = () => undefined,
  ) {}

  neverJoin(match: MachineMatch, opts: RuleOptions = {}): PolicyRule {
    return this.add('neverJoin', match, `${describe(match)} never join`, opts);
  }

  holdJoin(match: MachineMatch, opts: RuleOptions = {}): PolicyRule {
    return this.add('holdJoin', match, `${describe(match)} are held before joining`, opts);
  }

  neverJoinInitControlPlane(match: MachineMatch = {}, opts: RuleOptions = {}): PolicyRule {
    return this.add('neverJoinInit', match, `kubeadm init fails on ${describe(match)}`, opts);
  }

  /** Lifts every neverJoinInitControlPlane rule. */
  allowInitControlPlane(): void {
    for (const r of this.rules) if (r.kind === 'neverJoinInit') r.lift();
  }

  /** Lifts every holdJoin rule that matches the Machine name (or all holds when no name is given). */
  releaseHold(machineName?: string): void {
    for (const r of this.rules) {
      if (r.kind !== 'holdJoin') continue;
      if (machineName === undefined || r.name === machineName || r.appliedSet.has(machineName)) r.lift();
    }
  }

  /** VMs in scope are not torn down until lift() (their Machines stay Deleting). */
  holdDeletion(scope: DeletionScope): { lift(): void } {
    const hold = { scope, active: true };
    this.deletionHolds.push(hold);
    return {
      lift: () => {
        hold.active = false;
        this.changed();
      },
    };
  }

  deletionHeld(namespace: string, machineName: string): boolean {
    return this.deletionHolds.some(
      (h) =>
        h.active && h.scope.namespace === namespace && (h.scope.name === undefined || h.scope.name === machineName),
    );
  }

  expireCredential(scope: CredentialScope = {}): void {
    this.windows.push({ scope, from: this.now() });
    this.changed();
  }

  rotateCredential(scope: CredentialScope = {}): void {
    const at = this.now();
    for (const w of this.windows) {
      if (w.until !== undefined) continue;
      // A rotation for a wider (or the same) scope closes the window.
      const covers =
        (scope.namespace === undefined || scope.namespace === w.scope.namespace) &&
        (scope.cluster === undefined || scope.cluster === w.scope.cluster);
      if (covers) w.until = at;
    }
    this.changed();
  }

  /** Lifts every rule and forgets every credential window. */
  reset(): void {
    for (const r of this.rules) r.lift();
    this.rules = [];
    this.windows = [];
    this.deletionHolds = [];
    this.changed();
  }

  /** Rules in force, for messages. */
  describeActive(): string[] {
    const open = this.windows
      .filter((w) => w.until === undefined)
      .map((w) => `credential expired since ${new Date(w.from).toISOString()} (${JSON.stringify(w.scope)})`);
    return [...this.rules.filter((r) => r.active).map((r) => r.description), ...open];
  }

  /**
   * The decision for a Machine about to register its Node. A 'fail' or 'join' verdict is final for the
   * Machine (the caller records it); a 'hold' is asked again later.
   */
  decide(m: JoinCandidate): JoinDecision {
    for (const w of this.windows) {
      if (!inScope(w.scope, m)) continue;
      if (m.dataSeenAt >= w.from && (w.until === undefined || m.dataSeenAt < w.until)) {
        return {
          verdict: 'fail',
          reason: 'CredentialExpired',
          message: `bootstrap data made at ${new Date(m.dataSeenAt).toISOString()} carries a credential expired at ${new Date(w.from).toISOString()}`,
        };
      }
    }
    for (const r of this.rules) {
      if (!r.active || !r.matches(m)) continue;
      if (r.kind === 'neverJoinInit' && m.role !== 'init') continue;
      // A hold is counted once per Machine however often it is asked.
      if (!r.appliedSet.has(m.machineName)) {
        r.appliedSet.add(m.machineName);
        r.applied.push(m.machineName);
      }
      if (r.kind === 'holdJoin')
        return { verdict: 'hold', reason: 'JoinHeld', message: `held by the sim policy: ${r.description}` };
      if (r.kind === 'neverJoinInit')
        return { verdict: 'fail', reason: 'InitFailed', message: `kubeadm init failed (sim policy: ${r.description})` };
      const learner = r.leaveEtcdLearner === true && m.controlPlane;
      return {
        verdict: 'fail',
        reason: 'JoinFailed',
        message: `kubeadm join failed (sim policy: ${r.description})${learner ? '; its etcd member stays behind as a learner' : ''}`,
        ...(learner ? { leftEtcdLearner: true } : {}),
      };
    }
    return { verdict: 'join' };
  }

  private add(kind: Kind, match: MachineMatch, description: string, opts: RuleOptions): PolicyRule {
    const self = this;
    let active = true;
    const rule: Rule = {
      id: this.nextId++,
      kind,
      description: opts.limit !== undefined ? `${description} (at most ${opts.limit})` : description,
      applied: [],
      appliedSet: new Set<string>(),
      limit: opts.limit,
      ...(opts.leaveEtcdLearner ? { leaveEtcdLearner: true } : {}),
      name: typeof match === 'string' ? match : typeof match === 'object' ? match.name : undefined,
      matches: (m) => matchMachine(match, m),
      get active() {
        return active;
      },
      lift() {
        if (!active) return;
        active = false;
        self.changed();
      },
    };
    // A limited rule that is used up keeps applying to its own Machines only.
    const base = rule.matches;
    rule.matches = (m) =>
      base(m) && (rule.limit === undefined || rule.appliedSet.size < rule.limit || rule.appliedSet.has(m.machineName));
    this.rules.push(rule);
    this.changed();
    return rule;
  }
}
