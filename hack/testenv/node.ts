// A real node for the local test control plane (test-only): containerd with Debian's runc, a kubelet registered
// with the test apiserver, kube-proxy, and the control plane's kube-controller-manager and kube-scheduler, all built
// by hack/testenv/node/build.sh from the apiserver's Kubernetes version. Started only by the specs that need it and
// stopped by them; every server binds 127.0.0.1, and the pods live on a bridge of the node's own from which nothing
// is forwarded off the machine. The settings that make it run on this machine kind (cgroup v1, no CAP_SYS_RESOURCE)
// are in docs/decisions/kubelet-on-this-machine.md; each is commented where it is set. Needs root.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import type { TestEnv } from './env-interface.js';
import { track, untrack } from './cleanup.js';
import { freePorts } from './ports.js';
import { ManagedProcess, tailFile } from './process.js';
import { waitFor } from './wait.js';

const run = promisify(execFile);
const here = path.dirname(fileURLToPath(import.meta.url));
/** The sandbox image node/build.sh makes (registry.k8s.io/pause cannot be pulled here). */
export const PAUSE_IMAGE = 'localhost/joinguard/pause:test';
/** The label of a node with a kubelet behind it: the scheduler places pods on such nodes only. */
export const REAL_NODE_LABEL = 'node.joinguard.io/real';
/** The CRI's namespace in containerd: images the kubelet runs must be imported there. */
const CRI_NAMESPACE = 'k8s.io';

/** Runs hack/testenv/node/build.sh (a no-op when built) and returns the bin folder it prints last. */
export async function ensureNodeBuilt(log: (line: string) => void): Promise<string> {
  const child = execFile('/bin/bash', [path.join(here, 'node', 'build.sh')], { maxBuffer: 16 << 20 });
  child.stderr?.on('data', (d: Buffer) => {
    for (const line of d.toString().split('\n')) if (line && !line.endsWith(': cached')) log(line);
  });
  const stdout = await new Promise<string>((done, fail) => {
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', fail);
    child.on('close', (code) =>
      code === 0 ? done(out) : fail(new Error(`hack/testenv/node/build.sh exited ${code}`)),
    );
  });
  const bin = stdout.trim().split('\n').at(-1) ?? '';
  if (!fs.existsSync(path.join(bin, 'kubelet'))) throw new Error(`node/build.sh printed no bin folder (got "${bin}")`);
  return bin;
}

export interface TestNode {
  /** The Node's name. */
  name: string;
  binDir: string;
  runDir: string;
  /**
   * Imports an image archive (OCI or docker) into the CRI's image store under `name`, where the kubelet finds it
   * (`imagePullPolicy: IfNotPresent` then pulls nothing). An archive saved by image ID names no image: it is
   * imported by digest and tagged.
   */
  importImage(archive: string, name: string): Promise<void>;
  /** `ctr -n k8s.io <args>` against this node's containerd. */
  ctr(args: string[]): Promise<string>;
  /** The last lines of a component's log: containerd, kubelet, kube-controller-manager, kube-scheduler. */
  logTail(component: string, lines?: number): string;
  /** Stops the kubelet, every container it started, containerd and the controllers; unmounts what they mounted. */
  stop(): Promise<void>;
}

export interface NodeOptions {
  env: TestEnv;
  log: (line: string) => void;
  /** Default `node-<pid>`. */
  name?: string;
  /** Default: node/build.sh's folder (built if missing). */
  binDir?: string;
  /** Start kube-controller-manager and kube-scheduler beside the node (default true: one set per control plane). */
  controllers?: boolean;
}

/** Mount points under `dir` (deepest first), from this process's mount table. */
function mountsUnder(dir: string): string[] {
  const table = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const points = table.map((l) => l.split(' ')[4] ?? '').filter((p) => p === dir || p.startsWith(`${dir}/`));
  return points.sort((a, b) => b.length - a.length);
}

/** The ClusterIP of `default/kubernetes`: the first address of the test apiserver's service range (apiserver.ts). */
const KUBERNETES_SERVICE_IP = '10.0.0.1';

