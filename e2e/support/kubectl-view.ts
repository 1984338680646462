// What kubectl shows of an object, without kubectl (the repository does not build it): `kubectl get` is the
// apiserver's Table for the resource (the CRD's printer columns, computed by the apiserver; kubectl only lays the
// cells out), and `kubectl describe` of a custom resource prints the object's fields as kubectl's generic describer
// does (keys sorted, camelCase turned into words, nested maps and list entries indented one level, nothing between
// list entries). Used by the specs that assert what an operator reads.
import fs from 'node:fs';
import https from 'node:https';
import { credentialsFromKubeconfig } from '../../hack/testenv/kube-client.js';

export interface Table {
  columns: { name: string; priority: number }[];
  rows: { name: string; cells: Record<string, unknown> }[];
}

const TABLE = 'application/json;as=Table;g=meta.k8s.io;v=v1';

/** GET `path` as kubectl get does (the apiserver's Table); cells keyed by column name. */
export function getTable(kubeconfigPath: string, path: string): Promise<Table> {
  const creds = credentialsFromKubeconfig(fs.readFileSync(kubeconfigPath, 'utf8'));
  const server = new URL(creds.server);
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: server.hostname,
        port: server.port,
        path,
        method: 'GET',
        ca: creds.caPem,
        cert: creds.certPem,
        key: creds.keyPem,
        headers: { Accept: TABLE, ...(creds.token ? { Authorization: `Bearer ${creds.token}` } : {}) },
        timeout: 15_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8');
          if (res.statusCode !== 200) return reject(new Error(`GET ${path} as Table: ${res.statusCode} ${body}`));
          const t = JSON.parse(body) as {
            kind: string;
            columnDefinitions: { name: string; priority: number }[];
            rows: { cells: unknown[] }[];
          };
          if (t.kind !== 'Table') return reject(new Error(`GET ${path}: not a Table but ${t.kind}`));
          const columns = t.columnDefinitions.map((c) => ({ name: c.name, priority: c.priority }));
          resolve({
            columns,
            rows: t.rows.map((r) => {
              const cells = Object.fromEntries(columns.map((c, i) => [c.name, r.cells[i]]));
              return { name: String(cells['Name']), cells };
            }),
          });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${path} as Table: timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** The table as kubectl prints it (priority-0 columns; a missing value is `<none>`). */
export function printTable(t: Table): string {
  const cols = t.columns.filter((c) => c.priority === 0);
  const text = (v: unknown) => (v === null || v === undefined || v === '' ? '<none>' : String(v));
  const lines = [cols.map((c) => c.name.toUpperCase()), ...t.rows.map((r) => cols.map((c) => text(r.cells[c.name])))];
  const widths = cols.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  return lines
    .map((l) =>
      l
        .map((x, i) => x.padEnd(widths[i]!))
        .join('   ')
        .trimEnd(),
    )
    .join('\n');
}

/** kubectl's label for a field: `timedMachines` -> `Timed Machines`, `uid` -> `UID`; a name with digits as is. */
export function fieldLabel(field: string): string {
  if (/[^A-Za-z-]/.test(field)) return field;
  return field
    .split(/(?=[A-Z])/)
    .map((p) =>
      ['API', 'URL', 'UID', 'OSB', 'GUID'].includes(p.toUpperCase())
        ? p.toUpperCase()
        : p[0]!.toUpperCase() + p.slice(1),
    )
    .join(' ');
}

/** `kubectl describe` of a value's fields at `level` (2 spaces each), keys sorted, values aligned per object. */
export function describeFields(value: Record<string, unknown>, level = 0): string[] {
  const out: string[] = [];
  const pad = '  '.repeat(level);
  const keys = Object.keys(value).sort();
  const width = Math.max(0, ...keys.map((k) => fieldLabel(k).length + 1));
  for (const k of keys) {
    const v = value[k];
    if (Array.isArray(v)) {
      out.push(`${pad}${fieldLabel(k)}:`);
      for (const e of v)
        if (typeof e === 'object' && e !== null) out.push(...describeFields(e as Record<string, unknown>, level + 1));
        else out.push(`${pad}  ${String(e)}`);
    } else if (typeof v === 'object' && v !== null) {
      out.push(`${pad}${fieldLabel(k)}:`);
      out.push(...describeFields(v as Record<string, unknown>, level + 1));
    } else {
      out.push(`${pad}${`${fieldLabel(k)}:`.padEnd(width)}  ${String(v)}`);
    }
  }
  return out;
}
