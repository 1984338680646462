// The Machines of one snapshot (cache.ts): the planned ones from the cache, each replaced by its live read where the
// executor read it (null: read as gone), and Machines only the live reads know of; a Machine that cannot be read
// is reported, never planned on.
import { readMachine } from '../../../api/capi/readers.js';
import type { CapiApiVersion, MachineFacts } from '../../../api/capi/model.js';
import type { Json } from '../../../runtime/client/rest.js';

type MachineEntry = { facts: MachineFacts; malformed?: undefined } | { facts?: undefined; malformed: Problem };
type Problem = { name: string; uid?: string; error: string };

export function snapshotMachines(
  planned: readonly string[],
  src: { get(key: string): MachineEntry | undefined; keyOf(uid: string): string | undefined },
  live: ReadonlyMap<string, Json | null>,
  inCluster: (l: Json) => boolean,
  v: CapiApiVersion,
  problems: Problem[],
): { machines: MachineFacts[]; included: string[] } {
  const machines: MachineFacts[] = [];
  const seen = new Set<string>();
  const included: string[] = [];
  for (const k of planned) {
    const e = src.get(k);
    if (e === undefined) continue;
    if (e.malformed) {
      problems.push(e.malformed);
      continue;
    }
    const uid = e.facts.uid;
    seen.add(uid);
    const l = live.get(uid);
    if (l === null) continue; // read live as gone
    included.push(k);
    if (l === undefined) {
      machines.push(e.facts);
      continue;
    }
    try {
      machines.push(readMachine(l, v));
    } catch (err) {
      problems.push({ name: e.facts.name, uid, error: (err as Error).message });
    }
  }
  for (const [uid, l] of live) {
    if (seen.has(uid) || l === null || !inCluster(l)) continue;
    const k = src.keyOf(uid);
    if (k !== undefined) included.push(k);
    try {
      machines.push(readMachine(l, v));
    } catch (err) {
      problems.push({ name: String(l.metadata?.name), uid, error: (err as Error).message });
    }
  }
  return { machines, included };
}
