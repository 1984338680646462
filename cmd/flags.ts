// The `joinguard` command's flags: every flag of CAPI v1.14's managers that means the same thing in JoinGuard,
// with CAPI's spelling, type and default (core/main.go, util/flags, component-base's logging flags; the list
// and what is not taken, with why, are in capi-flags.ts), plus JoinGuard's own. pflag's syntax: `--name=value`,
// `--name value`, a bare `--name` for true, `-v N`/`-v=N`/`--v=N`, `-h`. An unknown flag or a bad value stops
// the command with a message naming the flag.
import { parseVmodule } from '../runtime/logger.js';
import { NOT_TAKEN } from './capi-flags.js';
import { FEATURE_GATES, FLAGS, tlsProblem, type Flags, type Kind, type Spec } from './flag-table.js';

export { CURVES, ecdhCurve, FEATURE_GATES, FLAGS, type Flags } from './flag-table.js';

const SHORT: Record<string, string> = { v: 'v', h: 'help' };
const DEFAULT_LEASE = 'joinguard-leader';
/** A Lease's name: a lower-case DNS subdomain. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * Older JoinGuard flags, still accepted with a warning (as CAPI kept --metrics-bind-addr for a release when it
 * moved to --diagnostics-address); not in --help.
 */
const DEPRECATED: Record<string, { use: string; apply: (f: Flags, value: string) => void }> = {
  'metrics-bind-address': {
    use: '--diagnostics-address (HTTPS with authentication) or --diagnostics-address with --insecure-diagnostics',
    apply: (f, v) => {
      f.diagnosticsAddress = v;
      f.insecureDiagnostics = true;
    },
  },
  'log-level': {
    use: '-v (4 for debug)',
    apply: (f, v) => {
      if (!['error', 'warn', 'info', 'debug'].includes(v))
        throw new Error(
          `invalid argument ${JSON.stringify(v)} for "--log-level" flag: not one of error, warn, info, debug`,
        );
      f.verbosity = v === 'debug' ? 4 : 0;
    },
  },
  'health-probe-bind-address': {
    use: "--health-addr (CAPI's name; its default is :9440)",
    apply: (f, v) => {
      f.healthAddr = v;
    },
  },
};

function parseGates(value: string): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const part of value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const [k, v, ...rest] = part.split('=').map((s) => s.trim());
    if (!k || v === undefined || rest.length > 0) throw new Error(`missing bool value for ${part}`);
    if (v !== 'true' && v !== 'false')
      throw new Error(
        `invalid value of ${k}=${v}, err: strconv.ParseBool: parsing ${JSON.stringify(v)}: invalid syntax`,
      );
    if (!FEATURE_GATES[k]) throw new Error(`unrecognized feature gate: ${k}`);
    out[k] = v === 'true';
  }
  return out;
}

/** The flags with every default applied. */
export function defaults(parseDuration: (s: string) => number): Flags {
  const f: Record<string, unknown> = {};
  for (const [name, s] of Object.entries(FLAGS))
    f[s.key] = convert(name, s, s.def === '[]' ? '' : s.def, parseDuration);
  for (const k of ['kubeconfig', 'namespace', 'watchFilter']) if (f[k] === '') delete f[k];
  return f as unknown as Flags;
}

function convert(name: string, spec: Spec, value: string, parseDuration: (s: string) => number): unknown {
  const bad = (why: string) => new Error(`invalid argument ${JSON.stringify(value)} for "--${name}" flag: ${why}`);
  switch (spec.kind) {
    case 'bool':
      if (value === 'true') return true;
      if (value === 'false') return false;
      throw bad('not true or false');
    case 'port':
    case 'count':
    case 'level': {
      const n = Number(value);
      const max = spec.kind === 'port' ? 65535 : 2 ** 31 - 1;
      if (!/^\d+$/.test(value) || n > max)
        throw bad(spec.kind === 'port' ? 'not a port number (0-65535)' : 'not a whole number (0 or more)');
      return n;
    }
    case 'float': {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw bad('not a number');
      return n;
    }
    case 'duration':
      try {
        return parseDuration(value);
      } catch (e) {
        throw bad((e as Error).message);
      }
    case 'list':
      return value === '' ? [] : value.split(',').map((x) => x.trim());
    case 'int32list': {
      const parts = value === '' ? [] : value.split(',').map((x) => x.trim());
      if (parts.some((p) => !/^-?\d+$/.test(p))) throw bad('not a list of whole numbers');
      return parts.map(Number);
    }
    case 'gates':
      try {
        return parseGates(value);
      } catch (e) {
        throw bad((e as Error).message);
      }
    case 'vmodule':
      try {
        return parseVmodule(value);
      } catch (e) {
        throw bad((e as Error).message);
      }
    case 'quantity':
      if (value === '') return '0';
      if (!/^\d+(\.\d+)?([KMGTPE]i?|[kmun])?$/.test(value)) throw bad('not a quantity (512, 1K, 2Ki, 3M ...)');
      return value;
    default:
      return value;
  }
}

