// A small driver for multi-step planner tests: it plans, persists the status the way the API server
// would (a JSON round trip), and lets the test move the clock and change Machines between plans.
import type { MachineFacts } from '../../../api/capi/model.js';
import type { Condition, MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import { plan } from '../planner.js';
import type { Action, Plan, Snapshot } from '../types.js';

export class Scenario {
  last: Plan | undefined;
  readonly plans: Plan[] = [];

  constructor(public s: Snapshot) {}

  /**
   * Plans, then stores the plan's status as the check's status (through JSON, like the API server).
   * Every step also checks idempotence: replanning the same snapshot with the new status must emit
   * nothing and change nothing (no duplicate events, no duplicate writes).
   */
  plan(): Plan {
    const p = plan(this.s);
    this.last = p;
    this.plans.push(p);
    this.s = { ...this.s, check: { ...this.s.check, status: JSON.parse(JSON.stringify(p.status)) as MachineJoinCheckStatus } };
    if (this.checkIdempotence) {
      const again = plan(this.s);
      if (again.actions.length > 0) {
        throw new Error(`not idempotent at ${new Date(this.s.now).toISOString()}: replanning emitted ${JSON.stringify(again.actions)}`);
      }
      const a = JSON.stringify(again.status);
      const b = JSON.stringify(this.s.check.status);
      if (a !== b) throw new Error(`not idempotent at ${new Date(this.s.now).toISOString()}: status changed\n${b}\n${a}`);
    }
    return p;
  }

  /** Off only for tests that check something else on a replan. */
  checkIdempotence = true;

  at(t: number): this {
    this.s = { ...this.s, now: t };
    return this;
  }

  advance(d: number): this {
    return this.at(this.s.now + d);
  }

  with(change: Partial<Snapshot>): this {
    this.s = { ...this.s, ...change };
    return this;
  }

  machine(name: string): MachineFacts {
    const m = this.s.machines.find((x) => x.name === name);
    if (m === undefined) throw new Error(`no Machine ${name}`);
    return m;
  }

  update(name: string, change: Partial<MachineFacts>): this {
    this.s = { ...this.s, machines: this.s.machines.map((m) => (m.name === name ? { ...m, ...change } : m)) };
    return this;
  }

  add(...ms: MachineFacts[]): this {
    this.s = { ...this.s, machines: [...this.s.machines, ...ms] };
    return this;
  }

  remove(name: string): this {
    this.s = { ...this.s, machines: this.s.machines.filter((m) => m.name !== name) };
    return this;
  }

  get status(): MachineJoinCheckStatus {
    return this.s.check.status ?? {};
  }
}

export function writes(p: Plan): Action[] {
  return p.actions.filter((a) => a.type !== 'MachineEvent' && a.type !== 'CheckEvent');
}

/** Machine names with a write action (mark, annotate, condition, delete) in the plan. */
export function requested(p: Plan): string[] {
  return p.actions
    .filter((a) => a.type === 'MarkOwnerRemediated' || a.type === 'AnnotateRemediate' || a.type === 'SetJoinGuardCondition' || a.type === 'DeleteMachine')
    .map((a) => ('machine' in a ? a.machine.name : ''));
}

export function eventReasons(p: Plan): string[] {
  return p.actions.filter((a) => a.type === 'MachineEvent' || a.type === 'CheckEvent').map((a) => ('reason' in a ? a.reason : ''));
}

export function cond(status: MachineJoinCheckStatus | undefined, type: string): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

export function progressingReason(p: Plan): string | undefined {
  return cond(p.status, 'Progressing')?.reason;
}

export function verdictOf(p: Plan, name: string) {
  const v = p.verdicts.find((x) => x.machine === name);
  if (v === undefined) throw new Error(`no verdict for ${name}`);
  return v;
}
