// Reads CRD manifests and installs them, waiting until the apiserver serves them.
import fs from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { KubeClient } from './kube-client.js';
import { waitFor } from './wait.js';

type Json = Record<string, any>;

const CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';

/** Every CustomResourceDefinition in the .yaml files of dir, sorted by file name. */
export function readCrds(dir: string): Json[] {
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
    .sort();
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

function established(crd: Json): boolean {
  const conditions = (crd.status?.conditions ?? []) as Json[];
  const isTrue = (type: string) => conditions.some((c) => c.type === type && c.status === 'True');
  return isTrue('Established') && isTrue('NamesAccepted');
}

/** Installs the CRDs and waits until all are Established. */
export async function installCrds(rest: KubeClient, crds: Json[], timeoutMs = 30_000): Promise<void> {
  // A few at a time: the CAPI CRDs are large (up to 360 KB) and this machine has two cores.
  const queue = [...crds];
  const workers = Array.from({ length: 4 }, async () => {
    for (let crd = queue.shift(); crd; crd = queue.shift()) await rest.createOrReplace(CRD_PATH, crd);
  });
  await Promise.all(workers);
  const names = new Set(crds.map((c) => c.metadata.name as string));
  await waitFor(
    'CRDs established',
    async () => {
      const list = await rest.list(CRD_PATH);
      return list.items.filter((c) => names.has(c.metadata.name) && established(c)).length === names.size;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

/** Names of the CRDs in the list that are not Established (for tests and status). */
export async function notEstablished(rest: KubeClient, names: string[]): Promise<string[]> {
  const list = await rest.list(CRD_PATH);
  const ok = new Set(list.items.filter(established).map((c) => c.metadata.name as string));
  return names.filter((n) => !ok.has(n));
}
