// The CAPI release under a running controller can change (`clusterctl upgrade apply` replaces CAPI's CRDs and
// managers; a v1beta1-only v1.10 becomes a v1beta2 v1.11): the caches, the readers and the status writes were
// chosen for the release found at start. Discovery runs again every period (jittered); when what the controller
// chose from changes — the API version, the minor or exact release, whether the kubeadm providers are served — or
// CAPI is no longer there or no longer supported, `onChange` is told once and the controller restarts cleanly
// (manager.ts: workers finish, the Lease is handed back, the process exits for its Deployment to start it again;
// docs/decisions/capi-upgrade-rediscovered-and-restarted.md). An apiserver that does not answer is no change:
// discovery is asked again next period.
import type { Logger } from 'winston';
import type { CapiVersionInfo } from './discovery.js';
import { ApiError } from './rest.js';

/** Five minutes: a few small GETs (the schema only without clusterctl's inventory). */
export const DEFAULT_REDISCOVERY_MS = 5 * 60_000;

/** What changed between two discoveries, in words; undefined when nothing the controller chose from did. */
export function capiChange(was: CapiVersionInfo, now: CapiVersionInfo): string | undefined {
  const d: string[] = [];
  const release = (c: CapiVersionInfo) => c.version ?? (c.minor !== undefined ? `v1.${c.minor}` : 'unknown');
  if (was.apiVersion !== now.apiVersion) d.push(`API version ${was.apiVersion} -> ${now.apiVersion}`);
  if (
    was.minor !== now.minor ||
    (was.version !== undefined && now.version !== undefined && was.version !== now.version)
  )
    d.push(`release ${release(was)} -> ${release(now)}`);
  if (was.kubeadmControlPlane !== now.kubeadmControlPlane)
    d.push(`KubeadmControlPlane ${now.kubeadmControlPlane ? 'now' : 'no longer'} served`);
  if (was.kubeadmBootstrap !== now.kubeadmBootstrap)
    d.push(`KubeadmConfig ${now.kubeadmBootstrap ? 'now' : 'no longer'} served`);
  return d.length ? d.join(', ') : undefined;
}

export interface RediscoveryOptions {
  discover: () => Promise<CapiVersionInfo>;
  initial: CapiVersionInfo;
  periodMs: number;
  log: Logger;
  /** Called once, with what changed. */
  onChange: (why: string) => void;
  random?: () => number;
}

export class CapiRediscovery {
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private changed = false;

  constructor(private readonly o: RediscoveryOptions) {}

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped || this.changed) return;
    // ±10 %, so that replicas and controllers started together do not ask together.
    const jitter = 0.9 + 0.2 * (this.o.random ?? Math.random)();
    this.timer = setTimeout(() => void this.check(), Math.round(this.o.periodMs * jitter));
  }

  /** One discovery; exported for tests through `checkNow`. */
  async checkNow(): Promise<void> {
    await this.check(false);
  }

  private async check(reschedule = true): Promise<void> {
    let why: string | undefined;
    try {
      const now = await this.o.discover();
      why = capiChange(this.o.initial, now);
    } catch (e) {
      // Not answered (transport, 5xx, 403 ...): no evidence of a change. Discovery's own refusals (not installed,
      // unsupported, no schema) are: a restart then fails with the same clear error.
      if (e instanceof ApiError) this.o.log.warn('CAPI discovery failed; asking again next period', { err: e.message });
      else why = (e as Error).message;
    }
    if (this.stopped) return;
    if (why !== undefined && !this.changed) {
      this.changed = true;
      this.o.onChange(why);
      return;
    }
    if (reschedule) this.schedule();
  }
}
