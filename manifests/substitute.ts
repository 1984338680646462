// clusterctl's variable substitution (cmd/clusterctl/client/yamlprocessor, the SimpleProcessor over
// drone/envsubst), for the two forms JoinGuard's manifests use: `${VAR}` and `${VAR:=default}`. The rules
// followed: whitespace inside the braces is dropped first (`${ VAR }` is `${VAR}`); a variable without a
// default must be set or the whole file is refused, naming every missing variable; `:=` takes the default
// when the variable is unset or empty; a set variable is used as is, even empty. Other envsubst operators
// are refused here rather than half-supported. The objects a substituted text yields are read here too.
import { parseAllDocuments } from 'yaml';

export interface VariableUse {
  name: string;
  /** The default written in the first use of the variable, undefined when it has none (clusterctl's rule). */
  default?: string;
}

export class MissingVariablesError extends Error {
  constructor(readonly missing: string[]) {
    super(
      `value for variables [${[...missing].sort().join(', ')}] ` +
        `is not set. Please set the value using os environment variables ` +
        `or the clusterctl config file`,
    );
    this.name = 'MissingVariablesError';
  }
}

// clusterctl's legacy form: `${ VAR}`, `${ VAR }`, `${VAR }` become `${VAR}`.
const LEGACY = /\$\{\s*([A-Za-z0-9_$]+)\s*\}/g;
const EXPR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::=([^}]*))?\}/y;

function normalize(text: string): string {
  return text.replace(LEGACY, (_m, name: string) => `\${${name}}`);
}

type Piece = { text: string } | { name: string; default?: string };

function parse(text: string): Piece[] {
  const src = normalize(text);
  const out: Piece[] = [];
  let i = 0;
  let lit = '';
  while (i < src.length) {
    const at = src.indexOf('$', i);
    if (at < 0) {
      lit += src.slice(i);
      break;
    }
    lit += src.slice(i, at);
    if (src[at + 1] === '$') {
      // envsubst's escape: `$$` is one literal `$`.
      lit += '$';
      i = at + 2;
      continue;
    }
    if (src[at + 1] !== '{') {
      lit += '$'; // a lone `$` is text for envsubst
      i = at + 1;
      continue;
    }
    EXPR.lastIndex = at;
    const m = EXPR.exec(src);
    if (!m) {
      const end = src.indexOf('}', at);
      throw new Error(
        `unsupported variable expression ${src.slice(at, end < 0 ? at + 20 : end + 1)}: ` +
          `only \${VAR} and \${VAR:=default} are used`,
      );
    }
    if (lit) out.push({ text: lit });
    lit = '';
    out.push(m[2] === undefined ? { name: m[1]! } : { name: m[1]!, default: m[2] });
    i = at + m[0].length;
  }
  if (lit) out.push({ text: lit });
  return out;
}

/** The variables of `text` in first-use order, each with the default of its first use. */
export function listVariables(text: string): VariableUse[] {
  const seen = new Map<string, VariableUse>();
  for (const p of parse(text)) {
    if ('name' in p && !seen.has(p.name))
      seen.set(p.name, p.default === undefined || p.default === '' ? { name: p.name } : p);
  }
  return [...seen.values()];
}

/** Every use of every variable, for checks that one variable carries the same default everywhere. */
export function variableUses(text: string): VariableUse[] {
  return parse(text).filter((p): p is VariableUse => 'name' in p);
}

/**
 * Substitutes like `clusterctl generate yaml` / `clusterctl init`. `vars` plays the role of the environment
 * and the clusterctl config file: a key present with value '' is set-but-empty.
 */
export function substitute(text: string, vars: Record<string, string | undefined>): string {
  const pieces = parse(text);
  const isSet = (n: string) => Object.hasOwn(vars, n) && vars[n] !== undefined;
  // clusterctl checks the first use of each variable: missing means unset with no default there.
  const missing = listVariables(text)
    .filter((v) => v.default === undefined && !isSet(v.name))
    .map((v) => v.name);
  if (missing.length > 0) throw new MissingVariablesError(missing);
  return pieces
    .map((p) => {
      if ('text' in p) return p.text;
      const value = isSet(p.name) ? vars[p.name]! : '';
      return p.default !== undefined && value === '' ? p.default : value;
    })
    .join('');
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [k: string]: unknown;
}

/** The objects of a components text after substitution with `vars` (defaults for the rest). */
export function objectsOf(text: string, vars: Record<string, string> = {}): K8sObject[] {
  return parseAllDocuments(substitute(text, vars))
    .map((d) => {
      if (d.errors.length > 0) throw new Error(`manifests: YAML error: ${d.errors[0]!.message}`);
      return d.toJS() as K8sObject | null;
    })
    .filter((o): o is K8sObject => o !== null);
}
