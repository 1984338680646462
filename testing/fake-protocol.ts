// The request side of the in-memory apiserver (fake-apiserver.ts): the kinds it serves, how a path names one, and
// the small pieces of the API's protocol it speaks (label selectors, merge and JSON patches, Status bodies).
import type { IncomingMessage } from 'node:http';

export type Json = Record<string, any>;

export interface Kind {
  group: string;
  version: string;
  plural: string;
  kind: string;
}

export const KINDS: Kind[] = [
  { group: 'joinguard.io', version: 'v1alpha1', plural: 'machinejoinchecks', kind: 'MachineJoinCheck' },
  ...['Machine', 'Cluster', 'MachineHealthCheck', 'MachineSet', 'MachineDeployment'].map((kind) => ({
    group: 'cluster.x-k8s.io',
    version: 'v1beta2',
    plural: `${kind.toLowerCase()}s`,
    kind,
  })),
  {
    group: 'controlplane.cluster.x-k8s.io',
    version: 'v1beta2',
    plural: 'kubeadmcontrolplanes',
    kind: 'KubeadmControlPlane',
  },
  { group: 'bootstrap.cluster.x-k8s.io', version: 'v1beta2', plural: 'kubeadmconfigs', kind: 'KubeadmConfig' },
  { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease' },
  { group: 'clusterctl.cluster.x-k8s.io', version: 'v1alpha3', plural: 'providers', kind: 'Provider' },
  { group: '', version: 'v1', plural: 'events', kind: 'Event' },
  { group: '', version: 'v1', plural: 'secrets', kind: 'Secret' },
];

export interface Route {
  kind?: Kind;
  namespace?: string;
  name?: string;
  sub?: string;
  discovery?: Json;
}

export function parse(pathname: string): Route {
  const parts = pathname.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'apis' && parts.length === 1)
    return {
      discovery: {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [...new Set(KINDS.filter((k) => k.group).map((k) => k.group))].map(groupOf),
      },
    };
  if (parts[0] === 'apis' && parts.length === 2)
    return KINDS.some((k) => k.group === parts[1]) ? { discovery: groupOf(parts[1]!) } : {};
  if (parts[0] === 'version') return { discovery: { major: '1', minor: '36', gitVersion: 'v1.36.3' } };
  const [group, rest] = parts[0] === 'api' ? ['', parts.slice(2)] : [parts[1] ?? '', parts.slice(3)];
  let namespace: string | undefined;
  let i = 0;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    i = 2;
  }
  const kind = KINDS.find((k) => k.group === group && k.plural === rest[i]);
  return {
    ...(kind ? { kind } : {}),
    ...(namespace !== undefined ? { namespace } : {}),
    ...(rest[i + 1] !== undefined ? { name: rest[i + 1] } : {}),
    ...(rest[i + 2] !== undefined ? { sub: rest[i + 2] } : {}),
  };
}

function groupOf(group: string): Json {
  const version = KINDS.find((k) => k.group === group)!.version;
  return {
    kind: 'APIGroup',
    apiVersion: 'v1',
    name: group,
    versions: [{ groupVersion: `${group}/${version}`, version }],
    preferredVersion: { groupVersion: `${group}/${version}`, version },
  };
}

export function verbOf(method: string, name: string | undefined): string {
  switch (method) {
    case 'GET':
      return name === undefined ? 'list' : 'get';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
  }
  return method.toLowerCase();
}

export const status = (code: number, reason: string, message: string): Json => ({
  kind: 'Status',
  apiVersion: 'v1',
  status: code < 300 ? 'Success' : 'Failure',
  code,
  reason,
  message,
});

/** Equality, inequality and existence requirements, comma-separated (what JoinGuard's informers send). */
export function selector(s: string | null): (o: Json) => boolean {
  if (!s) return () => true;
  const reqs = s.split(',').map((r) => {
    const m = /^(!?)([^=!]+?)(?:(!=|==|=)(.*))?$/.exec(r.trim())!;
    return { not: m[1] === '!', key: m[2]!, op: m[3], value: m[4] };
  });
  return (o) =>
    reqs.every((q) => {
      const v = o.metadata?.labels?.[q.key];
      if (q.op === undefined) return q.not ? v === undefined : v !== undefined;
      return q.op === '!=' ? v !== q.value : v === q.value;
    });
}

/** RFC 7386. */
export function mergePatch(target: Json, patch: Json): Json {
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete target[k];
    else if (
      typeof v === 'object' &&
      !Array.isArray(v) &&
      typeof target[k] === 'object' &&
      target[k] !== null &&
      !Array.isArray(target[k])
    )
      target[k] = mergePatch(target[k], v);
    else target[k] = structuredClone(v);
  }
  return target;
}

/** RFC 6902 for test/add/replace/remove; undefined when a test fails. */
export function jsonPatch(target: Json, ops: Json[]): Json | undefined {
  for (const op of ops) {
    const keys = String(op.path)
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = keys.pop()!;
    let parent: Json = target;
    for (const k of keys) parent = parent[k] ??= {};
    if (op.op === 'test' && JSON.stringify(parent[last]) !== JSON.stringify(op.value)) return undefined;
    if (op.op === 'remove') delete parent[last];
    if (op.op === 'add' || op.op === 'replace') parent[last] = op.value;
  }
  return target;
}

export function readBody(req: IncomingMessage): Promise<Json | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        resolve(text ? (JSON.parse(text) as Json) : undefined);
      } catch {
        resolve(undefined);
      }
    });
  });
}
