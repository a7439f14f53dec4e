/**
 * Process signal handling, like controller-runtime's `SetupSignalHandler`: the first
 * SIGTERM/SIGINT starts a graceful shutdown (abort the run's signal); if it has not finished
 * within `shutdownTimeoutMs` (keep it below the pod's terminationGracePeriodSeconds) the
 * process exits with status 1; a second signal exits with status 1 at once.
 * Exit status: 0 after a graceful shutdown, 1 after losing leadership or on failure.
 */

import { createSilentLogger, describeError, type Logger } from '@kubeplus-isolation/service';
import { type Clock, systemClock } from './clock.js';
import type { ManagerExit } from './manager.js';

export interface SignalSource {
  on(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown;
  off(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown;
}

export interface RunUntilSignalledOptions {
  /** Default: `process`. */
  signals?: SignalSource;
  /** Default: `process.exit`. */
  exit?: (code: number) => void;
  /** Bound on graceful shutdown after the first signal. Default 25s. */
  shutdownTimeoutMs?: number;
  clock?: Clock;
  logger?: Logger;
}

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/** Runs `run` until it ends or a signal stops it, then calls `exit` with the status; resolves that status. */
export async function runUntilSignalled(
  run: (signal: AbortSignal) => Promise<ManagerExit>,
  options: RunUntilSignalledOptions = {},
): Promise<number> {
  const signals = options.signals ?? process;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const clock = options.clock ?? systemClock;
  const logger = options.logger ?? createSilentLogger();
  const timeoutMs = options.shutdownTimeoutMs ?? 25_000;
  const controller = new AbortController();
  let exited = false;
  let cancelDeadline: (() => void) | undefined;
  const finish = (code: number): number => {
    if (!exited) {
      exited = true;
      cancelDeadline?.();
      for (const name of SIGNALS) signals.off(name, onSignal);
      exit(code);
    }
    return code;
  };
  function onSignal(): void {
    if (controller.signal.aborted) {
      logger.warn('second signal received; exiting immediately');
      finish(1);
      return;
    }
    logger.info('signal received; shutting down', { timeoutMs });
    controller.abort(new Error('signal received'));
    cancelDeadline = clock.schedule(timeoutMs, () => {
      logger.error('graceful shutdown timed out; exiting', { timeoutMs });
      finish(1);
    });
  }
  for (const name of SIGNALS) signals.on(name, onSignal);

  try {
    const result = await run(controller.signal);
    if (result === 'leadership-lost') {
      logger.error('leadership lost; exiting so the process restarts as a standby');
      return finish(1);
    }
    return finish(0);
  } catch (err) {
    logger.error('operator failed', { error: describeError(err) });
    return finish(1);
  }
}
