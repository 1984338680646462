// The demo's live view: the Machines of the demo cluster with their states and clocks, the check's counts
// and conditions, and the latest JoinGuard events and simulation events. On a terminal it redraws in
// place once a second; otherwise (CI logs, a pipe) it prints a frame only when something changed.
import type { MachineJoinCheck } from '../../api/v1alpha1/types.js';
import { conditionOf, hasNode, isControlPlane, isDeleting, joinClockStart } from '../support/cluster-view.js';
import type { Json } from '../../hack/testenv/kube-client.js';
import { capiApi } from '../sim/capi-api.js';
import type { SimEvent } from '../sim/context.js';

export interface Frame {
  act: string;
  elapsedS: number;
  machines: Json[];
  cluster?: Json;
  joinTimeoutMs: number;
  simMachines: Map<string, Json>;
  check?: MachineJoinCheck;
  k8sEvents: Json[];
  simEvents: SimEvent[];
}

const tty = process.stdout.isTTY;
const bold = (s: string) => (tty ? `\x1b[1m${s}\x1b[0m` : s);
const color = (code: number, s: string) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const red = (s: string) => color(31, s);
const green = (s: string) => color(32, s);
const yellow = (s: string) => color(33, s);

const secs = (ms: number) => `${Math.max(0, Math.round(ms / 1000))}s`;
const pad = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s.padEnd(n));
// Visible width ignores colour codes.
const padc = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - s.replace(/\x1b\[\d+m/g, '').length));

/** The join clock as DESIGN defines it (from the v1beta2 conditions), as a countdown to the deadline. */
function joinClock(m: Json, f: Frame, now: number): string {
  if (
    conditionOf(m, 'InfrastructureReady')?.status !== 'True' ||
    conditionOf(f.cluster, 'ControlPlaneInitialized')?.status !== 'True'
  )
    return 'join clock not started';
  const left = joinClockStart(capiApi('v1beta2'), m, f.cluster) + f.joinTimeoutMs - now;
  return left >= 0 ? `join deadline in ${secs(left)}` : `${secs(-left)} past its join deadline`;
}

function machineState(m: Json, sm: Json | undefined, f: Frame, now: number): { state: string; clock: string } {
  const age = now - Date.parse(m.metadata.creationTimestamp);
  if (isDeleting(m)) return { state: yellow('Deleting'), clock: `age ${secs(age)}` };
  if (hasNode(m)) return { state: green('Joined'), clock: `age ${secs(age)}` };
  const hc = conditionOf(m, 'HealthCheckSucceeded');
  if (hc?.status === 'False')
    return {
      state: red(`Marked (${hc.reason})`),
      clock: `marked ${secs(now - Date.parse(hc.lastTransitionTime))} ago`,
    };
  const boot = sm?.status?.boot as Json | undefined;
  if (boot?.phase === 'Failed') {
    return { state: red(`VM: join failed (${boot.reason})`), clock: joinClock(m, f, now) };
  }
  if (m.status?.phase === 'Provisioned') return { state: 'Joining', clock: joinClock(m, f, now) };
  return { state: m.status?.phase ?? 'Pending', clock: `age ${secs(age)}` };
}

export function render(f: Frame): string {
  const now = Date.now();
  const out: string[] = [];
  out.push(bold(`JoinGuard demo — ${f.act}`) + `   (${f.elapsedS.toFixed(0)}s)`);
  out.push('');
  out.push(
    bold(
      `${pad('MACHINE', 30)} ${pad('ROLE', 7)} ${pad('IMAGE', 14)} ${pad('PHASE', 12)} ${pad('NODE', 5)} ${pad('STATE', 34)} CLOCK`,
    ),
  );
  for (const m of f.machines) {
    const sm = f.simMachines.get(m.spec?.infrastructureRef?.name);
    const { state, clock } = machineState(m, sm, f, now);
    out.push(
      `${pad(m.metadata.name, 30)} ${pad(isControlPlane(m) ? 'cp' : 'worker', 7)} ${pad(sm?.spec?.image ?? '-', 14)} ${pad(m.status?.phase ?? '-', 12)} ${pad(hasNode(m) ? 'yes' : '-', 5)} ${padc(state, 34)} ${clock}`,
    );
  }
  out.push('');
  const s = f.check?.status;
  if (s) {
    out.push(
      bold('MachineJoinCheck "workers"') +
        `  expected ${s.expectedMachines ?? 0}  joined ${s.joinedMachines ?? 0}  joining ${s.joiningMachines ?? 0}  stuck ${s.stuckMachines ?? 0}  consecutive failures ${s.consecutiveJoinFailures ?? 0}`,
    );
    for (const c of s.conditions ?? []) {
      const st = c.status === 'True' ? green(c.status) : c.type === 'Paused' ? c.status : red(c.status);
      out.push(
        `  ${pad(c.type, 12)} ${padc(st, 5)} ${pad(c.reason, 28)} ${wrap(c.message, 110, '  ' + ' '.repeat(48))}`,
      );
    }
    if (s.suspicion)
      out.push(
        `  suspicion since ${s.suspicion.since}, next canary ${s.suspicion.nextCanaryTime ?? '-'} (in ${secs(Date.parse(s.suspicion.nextCanaryTime ?? '') - now)}), canaries spent ${s.suspicion.canariesSpent}`,
      );
    const rems = (s.remediations ?? []).slice(-6);
    if (rems.length)
      out.push(
        `  remediations: ${rems.map((r) => `${r.machine} ${r.outcome}${r.canary ? ' (canary)' : ''}`).join(', ')}`,
      );
  }
  out.push('');
  out.push(bold('JoinGuard events (newest last)'));
  for (const e of f.k8sEvents.slice(-6)) {
    out.push(
      `  ${pad(e.involvedObject?.kind ?? '', 16)} ${pad(e.involvedObject?.name ?? '', 28)} ${pad(e.reason ?? '', 22)} ${pad(e.message ?? '', 100)}`,
    );
  }
  out.push(bold('Simulated infrastructure (newest last)'));
  for (const e of f.simEvents.slice(-6)) {
    out.push(
      `  ${new Date(e.time).toISOString().slice(11, 19)} ${pad(e.type, 22)} ${pad(e.name, 28)} ${pad(e.message, 90)}`,
    );
  }
  return out.join('\n');
}

function wrap(text: string, width: number, indent: string): string {
  const words = text.split(' ');
  const lines: string[] = [];
  let line = '';
  for (const w of words) {
    if ((line + ' ' + w).trim().length > width) {
      lines.push(line.trim());
      line = w;
    } else line += ` ${w}`;
  }
  if (line.trim()) lines.push(line.trim());
  return lines.slice(0, 6).join(`\n${indent}`);
}

/** Draws frames: in place on a terminal, on change elsewhere. */
export class Screen {
  private last = '';

  draw(f: Frame): void {
    const text = render(f);
    // Clocks tick every second; only compare the lines without them off a terminal.
    const key = text.replace(/\d+s\b/g, '').replace(/\(\d+s\)/, '');
    if (tty) {
      process.stdout.write(`\x1b[H\x1b[2J${text}\n`);
    } else if (key !== this.last) {
      process.stdout.write(`\n${'-'.repeat(100)}\n${text}\n`);
    }
    this.last = key;
  }

  say(line: string): void {
    if (!tty) process.stdout.write(`${bold(line)}\n`);
  }
}
