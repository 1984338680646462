// The ONE place the running CAPI is found (the controller at start, the webhook at admission):
// - the API version from API discovery: v1beta2 whenever it is served (owners on v1.11+ read only v1beta2
//   conditions), else v1beta1;
// - the minor from clusterctl's provider inventory when CAPI was installed with clusterctl (the exact
//   release: Provider `cluster-api`, type CoreProvider), else from the schema the apiserver publishes for
//   CAPI's kinds (OpenAPI v3, readable by every authenticated user): the newest release whose field is in
//   it, checked against the CRDs of v1.8.4 ... v1.14.2 (a lower bound, which is what a feature gate needs);
// - CAPI below v1.9 is refused: v1.8 has no signal for a lost workload connection (DESIGN, CAPI versions).
import type { CapiApiVersion } from '../../api/capi/model.js';
import { ApiError, isNotFound, type Json, type RestClient } from './rest.js';

export type { CapiApiVersion };

export interface CapiVersionInfo {
  apiVersion: CapiApiVersion;
  /** Served versions of cluster.x-k8s.io. */
  served: string[];
  /** The CAPI minor (v1.<minor>); from the schema, the lowest release that has what is served. */
  minor?: number;
  /** The exact release (`v1.14.2`), when the clusterctl inventory says it. */
  version?: string;
  /** Where the minor came from, for the log line and status messages. */
  source: string;
  /** Whether KubeadmControlPlane / KubeadmConfig are served (kubeadm providers installed). */
  kubeadmControlPlane: boolean;
  kubeadmBootstrap: boolean;
}

/** The oldest CAPI JoinGuard runs against. */
export const MIN_CAPI_MINOR = 9;

/**
 * Fields that first appear in a release's CRDs (checked in each release's config/crd/bases, v1.8.4 to
 * v1.14.2: every marker is absent before its release and present in each one after). Newest first.
 */
export const SCHEMA_MARKERS: { minor: number; version: CapiApiVersion; kind: string; path: string }[] = [
  { minor: 14, version: 'v1beta2', kind: 'Machine', path: 'status.deletion.waitForPreDrainHookStartTime' },
  { minor: 13, version: 'v1beta2', kind: 'Machine', path: 'status.failureDomain' },
  // The field the MachineCondition strategy needs.
  { minor: 12, version: 'v1beta2', kind: 'MachineHealthCheck', path: 'spec.checks.unhealthyMachineConditions' },
  { minor: 11, version: 'v1beta2', kind: 'Machine', path: 'status' },
  { minor: 10, version: 'v1beta1', kind: 'Machine', path: 'spec.readinessGates[].polarity' },
  { minor: 9, version: 'v1beta1', kind: 'Machine', path: 'status.v1beta2' },
];

const CAPI = 'cluster.x-k8s.io';
const INVENTORY = '/apis/clusterctl.cluster.x-k8s.io/v1alpha3/providers';

export async function discoverCapi(rest: RestClient): Promise<CapiVersionInfo> {
  const served = await servedVersions(rest, CAPI);
  if (served.length === 0) throw new Error(`CAPI is not installed: the API group ${CAPI} is not served`);
  // The newest version served.
  const apiVersion = (['v1beta2', 'v1beta1'] as const).find((v) => served.includes(v));
  if (!apiVersion) throw unsupported(`${CAPI} serves ${served.join(', ')} only (no v1beta1)`);

  const found = (await fromInventory(rest)) ?? (await fromSchema(rest, apiVersion));
  if (found.minor < MIN_CAPI_MINOR)
    throw unsupported(
      `found v1.${found.minor}${found.version ? ` (${found.version})` : ' or older'} from ${found.source}`,
    );
  const kubeadm = await Promise.all(
    ['controlplane.cluster.x-k8s.io', 'bootstrap.cluster.x-k8s.io'].map(async (g) =>
      (await servedVersions(rest, g)).includes(apiVersion),
    ),
  );
  return {
    apiVersion,
    served,
    minor: found.minor,
    ...(found.version ? { version: found.version } : {}),
    source: found.source,
    kubeadmControlPlane: kubeadm[0]!,
    kubeadmBootstrap: kubeadm[1]!,
  };
}

