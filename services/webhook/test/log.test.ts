import { Writable } from 'node:stream';
import { describe, expect, it, jest } from '@jest/globals';
import winston from 'winston';
import { createLogger, SERVICE_NAME, StdoutTransport } from '../src/log.js';

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
