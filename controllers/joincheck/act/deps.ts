// The executor's dependencies as one type; each part of the executor takes the view of it that it needs (a Pick),
// so a dependency is declared once and a part cannot reach what it was not given.
import type { Logger } from 'winston';
import type { CapiApiVersion } from '../../../api/capi/model.js';
import type { Json, RestClient } from '../../../runtime/client/rest.js';
import type { PlannedEvent } from '../types.js';
import type { Refusals } from './refusals.js';

export interface ExecutorDeps {
  rest: RestClient;
  apiVersion: CapiApiVersion;
  log: Logger;
  writeMetric: (kind: string, result: 'ok' | 'conflict' | 'gone' | 'error' | 'forbidden') => void;
  /** Fresher objects read or written go back into the caches. */
  remember: (kind: 'check' | 'machine' | 'cluster', raw: Json) => void;
  now: () => number;
  emit: (e: PlannedEvent, check: Json) => void;
  /** When this process last wrote the check's status (epoch ms), for coalescing count-only changes. */
  lastStatusWrite?: number;
  /** The check's Machines whose writes are refused, kept across reconciles (back-off); a fresh one when absent. */
  refusals?: Refusals;
  /** Machine writes of one pass in flight at once, at most (executor.ts MACHINE_WRITES_AT_ONCE when absent). */
  machineWritesAtOnce?: number;
}

/** What the live reads need (live-reads.ts). */
export type LiveReadDeps = Pick<ExecutorDeps, 'rest' | 'apiVersion' | 'log' | 'writeMetric' | 'remember'>;

/** What a Machine write needs (machine-writes.ts). */
export type WriteDeps = Pick<ExecutorDeps, keyof LiveReadDeps | 'now'>;

/** What converging one Machine needs (machine-converge.ts): its writes, its live reads, its events. */
export type ConvergeDeps = Pick<ExecutorDeps, keyof WriteDeps | 'emit'>;
