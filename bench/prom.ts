// Prometheus text exposition, read: the apiserver's audit counters, the CAPI core manager's
// per-controller reconcile figures and JoinGuard's process and V8 figures are all scraped from /metrics.
import http from 'node:http';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[3] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[4]) });
  }
  return out;
}

/** The sum of a family's samples whose labels include `where`. */
export function sum(samples: Sample[], name: string, where: Record<string, string> = {}): number {
  let s = 0;
  for (const x of samples)
    if (x.name === name && Object.entries(where).every(([k, v]) => x.labels[k] === v)) s += x.value;
  return s;
}

/** name{label} -> summed value, for one label (e.g. controller_runtime_reconcile_total by controller). */
export function byLabel(samples: Sample[], name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of samples)
    if (x.name === name) out[x.labels[label] ?? ''] = (out[x.labels[label] ?? ''] ?? 0) + x.value;
  return out;
}

/** GET a plain-HTTP /metrics; undefined when it does not answer (the process is gone or busy). */
export function scrape(url: string, timeoutMs = 10_000): Promise<Sample[] | undefined> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve(res.statusCode === 200 ? parseMetrics(text) : undefined));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}
