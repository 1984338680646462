// The substitution cases (clusterctl's variable rules), shared by the table (substitute.test.ts) and the comparison
// with clusterctl itself (substitute-clusterctl.test.ts).
import { parse } from 'yaml';
import { MissingVariablesError, substitute } from '../substitute.js';

export interface Case {
  name: string;
  text: string;
  vars: Record<string, string>;
  want: Record<string, unknown> | { missing: string[] };
}

export const cases: Case[] = [
  { name: '${VAR} set', text: 'a: ${A}\n', vars: { A: 'x' }, want: { a: 'x' } },
  { name: '${VAR} unset is refused, naming it', text: 'a: ${A}\n', vars: {}, want: { missing: ['A'] } },
  { name: '${VAR} set but empty is used (empty)', text: 'a: "${A}"\n', vars: { A: '' }, want: { a: '' } },
  { name: '${VAR:=default} unset takes the default', text: 'a: ${A:=dflt}\n', vars: {}, want: { a: 'dflt' } },
  { name: '${VAR:=default} empty takes the default', text: 'a: ${A:=dflt}\n', vars: { A: '' }, want: { a: 'dflt' } },
  { name: '${VAR:=default} set wins', text: 'a: ${A:=dflt}\n', vars: { A: 'v' }, want: { a: 'v' } },
  {
    name: 'default with : and / (an image)',
    text: 'a: ${IMG:=ghcr.io/x/y:v0.1.0}\n',
    vars: {},
    want: { a: 'ghcr.io/x/y:v0.1.0' },
  },
  { name: 'inside a longer value', text: 'a: pre-${A:=mid}-post\n', vars: {}, want: { a: 'pre-mid-post' } },
  { name: 'legacy whitespace ${ VAR }', text: 'a: ${ A }\n', vars: { A: 'x' }, want: { a: 'x' } },
  {
    name: 'every missing variable is named, sorted',
    text: 'a: ${B}\nb: ${A}\nc: ${C:=1}\n',
    vars: {},
    want: { missing: ['A', 'B'] },
  },
  { name: '$$ escapes a dollar', text: 'a: "$${A}"\n', vars: { A: 'x' }, want: { a: '${A}' } },
  { name: 'a lone $ is text', text: 'a: "x$y"\n', vars: {}, want: { a: 'x$y' } },
  { name: 'two uses, one default each', text: 'a: ${A:=1}\nb: ${A:=1}\n', vars: { A: '2' }, want: { a: 2, b: 2 } },
];

export function ours(c: Case): Record<string, unknown> | { missing: string[] } {
  try {
    return parse(substitute(c.text, c.vars)) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof MissingVariablesError) return { missing: [...e.missing].sort() };
    throw e;
  }
}
