// Logs in the shape of CAPI's managers (component-base's JSON and klog's text format), still through winston.
//
// JSON (--logging-format=json): one object per line, `{"ts":<epoch ms>,"msg":"…","v":<level>,…}`; error lines
// carry `err` instead of `v`, as zapr writes them — always, `null` when no error value was given, so that
// `grep '"err":'` finds every error line (docs/runbook.md). Text (--logging-format=text, CAPI's default): klog's
// header `E0102 15:04:05.000000   <pid> joinguard] "msg" err="…" key="value"` (I, W, E by severity), Kubernetes
// objects as "namespace/name". --vmodule (text only, as component-base) raises the verbosity of the source files
// whose name matches a pattern, as klog matches Go files: the pattern against the file name without its
// extension, or, when it holds a `/`, against the path.
// Verbosity: winston's npm levels stand for klog's V-levels — error/warn/info are V(0), http V(1), verbose
// V(2), debug V(4) (CAPI's "how it happened"), silly V(5) (controller-runtime's "Reconciling"); `-v=N` shows
// every line at V(N) or below. Object references follow controller-runtime's reconcile logger: the kind as
// key, `{name, namespace}` as value. Values under keys that name credentials are never written.
import { randomUUID } from 'node:crypto';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import winston from 'winston';

export type LogFormat = 'text' | 'json';
export const LOG_FORMATS: readonly LogFormat[] = ['text', 'json'];

const MESSAGE = Symbol.for('message');
const V_OF_LEVEL: Record<string, number> = { error: 0, warn: 0, info: 0, http: 1, verbose: 2, debug: 4, silly: 5 };
const KLOG_SEVERITY: Record<string, string> = { error: 'E', warn: 'W' };
// Keys whose values are credentials or could hold one; their values are replaced.
const SECRET_KEY = /token|password|secret|authorization|kubeconfig|private.?key|client.?key|bearer|credential/i;

/** The winston level that shows every line of klog verbosity `v` or below. */
export function levelForVerbosity(v: number): string {
  if (v >= 5) return 'silly';
  if (v >= 4) return 'debug';
  if (v >= 2) return 'verbose';
  if (v >= 1) return 'http';
  return 'info';
}

export interface LoggerOptions {
  format?: LogFormat;
  /** klog verbosity (-v). Default 0. */
  verbosity?: number;
  /** --vmodule: per source file verbosity (text format). */
  vmodule?: VmoduleRule[];
  /** Where lines go; default stdout. */
  stream?: NodeJS.WritableStream;
}

export function makeLogger(o: LoggerOptions = {}): winston.Logger {
  const format = o.format ?? 'json';
  if (!LOG_FORMATS.includes(format))
    throw new Error(`--logging-format: ${JSON.stringify(format)} is not one of ${LOG_FORMATS.join(', ')}`);
  const vmodule = o.vmodule ?? [];
  if (vmodule.length > 0 && format !== 'text') throw new Error('--vmodule: Only supported for text log format');
  const verbosity = o.verbosity ?? 0;
  // With --vmodule the logger lets through up to the highest V a rule names; each line above -v is then kept only
  // when the file that logged it matches a rule that high (klog's V() does the same walk to its caller).
  const level = levelForVerbosity(Math.max(verbosity, ...vmodule.map((r) => r.v)));
  const logger = winston.createLogger({
    levels: winston.config.npm.levels,
    level,
    format: winston.format((info) => {
      if (
        vmodule.length > 0 &&
        (V_OF_LEVEL[info.level] ?? 0) > currentVerbosity(logger, verbosity) &&
        !vmoduleAllows(vmodule, V_OF_LEVEL[info.level] ?? 0)
      )
        return false;
      (info as unknown as Record<symbol, string>)[MESSAGE] = format === 'json' ? jsonLine(info) : textLine(info);
      return info;
    })(),
    transports: [o.stream ? new winston.transports.Stream({ stream: o.stream }) : new winston.transports.Console()],
  });
  if (vmodule.length > 0) VMODULE.set(logger, { rules: vmodule, verbosity });
  return logger;
}

