// The types of the command's flags (flag-table.ts lists them): the parsed Flags, and each flag's spec.
import type { LogFormat, VmoduleRule } from '../runtime/logger.js';

export interface Flags {
  kubeconfig?: string;
  namespace?: string;
  watchFilter?: string;
  syncPeriodMs: number;
  kubeApiQps: number;
  kubeApiBurst: number;
  leaderElect: boolean;
  leaderElectLeaseDurationMs: number;
  leaderElectRenewDeadlineMs: number;
  leaderElectRetryPeriodMs: number;
  leaderElectResourceName: string;
  concurrency: number;
  webhookPort: number;
  webhookCertDir: string;
  webhookCertName: string;
  webhookKeyName: string;
  tlsMinVersion: string;
  tlsCipherSuites: string[];
  tlsCurvePreferences: number[];
  diagnosticsAddress: string;
  insecureDiagnostics: boolean;
  healthAddr: string;
  profilerAddress: string;
  featureGates: Record<string, boolean>;
  loggingFormat: LogFormat;
  verbosity: number;
  vmodule: VmoduleRule[];
  logFlushFrequencyMs: number;
  logJsonSplitStream: boolean;
  logTextSplitStream: boolean;
  logJsonInfoBufferSize: string;
  logTextInfoBufferSize: string;
  workloadNodeCheck: boolean;
  allowMachineDelete: boolean;
  connectionGraceMs: number;
  help: boolean;
  version: boolean;
}

export type Kind =
  | 'string'
  | 'bool'
  | 'port'
  | 'count'
  | 'float'
  | 'duration'
  | 'list'
  | 'int32list'
  | 'gates'
  | 'vmodule'
  | 'quantity'
  | 'level';

export interface Spec {
  key: keyof Flags;
  kind: Kind;
  /** As `--help` prints it (pflag's style); '' prints no default. */
  def: string;
  help: string;
  /** Extra validation of the parsed value; returns a problem. */
  check?: (v: any) => string | undefined;
}
