// The validating webhook's decision: everything the CRD schema and CEL cannot say about a MachineJoinCheck.
// Refusals name the field and say what would be accepted; risky but legal values are admitted with warnings.
import { isDeepStrictEqual } from 'node:util';
import type { CapiApiVersion, LabelSelectorModel, MachineHealthCheckFacts } from '../api/capi/model.js';
import { isObject, type AdmissionRequest, type FieldProblem } from './admission.js';
import type { CapiKnowledge } from './capi-version.js';
import { clusterLabelContradictions, selectorsOverlap } from './selectors.js';
import type { Lookups, MachineLabels } from './lookups.js';

/** The API's own rules on a spec (api/v1alpha1): errors, and warnings for legal but risky values. */
export interface SpecRules {
  validateSpec(spec: unknown): { field: string; message: string }[];
  /** Only called on a spec validateSpec accepts. */
  warnings(spec: unknown): string[];
  /** Label selector matching, for the existing-Machines overlap test. */
  matches(selector: LabelSelectorModel | undefined, labels: Record<string, string>): boolean;
  /** api/capi's reader: a raw MachineHealthCheck of the served CAPI version into the model. */
  readMachineHealthCheck(obj: unknown, version: CapiApiVersion): MachineHealthCheckFacts;
  /** Why a strategy cannot work on the CAPI release found; undefined when it can or the minor is unknown. */
  strategyCapiProblem(strategy: string, capi: { minor?: number; version?: string }): string | undefined;
  /** The CAPI minor a strategy needs, if any (for the warning when the release is not known). */
  strategyMinCapiMinor(strategy: string): number | undefined;
}

/** What decide may read beyond the request: the cluster lookups and the CAPI release (both optional). */
export interface DecideContext {
  lookups?: Lookups;
  capi?: () => Promise<CapiKnowledge>;
}

export interface Decision {
  problems: FieldProblem[];
  warnings: string[];
  /** Set when a lookup failed: the request is refused as an internal error, retrying may pass. */
  internalError?: string;
}

interface CheckLike {
  name: string;
  deleting: boolean;
  clusterName?: string;
  selector?: LabelSelectorModel;
}

function checkLike(obj: unknown): CheckLike {
  const o = isObject(obj) ? obj : {};
  const meta = isObject(o['metadata']) ? o['metadata'] : {};
  const spec = isObject(o['spec']) ? o['spec'] : {};
  return {
    name: typeof meta['name'] === 'string' ? meta['name'] : '',
    deleting: typeof meta['deletionTimestamp'] === 'string',
    clusterName: typeof spec['clusterName'] === 'string' ? spec['clusterName'] : undefined,
    selector: isObject(spec['selector']) ? spec['selector'] : undefined,
  };
}

/** validateSpec's field names, always rooted at `spec.` as the apiserver's own errors are. */
function rooted(field: string): string {
  if (field === 'spec' || field.startsWith('spec.') || field.startsWith('spec[')) return field;
  return field === '' ? 'spec' : `spec.${field}`;
}

export async function decide(req: AdmissionRequest, rules: SpecRules, ctx: DecideContext = {}): Promise<Decision> {
  const { lookups } = ctx;
  const obj = req.object;
  const spec = isObject(obj) ? obj['spec'] : undefined;
  const self = checkLike(obj);

  if (req.operation === 'UPDATE') {
    const old = isObject(req.oldObject) ? req.oldObject['spec'] : undefined;
    // Metadata-only updates (the controller removing `joinguard.io/resume`, finalizers) and deletion must
    // pass even for a check admitted under older rules; only a changed spec is judged again.
    if (self.deleting || isDeepStrictEqual(old, spec)) return { problems: [], warnings: [] };
  }

  const problems: FieldProblem[] = rules
    .validateSpec(spec)
    .map((e) => ({ field: rooted(e.field), message: e.message }));
  const changed = req.operation === 'UPDATE' ? clusterNameChanged(req, self) : undefined;
  if (changed) problems.push(changed);
  if (self.clusterName !== undefined) problems.push(...clusterLabelContradictions(self.selector, self.clusterName));

  const warnings = problems.length === 0 ? rules.warnings(spec) : [];
  if (ctx.capi && problems.length === 0) {
    const r = await strategyOnThisCapi(spec, rules, ctx.capi);
    if (r.problem) problems.push(r.problem);
    if (r.warning) warnings.push(r.warning);
  }
  if (problems.length > 0 || !lookups || self.clusterName === undefined || !req.namespace) {
    return { problems, warnings };
  }

  try {
    await overlapsInNamespace(self, self.clusterName, req.namespace, lookups, rules, { problems, warnings });
  } catch (e) {
    return {
      problems,
      warnings,
      internalError:
        `could not look up MachineJoinChecks, MachineHealthChecks ` +
        `or Machines in namespace ${JSON.stringify(req.namespace)} ` +
        `to rule out overlaps: ${(e as Error).message}; try again`,
    };
  }
  return { problems, warnings };
}

/** spec.clusterName is immutable once set. */
function clusterNameChanged(req: AdmissionRequest, self: CheckLike): FieldProblem | undefined {
  const oldCluster = checkLike(req.oldObject).clusterName;
  if (oldCluster === undefined || self.clusterName === oldCluster) return undefined;
  return {
    field: 'spec.clusterName',
    message:
      `is immutable: it was ${JSON.stringify(oldCluster)} and cannot ` +
      `become ${JSON.stringify(self.clusterName ?? null)}; keep ` +
      `${JSON.stringify(oldCluster)}, or create a new MachineJoinCheck ` +
      `for the other Cluster`,
  };
}