function unsupported(what: string): Error {
  return new Error(
    `unsupported CAPI: ${what}. JoinGuard supports CAPI v1.${MIN_CAPI_MINOR} ` +
      `and later: v1.8 and older set no condition when the ` +
      ('workload cluster cannot be reached, so JoinGuard could not ' +
        'tell a lost connection from a Machine that never joined'),
  );
}

async function servedVersions(rest: RestClient, group: string): Promise<string[]> {
  try {
    const g = await rest.get(`/apis/${group}`);
    return ((g.versions ?? []) as { version: string }[]).map((v) => v.version);
  } catch (e) {
    if (isNotFound(e)) return [];
    throw e;
  }
}

interface Found {
  minor: number;
  version?: string;
  source: string;
}

/**
 * clusterctl's inventory: present when CAPI was installed (and upgraded) with clusterctl; not readable is not an error.
 */
async function fromInventory(rest: RestClient): Promise<Found | undefined> {
  let list: Json;
  try {
    list = await rest.get(INVENTORY);
  } catch (e) {
    if (e instanceof ApiError && (e.code === 404 || e.code === 403)) return undefined;
    throw e;
  }
  const core = ((list.items ?? []) as Json[]).find(
    (p) => p.type === 'CoreProvider' && p.providerName === 'cluster-api',
  );
  const m = typeof core?.version === 'string' ? /^v?1\.(\d+)\.\d+/.exec(core.version) : null;
  if (!core || !m) return undefined;
  return {
    minor: Number(m[1]),
    version: core.version,
    source: `clusterctl inventory (Provider ${core.metadata?.namespace}/${core.metadata?.name})`,
  };
}

/** The published schema of CAPI's kinds in the API version in use, against SCHEMA_MARKERS. */
async function fromSchema(rest: RestClient, apiVersion: CapiApiVersion): Promise<Found> {
  const doc = await openApi(rest, `/openapi/v3/apis/${CAPI}/${apiVersion}`);
  const schemas = (doc.components?.schemas ?? {}) as Record<string, Json>;
  const source = `the ${CAPI}/${apiVersion} schema (OpenAPI v3)`;
  for (const mk of SCHEMA_MARKERS) {
    if (mk.version !== apiVersion) continue;
    const root = schemas[`io.x-k8s.cluster.${apiVersion}.${mk.kind}`];
    if (!root) throw new Error(`${source} has no ${mk.kind}: cannot tell the CAPI release`);
    if (hasPath(root, mk.path, schemas))
      return { minor: mk.minor, source: `${source}: ${mk.kind} ${mk.path} (v1.${mk.minor}+)` };
  }
  return { minor: 8, source: `${source}: Machine has no status.v1beta2 (added in v1.9)` };
}

/**
 * The apiserver publishes a CRD's schema a little after it serves the group (seen: a 404 for ~1 s after the CRDs
 * were created): a 404 is asked again for 30 s before it is an error.
 */
async function openApi(rest: RestClient, path: string, waitMs = 30_000): Promise<Json> {
  const end = Date.now() + waitMs;
  for (;;) {
    try {
      return await rest.get(path, undefined, { timeoutMs: 60_000 });
    } catch (e) {
      if (!isNotFound(e)) throw e;
      if (Date.now() >= end)
        throw new Error(
          `the apiserver serves ${CAPI} but publishes no OpenAPI v3 ` +
            `schema at ${path} (asked for ${waitMs / 1000} s): cannot ` +
            `tell the CAPI release`,
        );
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** `a.b[].c` through properties, items and $ref/allOf. */
export function hasPath(schema: Json, path: string, schemas: Record<string, Json>): boolean {
  let s: Json | undefined = schema;
  for (const part of path.replace(/\[\]/g, '.[]').split('.')) {
    s = deref(s, schemas);
    s = part === '[]' ? s?.items : s?.properties?.[part];
    if (!s) return false;
  }
  return true;
}

function deref(s: Json | undefined, schemas: Record<string, Json>): Json | undefined {
  for (let i = 0; s && i < 8; i++) {
    const ref: unknown = s.$ref ?? (Array.isArray(s.allOf) && s.allOf.length === 1 ? s.allOf[0]?.$ref : undefined);
    if (typeof ref !== 'string') return s;
    s = schemas[ref.replace('#/components/schemas/', '')];
  }
  return s;
}
