// A fleet made once (issue 37, item 1): the fleet built through CAPI is saved as etcd's data folder, copied after a
// clean stop (etcd 3.6's binary has no snapshot command and build.sh builds no etcdutl; a copy restores by `cp`
// plus --force-new-cluster, measured in docs/decisions/bench-fleet-snapshot.md), and restored for every run.
// Kept under the joinguard cache (JOINGUARD_CACHE or ~/.cache/joinguard, as hack/testenv/build.sh's) at
// fleet/<key>/{etcd-data,fleet.json}; the key names what the saved objects depend on.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FleetShape } from './fleet.js';
import { REST_TIMEOUT_S } from './fleet-objects.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The files whose text makes the saved objects: a change of any of them makes a new key. */
export const FLEET_SOURCES = ['fleet-objects.ts', 'fleet.ts', 'crds.ts', 'fleet-cache.ts'].map((f) =>
  path.join(here, f),
);

export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.JOINGUARD_CACHE || path.join(os.homedir(), '.cache', 'joinguard');
}

/** A short hash of the sources' text (in the given order). */
export function sourcesHash(texts: string[]): string {
  const h = crypto.createHash('sha256');
  for (const t of texts) h.update(`${t.length}:`).update(t);
  return h.digest('hex').slice(0, 12);
}

/** `m<machines>-c<clusters>x<cp>-r<resting>-s<stuck>_capi-<version>_<hash>`: readable, and one folder per fleet. */
export function fleetKey(shape: FleetShape, capiVersion: string, hash: string): string {
  const sh = shape.shards.length ? `-${shape.shards.join('.')}` : '';
  return `m${shape.machines}-c${shape.clusters}x${shape.controlPlanePerCluster}-r${shape.resting}-s${shape.stuck}${sh}_capi-${capiVersion}_${hash}`;
}

export interface FleetMeta {
  key: string;
  /** When the fleet's objects were made (ms since the epoch): their creation and condition times. */
  builtAt: number;
  buildS: number;
  /** Bytes of the saved data folder. */
  bytes: number;
}

/**
 * A saved fleet is used while it is younger than half the resting pools' timeout: its Machines were created (and
 * their conditions set) when it was built, so a resting pool's clock runs from then, and a run of up to that other
 * half never sees a resting Machine due. Older: rebuilt (the age limit is 182 days with REST_TIMEOUT_S of 365).
 */
export function usable(meta: FleetMeta | undefined, key: string, now: number, restTimeoutS = REST_TIMEOUT_S): boolean {
  return Boolean(meta && meta.key === key && now >= meta.builtAt && now - meta.builtAt < (restTimeoutS * 1000) / 2);
}

export interface FleetCache {
  dir: string;
  dataDir: string;
  metaFile: string;
}

export function fleetCache(key: string, root = cacheRoot()): FleetCache {
  const dir = path.join(root, 'fleet', key);
  return { dir, dataDir: path.join(dir, 'etcd-data'), metaFile: path.join(dir, 'fleet.json') };
}

export function readMeta(c: FleetCache): FleetMeta | undefined {
  try {
    if (!fs.existsSync(c.dataDir)) return undefined;
    return JSON.parse(fs.readFileSync(c.metaFile, 'utf8')) as FleetMeta;
  } catch {
    return undefined;
  }
}

export function dirBytes(dir: string): number {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (e.isFile()) n += fs.statSync(path.join(e.parentPath, e.name)).size;
  return n;
}

/** A folder beside the final one to build into; renamed into place by save (a cut-short build leaves no fleet). */
export function stagingDir(c: FleetCache): string {
  fs.mkdirSync(path.dirname(c.dir), { recursive: true });
  return fs.mkdtempSync(`${c.dir}.building-`);
}

/** Moves a cleanly stopped etcd's data folder (in staging) into the cache, with its meta. */
export function save(c: FleetCache, staging: string, meta: Omit<FleetMeta, 'bytes'>): FleetMeta {
  const full: FleetMeta = { ...meta, bytes: dirBytes(path.join(staging, 'etcd-data')) };
  fs.writeFileSync(path.join(staging, 'fleet.json'), `${JSON.stringify(full, null, 1)}\n`);
  fs.rmSync(c.dir, { recursive: true, force: true });
  fs.renameSync(staging, c.dir);
  return full;
}

/** A private copy of the saved data for one run (etcd writes to it). */
export function restoreCopy(c: FleetCache, into: string): void {
  fs.rmSync(into, { recursive: true, force: true });
  fs.cpSync(c.dataDir, into, { recursive: true });
  fs.chmodSync(into, 0o700);
}

/**
 * When each stuck Machine of a phase is flipped provisioned (its infrastructure ready: the clocks of JoinGuard
 * and the MHC start there, through CAPI): n Machines over `spreadMs` from `start`, evenly, the first at start.
 * The Machines are in the saved fleet, not provisioned; the run only writes their BenchMachine's status.
 */
export function flipSchedule(n: number, start: number, spreadMs: number): number[] {
  if (n <= 0) return [];
  if (n === 1 || spreadMs <= 0) return Array.from({ length: n }, () => start);
  return Array.from({ length: n }, (_, i) => start + Math.round((i * spreadMs) / (n - 1)));
}