/**
 * The node's bridge and the host rules that go with it, all named after the bridge so that down() removes exactly
 * what up() added. The /24 is picked from this process's pid (10.244.<pid % 250>.0/24): one node per test process.
 */
function podNetwork(node: string, apiserverPort: string) {
  const n = process.pid % 250;
  const bridge = `jg${process.pid}`.slice(0, 15);
  const gateway = `10.244.${n}.1`;
  const rules: string[][] = [
    [
      '-t',
      'nat',
      'PREROUTING',
      '-i',
      bridge,
      '-d',
      `${KUBERNETES_SERVICE_IP}/32`,
      '-p',
      'tcp',
      '--dport',
      '443',
      '-j',
      'DNAT',
      '--to-destination',
      `127.0.0.1:${apiserverPort}`,
    ],
    ['-t', 'filter', 'FORWARD', '-i', bridge, '-j', 'DROP'],
    ['-t', 'filter', 'FORWARD', '-o', bridge, '-j', 'DROP'],
  ];
  const iptables = (op: '-I' | '-D', r: string[]) =>
    run('iptables', ['-w', r[0]!, r[1]!, op, ...r.slice(2), '-m', 'comment', '--comment', `joinguard ${node}`]);
  return {
    bridge,
    gateway,
    subnet: `10.244.${n}.0/24`,
    async up() {
      await run('ip', ['link', 'add', bridge, 'type', 'bridge']);
      await run('ip', ['addr', 'add', `${gateway}/24`, 'dev', bridge]);
      await run('ip', ['link', 'set', bridge, 'up']);
      await run('sysctl', ['-q', '-w', `net.ipv4.conf.${bridge}.route_localnet=1`]);
      for (const r of rules) await iptables('-I', r);
    },
    async down() {
      for (const r of rules) await iptables('-D', r).catch(() => undefined);
      await run('ip', ['link', 'delete', bridge]).catch(() => undefined);
    },
  };
}

/** The containerd shims started by the containerd serving `socket` (their command line names it). */
function shimsOf(socket: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv[0]?.endsWith('containerd-shim-runc-v2') && argv.includes(socket)) pids.push(Number(entry));
    } catch {
      // Exited while listed.
    }
  }
  return pids;
}

