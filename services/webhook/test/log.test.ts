import { Writable } from 'node:stream';
import { describe, expect, it, jest } from '@jest/globals';
import winston from 'winston';
import { COMPONENT, createLogger, FLUSH_INTERVAL_MS, isoTimestamp, logRecord, StdoutTransport } from '../src/log.js';

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
  it('carries ts, level, msg, component and the fields, from either call form: the services’ shared line', () => {
    const { logger, lines } = capture();
    logger.info('namespace isolation loaded', { namespace: 'team-a', tolerations: 1 });
    logger.warn({ message: 'pod admitted WITHOUT node isolation (fail open)', uid: 'u', reason: 'lookup_timeout' });
    expect(lines()).toEqual([
      {
        ts: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        level: 'info',
        msg: 'namespace isolation loaded',
        component: COMPONENT,
        namespace: 'team-a',
        tolerations: 1,
      },
      {
        ts: expect.any(String),
        level: 'warn',
        msg: 'pod admitted WITHOUT node isolation (fail open)',
        component: COMPONENT,
        uid: 'u',
        reason: 'lookup_timeout',
      },
    ]);
    expect(Object.keys(lines()[0] as object).slice(0, 3)).toEqual(['ts', 'level', 'msg']);
  });

  it('drops lines below the level', () => {
    const { logger, lines } = capture('info');
    logger.debug('pod admitted unchanged', { uid: 'u' });
    expect(lines()).toEqual([]);
  });

  it('writes an Error and values JSON.stringify rejects as the shared formatLine does (never a crash)', () => {
    const { logger, lines } = capture();
    logger.error(new Error('boom'));
    logger.info('failed', { error: new Error('denied') });
    logger.info('big', { n: 10n });
    const [error, field, big] = lines();
    expect(error).toMatchObject({ level: 'error', msg: 'boom', component: COMPONENT });
    expect(field).toMatchObject({ msg: 'failed', error: { message: 'denied' } });
    expect(big).toMatchObject({ msg: 'big', logError: 'unserializable metadata' });
  });
});

describe('StdoutTransport', () => {
  it('writes the lines of 10 ms to stdout in one write, in order, newline-terminated', async () => {
    // The clock is jest's: a loaded machine (CI runs builds beside the unit tests) once let 35 ms
    // pass between the two lines below, and the real timer wrote the first line alone.
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick', 'queueMicrotask'] });
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      const logger = createLogger({ level: 'info', transports: [new StdoutTransport()] });
      logger.info('hello', { a: 1 });
      // Later event-loop turns within the interval join the same write.
      await new Promise((resolve) => setImmediate(resolve));
      jest.advanceTimersByTime(FLUSH_INTERVAL_MS - 1);
      logger.warn('again', { a: 2 });
      await new Promise((resolve) => setImmediate(resolve));
      expect(write).not.toHaveBeenCalled();
      jest.advanceTimersByTime(1); // FLUSH_INTERVAL_MS after the first line
      expect(write).toHaveBeenCalledTimes(1);
      const text = write.mock.calls[0]?.[0] as string;
      expect(text.endsWith('}\n')).toBe(true);
      const lines = text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l));
      expect(lines).toEqual([
        expect.objectContaining({ level: 'info', msg: 'hello', a: 1, component: COMPONENT }),
        expect.objectContaining({ level: 'warn', msg: 'again', a: 2 }),
      ]);
    } finally {
      write.mockRestore();
      jest.useRealTimers();
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
      expect(JSON.parse(write.mock.calls[1]?.[0] as string)).toMatchObject({ msg: 'small' });
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
      `{"ts":"2026-01-01T00:00:00.123Z","level":"info","msg":"pod admitted with node isolation","component":"${COMPONENT}",` +
        '"uid":"u-1","namespace":"team-a","durationMs":0.25}',
    );
  });

  it('merges the logger’s defaultMeta as winston does: the record’s keys first, then the meta’s, the meta’s values winning', () => {
    const meta = { component: COMPONENT, replica: 'r-1', uid: 'from-meta' };
    const run = (write: (logger: winston.Logger) => void) =>
      stdoutLines((logger) => {
        logger.defaultMeta = meta;
        write(logger);
      });
    const fields = { ...record(), extra: 1 };
    const direct = run((logger) => logRecord(logger, 'info', fields));
    expect(direct).toEqual(run((logger) => logger.info(fields)));
    expect(Object.keys(JSON.parse(direct.join('')))).toEqual([
      'ts',
      'level',
      'msg',
      'component',
      'uid',
      'namespace',
      'durationMs',
      'extra',
      'replica',
    ]);
    expect(JSON.parse(direct.join('')).uid).toBe('from-meta');
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
        .map((l) => JSON.parse(l).msg),
    ).toEqual(['first', 'second', 'third']);
  });

  it('goes through winston for any other transport, and for what JSON.stringify rejects', () => {
    const { logger, lines } = capture('info');
    logRecord(logger, 'info', record());
    const { message, ...fields } = record();
    expect(lines()).toEqual([{ ts: expect.any(String), level: 'info', msg: message, component: COMPONENT, ...fields }]);
    const big = stdoutLines((l) => logRecord(l, 'info', { message: 'big', n: 10n }));
    expect(JSON.parse(big.join(''))).toMatchObject({ msg: 'big', level: 'info', logError: 'unserializable metadata' });
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
