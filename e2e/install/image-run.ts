// JoinGuard's image run as the add-on's Deployment runs it, with podman (test-only). The container's settings are
// read from the rendered Deployment, not written here: its user and group, read-only root, dropped capabilities, no
// privilege escalation, memory limit, env (the downward API's namespace and name filled in), args, ports and mounts.
// A mount or an env source this file does not know how to supply fails the spec, so the Deployment cannot grow
// something the image was never started with.
//
// What a pod has and a podman container must be given: the ServiceAccount token (a TokenRequest token, its CA and
// namespace at the kubelet's path), the apiserver's Service (KUBERNETES_SERVICE_HOST names kubernetes.default.svc,
// which the apiserver's certificate carries, and which resolves to the host's loopback through slirp4netns), the
// webhook Secret's files, and ports published on 127.0.0.1 as a Service would reach them.
import { execFile, spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import type { K8sObject } from '../../manifests/render.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '..', '..');

/** podman's default runtime (crun) cannot set its rlimits on this machine kind: runc, with explicit ulimits. */
export const PODMAN_RUNTIME = ['--runtime', 'runc'];
export const ULIMITS = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024'];
/** The host's 127.0.0.1 as slirp4netns shows it inside the container (allow_host_loopback). */
const HOST_LOOPBACK = '10.0.2.2';
export const SERVICE_ACCOUNT_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';

type Json = Record<string, any>;

/** Rootful podman, as hack/image/build.sh builds with: through sudo where the user is not root (GitHub's runners). */
const PODMAN = process.getuid?.() === 0 ? ['podman'] : ['sudo', '-n', 'podman'];

export async function podman(args: string[], timeoutMs = 120_000): Promise<{ stdout: string; stderr: string }> {
  return run(PODMAN[0]!, [...PODMAN.slice(1), ...PODMAN_RUNTIME, ...args], {
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });
}

/**
 * The image under test, by its ID (a name can be moved by another build meanwhile): JOINGUARD_IMAGE (the ID .ci/run's
 * step built), else built now by hack/image/build.sh (cached bases and layers: about 20 s warm).
 */
export async function imageUnderTest(log: (line: string) => void): Promise<string> {
  const given = process.env['JOINGUARD_IMAGE'];
  if (given) return given;
  log('[image] JOINGUARD_IMAGE unset: building it with hack/image/build.sh');
  const name = await new Promise<string>((done, fail) => {
    const child = spawn('bash', [resolve(root, 'hack/image/build.sh')], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => log(d.toString().trimEnd()));
    child.on('error', fail);
    child.on('close', (code) =>
      code === 0
        ? done(out.trim().split('\n').pop()!)
        : fail(new Error(`hack/image/build.sh exited ${code} (podman, runc and debootstrap installed?)`)),
    );
  });
  return (await podman(['image', 'inspect', '--format', '{{.Id}}', name])).stdout.trim();
}

export interface PodOf {
  pod: Json;
  container: Json;
}

/** The Deployment's pod spec and its `manager` container. */
export function managerPod(objects: K8sObject[]): PodOf {
  const dep = objects.find((o) => o.kind === 'Deployment') as Json | undefined;
  if (!dep) throw new Error('the components have no Deployment');
  const pod = dep.spec.template.spec as Json;
  const container = (pod.containers as Json[]).find((c) => c.name === 'manager');
  if (!container) throw new Error('the Deployment has no container `manager`');
  return { pod, container };
}

export interface RunAs {
  name: string;
  /** The pod's name: its hostname, and the downward API's metadata.name. */
  podName: string;
  namespace: string;
  image: string;
  apiserverPort: number;
  /** Host folders: the ServiceAccount files (token, ca.crt, namespace) and the webhook Secret's (tls.crt, tls.key). */
  serviceAccountDir: string;
  webhookCertDir: string;
  /** containerPort -> host port on 127.0.0.1. */
  ports: Record<number, number>;
}

const MEMORY_UNITS: Record<string, number> = { Ki: 1 << 10, Mi: 1 << 20, Gi: 1 << 30 };
function bytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(q);
  if (!m) throw new Error(`quantity ${q}: not understood here`);
  return Number(m[1]) * (m[2] ? MEMORY_UNITS[m[2]]! : 1);
}

