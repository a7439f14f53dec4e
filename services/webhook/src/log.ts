/**
 * Structured JSON logs (winston) on stdout, one object per line, in the line format both services
 * share (`{"ts","level","msg","component":"webhook",…}`, @kubeplus-isolation/service). Admission log lines carry
 * the request uid, namespace, Pod name (or generateName), result and reason — never a Pod body.
 *
 * Cheap enough to write a line per admission: winston's stock pipeline for JSON lines
 * (`timestamp()` + `errors()` + `json()`, whose safe-stable-stringify is configured anew and
 * sorts keys on every line, then the Console transport's setImmediate per line) cost ~18 µs of
 * CPU per admission line; `leanJson` + a plain stdout transport ~5 µs (measured in one process,
 * stdout to a file), and `StdoutTransport` writes the lines of up to 10 ms at once (one write,
 * a system call, per admission under load cost ~5% of the webhook's busy time).
 * `logRecord` — the admission line, one
 * per Pod — skips winston's object-mode stream pipeline (a Transform, a pipe and the transport's
 * Writable per line) when the logger is createLogger's default, and writes the same line.
 */
import { formatLine, type LogLevel } from '@kubeplus-isolation/service';
import winston from 'winston';

/** The `component` field of every line (the services share the line format: ts, level, msg, component). */
export const COMPONENT = 'webhook';

/** Where winston (triple-beam) keeps the formatted line of a log record. */
const MESSAGE = Symbol.for('message');

let isoSecond = Number.NaN;
let isoPrefix = '';

/**
 * `new Date(now).toISOString()` ("2026-01-02T03:04:05.678Z"), with the part up to the second
 * formatted once per second: a Date and its formatting cost more than a short log line's
 * JSON.stringify.
 */
export function isoTimestamp(now: number = Date.now()): string {
  const second = Math.floor(now / 1000);
  if (second !== isoSecond) {
    isoSecond = second;
    isoPrefix = new Date(second * 1000).toISOString().slice(0, -4);
  }
  const ms = now - second * 1000;
  return `${isoPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z`;
}

/** Keys a record's fields never contribute to the line (the line's own ts, level and msg come first). */
function isReserved(key: string): boolean {
  return key === 'level' || key === 'message' || key === 'component';
}

/**
 * The line of one record in the services' shared format — `{"ts","level","msg",…fields}` —
 * built with the once-per-second timestamp and native JSON.stringify, or `undefined` when the
 * record needs @kubeplus-isolation/service `formatLine` (an Error as the message or a field, a
 * value JSON.stringify rejects: a BigInt, a cycle), which writes those the same way the
 * operator's lines do. With `meta` (the logger's defaultMeta), the fields are what winston's
 * single-object call merges — the record's keys, then meta's other keys, meta's values winning —
 * without building that object.
 */
function leanLine(
  level: unknown,
  message: unknown,
  fields: Record<string, unknown>,
  meta?: Record<string, unknown>,
): string | undefined {
  if (typeof message !== 'string') return undefined;
  const line: Record<string, unknown> = { ts: isoTimestamp(), level, msg: message };
  const component = meta !== undefined && Object.hasOwn(meta, 'component') ? meta.component : fields.component;
  if (component !== undefined) line.component = component;
  for (const key in fields) {
    if (isReserved(key)) continue;
    const value = meta !== undefined && Object.hasOwn(meta, key) ? meta[key] : fields[key];
    if (value instanceof Error) return undefined;
    line[key] = value;
  }
  if (meta !== undefined) {
    for (const key in meta) {
      if (isReserved(key) || Object.hasOwn(fields, key)) continue;
      const value = meta[key];
      if (value instanceof Error) return undefined;
      line[key] = value;
    }
  }
  try {
    return JSON.stringify(line);
  } catch {
    return undefined;
  }
}

const leanJson = winston.format((info) => {
  const record = info as unknown as Record<string, unknown>;
  (info as unknown as Record<symbol, unknown>)[MESSAGE] =
    leanLine(record.level, record.message, record) ?? formatLine(record);
  return info;
});

/** winston-transport's base class: `winston.Transport` at run time (its typings only name the instance type). */
const TransportStream = (winston as unknown as { Transport: new () => winston.transport }).Transport;

/** Buffered lines are written at the latest once they reach this size. */
const FLUSH_BYTES = 64 * 1024;
/** …or this long after the first of them was logged. */
export const FLUSH_INTERVAL_MS = 10;