/**
 * What the namespace's other objects say: another check of the Cluster that selects the same Machines is refused;
 * a MachineHealthCheck that also selects them is a warning (it acts first on Machines that never join).
 */
async function overlapsInNamespace(
  self: CheckLike,
  clusterName: string,
  namespace: string,
  lookups: Lookups,
  rules: SpecRules,
  out: { problems: FieldProblem[]; warnings: string[] },
): Promise<void> {
  const [checks, rawMhcs, machines] = await Promise.all([
    lookups.checks(namespace),
    lookups.machineHealthChecks(namespace),
    lookups.machines(namespace, clusterName),
  ]);
  const mhcs = rawMhcs.objects.map((o) => rules.readMachineHealthCheck(o, rawMhcs.version));
  for (const other of checks.map(checkLike)) {
    if (other.name === self.name || other.deleting || other.clusterName !== clusterName) continue;
    const problem = overlapProblem(self, other, machines, rules.matches);
    if (problem) out.problems.push(problem);
  }
  for (const mhc of mhcs) {
    if (mhc.clusterName !== clusterName || mhc.nodeStartupTimeoutSeconds === 0) continue;
    const shared = bothSelect(self.selector, mhc.selector, machines, rules.matches);
    if (!selectorsOverlap(self.selector, mhc.selector, clusterName).overlap && shared.length === 0) continue;
    // CAPI's MHC defaulting writes 600 into an unset timeout, so "unset" is seldom seen on a stored MHC.
    const t = mhc.nodeStartupTimeoutSeconds;
    let timeout = t === 600 ? "600s (CAPI's default)" : `${t}s`;
    if (t === undefined) timeout = 'unset (CAPI uses 10m)';
    out.warnings.push(
      `MachineHealthCheck ${JSON.stringify(mhc.name)} also selects ` +
        `these Machines and its node startup timeout is ${timeout}: ` +
        `it acts first on Machines that never join; set its nodeStartupTimeout ` +
        `explicitly to 0 to leave them to JoinGuard`,
    );
  }
}

/** The strategy against the CAPI release found: refused when too old, admitted with a warning when unknown. */
async function strategyOnThisCapi(
  spec: unknown,
  rules: SpecRules,
  capi: () => Promise<CapiKnowledge>,
): Promise<{ problem?: FieldProblem; warning?: string }> {
  const remediation = isObject(spec) && isObject(spec['remediation']) ? spec['remediation'] : {};
  const strategy = typeof remediation['strategy'] === 'string' ? remediation['strategy'] : undefined;
  const need = strategy === undefined ? undefined : rules.strategyMinCapiMinor(strategy);
  if (strategy === undefined || need === undefined) return {};
  const known = await capi();
  const facts = known.facts;
  if (facts?.minor !== undefined) {
    const problem = rules.strategyCapiProblem(strategy, facts);
    return problem
      ? {
          problem: {
            field: 'spec.remediation.strategy',
            message: `${problem} (CAPI found from ${facts.source ?? 'discovery'})`,
          },
        }
      : {};
  }
  const why =
    known.error ??
    (facts ? `discovery did not report it${facts.source ? ` (${facts.source})` : ''}` : 'discovery has not answered');
  return {
    warning:
      `spec.remediation.strategy: ${strategy} needs CAPI v1.${need} ` +
      `or later, and the CAPI release of this management cluster ` +
      `is not known (${why}): ` +
      (`on an older release no MachineHealthCheck acts on JoinGuardJoined, ` +
        `and the controller reports it; check with: kubectl get deployment ` +
        `-A -l cluster.x-k8s.io/provider=cluster-api -o wide`),
  };
}

function bothSelect(
  a: LabelSelectorModel | undefined,
  b: LabelSelectorModel | undefined,
  machines: MachineLabels[],
  matches: SpecRules['matches'],
): string[] {
  return machines.filter((m) => matches(a, m.labels) && matches(b, m.labels)).map((m) => m.name);
}

function overlapProblem(
  self: CheckLike,
  other: CheckLike,
  machines: MachineLabels[],
  matches: SpecRules['matches'],
): FieldProblem | undefined {
  const shared = bothSelect(self.selector, other.selector, machines, matches);
  const statically = selectorsOverlap(self.selector, other.selector, self.clusterName!).overlap;
  if (!statically && shared.length === 0) return undefined;
  const seen =
    shared.length > 0
      ? `both select Machine${shared.length > 1 ? 's' : ''} ${shared
          .slice(0, 3)
          .map((n) => JSON.stringify(n))
          .join(', ')}${shared.length > 3 ? ` and ${shared.length - 3} more` : ''}`
      : 'a Machine could carry labels that satisfy both selectors';
  return {
    field: 'spec.selector',
    message:
      `overlaps MachineJoinCheck ${JSON.stringify(other.name)} ` +
      `of the same Cluster (${seen}); one Machine may be checked ` +
      `by one MachineJoinCheck only: accepted is a selector that ` +
      `excludes its Machines, e.g. the same label key with a different ` +
      `value, a NotIn or DoesNotExist on a label its selector requires, ` +
      `or cluster.x-k8s.io/control-plane vs cluster.x-k8s.io/deployment-name`,
  };
}
