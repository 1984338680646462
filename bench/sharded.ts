// Phase `sharded`: JoinGuard as two shards over the one fleet, whose Clusters are split in halves, each half's objects
// labelled cluster.x-k8s.io/watch-filter=<shard> where docs/install.md says (the Cluster, its checks, the MachineSets'
// templates, so the Machines). One process per shard, each with --watch-filter, its own Lease and its own client
// identity, so that the audit log attributes every request to one shard (bench/audit.ts ShardAuditor). Per shard:
// detection over its own stuck Machines; who wrote them (every stuck Machine must be written by the shard owning its
// Cluster and by no other); its requests, and any outside its shard.
import type { ShardAuditor, ShardAudit } from './audit.js';
import { SHARDS, shardOfName, type ClusterTimes } from './fleet.js';
import { detection, type SideDetection } from './latency.js';
import type { Context } from './phase-kit.js';
import type { MachineRecord } from './watch.js';

/** A shard's client identity (its own certificate): the audit log attributes each request to one shard. */
export const shardUser = (shard: string) => `joinguard-${shard}`;
export const SHARD_USERS = SHARDS.map(shardUser);

export interface ShardFigures {
  name: string;
  user: string;
  lease: string;
  clusters: number;
  detection: SideDetection;
  /** Stuck Machines of this shard written (marked) by the other shard's process (from the audit log). */
  markedByOtherShard?: string[];
  /** Stuck Machines this shard wrote, per the audit log (its own and, if any, the other's). */
  markedByThisShard?: number;
  audit?: ShardAudit;
  /** Per stuck Machine of the shard: the shards that wrote it. */
  writers?: Record<string, string[]>;
}

export function shardDetection(
  ctx: Context,
  records: MachineRecord[],
  clusters: Map<string, ClusterTimes>,
  timeoutMs: number,
  windowEnd: number,
): ShardFigures[] {
  return SHARDS.map((name) => ({
    name,
    user: shardUser(name),
    lease: `joinguard-leader-${name}`,
    clusters: ctx.clusters.filter((c) => shardOfName(ctx.shape, c) === name).length,
    detection: detection(
      'joinguard',
      records.filter((r) => shardOfName(ctx.shape, r.name) === name),
      clusters,
      timeoutMs,
      windowEnd,
    ),
  }));
}

/** After the audit log is read: who wrote each stuck Machine, and each shard's requests. */
export function shardAudit(
  shards: ShardFigures[],
  stuckNames: string[],
  auditor: Pick<ShardAuditor, 'shards' | 'machineWriters'>,
  ownerOf: (name: string) => string | undefined,
): void {
  for (const s of shards) {
    const mine = stuckNames.filter((n) => ownerOf(n) === s.name);
    const writers = (n: string) => auditor.machineWriters[n] ?? [];
    s.markedByOtherShard = mine.filter((n) => writers(n).some((w) => w !== s.name));
    s.markedByThisShard = stuckNames.filter((n) => writers(n).includes(s.name)).length;
    s.audit = auditor.shards[s.name];
    s.writers = Object.fromEntries(mine.map((n) => [n, writers(n)]));
  }
}
