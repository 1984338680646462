// The apiserver's warnings (deprecated APIs, admission webhooks' warnings, unknown fields): `Warning` headers
// in RFC 7234's form, `299 - "text"`, several per header comma-separated (apimachinery's ParseWarningHeaders).
// CAPI's managers install a warning handler that logs them (util/apiwarnings, logger "API Server Warning");
// JoinGuard logs each distinct warning once (client-go's WarningWriter with Deduplicate), so a warning that comes
// with every request of a resync does not flood the log.
import type { Logger } from 'winston';

export interface WarningHeader {
  code: number;
  agent: string;
  text: string;
}

/** Every well-formed warning of a `Warning` header (or several); a malformed rest of a header is dropped. */
export function parseWarningHeaders(headers: string | string[]): WarningHeader[] {
  const out: WarningHeader[] = [];
  for (let rest of Array.isArray(headers) ? headers : [headers]) {
    for (;;) {
      rest = rest.trimStart();
      if (rest === '') break;
      const one = parseOne(rest);
      if (!one) break;
      out.push(one.warning);
      rest = one.rest;
    }
  }
  return out;
}

/** `code agent "text" ["date"]` and what follows a comma after it. */
function parseOne(h: string): { warning: WarningHeader; rest: string } | undefined {
  const m = /^(\d{3}) (\S+) "/.exec(h);
  if (!m) return undefined;
  let i = m[0].length;
  let text = '';
  for (; i < h.length; i++) {
    const c = h[i]!;
    if (c === '\\' && i + 1 < h.length) text += h[++i]!;
    else if (c === '"') break;
    else text += c;
  }
  if (i >= h.length) return undefined; // no closing quote
  let rest = h.slice(i + 1).trimStart();
  // An optional quoted date.
  if (rest.startsWith('"')) {
    const end = rest.indexOf('"', 1);
    if (end < 0) return undefined;
    rest = rest.slice(end + 1).trimStart();
  }
  if (rest.startsWith(',')) rest = rest.slice(1);
  else if (rest !== '') return undefined;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(text)) return undefined;
  return { warning: { code: Number(m[1]), agent: m[2]!, text }, rest };
}

/** Distinct warnings remembered; past this the oldest is forgotten (and would be logged again). */
const REMEMBERED = 1000;

/** Logs each distinct warning text once, as CAPI's handler logs them (logger "API Server Warning"). */
export class WarningLog {
  private readonly seen = new Set<string>();

  constructor(private readonly log: Logger) {}

  readonly handle = (text: string): void => {
    if (text === '' || this.seen.has(text)) return;
    if (this.seen.size >= REMEMBERED) this.seen.delete(this.seen.values().next().value!);
    this.seen.add(text);
    this.log.info(text, { logger: 'API Server Warning' });
  };
}