/** `podman run` arguments that start the image as the Deployment's pod would run it. */
export function runArguments(p: PodOf, o: RunAs): string[] {
  const { pod, container } = p;
  const psc = (pod.securityContext ?? {}) as Json;
  const csc = (container.securityContext ?? {}) as Json;
  const user = csc.runAsUser ?? psc.runAsUser;
  const group = csc.runAsGroup ?? psc.runAsGroup;
  if (user === undefined || group === undefined) throw new Error('the Deployment names no runAsUser/runAsGroup');
  const args = ['run', '--detach', '--name', o.name, '--hostname', o.podName, ...ULIMITS, '--user', `${user}:${group}`];
  if (csc.readOnlyRootFilesystem === true) args.push('--read-only', '--read-only-tmpfs=false');
  for (const cap of (csc.capabilities?.drop ?? []) as string[]) args.push('--cap-drop', cap);
  for (const cap of (csc.capabilities?.add ?? []) as string[]) args.push('--cap-add', cap);
  if (csc.allowPrivilegeEscalation === false) args.push('--security-opt', 'no-new-privileges');
  if (csc.privileged === true) throw new Error('a privileged container is not started here');
  const seccomp = csc.seccompProfile?.type ?? psc.seccompProfile?.type;
  if (seccomp !== undefined && seccomp !== 'RuntimeDefault') throw new Error(`seccomp ${seccomp}: not supplied here`);
  const memory = container.resources?.limits?.memory as string | undefined;
  if (memory) args.push('--memory', String(bytes(memory)));
  args.push('--stop-timeout', String(pod.terminationGracePeriodSeconds ?? 30));

  // The network: the container's own, as a pod's; the apiserver through its Service name; ports on the loopback.
  args.push(
    '--network',
    'slirp4netns:allow_host_loopback=true',
    '--add-host',
    `kubernetes.default.svc:${HOST_LOOPBACK}`,
  );
  for (const port of (container.ports ?? []) as Json[]) {
    const host = o.ports[port.containerPort as number];
    if (host === undefined) throw new Error(`container port ${port.name} (${port.containerPort}): no host port given`);
    args.push('--publish', `127.0.0.1:${host}:${port.containerPort}`);
  }

  const env: [string, string][] = [
    ['KUBERNETES_SERVICE_HOST', 'kubernetes.default.svc'],
    ['KUBERNETES_SERVICE_PORT', String(o.apiserverPort)],
  ];
  for (const e of (container.env ?? []) as Json[]) {
    if (typeof e.value === 'string') env.push([e.name, e.value]);
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env.push([e.name, o.namespace]);
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.name') env.push([e.name, o.podName]);
    else throw new Error(`env ${e.name}: its source is not supplied here (${JSON.stringify(e.valueFrom)})`);
  }
  for (const [k, v] of env) args.push('--env', `${k}=${v}`);

  if (pod.automountServiceAccountToken !== false)
    args.push('--volume', `${o.serviceAccountDir}:${SERVICE_ACCOUNT_PATH}:ro`);
  const volumes = new Map(((pod.volumes ?? []) as Json[]).map((v) => [v.name as string, v]));
  for (const m of (container.volumeMounts ?? []) as Json[]) {
    const v = volumes.get(m.name);
    if (v?.emptyDir) {
      const size = v.emptyDir.sizeLimit ? `,size=${bytes(v.emptyDir.sizeLimit)}` : '';
      args.push('--tmpfs', `${m.mountPath}:rw,mode=1777${size}`);
    } else if (v?.secret?.secretName === 'joinguard-webhook-service-cert') {
      args.push('--volume', `${o.webhookCertDir}:${m.mountPath}:ro`);
    } else throw new Error(`volume ${m.name} at ${m.mountPath}: not supplied here`);
  }
  args.push(o.image, ...((container.args ?? []) as string[]));
  return args;
}

/** The container's log so far (stdout and stderr). */
export async function logsOf(name: string): Promise<string> {
  const r = await podman(['logs', name]).catch((e: { stdout?: string; stderr?: string }) => e);
  return `${r.stdout ?? ''}${r.stderr ?? ''}`;
}

export async function stateOf(name: string): Promise<{ Status: string; ExitCode: number; Running: boolean }> {
  const { stdout } = await podman(['inspect', '--format', '{{json .State}}', name]);
  return JSON.parse(stdout) as { Status: string; ExitCode: number; Running: boolean };
}
