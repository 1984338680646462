// The link check of README.md, docs/*.md and docs/decisions/*.md: every link stays inside the repository and resolves —
// a relative path to a file that exists, an anchor to a heading (GitHub's slugs) or an explicit anchor of
// that file. A link with a scheme (https:, mailto:, ...) or a path that climbs out of the repository is
// refused: the documents must read the same in a clone, with no network, at any version.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

export interface Link {
  file: string;
  line: number;
  target: string;
}

export interface LinkProblem extends Link {
  problem: string;
}

/** The text without fenced code blocks and inline code (a URL in a command is not a link). */
function prose(text: string): string[] {
  let fence: string | undefined;
  return text.split('\n').map((line) => {
    const m = /^\s*(```+|~~~+)/.exec(line);
    if (m) {
      if (fence === undefined) fence = m[1]![0];
      else if (m[1]![0] === fence) fence = undefined;
      return '';
    }
    if (fence !== undefined) return '';
    return line.replace(/(`+)[^`]*?\1/g, '');
  });
}

/** GitHub's heading anchor: lower case, punctuation dropped (but `-` and `_`), spaces to `-`; repeats get -1, -2. */
export function slug(heading: string): string {
  return heading
    .trim()
    .replace(/<[^>]+>/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor a Markdown file offers. */
export function anchorsOf(text: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fence = false;
  for (const line of text.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fence = !fence;
    if (fence) continue;
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      const base = slug(h[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      out.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) out.add(m[1]!);
  }
  return out;
}

export function linksOf(file: string, text: string): Link[] {
  const links: Link[] = [];
  prose(text).forEach((line, i) => {
    const at = (target: string) => links.push({ file, line: i + 1, target });
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) at(m[1]!);
    const def = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(line);
    if (def) at(def[1]!);
    for (const m of line.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]+)>/gi)) at(m[1]!);
    // A bare URL in prose becomes a link on GitHub too.
    for (const m of line.replace(/\]\([^)]*\)/g, '](').matchAll(/(?:^|[\s(])((?:https?|ftp):\/\/[^\s)>\]]+)/g))
      at(m[1]!);
  });
  return links;
}

/** The problems of one file's links; `root` is the repository's top folder. */
export function checkLinks(root: string, file: string): LinkProblem[] {
  const abs = resolve(root, file);
  const text = readFileSync(abs, 'utf8');
  const problems: LinkProblem[] = [];
  for (const l of linksOf(file, text)) {
    const fail = (problem: string) => problems.push({ ...l, problem });
    if (/^[a-z][a-z0-9+.-]*:/i.test(l.target)) {
      fail('leaves the repository (a URL): link a file of the repository instead');
      continue;
    }
    const [path, anchor] = l.target.split('#', 2) as [string, string | undefined];
    if (path.startsWith('/')) {
      fail('absolute path: write it relative to this file');
      continue;
    }
    const dest = path === '' ? abs : resolve(dirname(abs), decodeURIComponent(path));
    const rel = relative(root, dest);
    if (rel.startsWith('..') || rel.split(sep)[0] === '..') {
      fail('leaves the repository');
      continue;
    }
    if (!existsSync(dest)) {
      fail(`no such file: ${rel}`);
      continue;
    }
    if (anchor !== undefined) {
      if (statSync(dest).isDirectory() || !dest.endsWith('.md')) {
        fail(`anchor #${anchor} into a file that is not Markdown`);
        continue;
      }
      if (!anchorsOf(readFileSync(dest, 'utf8')).has(anchor)) fail(`no heading or anchor #${anchor} in ${rel}`);
    }
  }
  return problems;
}

export function format(p: LinkProblem): string {
  return `${p.file}:${p.line}: (${p.target}) ${p.problem}`;
}

/** README.md, CHANGELOG.md, SECURITY.md, every docs/*.md and docs/decisions/*.md, as paths relative to root. */
export function documents(root: string, list: (dir: string) => string[]): string[] {
  const md = (dir: string) =>
    existsSync(join(root, dir))
      ? list(join(root, dir))
          .filter((f) => f.endsWith('.md'))
          .sort()
          .map((f) => `${dir}/${f}`)
      : [];
  return ['README.md', 'CHANGELOG.md', 'SECURITY.md', ...md('docs'), ...md('docs/decisions')];
}
