// Reading answers of the REST client: a whole body, an error's message, a drained body; sleeps and reasons of
// abort signals. Every helper finishes on the response's own end events, once (Node 24 emits no readline close
// for an aborted response).
import type { IncomingMessage } from 'node:http';

type Json = Record<string, any>;

/** Reads and drops a (small, error) body so the connection can be reused; never waits past its end. */
export function drain(res: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    res.resume();
    res.once('end', resolve);
    res.once('error', () => resolve());
    res.once('close', () => resolve());
  });
}

/** The message of an error answer (its first 4 KiB); never waits past the response's own end. */
export function readError(res: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const done = () => resolve(statusMessage(text));
    res.on('data', (c: Buffer) => (text.length < 4096 ? (text += c.toString('utf8')) : undefined));
    res.once('end', done);
    res.once('error', done);
    res.once('close', done);
  });
}

/** The whole body; any end but `end` (reset, abort, destroy) rejects, once. */
export function readAll(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.once('error', reject);
    res.once('close', () => reject(new Error('the response ended before its body')));
  });
}

/** An AbortSignal's reason as an Error. */
export function reasonOf(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? 'aborted'));
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(reasonOf(signal!));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The message of a Status body, else the start of the text. */
export function statusMessage(text: string): string {
  try {
    const s = JSON.parse(text) as Json;
    if (typeof s.message === 'string') return s.message;
  } catch {
    // not a Status
  }
  return text.slice(0, 200);
}