/** Changes the verbosity of a logger and of every child made from it (the diagnostics /debug/flags/v). */
export function setVerbosity(log: winston.Logger, v: number): void {
  const vm = VMODULE.get(log);
  if (vm) vm.verbosity = v;
  log.level = levelForVerbosity(Math.max(v, ...(vm?.rules ?? []).map((r) => r.v)));
}

// ---- --vmodule ----

export interface VmoduleRule {
  pattern: string;
  v: number;
}

const VMODULE = new WeakMap<winston.Logger, { rules: VmoduleRule[]; verbosity: number }>();

const currentVerbosity = (log: winston.Logger, initial: number): number => VMODULE.get(log)?.verbosity ?? initial;

/** component-base's VModuleConfiguration: `pattern=N,...`, no empty pattern, N a non-negative int32. */
export function parseVmodule(value: string): VmoduleRule[] {
  if (value.trim() === '') return [];
  return value.split(',').map((part) => {
    const eq = part.lastIndexOf('=');
    if (eq < 0) throw new Error(`${JSON.stringify(part)} does not have the pattern=N format`);
    const pattern = part.slice(0, eq).trim();
    const n = part.slice(eq + 1).trim();
    if (pattern === '') throw new Error('File pattern must not be empty');
    if (pattern.includes('='))
      throw new Error(`${JSON.stringify(pattern)}: File pattern must not contain equal sign or comma`);
    if (!/^\d+$/.test(n) || Number(n) > 2 ** 31 - 1)
      throw new Error(`${JSON.stringify(n)} is not a verbosity (0 to 2147483647)`);
    return { pattern, v: Number(n) };
  });
}

/** Go's filepath.Match for `*` and `?` (no character classes in practice for file names). */
function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '[^/]*')
    .replace(/\?/g, '[^/]');
  return new RegExp(`^${body}$`);
}

/** Whether the source file that is logging (the first frame outside winston and this file) has a rule >= v. */
function vmoduleAllows(rules: VmoduleRule[], v: number): boolean {
  const file = callerFile();
  if (file === undefined) return false;
  const path = file.replace(/\.(ts|js|mjs|cjs)$/, '');
  const base = path.slice(path.lastIndexOf('/') + 1);
  // A path pattern is matched against the path below the project (or dist/): `runtime/*`.
  const rel = path.startsWith(ROOT) ? path.slice(ROOT.length) : path;
  return rules.some(
    (r) =>
      r.v >= v && (r.pattern.includes('/') ? globToRegExp(r.pattern).test(rel) : globToRegExp(r.pattern).test(base)),
  );
}

const THIS_FILE = fileURLToPath(import.meta.url);
/** The project's root (or dist/), one level above runtime/, with a trailing slash. */
const ROOT = `${dirname(dirname(THIS_FILE))}/`;

function callerFile(): string | undefined {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 60;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  for (const line of stack.split('\n').slice(1)) {
    const m = /\(?((?:file:\/\/)?\/[^():]+):\d+:\d+\)?\s*$/.exec(line);
    if (!m) continue;
    const file = m[1]!.startsWith('file://') ? fileURLToPath(m[1]!) : m[1]!;
    if (file === THIS_FILE || file.includes('/node_modules/') || file.startsWith('node:')) continue;
    return file;
  }
  return undefined;
}

/** A logger that drops everything (tests that do not want the noise). */
export function silentLogger(): winston.Logger {
  return winston.createLogger({ silent: true, transports: [new winston.transports.Console({ silent: true })] });
}

/** klog.KRef: how a Kubernetes object is named in a log line. */
export const kref = (namespace: string | undefined, name: string): { name: string; namespace?: string } =>
  namespace ? { name, namespace } : { name };

export interface ControllerIdentity {
  name: string;
  group: string;
  kind: string;
}

