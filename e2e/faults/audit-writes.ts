// The writes in the apiserver's audit log (JSON lines; the test env logs every write at level Metadata in
// blocking mode, so a write that completed is in the file). One entry per completed request, timed by
// the apiserver's requestReceivedTimestamp, with the user who made it (test-only).
import fs from 'node:fs';

export interface AuditWrite {
  at: number;
  user: string;
  userAgent: string;
  verb: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  code: number;
}

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export function readAuditWrites(file: string): AuditWrite[] {
  const out: AuditWrite[] = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    let e: Record<string, any>;
    try {
      e = JSON.parse(line);
    } catch {
      continue; // a line being written
    }
    if (e.stage !== 'ResponseComplete' || !WRITE_VERBS.has(e.verb)) continue;
    const ref = e.objectRef ?? {};
    out.push({
      at: Date.parse(e.requestReceivedTimestamp),
      user: e.user?.username ?? '',
      userAgent: e.userAgent ?? '',
      verb: e.verb,
      resource: ref.resource ?? '',
      code: e.responseStatus?.code ?? 0,
      ...(ref.subresource ? { subresource: ref.subresource } : {}),
      ...(ref.namespace ? { namespace: ref.namespace } : {}),
      ...(ref.name ? { name: ref.name } : {}),
    });
  }
  return out.sort((x, y) => x.at - y.at);
}
