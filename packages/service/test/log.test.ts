import { Writable } from 'node:stream';
import { describe, expect, it } from '@jest/globals';
import { createLogger, formatLine, type Logger, type LogLevel, parseLogLevel } from '../src/index.js';

/** A logger writing into memory, and its lines parsed. */
function captureLogger(level: LogLevel): { logger: Logger; lines(): Array<Record<string, unknown>> } {
  const raw: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      raw.push(chunk.toString());
      callback();
    },
  });
  return {
    logger: createLogger({ level, stream, base: { component: 'test' } }),
    lines: () =>
      raw
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

class HttpError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

describe('logger', () => {
  it('writes one JSON object per line with ts, level, msg and the given fields', async () => {
    const { logger, lines } = captureLogger('info');
    logger
      .child({ controller: 'node-isolation' })
      .info('reconciled', { key: 'team-a/agent-x', namespace: 'team-a', name: 'agent-x' });
    await flush();
    const [line] = lines();
    expect(line).toEqual({
      ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      level: 'info',
      msg: 'reconciled',
      component: 'test',
      controller: 'node-isolation',
      key: 'team-a/agent-x',
      namespace: 'team-a',
      name: 'agent-x',
    });
  });

  it('drops lines below the configured level', async () => {
    const { logger, lines } = captureLogger('warn');
    logger.info('hidden');
    logger.debug('hidden');
    logger.warn('shown');
    logger.error('shown too');
    await flush();
    expect(lines().map((l) => l.level)).toEqual(['warn', 'error']);
  });

  it('flattens errors to their message and HTTP status', () => {
    const line = JSON.parse(formatLine({ level: 'error', message: 'failed', error: new HttpError(409, 'conflict') }));
    expect(line.error).toEqual({ message: 'HTTP 409: conflict', status: 409 });
  });

  it('never throws on unserialisable metadata', () => {
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const line = JSON.parse(formatLine({ level: 'info', message: 'x', circular }));
    expect(line).toMatchObject({ level: 'info', msg: 'x', logError: 'unserializable metadata' });
  });
});

describe('parseLogLevel', () => {
  it('accepts known levels case-insensitively and defaults to info', () => {
    expect(parseLogLevel(undefined)).toBe('info');
    expect(parseLogLevel('')).toBe('info');
    expect(parseLogLevel(' DEBUG ')).toBe('debug');
  });

  it('rejects anything else with a clear message', () => {
    expect(() => parseLogLevel('verbose')).toThrow(
      'invalid log level "verbose": expected one of error, warn, info, debug',
    );
  });
});
