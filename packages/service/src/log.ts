/**
 * Structured JSON logging (winston), one object per line, the same keys in both services:
 * `{"ts":"…","level":"info","msg":"…","component":"webhook",…fields}` — the shape of
 * controller-runtime's zap logger (ts, level, msg) so SREs grep and ship both services' logs the
 * same way. Error values in fields are flattened to their description (and HTTP status), never
 * dumped with request headers; metadata JSON cannot encode (a cycle, a BigInt) never takes the
 * process down.
 */
import { Writable } from 'node:stream';
import winston from 'winston';
import { describeError, httpStatusOf } from './errors.js';

export type Logger = winston.Logger;

export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Parses a configured level (case-insensitive); `undefined`/empty gives `info`. Throws a clear error otherwise. */
export function parseLogLevel(raw: string | undefined): LogLevel {
  if (raw === undefined || raw.trim() === '') return 'info';
  const level = raw.trim().toLowerCase();
  if ((LOG_LEVELS as readonly string[]).includes(level)) return level as LogLevel;
  throw new Error(`invalid log level ${JSON.stringify(raw)}: expected one of ${LOG_LEVELS.join(', ')}`);
}

export interface LoggerOptions {
  level?: LogLevel;
  /** Where lines go; defaults to stdout. */
  stream?: NodeJS.WritableStream;
  /** Fields on every line, e.g. `{ component: 'operator' }`. */
  base?: Record<string, unknown>;
}

const MESSAGE = Symbol.for('message');
const RESERVED = new Set(['level', 'message', 'ts', 'msg']);

/** The JSON line of one record. */
export function formatLine(info: Record<string, unknown>, now: Date = new Date()): string {
  const line: Record<string, unknown> = {
    ts: now.toISOString(),
    level: info.level,
    msg: typeof info.message === 'string' ? info.message : describeError(info.message),
  };
  for (const [key, value] of Object.entries(info)) {
    if (RESERVED.has(key)) continue;
    line[key] = value instanceof Error ? serializeError(value) : value;
  }
  try {
    return JSON.stringify(line);
  } catch {
    return JSON.stringify({ ts: line.ts, level: line.level, msg: line.msg, logError: 'unserializable metadata' });
  }
}

function serializeError(err: Error): Record<string, unknown> {
  const status = httpStatusOf(err);
  return status === undefined ? { message: describeError(err) } : { message: describeError(err), status };
}

const jsonLine = winston.format((info) => {
  (info as unknown as Record<symbol, string>)[MESSAGE] = formatLine(info as Record<string, unknown>);
  return info;
});

export function createLogger(options: LoggerOptions = {}): Logger {
  return winston.createLogger({
    level: options.level ?? 'info',
    levels: { error: 0, warn: 1, info: 2, debug: 3 },
    format: jsonLine(),
    defaultMeta: options.base,
    transports: [new winston.transports.Stream({ stream: options.stream ?? process.stdout })],
  });
}

/** A logger that discards everything (tests, or components whose caller passed none). */
export function createSilentLogger(): Logger {
  return winston.createLogger({
    silent: true,
    transports: [new winston.transports.Stream({ stream: new Writable({ write: (_c, _e, cb) => cb() }) })],
  });
}
