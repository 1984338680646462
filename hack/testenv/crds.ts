// Reads CRD manifests and installs them, waiting until the apiserver serves them.
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { KubeRest, poll } from './kube-rest.js';

type Json = Record<string, any>;

const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

/** Every CustomResourceDefinition in the .yaml files of dir, sorted by file name. */
export function readCrds(dir: string): Json[] {
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.yaml') || f.endsWith('.yml')).sort();
  const crds: Json[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(fs.readFileSync(path.join(dir, file), 'utf8'))) {
      const obj = doc.toJS() as Json | null;
      if (obj?.kind === 'CustomResourceDefinition') crds.push(obj);
    }
  }
  if (crds.length === 0) throw new Error(`no CRDs found in ${dir}`);
  return crds;
}

/** Creates an object, or replaces it when it already exists (a reused etcd, or a second install). */
export async function createOrReplace(rest: KubeRest, collectionPath: string, obj: Json): Promise<void> {
  const created = await rest.post(collectionPath, obj);
  if (created.status === 201 || created.status === 200) return;
  if (created.status !== 409) throw new Error(`create ${obj.kind} ${obj.metadata?.name}: ${created.status} ${created.body.slice(0, 800)}`);
  const itemPath = `${collectionPath}/${obj.metadata.name}`;
  const current = JSON.parse((await rest.get(itemPath)).body) as Json;
  const replaced = await rest.request('PUT', itemPath, { ...obj, metadata: { ...obj.metadata, resourceVersion: current.metadata?.resourceVersion } });
  if (replaced.status !== 200) throw new Error(`replace ${obj.kind} ${obj.metadata?.name}: ${replaced.status} ${replaced.body.slice(0, 800)}`);
}

function established(crd: Json): boolean {
  const conditions = (crd.status?.conditions ?? []) as Json[];
  const isTrue = (type: string) => conditions.some((c) => c.type === type && c.status === 'True');
  return isTrue('Established') && isTrue('NamesAccepted');
}

/** Installs the CRDs and waits until all are Established. */
export async function installCrds(rest: KubeRest, crds: Json[], timeoutMs = 30_000): Promise<void> {
  // A few at a time: the CAPI CRDs are large (up to 360 KB) and this machine has two cores.
  const queue = [...crds];
  const workers = Array.from({ length: 4 }, async () => {
    for (let crd = queue.shift(); crd; crd = queue.shift()) await createOrReplace(rest, CRD_PATH, crd);
  });
  await Promise.all(workers);
  const names = new Set(crds.map((c) => c.metadata.name as string));
  await poll('CRDs established', timeoutMs, async () => {
    const list = await rest.getJson<{ items: Json[] }>(CRD_PATH);
    const ready = list.items.filter((c) => names.has(c.metadata.name) && established(c)).length;
    return ready === names.size ? true : undefined;
  }, undefined, 200);
}

/** Names of the CRDs in the list that are not Established (for tests and status). */
export async function notEstablished(rest: KubeRest, names: string[]): Promise<string[]> {
  const list = await rest.getJson<{ items: Json[] }>(CRD_PATH);
  const ok = new Set(list.items.filter(established).map((c) => c.metadata.name as string));
  return names.filter((n) => !ok.has(n));
}
