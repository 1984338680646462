// The harness's one wait helper (test-only): start-up readiness, and what e2e specs wait for. Tests may
// poll; the controller under test never does.

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Extra text for the failure message (the state seen last). */
  describe?: () => string | Promise<string>;
  /** Consulted before each try (e.g. "the process died"): a string it returns fails at once. */
  abort?: () => string | undefined;
}

/**
 * Calls fn until it returns something other than undefined/false; throws after the timeout naming `what`,
 * the last error fn threw and what `describe` says.
 */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  opts: WaitOptions = {},
): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    const reason = opts.abort?.();
    if (reason) throw new Error(`${what}: ${reason}`);
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const seen = opts.describe ? await Promise.resolve(opts.describe()).catch((e) => `(describe failed: ${e})`) : '';
      throw new Error(
        `timed out after ${timeoutMs}ms waiting for ${what}` +
          `${lastError ? `; last error: ${lastError instanceof Error ? lastError.message : String(lastError)}` : ''}${seen ? `\n${seen}` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 250));
  }
}
