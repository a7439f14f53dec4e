/**
 * Structured JSON logs (winston) on stdout, one object per line. Admission log lines carry
 * the request uid, namespace, Pod name (or generateName), result and reason — never a Pod body.
 */
import winston from 'winston';

export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const SERVICE_NAME = 'kubeplus-node-isolation-webhook';

export interface LoggerOptions {
  level: LogLevel;
  /** Extra or replacement transports (tests capture log records this way). */
  transports?: winston.transport[];
  silent?: boolean;
}

export function createLogger(opts: LoggerOptions): winston.Logger {
  return winston.createLogger({
    level: opts.level,
    levels: winston.config.npm.levels,
    defaultMeta: { service: SERVICE_NAME },
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format.errors({ stack: true }),
      winston.format.json(),
    ),
    transports: opts.transports ?? [new winston.transports.Console()],
    silent: opts.silent ?? false,
  });
}

type LogMethod = (message: string, meta?: Record<string, unknown>) => void;

/** The part of a logger the modules use; a winston Logger is one. Lets tests record log calls. */
export interface LogSink {
  error: LogMethod;
  warn: LogMethod;
  info: LogMethod;
  debug: LogMethod;
}