export async function startNode(o: NodeOptions): Promise<TestNode> {
  const name = o.name ?? `node-${process.pid}`;
  // JOINGUARD_NODE_BIN: the folder .ci/run's build chain built (hack/run-tests.sh).
  const binDir = o.binDir ?? process.env.JOINGUARD_NODE_BIN ?? (await ensureNodeBuilt(o.log));
  const runDir = path.join(o.env.runDir, name);
  const dirs = {
    containerd: path.join(runDir, 'containerd'),
    kubelet: path.join(runDir, 'kubelet'),
    cni: path.join(runDir, 'cni'),
    podLogs: path.join(runDir, 'pod-logs'),
  };
  for (const d of Object.values(dirs)) fs.mkdirSync(d, { recursive: true });
  const socket = path.join(dirs.containerd, 'containerd.sock');
  const procs: ManagedProcess[] = [];
  const logOf = (c: string) => path.join(runDir, `${c}.log`);
  const start = (component: string, command: string, args: string[], env?: NodeJS.ProcessEnv) => {
    const p = ManagedProcess.start({ name: component, command, args, logFile: logOf(component), env });
    procs.push(p);
    return p;
  };
  const ctr = async (args: string[]) =>
    (
      await run(path.join(binDir, 'ctr'), ['--address', socket, '--namespace', CRI_NAMESPACE, ...args], {
        timeout: 120_000,
        maxBuffer: 16 << 20,
      })
    ).stdout;

  const network = podNetwork(name, new URL(o.env.server).port);
  let stopping: Promise<void> | undefined;
  const stopAll = async () => {
    const byName = (n: string) => procs.filter((p) => p.name === n && p.running);
    // The kubelet first (it would restart what is killed under it), then every container containerd runs (its
    // shims outlive containerd otherwise), then containerd and the controllers.
    await Promise.all(byName('kubelet').map((p) => p.stop(10_000)));
    if (byName('containerd').length > 0) {
      const tasks = await ctr(['tasks', 'list', '--quiet']).catch(() => '');
      for (const id of tasks.split('\n').filter(Boolean)) {
        await ctr(['tasks', 'kill', '--signal', 'SIGKILL', id]).catch(() => undefined);
        await ctr(['tasks', 'delete', '--force', id]).catch(() => undefined);
      }
      const containers = await ctr(['containers', 'list', '--quiet']).catch(() => '');
      for (const id of containers.split('\n').filter(Boolean))
        await ctr(['containers', 'delete', id]).catch(() => undefined);
      // The pods' sandboxes (pause) are not tasks in containerd 2: removed through the sandbox API.
      const sandboxes = await ctr(['sandboxes', 'list', '--quiet']).catch(() => '');
      for (const id of sandboxes.split('\n').filter(Boolean))
        await ctr(['sandboxes', 'remove', '--force', id]).catch(() => undefined);
    }
    await Promise.all(procs.filter((p) => p.running).map((p) => p.stop(5_000)));
    // A shim can outlive its sandbox's removal: this node's shims are the ones that name its socket.
    for (const pid of shimsOf(socket)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
    // kube-proxy leaves its table behind on exit: its own --cleanup removes it.
    await run(path.join(binDir, 'kube-proxy'), ['--cleanup', '--proxy-mode=nftables']).catch(() => undefined);
    await network.down();
    // The kubelet's links to its pods' logs (in /var/log/containers whatever podLogsDir says).
    for (const f of fs.existsSync('/var/log/containers') ? fs.readdirSync('/var/log/containers') : []) {
      const link = path.join('/var/log/containers', f);
      const target = fs.readlinkSync(link, { encoding: 'utf8' });
      if (target.startsWith(`${dirs.podLogs}/`)) fs.rmSync(link, { force: true });
    }
    // The kubelet's volumes (tmpfs for projected tokens and Secrets) and containerd's leftovers.
    for (const m of mountsUnder(runDir)) await run('umount', ['-l', m]).catch(() => undefined);
    fs.rmSync(path.join(dirs.containerd, 'root'), { recursive: true, force: true });
  };
  const handle = {
    stop: () => (stopping ??= stopAll().finally(() => untrack(handle))),
    killNow: () => {
      for (const p of procs) p.killNow();
    },
  };
  track(handle);

  try {
    // containerd: its own sockets, root and state under the run dir; the stream server (exec, logs) on 127.0.0.1.
    // restrict_oom_score_adj: runc cannot lower a process's oom_score_adj without CAP_SYS_RESOURCE, which this
    // machine kind lacks ("can't get final child's PID from pipe: EOF" on every sandbox); restricted, containerd
    // never asks for less than its own. Network namespaces under the state dir, not /var/run/netns.
    // The pod network: a bridge of this node's own with a /24 (the kubelet's probes and the apiserver's webhook
    // calls reach the pods through it), no default route in the pods and nothing forwarded in or out of the bridge,
    // so that no pod packet leaves the machine. The one way out is the apiserver's Service: 10.0.0.1:443, which is
    // DNAT'ed, for packets from the bridge only, to the apiserver on 127.0.0.1 (kube-proxy's part for that one
    // Service; route_localnet lets the bridge carry loopback-bound packets, as kube-proxy sets it for localhost
    // NodePorts).
    await network.up();
    fs.mkdirSync(path.join(dirs.cni, 'conf'), { recursive: true });
    fs.writeFileSync(
      path.join(dirs.cni, 'conf', '10-bridge.conflist'),
      JSON.stringify({
        cniVersion: '1.0.0',
        name: `jg-${name}`,
        plugins: [
          {
            type: 'bridge',
            bridge: network.bridge,
            isGateway: true,
            isDefaultGateway: false,
            ipMasq: false,
            ipam: {
              type: 'host-local',
              ranges: [[{ subnet: network.subnet, gateway: network.gateway }]],
              routes: [{ dst: `${KUBERNETES_SERVICE_IP}/32` }],
              dataDir: path.join(dirs.cni, 'ipam'),
            },
          },
        ],
      }),
    );
    const cdConfig = path.join(dirs.containerd, 'config.toml');
    fs.writeFileSync(
      cdConfig,
      `version = 3
root = "${dirs.containerd}/root"
state = "${dirs.containerd}/state"
[grpc]
  address = "${socket}"
[ttrpc]
  address = "${socket}.ttrpc"
[debug]
  address = "${dirs.containerd}/debug.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "${PAUSE_IMAGE}"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${dirs.cni}/conf"
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`,
    );
    // The shim is found on PATH.
    const env = { ...process.env, PATH: `${binDir}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}` };
    const cd = start('containerd', path.join(binDir, 'containerd'), ['--config', cdConfig], env);
    // Booted: every plugin loaded, the CRI's included (a kubelet started before that can find no CRI service).
    const booted = () => fs.readFileSync(cd.logFile, 'utf8').includes('containerd successfully booted');
    await waitFor('containerd booted', async () => booted() && (await ctr(['version'])), {
      timeoutMs: 30_000,
      intervalMs: 200,
      abort: () => (cd.running ? undefined : `containerd ${cd.describeExit()}: ${tailFile(cd.logFile, 20)}`),
    });
    await ctr(['images', 'import', path.join(binDir, 'pause.tar')]);

    const kubeconfig = o.env.kubeconfigPath;
    if (o.controllers ?? true) {
      // No serving port (--secure-port=0): nothing scrapes them here. One instance each: no election.
      start('kube-controller-manager', path.join(binDir, 'kube-controller-manager'), [
        `--kubeconfig=${kubeconfig}`,
        '--secure-port=0',
        '--leader-elect=false',
        '--use-service-account-credentials=false',
        // The kube-root-ca.crt ConfigMap of every namespace (the projected token volume's ca.crt) carries it.
        `--root-ca-file=${o.env.caCertFile}`,
        '--controllers=*',
      ]);
      // Pods go to real nodes only: the simulation's Nodes are API objects with no kubelet behind them, and the
      // scheduler would spread the Deployment's replicas onto them (its anti-affinity prefers other nodes).
      const schedulerConfig = path.join(runDir, 'kube-scheduler.yaml');
      fs.writeFileSync(
        schedulerConfig,
        stringify({
          apiVersion: 'kubescheduler.config.k8s.io/v1',
          kind: 'KubeSchedulerConfiguration',
          clientConnection: { kubeconfig },
          leaderElection: { leaderElect: false },
          profiles: [
            {
              schedulerName: 'default-scheduler',
              pluginConfig: [
                {
                  name: 'NodeAffinity',
                  args: {
                    addedAffinity: {
                      requiredDuringSchedulingIgnoredDuringExecution: {
                        nodeSelectorTerms: [{ matchExpressions: [{ key: REAL_NODE_LABEL, operator: 'Exists' }] }],
                      },
                    },
                  },
                },
              ],
            },
          ],
        }),
      );
      start('kube-scheduler', path.join(binDir, 'kube-scheduler'), [`--config=${schedulerConfig}`, '--secure-port=0']);
    }

    const [port, healthzPort] = await freePorts(2);
    const kubeletConfig = path.join(dirs.kubelet, 'config.yaml');
    fs.writeFileSync(
      kubeletConfig,
      stringify({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        address: '127.0.0.1',
        port,
        readOnlyPort: 0,
        healthzBindAddress: '127.0.0.1',
        healthzPort,
        containerRuntimeEndpoint: `unix://${socket}`,
        // cgroup v1 here: kubelet 1.35+ refuses it unless told; no QoS cgroups and no node-allocatable enforcement,
        // which would need cgroup writes the kubelet does not need for pods to run.
        cgroupDriver: 'cgroupfs',
        failCgroupV1: false,
        cgroupsPerQOS: false,
        enforceNodeAllocatable: [],
        failSwapOn: false,
        // The admin's client certificate stands for the kubelet's; the apiserver calls it with no client check.
        authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
        authorization: { mode: 'AlwaysAllow' },
        // The root disk is shared with other work: no eviction, no image garbage collection.
        evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '0%', 'imagefs.available': '0%' },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        podLogsDir: dirs.podLogs,
        resolvConf: '',
        makeIPTablesUtilChains: false,
        serializeImagePulls: false,
        // A Secret change (cert-manager's renewal) reaches the pod within seconds, not a minute.
        syncFrequency: '10s',
      }),
    );
    // The Services' ClusterIPs on this host (the apiserver calls the webhook's), as kube-proxy programs them:
    // nftables mode, its own table; no conntrack sysctls (not permitted here); NodePorts on the bridge only.
    const [proxyHealth, proxyMetrics] = await freePorts(2);
    start('kube-proxy', path.join(binDir, 'kube-proxy'), [
      `--kubeconfig=${kubeconfig}`,
      `--hostname-override=${name}`,
      '--proxy-mode=nftables',
      `--cluster-cidr=${network.subnet}`,
      `--nodeport-addresses=${network.gateway}/32`,
      `--healthz-bind-address=127.0.0.1:${proxyHealth}`,
      `--metrics-bind-address=127.0.0.1:${proxyMetrics}`,
      '--conntrack-max-per-core=0',
      '--conntrack-tcp-timeout-established=0',
      '--conntrack-tcp-timeout-close-wait=0',
    ]);
    const kubelet = start('kubelet', path.join(binDir, 'kubelet'), [
      `--config=${kubeletConfig}`,
      `--kubeconfig=${kubeconfig}`,
      `--root-dir=${dirs.kubelet}`,
      `--hostname-override=${name}`,
      `--node-labels=${REAL_NODE_LABEL}=true`,
      // The bridge's address: the kubelet refuses a loopback node IP; it still serves on 127.0.0.1 only.
      `--node-ip=${network.gateway}`,
      '--v=2',
    ]);
    const kube = o.env.kube();
    await waitFor(
      `Node ${name} Ready`,
      async () => {
        const node = await kube.get(`/api/v1/nodes/${name}`);
        const ready = (node?.status?.conditions as { type: string; status: string }[] | undefined)?.find(
          (c) => c.type === 'Ready',
        );
        return ready?.status === 'True';
      },
      {
        timeoutMs: 90_000,
        intervalMs: 500,
        abort: () =>
          kubelet.running ? undefined : `kubelet ${kubelet.describeExit()}:\n${tailFile(kubelet.logFile, 30)}`,
        describe: () => `kubelet.log (tail):\n${tailFile(kubelet.logFile, 30)}`,
      },
    ).finally(() => kube.close());
  } catch (err) {
    await handle.stop();
    throw err;
  }
  o.log(`[node] ${name} Ready (kubelet, containerd; runDir ${runDir})`);
  return {
    name,
    binDir,
    runDir,
    async importImage(archive, name) {
      const refs = async () => (await ctr(['images', 'list'])).split('\n').map((r) => r.trim().split(/\s+/));
      const before = new Set((await refs()).map((cols) => cols[0]));
      const out = await ctr(['images', 'import', '--all-platforms', '--digests', archive]);
      // Its progress table names the manifest's digest. An archive without a name is imported as
      // `import-<date>@<digest>`; one saved with a name (podman save in CI) keeps it: the image is found by its
      // digest in either column, else as the one image the import added.
      const digest = /sha256:[0-9a-f]{64}/.exec(out)?.[0];
      const rows = await refs();
      const added = rows.filter((cols) => cols[0] !== undefined && cols[0] !== 'REF' && !before.has(cols[0]));
      const imported =
        rows.find((cols) => digest !== undefined && (cols[0]?.endsWith(`@${digest}`) || cols.includes(digest)))?.[0] ??
        (added.length === 1 ? added[0]![0] : undefined);
      if (!imported) throw new Error(`ctr images import: no image by the digest it printed: ${out.slice(0, 500)}`);
      await ctr(['images', 'tag', '--force', imported, name]);
    },
    ctr,
    logTail: (c, lines = 40) => tailFile(logOf(c), lines),
    stop: handle.stop,
  };
}