/** Parses argv; `warnings` receives one line per deprecated flag used. */
export function parseFlags(argv: string[], parseDuration: (s: string) => number, warnings: string[] = []): Flags {
  const out = defaults(parseDuration) as unknown as Record<string, unknown>;
  const given = new Set<string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const m = /^--([a-z][a-z0-9-]*)(?:=(.*))?$/s.exec(arg) ?? /^-([a-z])(?:=?(.+))?$/s.exec(arg);
    if (!m) throw new Error(`unexpected argument ${JSON.stringify(arg)} (flags are --name=value)`);
    const name = arg.startsWith('--') ? m[1]! : SHORT[m[1]!];
    const old = name === undefined ? undefined : DEPRECATED[name];
    if (old) {
      const value = m[2] ?? argv[++i];
      if (value === undefined) throw new Error(`flag needs an argument: --${name}`);
      old.apply(out as unknown as Flags, value);
      warnings.push(`Flag --${name} has been deprecated, use ${old.use}`);
      continue;
    }
    const spec = name === undefined ? undefined : FLAGS[name];
    if (!spec || name === undefined) {
      const flag = arg.split('=')[0]!;
      const capi = name === undefined ? undefined : NOT_TAKEN[name];
      throw new Error(capi ? `unknown flag: ${flag} (${capi})` : `unknown flag: ${flag} (see --help)`);
    }
    let value = m[2];
    if (value === undefined) {
      if (spec.kind === 'bool') value = 'true';
      else {
        value = argv[++i];
        if (value === undefined) throw new Error(`flag needs an argument: --${name}`);
      }
    }
    const v = convert(name, spec, value, parseDuration);
    const problem = spec.check?.(v);
    if (problem) throw new Error(`invalid argument ${JSON.stringify(value)} for "--${name}" flag: ${problem}`);
    out[spec.key] = v;
    given.add(name);
  }
  const f = out as unknown as Flags;
  nameShardLease(f, given);
  checkTogether(f);
  return f;
}

/** A shard elects on its own Lease unless one is named: two shards on one Lease would leave one without a leader. */
function nameShardLease(f: Flags, given: ReadonlySet<string>): void {
  if (f.watchFilter && !given.has('leader-elect-resource-name')) {
    const lease = `${DEFAULT_LEASE}-${f.watchFilter}`;
    if (!DNS_SUBDOMAIN.test(lease)) {
      throw new Error(
        `--watch-filter=${f.watchFilter}: the shard's Lease would ` +
          `be ${JSON.stringify(lease)}, not a valid name; set --leader-elect-resource-name`,
      );
    }
    f.leaderElectResourceName = lease;
  }
}

/** What no one flag can check alone: bounds, client-go's leader-election rules, the TLS pair, vmodule's format. */
function checkTogether(f: Flags): void {
  if (f.concurrency < 1) throw new Error('--machinejoincheck-concurrency: must be at least 1');
  if (f.kubeApiBurst < 1) throw new Error('--kube-api-burst: must be at least 1');
  // client-go's NewLeaderElector rules.
  if (f.leaderElectLeaseDurationMs <= f.leaderElectRenewDeadlineMs)
    throw new Error('--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline');
  if (f.leaderElectRenewDeadlineMs <= 1.2 * f.leaderElectRetryPeriodMs)
    throw new Error('--leader-elect-renew-deadline must be greater than 1.2 x --leader-elect-retry-period');
  if (f.leaderElectRetryPeriodMs < 1) throw new Error('--leader-elect-retry-period must be greater than zero');
  if (!DNS_SUBDOMAIN.test(f.leaderElectResourceName)) {
    throw new Error(
      `--leader-elect-resource-name: ${JSON.stringify(f.leaderElectResourceName)} ` +
        `is not a valid Lease name (lower-case DNS subdomain)`,
    );
  }
  const tls = tlsProblem(f.tlsMinVersion, f.tlsCipherSuites);
  if (tls) throw new Error(`--tls-min-version/--tls-cipher-suites: ${tls}`);
  // component-base's Validate: vmodule is only supported for the text format.
  if (f.vmodule.length > 0 && f.loggingFormat !== 'text')
    throw new Error('--vmodule: Only supported for text log format');
}

const KIND_TYPE: Record<Kind, string> = {
  string: 'string',
  bool: '',
  port: 'int',
  count: 'int',
  float: 'float32',
  duration: 'duration',
  list: 'strings',
  int32list: 'int32Slice',
  gates: 'mapStringBool',
  vmodule: 'pattern=N,...',
  quantity: 'quantity',
  level: 'Level',
};

/** pflag's type word of a flag as --help prints it ('' for a bool). */
export const typeWord = (name: string): string => KIND_TYPE[FLAGS[name]!.kind];

/** The default as --help prints it ('' when pflag would print none: false, empty, zero quantity). */
export function printedDefault(name: string): string {
  const s = FLAGS[name]!;
  if (name === 'help' || s.def === '' || (s.kind === 'bool' && s.def === 'false')) return '';
  return s.kind === 'string' ? JSON.stringify(s.def) : s.def;
}

/** Every flag with its type, default and description, sorted by name as pflag prints them. */
export function usage(): string {
  const lines = Object.entries(FLAGS)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([n, s]) => {
      const type = typeWord(n);
      const names: Record<string, string> = { v: '  -v, --v', help: '  -h, --help' };
      const head = `${names[n] ?? `      --${n}`}${type ? ` ${type}` : ''}`;
      const def = printedDefault(n);
      const help = s.help.split('\n').join('\n          ');
      return `${head}\n          ${help}${def ? ` (default ${def})` : ''}`;
    });
  return (
    `joinguard: rescues Cluster API Machines that never join, ` +
    `and stops rebuilding when the join credential or network ` +
    `is at fault.\n\nUsage: joinguard [flags]\n\nFlags:\n${lines.join('\n')}\n`
  );
}
