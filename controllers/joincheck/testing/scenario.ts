// A small driver for multi-step planner tests: it plans, persists the status the way the API server would (a
// JSON round trip), keeps the in-process view a running controller would hand to its next plan, and lets the test
// move the clock and change Machines between plans. Every step also checks that planning twice changes nothing.
import { isDeepStrictEqual } from 'node:util';
import type { MachineFacts } from '../../../api/capi/model.js';
import type { Condition, MachineJoinCheckStatus } from '../../../api/v1alpha1/types.js';
import { plan } from '../plan/planner.js';
import type { MarkIntent, Plan, Snapshot } from '../types.js';

/** A plan, with the Machines it asked to be replaced for the first time (new open requests). */
export type StepPlan = Plan & { asked: string[] };

export class Scenario {
  last: StepPlan | undefined;
  readonly plans: StepPlan[] = [];

  constructor(public s: Snapshot) {}

  /**
   * Plans, then stores the plan's status as the check's status (through JSON, like the API server). Replanning
   * the same snapshot with the new status must emit nothing and change nothing (no duplicate events or requests).
   */
  plan(): StepPlan {
    const before = new Set((this.s.check.status?.requests ?? []).filter((r) => r.state === 'Open').map((r) => r.uid));
    const p = plan(this.s);
    const asked = (p.status.requests ?? [])
      .filter((r) => r.state === 'Open' && !before.has(r.uid))
      .map((r) => r.machine);
    const step: StepPlan = Object.assign(p, { asked });
    this.last = step;
    this.plans.push(step);
    this.s = {
      ...this.s,
      check: { ...this.s.check, status: JSON.parse(JSON.stringify(p.status)) as MachineJoinCheckStatus },
      previous: p.view,
    };
    if (this.checkIdempotence) {
      const again = plan(this.s);
      if (again.events.length > 0)
        throw new Error(
          `not idempotent at ${new Date(this.s.now).toISOString()}: replanning emitted ${JSON.stringify(again.events)}`,
        );
      if (!isDeepStrictEqual(JSON.parse(JSON.stringify(again.status)), this.s.check.status)) {
        throw new Error(
          `not idempotent at ${new Date(this.s.now).toISOString()}: status changed\n${JSON.stringify(this.s.check.status)}\n${JSON.stringify(again.status)}`,
        );
      }
    }
    return step;
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

  annotate(annotations: Record<string, string>): this {
    this.s = { ...this.s, check: { ...this.s.check, metadata: { ...this.s.check.metadata, annotations } } };
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

  /** The executor converged: each Machine now carries what its intent wants (a fake of CAPI's view of it). */
  converge(p: Plan = this.last!): this {
    for (const i of p.intents) this.update(i.machine.name, applied(i, this.machine(i.machine.name)));
    return this;
  }

  get status(): MachineJoinCheckStatus {
    return this.s.check.status ?? {};
  }
}

/** What a Machine looks like once an intent has been written (test fake of the executor's writes). */
export function applied(i: MarkIntent, m: MachineFacts): Partial<MachineFacts> {
  switch (i.want) {
    case 'delete':
      return { deletingSince: m.deletingSince ?? 0 };
    case 'mark': {
      const marker = i.marker !== undefined ? { requestedBy: i.marker } : {};
      if (i.path === 'RemediateAnnotation') return { remediateAnnotation: true, ...marker };
      if (i.path === 'MachineCondition') return { joinGuardJoined: { status: 'False', reason: i.kind }, ...marker };
      return {
        healthCheckSucceeded: { status: 'False', reason: i.kind },
        ownerRemediated: m.ownerRemediated ?? { status: 'False', reason: 'WaitingForRemediation' },
        ...marker,
      };
    }
    case 'withdraw':
      return {
        ...(i.marker !== undefined && m.requestedBy === i.marker ? { requestedBy: undefined } : {}),
        ...(m.healthCheckSucceeded?.status === 'False'
          ? { healthCheckSucceeded: { status: 'True', reason: 'HealthCheckSucceeded' } }
          : {}),
        ...(i.path === 'RemediateAnnotation' ? { remediateAnnotation: false } : {}),
        ...(m.joinGuardJoined?.status === 'False' ? { joinGuardJoined: { status: 'True', reason: 'NodeJoined' } } : {}),
      };
  }
}

/** Machines asked to be replaced for the first time in this plan (without a Scenario: every open request). */
export function requested(p: Plan): string[] {
  const asked = (p as Partial<StepPlan>).asked;
  if (asked !== undefined) return asked;
  return (p.status.requests ?? []).filter((r) => r.state === 'Open').map((r) => r.machine);
}

export function intentOf(p: Plan, name: string): MarkIntent | undefined {
  return p.intents.find((i) => i.machine.name === name);
}

/** The reasons of the events this plan owes once its status is written. */
export function eventReasons(p: Plan): string[] {
  return p.events.map((e) => e.reason);
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

export function requestOf(p: Plan, name: string) {
  return p.status.requests?.find((r) => r.machine === name);
}
