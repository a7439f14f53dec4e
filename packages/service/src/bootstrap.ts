/**
 * The process bootstrap both services' main.ts run: flags first (so --help, --version and flag
 * errors answer at once, before main.ts imports the service's own modules), then the JSON logger,
 * then handlers that log an uncaught exception or unhandled rejection and exit 1 — a process in an
 * unknown state restarts rather than serves. Exit 2 for invalid flags.
 */
import { createLogger, type Logger, type LogLevel } from './log.js';

export type ConfigParse<C> =
  | { kind: 'config'; config: C }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

export interface BootstrapOptions<C extends { logLevel: LogLevel }> {
  program: string;
  version: string;
  parse(): ConfigParse<C>;
  usage(): string;
  /** The `component` field of every log line, e.g. `webhook`. */
  component: string;
  /**
   * Builds the logger (default: `createLogger` with the config's level and the component). A
   * service with a faster writer of the same line format passes its own.
   */
  createLogger?: (config: C) => Logger;
}

export function bootstrap<C extends { logLevel: LogLevel }>(
  options: BootstrapOptions<C>,
): { config: C; logger: Logger } {
  const parsed = options.parse();
  if (parsed.kind === 'help') {
    process.stdout.write(options.usage());
    process.exit(0);
  }
  if (parsed.kind === 'version') {
    process.stdout.write(`${options.program} ${options.version}\n`);
    process.exit(0);
  }
  if (parsed.kind === 'error') {
    process.stderr.write(`${options.program}: ${parsed.message}\nRun ${options.program} --help for the flags.\n`);
    process.exit(2);
  }
  const config = parsed.config;
  const logger =
    options.createLogger?.(config) ?? createLogger({ level: config.logLevel, base: { component: options.component } });
  process.on('uncaughtException', (err) => {
    logger.error('uncaught exception; exiting', { error: err.message, stack: err.stack });
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    logger.error('unhandled promise rejection; exiting', {
      error: reason instanceof Error ? reason.stack : String(reason),
    });
    process.exit(1);
  });
  return { config, logger };
}
