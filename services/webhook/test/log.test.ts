import { Writable } from 'node:stream';
import { describe, expect, it, jest } from '@jest/globals';
import winston from 'winston';
import { createLogger, isoTimestamp, logRecord, SERVICE_NAME, StdoutTransport } from '../src/log.js';

function capture(level: 'debug' | 'info' = 'debug') {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ level, transports: [new winston.transports.Stream({ stream })] });
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines };
}

describe('createLogger: one JSON object per line', () => {
  it('carries level, message, service, an ISO timestamp and the fields, from either call form', () => {
    const { logger, lines } = capture();
    logger.info('namespace isolation loaded', { namespace: 'team-a', tolerations: 1 });
    logger.warn({ message: 'pod admitted WITHOUT node isolation (fail open)', uid: 'u', reason: 'lookup_timeout' });
    expect(lines()).toEqual([
      {
        level: 'info',
        message: 'namespace isolation loaded',
        service: SERVICE_NAME,
        timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        namespace: 'team-a',
        tolerations: 1,
      },
      {
        level: 'warn',
        message: 'pod admitted WITHOUT node isolation (fail open)',
        service: SERVICE_NAME,
        timestamp: expect.any(String),
        uid: 'u',
        reason: 'lookup_timeout',
      },
    ]);
  });

  it('drops lines below the level', () => {
    const { logger, lines } = capture('info');
    logger.debug('pod admitted unchanged', { uid: 'u' });
    expect(lines()).toEqual([]);
  });

  it('writes what winston’s stock JSON chain writes for an Error and for values JSON.stringify rejects', () => {
    const { logger, lines } = capture();
    logger.error(new Error('boom'));
    logger.info('big', { n: 10n });
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    logger.info('cyclic', { cyclic });
    const [error, big, cycle] = lines();
    expect(error).toMatchObject({ level: 'error', message: 'boom', stack: expect.stringContaining('Error: boom') });
    expect(big).toMatchObject({ message: 'big', n: '10', timestamp: expect.any(String) });
    expect(cycle).toMatchObject({ message: 'cyclic', cyclic: { a: 1, self: '[Circular]' } });
  });
});

describe('StdoutTransport', () => {
  it('writes the lines of one event-loop turn to stdout in one write, in order, newline-terminated', async () => {
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      const logger = createLogger({ level: 'info', transports: [new StdoutTransport()] });
      logger.info('hello', { a: 1 });
      logger.warn('again', { a: 2 });
      expect(write).not.toHaveBeenCalled();
      await new Promise((resolve) => setImmediate(resolve));
      expect(write).toHaveBeenCalledTimes(1);
      const text = write.mock.calls[0]?.[0] as string;
      expect(text.endsWith('}\n')).toBe(true);
      const lines = text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l));
      expect(lines).toEqual([
        expect.objectContaining({ level: 'info', message: 'hello', a: 1, service: SERVICE_NAME }),
        expect.objectContaining({ level: 'warn', message: 'again', a: 2 }),
      ]);
    } finally {
      write.mockRestore();
    }
  });

  it('writes at once when the pending lines reach 64 KiB, and flush() writes what is pending', () => {
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      const transport = new StdoutTransport();
      const logger = createLogger({ level: 'info', transports: [transport] });
      logger.info('big', { text: 'x'.repeat(70 * 1024) });
      expect(write).toHaveBeenCalledTimes(1);
      logger.info('small');
      transport.flush();
      expect(write).toHaveBeenCalledTimes(2);
      expect(JSON.parse(write.mock.calls[1]?.[0] as string)).toMatchObject({ message: 'small' });
      transport.flush();
      expect(write).toHaveBeenCalledTimes(2);
    } finally {
      write.mockRestore();
    }
  });
});

