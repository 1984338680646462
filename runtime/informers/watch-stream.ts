// One watch request read to its end, for the informer: it ends on ANY end of its response or request (end,
// close, error, abort, the liveness abort), once, and never waits on a readline `close` (Node 24 does not emit
// it for an aborted response). One timer bounds the wait for the response headers and then each silence on
// the stream; bytes only move the time of the last one (not one timer per chunk). Events are read one at a time
// (json-items.ts).
import type { IncomingMessage } from 'node:http';
import { JsonItemScanner } from '../client/json-items.js';
import { ApiError, retryAfterOf, type Json, type RequestOptions, type RestClient } from '../client/rest.js';
import { readError, reasonOf } from '../client/http-body.js';

/** A watch aborted for silence (no header or no byte within the liveness bound). */
export class WatchSilent extends Error {}

export interface WatchStreamOptions {
  rest: RestClient;
  path: string;
  query: RequestOptions['query'];
  livenessMs: number;
  now: () => number;
  /** Each event; a throw ends the watch with that error. */
  onEvent: (ev: Json) => void;
  /** Bytes came (evidence that the stream is alive). */
  onBytes: () => void;
  /** Hands over the abort of this watch (the informer's stop()), or undefined once it ended. */
  setAbort: (abort: ((why: Error) => void) | undefined) => void;
}

/**
 * Opens the watch and reads it until the server ends it: resolves with how many events came. A non-200 answer
 * throws ApiError (with its Retry-After), a silence WatchSilent, any other end its error.
 */
export async function readWatch(o: WatchStreamOptions): Promise<{ events: number }> {
  const ac = new AbortController();
  const timer = liveness(o, ac);
  o.setAbort((why) => ac.abort(why));
  timer.arm();
  let res: IncomingMessage;
  try {
    ({ res } = await o.rest.open('GET', o.path, { query: o.query, signal: ac.signal, retries: 0, stream: true }));
  } catch (e) {
    timer.done();
    throw ac.signal.aborted ? reasonOf(ac.signal) : e;
  }
  if (res.statusCode !== 200) {
    timer.done();
    const code = res.statusCode ?? 0;
    throw new ApiError(code, 'WATCH', o.path, await readError(res), retryAfterOf(code, res.headers['retry-after']));
  }
  timer.arm();
  return { events: await readEvents(o, res, ac, timer) };
}

interface Liveness {
  /** Bytes came (or a wait begins): the silence is measured from now. */
  arm: () => void;
  /** The watch ended: the timer stops and the abort is handed back. */
  done: () => void;
}

/** One timer for the whole watch: it aborts after `livenessMs` without a byte. */
function liveness(o: WatchStreamOptions, ac: AbortController): Liveness {
  let timer: NodeJS.Timeout | undefined;
  let lastByte = o.now();
  const check = () => {
    const left = lastByte + o.livenessMs - o.now();
    if (left > 0) timer = setTimeout(check, left);
    else ac.abort(new WatchSilent(`watch silent for ${o.livenessMs} ms`));
  };
  return {
    arm: () => {
      lastByte = o.now();
      if (timer === undefined) timer = setTimeout(check, o.livenessMs);
    },
    done: () => {
      clearTimeout(timer);
      o.setAbort(undefined);
    },
  };
}

/** The response's events, one at a time, until ANY end of it (settled once): how many came. */
async function readEvents(
  o: WatchStreamOptions,
  res: IncomingMessage,
  ac: AbortController,
  timer: Liveness,
): Promise<number> {
  let events = 0;
  await new Promise<void>((resolve, reject) => {
    let settled = false;
    const scanner = new JsonItemScanner({ mode: 'stream', onItem: (ev: Json) => (events++, o.onEvent(ev)) });
    const finish = (failure?: Error) => {
      if (settled) return;
      settled = true;
      timer.done();
      if (!res.destroyed) res.destroy();
      if (failure) reject(failure);
      else resolve();
    };
    res.on('data', (chunk: Buffer) => {
      if (settled) return;
      o.onBytes();
      timer.arm();
      try {
        scanner.write(chunk);
      } catch (e) {
        finish(e as Error);
      }
    });
    res.once('end', () => {
      try {
        scanner.end();
      } catch (e) {
        return finish(e as Error);
      }
      finish();
    });
    res.once('error', (e) => finish(ac.signal.aborted ? reasonOf(ac.signal) : e));
    res.once('aborted', () => finish(new Error('watch response aborted')));
    res.once('close', () =>
      finish(ac.signal.aborted ? reasonOf(ac.signal) : new Error('watch stream closed before its end')),
    );
    ac.signal.addEventListener('abort', () => finish(reasonOf(ac.signal)), { once: true });
  });
  return events;
}
