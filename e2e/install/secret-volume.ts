// The kubelet's part of a Secret volume, for the webhook server the install tests run as a process instead of a pod:
// the Secret's keys become files in the mount folder, laid out as the kubelet lays them out (each key a symlink
// into `..data`, `..data` a symlink to a timestamped folder) and replaced by an atomic swap of `..data` whenever
// the Secret changes. JoinGuard's certificate watcher (runtime/serving/tls.ts) then meets cert-manager's rotation exactly as
// in its pod. The kubelet syncs a changed Secret within about a minute; this polls every pollMs.
import { mkdir, readdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { KubeClient } from '../../hack/testenv/kube-client.js';

type Json = Record<string, any>;

export interface SecretVolume {
  /** The mount folder (what the container sees at its mountPath). */
  dir: string;
  /** resourceVersions of the Secret written so far, oldest first. */
  written: string[];
  stop(): Promise<void>;
}

const readSecret = (kube: KubeClient, namespace: string, name: string) =>
  kube.get(`/api/v1/namespaces/${namespace}/secrets/${name}`);

/** Writes one version of the Secret and swaps `..data` to it (the kubelet's AtomicWriter order). */
async function project(dir: string, secret: Json): Promise<void> {
  const data = (secret.data ?? {}) as Record<string, string>;
  const version = `..${new Date().toISOString().replace(/[:.]/g, '_')}_${secret.metadata.resourceVersion}`;
  await mkdir(join(dir, version), { mode: 0o755 });
  for (const [key, b64] of Object.entries(data))
    await writeFile(join(dir, version, key), Buffer.from(b64, 'base64'), { mode: 0o644 });
  await rm(join(dir, '..data_tmp'), { force: true });
  await symlink(version, join(dir, '..data_tmp'));
  await rename(join(dir, '..data_tmp'), join(dir, '..data'));
  for (const key of Object.keys(data)) await symlink(join('..data', key), join(dir, key)).catch(() => undefined);
  for (const entry of await readdir(dir))
    if (entry.startsWith('..') && entry !== version && entry !== '..data')
      await rm(join(dir, entry), { recursive: true, force: true });
}

/**
 * Mounts Secret namespace/name at dir once it exists with every key in `keys` (a pod whose Secret volume is not
 * there yet does not start either), then follows its changes until stop().
 */
export async function mountSecret(
  kube: KubeClient,
  namespace: string,
  name: string,
  dir: string,
  opts: { keys?: string[]; timeoutMs?: number; pollMs?: number } = {},
): Promise<SecretVolume> {
  const keys = opts.keys ?? ['tls.crt', 'tls.key'];
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  let secret: Json | undefined;
  for (;;) {
    secret = await readSecret(kube, namespace, name);
    if (secret && keys.every((k) => secret!.data?.[k])) break;
    if (Date.now() > deadline)
      throw new Error(
        `Secret ${namespace}/${name} with ${keys.join(', ')} not there after ${opts.timeoutMs ?? 60_000} ms`,
      );
    await new Promise((r) => setTimeout(r, 250));
  }
  await mkdir(dir, { recursive: true });
  await project(dir, secret);
  const written = [secret.metadata.resourceVersion as string];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 500));
      if (stopped) break;
      // A failed read (apiserver busy) is retried on the next poll, as the kubelet would.
      const next = await readSecret(kube, namespace, name).catch(() => undefined);
      if (!next || next.metadata.resourceVersion === written.at(-1)) continue;
      await project(dir, next);
      written.push(next.metadata.resourceVersion as string);
    }
  })();
  return {
    dir,
    written,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