describe('isoTimestamp', () => {
  it('is Date#toISOString, across seconds, before 1970 and past year 9999', () => {
    const instants = [
      0, 1, 9, 10, 99, 100, 999, 1000, 1001, -1, -999, -1000, -1001, 1_767_225_599_999, 1_767_225_600_000,
    ];
    for (const base of [0, 1_767_225_600_000, -62_198_755_200_000, 253_402_300_799_000, 253_402_300_800_000]) {
      for (const d of [0, 5, 42, 999, 1000, 1234]) instants.push(base + d, base - d);
    }
    for (const t of instants) expect(isoTimestamp(t)).toBe(new Date(t).toISOString());
    // In time order, as the process sees it.
    for (let t = 1_767_225_598_990; t < 1_767_225_601_020; t += 7)
      expect(isoTimestamp(t)).toBe(new Date(t).toISOString());
  });

  it('defaults to now', () => {
    const now = jest.spyOn(Date, 'now').mockReturnValue(1_767_225_600_123);
    try {
      expect(isoTimestamp()).toBe('2026-01-01T00:00:00.123Z');
    } finally {
      now.mockRestore();
    }
  });
});

describe('logRecord: the line logger[level](record) writes', () => {
  const record = () => ({
    message: 'pod admitted with node isolation',
    uid: 'u-1',
    namespace: 'team-a',
    durationMs: 0.25,
  });

  /** Lines written to stdout by a logger on a StdoutTransport, with the clock stopped. */
  function stdoutLines(run: (logger: winston.Logger, transport: StdoutTransport) => void): string[] {
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const now = jest.spyOn(Date, 'now').mockReturnValue(1_767_225_600_123);
    try {
      const transport = new StdoutTransport();
      run(createLogger({ level: 'info', transports: [transport] }), transport);
      transport.flush();
      return write.mock.calls.map((c) => c[0] as string);
    } finally {
      now.mockRestore();
      write.mockRestore();
    }
  }

  it('writes to a lone StdoutTransport without winston’s streams, byte for byte what winston writes', () => {
    let winstonWrites = 0;
    const direct = stdoutLines((logger) => {
      const write = jest.spyOn(logger, 'write');
      logRecord(logger, 'info', record());
      logRecord(logger, 'warn', { ...record(), reason: 'lookup_timeout' });
      winstonWrites = write.mock.calls.length;
    });
    const viaWinston = stdoutLines((logger) => {
      logger.info(record());
      logger.warn({ ...record(), reason: 'lookup_timeout' });
    });
    expect(winstonWrites).toBe(0);
    expect(direct).toEqual(viaWinston);
    expect(direct.join('').split('\n', 1)[0]).toBe(
      '{"message":"pod admitted with node isolation","uid":"u-1","namespace":"team-a","durationMs":0.25,' +
        `"level":"info","service":"${SERVICE_NAME}","timestamp":"2026-01-01T00:00:00.123Z"}`,
    );
  });

  it('writes nothing below the level', () => {
    expect(stdoutLines((logger) => logRecord(logger, 'debug', record()))).toEqual([]);
  });

  it('keeps the order of lines logged either way', () => {
    const text = stdoutLines((logger) => {
      logger.info('first');
      logRecord(logger, 'info', { message: 'second' });
      logger.warn('third');
    }).join('');
    expect(
      text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l).message),
    ).toEqual(['first', 'second', 'third']);
  });

  it('goes through winston for any other transport, and for what JSON.stringify rejects', () => {
    const { logger, lines } = capture('info');
    logRecord(logger, 'info', record());
    expect(lines()).toEqual([{ ...record(), level: 'info', service: SERVICE_NAME, timestamp: expect.any(String) }]);
    const big = stdoutLines((l) => logRecord(l, 'info', { message: 'big', n: 10n }));
    expect(JSON.parse(big.join(''))).toMatchObject({ message: 'big', n: '10', level: 'info' });
  });

  it('goes through winston once the logger is silenced or has another transport', () => {
    const silenced = stdoutLines((logger) => {
      logger.silent = true;
      logRecord(logger, 'info', record());
    });
    expect(silenced).toEqual([]);
    const { logger: other, lines } = capture('info');
    const both = stdoutLines((logger) => {
      logger.add(other.transports[0] as winston.transport);
      logRecord(logger, 'info', record());
    });
    expect(both).toHaveLength(1);
    expect(lines()).toEqual([JSON.parse(both[0] as string)]);
  });
});
