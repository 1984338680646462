// The house's floors: which top-level folder imports which (relative imports of .ts files, of the files given:
// product code alone, or tests too), and the cycles between folders. A cycle means two folders can only be
// understood, tested and changed together.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

const SKIP = new Set(['node_modules', 'dist', 'out', '.git', 'lint']);

export function tsFiles(root: string, dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.name.startsWith('.') || SKIP.has(e.name)) return [];
    const p = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(root, p);
    return e.name.endsWith('.ts') ? [relative(root, p)] : [];
  });
}

/** The folders whose code ships; their tests and test helpers live beside it. */
export const PRODUCT = ['api', 'runtime', 'controllers', 'webhooks', 'cmd', 'manifests'] as const;

/** A test or a test helper: `*.test.ts`, or a file under a `testing/` folder (the top-level testing/ included). */
export function isTest(file: string): boolean {
  return file.endsWith('.test.ts') || file.split('/').slice(0, -1).includes('testing');
}

const IMPORT = /(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** The top-level folder of a path (a file at the root is its own "folder"). */
const top = (p: string) => p.split('/')[0]!;

/**
 * The rooms inside one folder (`base`): each sub-folder is a room, named `name/`; each file directly in `base` is its
 * own room, named by its file name; a path outside `base` is its top-level folder.
 */
export function roomOf(base: string): (p: string) => string {
  return (p) => {
    if (!p.startsWith(base + '/')) return top(p);
    const rest = p.slice(base.length + 1).split('/');
    return rest.length > 1 ? `${rest[0]}/` : rest[0]!;
  };
}

/** Folder -> the folders its files import (relative imports only); `room` groups paths (top-level folders unless told). */
export function folderArrows(
  root: string,
  files: readonly string[],
  room: (p: string) => string = top,
): Map<string, Set<string>> {
  const arrows = new Map<string, Set<string>>();
  for (const f of files) {
    const from = room(f);
    const to = arrows.get(from) ?? new Set<string>();
    arrows.set(from, to);
    for (const m of readFileSync(join(root, f), 'utf8').matchAll(IMPORT)) {
      const target = room(normalize(join(dirname(f), m[1]!)).replace(/\.js$/, '.ts'));
      if (target !== from && !target.startsWith('..')) to.add(target);
    }
  }
  return arrows;
}

/** Every cycle found by a depth-first walk, each as the folders on it (first repeated at the end). */
export function cycles(arrows: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (n: string): void => {
    state.set(n, 'open');
    path.push(n);
    for (const next of [...(arrows.get(n) ?? [])].sort()) {
      if (state.get(next) === 'open') found.push([...path.slice(path.indexOf(next)), next]);
      else if (state.get(next) === undefined) visit(next);
    }
    path.pop();
    state.set(n, 'done');
  };
  for (const n of [...arrows.keys()].sort()) if (state.get(n) === undefined) visit(n);
  return found;
}

/**
 * The arrows that do not run down the floors given (top floor first): a room imports only rooms on lower floors, never
 * one on its own floor; a room on no floor is reported too (a new file or folder must be given its floor). Targets
 * outside `inside` (rooms of other folders) are not judged here.
 */
export function upArrows(
  arrows: ReadonlyMap<string, ReadonlySet<string>>,
  floors: readonly (readonly string[])[],
  inside: (room: string) => boolean,
): string[] {
  const floorOf = new Map(floors.flatMap((rooms, i) => rooms.map((r) => [r, i] as const)));
  const bad: string[] = [];
  for (const [from, tos] of [...arrows].sort(([a], [b]) => a.localeCompare(b))) {
    const f = floorOf.get(from);
    if (f === undefined) {
      bad.push(`${from}: on no floor`);
      continue;
    }
    for (const to of [...tos].sort()) {
      if (!inside(to)) continue;
      const t = floorOf.get(to);
      if (t === undefined || t <= f) bad.push(`${from} -> ${to}`);
    }
  }
  return bad;
}