/** Every StdoutTransport with lines not yet written, flushed synchronously when the process exits. */
const unflushed = new Set<StdoutTransport>();
let exitHookInstalled = false;

/**
 * Writes each formatted line to stdout, as winston's Console transport does for every level by
 * default, but with one write for all the lines logged within FLUSH_INTERVAL_MS of the first (or
 * per 64 KiB), instead of a write — a system call — and a setImmediate per line. Lines keep
 * their order; a process that exits (process.exit included) writes what is pending first; only
 * a SIGKILL (or an OOM kill) can lose the lines of the last 10 ms. stdout is synchronous for
 * files and pipes on Linux.
 */
export class StdoutTransport extends TransportStream {
  #pending = '';
  #scheduled = false;
  readonly #flushSoon = (): void => {
    this.#scheduled = false;
    this.flush();
  };

  override log(info: Record<symbol, unknown>, next: () => void): void {
    this.append(info[MESSAGE] as string);
    next();
  }

  /** Queues one formatted line (without its newline) for the next write. */
  append(line: string): void {
    this.#pending += `${line}\n`;
    if (this.#pending.length >= FLUSH_BYTES) {
      this.flush();
    } else if (!this.#scheduled) {
      this.#scheduled = true;
      unflushed.add(this);
      if (!exitHookInstalled) {
        exitHookInstalled = true;
        process.on('exit', () => {
          for (const t of unflushed) t.flush();
        });
      }
      // Unreferenced: pending lines never keep the process alive (the exit hook writes them).
      setTimeout(this.#flushSoon, FLUSH_INTERVAL_MS).unref();
    }
  }

  /** Writes the pending lines now. */
  flush(): void {
    unflushed.delete(this);
    if (this.#pending === '') return;
    const text = this.#pending;
    this.#pending = '';
    process.stdout.write(text);
  }
}

export interface LoggerOptions {
  level: LogLevel;
  /** Extra or replacement transports (tests capture log records this way). */
  transports?: winston.transport[];
  silent?: boolean;
}

/** The format each logger createLogger made was given: while it and a lone StdoutTransport are in place, `logRecord` writes directly. */
const leanFormats = new WeakMap<winston.Logger, winston.Logform.Format>();

export function createLogger(opts: LoggerOptions): winston.Logger {
  const format = leanJson();
  const logger = winston.createLogger({
    level: opts.level,
    levels: winston.config.npm.levels,
    defaultMeta: { component: COMPONENT },
    format,
    transports: opts.transports ?? [new StdoutTransport()],
    silent: opts.silent ?? false,
  });
  leanFormats.set(logger, format);
  return logger;
}

/** The logger's StdoutTransport when the logger writes with leanJson to it alone, unfiltered; else undefined. */
function directTransport(logger: winston.Logger): StdoutTransport | undefined {
  if (logger.silent || logger.format !== leanFormats.get(logger) || logger.transports.length !== 1) return undefined;
  const transport = logger.transports[0];
  if (!(transport instanceof StdoutTransport)) return undefined;
  return transport.level === undefined && !transport.silent && transport.format === undefined ? transport : undefined;
}

/**
 * Logs `record` (a plain object with a string `message`; the caller's, not kept) at `level` when
 * the level is enabled: the line `logger[level](record)` writes — same fields, same order — but,
 * for createLogger's default logger (leanJson to a lone StdoutTransport), formatted here and
 * handed to the transport without winston's object-mode streams. Anything else (other
 * transports, a record JSON.stringify rejects) goes through winston.
 */
export function logRecord(logger: winston.Logger, level: LogLevel, record: Record<string, unknown>): void {
  if (!logger.isLevelEnabled(level)) return;
  const transport = directTransport(logger);
  if (transport === undefined || typeof record.message !== 'string') {
    logger[level](record);
    return;
  }
  // What winston's single-object call sees (the record merged with defaultMeta), formatted as leanJson does.
  const line = leanLine(level, record.message, record, logger.defaultMeta as Record<string, unknown> | undefined);
  if (line === undefined) {
    logger[level](record);
    return;
  }
  transport.append(line);
}

type LogMethod = (message: string, meta?: Record<string, unknown>) => void;

/** The part of a logger the modules use; a winston Logger is one. Lets tests record log calls. */
export interface LogSink {
  error: LogMethod;
  warn: LogMethod;
  info: LogMethod;
  debug: LogMethod;
}
