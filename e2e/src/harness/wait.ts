/** Thrown by a probe to stop waiting at once (e.g. the process being waited for has exited). */
export class FatalWaitError extends Error {
  override name = 'FatalWaitError';
}

export interface WaitOptions {
  timeoutMs: number;
  intervalMs?: number;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** One line: the error's message and, if any, its cause's (fetch errors hide ECONNREFUSED there). */
export function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? ` (${error.cause.message})` : '';
  return `${error.message}${cause}`;
}

function describeValue(value: unknown): string {
  if (value instanceof Error) return value.message;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? String(value) : text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
  } catch {
    return String(value);
  }
}

/**
 * Polls `probe` until it returns a value other than `undefined` or `false`, and returns that value.
 * A probe may throw: the error is remembered and retried, unless it is a {@link FatalWaitError}.
 * On timeout the error names what was awaited, the last probe error and, if the probe supplied one
 * through `observe`, the last observed state — so a failing test says *why* it gave up.
 */
export async function waitFor<T>(
  description: string,
  probe: (observe: (state: unknown) => void) => Promise<T | undefined | false>,
  { timeoutMs, intervalMs = 250 }: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  let observed: { state: unknown } | undefined;
  const observe = (state: unknown): void => {
    observed = { state };
  };
  for (;;) {
    try {
      const result = await probe(observe);
      if (result !== undefined && result !== false) return result;
      lastError = undefined;
    } catch (error) {
      if (error instanceof FatalWaitError) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const details = [
        observed ? `last observed: ${describeValue(observed.state)}` : undefined,
        lastError !== undefined ? `last error: ${describeValue(lastError)}` : undefined,
      ].filter((line) => line !== undefined);
      throw new Error(
        `timed out after ${(timeoutMs / 1000).toFixed(1)}s waiting for ${description}${details.length ? `\n  ${details.join('\n  ')}` : ''}`,
      );
    }
    await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
  }
}

/** Blocks the thread for `ms` (for synchronous cleanup paths, e.g. an interrupt handler). */
export function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