export interface ReconcileRequest {
  namespace: string;
  name: string;
  /** The Cluster the object belongs to (same namespace). */
  cluster?: string;
  /** Default: a new UUID, as controller-runtime makes one per reconcile. */
  reconcileID?: string;
}

/**
 * The logger of one reconcile, with the keys controller-runtime's builder and reconcileHandler add
 * (controller, controllerGroup, controllerKind, <Kind>{name,namespace}, namespace, name, reconcileID) and
 * CAPI's Cluster key.
 */
export function reconcileLogger(base: winston.Logger, c: ControllerIdentity, req: ReconcileRequest): winston.Logger {
  return base.child({
    controller: c.name,
    controllerGroup: c.group,
    controllerKind: c.kind,
    [c.kind]: kref(req.namespace, req.name),
    namespace: req.namespace,
    name: req.name,
    reconcileID: req.reconcileID ?? randomUUID(),
    ...(req.cluster ? { Cluster: kref(req.namespace, req.cluster) } : {}),
  });
}

/** Adds the Machine a line is about (CAPI's `Machine` key). */
export const machineLogger = (log: winston.Logger, namespace: string, name: string): winston.Logger =>
  log.child({ Machine: kref(namespace, name) });

// ---- formats ----

interface Line {
  level: string;
  msg: string;
  fields: Record<string, unknown>;
}

function lineOf(info: winston.Logform.TransformableInfo): Line {
  const { level, message, ...rest } = info as Record<string, unknown>;
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rest)) {
    const key = k === 'error' ? 'err' : k; // klog's key for an error
    fields[key] = redact(key, v instanceof Error ? v.message : v, 0);
  }
  return { level: String(level), msg: typeof message === 'string' ? message : JSON.stringify(message), fields };
}

/** Values under a credential key are replaced; objects are searched (a `Secret: {name, namespace}` stays). */
function redact(key: string, v: unknown, depth: number): unknown {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    if (depth >= 4) return SECRET_KEY.test(key) ? '[redacted]' : v;
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, redact(k, x, depth + 1)]),
    );
  }
  if (SECRET_KEY.test(key) && v !== undefined && v !== null && v !== '') return '[redacted]';
  return v;
}

function jsonLine(info: winston.Logform.TransformableInfo): string {
  const { level, msg, fields } = lineOf(info);
  const ts = Number(nowMs().toFixed(3));
  const head: Record<string, unknown> =
    level === 'error' ? { ts, msg, err: fields['err'] ?? null } : { ts, msg, v: V_OF_LEVEL[level] ?? 0 };
  return JSON.stringify({ ...head, ...fields });
}

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
/** Epoch ms with a fraction (component-base writes `ts` as float epoch milliseconds). */
const nowMs = () => performance.timeOrigin + performance.now();

function textLine(info: winston.Logform.TransformableInfo): string {
  const { level, msg, fields } = lineOf(info);
  const t = nowMs();
  const now = new Date(Math.floor(t));
  const micros = pad(Math.floor((t % 1000) * 1000), 6);
  const header =
    `${KLOG_SEVERITY[level] ?? 'I'}${pad(now.getUTCMonth() + 1)}` +
    `${pad(now.getUTCDate())} ${pad(now.getUTCHours())}:${pad(now.getUTCMinutes())}:` +
    `${pad(now.getUTCSeconds())}.${micros} ${String(process.pid).padStart(7)} ` +
    `joinguard]`;
  // klog puts an error line's err right after the message.
  const ordered = level === 'error' && 'err' in fields ? { err: fields['err'], ...fields } : fields;
  const kv = Object.entries(ordered).map(([k, v]) => `${k}=${textValue(v)}`);
  return [header, JSON.stringify(msg), ...kv].join(' ');
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  // An object reference (klog.KObj/KRef) prints as "namespace/name".
  if (typeof o['name'] === 'string' && keys.every((k) => k === 'name' || k === 'namespace')) {
    return JSON.stringify(o['namespace'] ? `${String(o['namespace'])}/${o['name']}` : o['name']);
  }
  return JSON.stringify(v);
}
