/** A real winston JSON logger whose output lines are kept for assertions. */
import { Writable } from 'node:stream';
import winston from 'winston';
import { createLogger } from '../../src/log.js';

export function captureLogger(): { logger: winston.Logger; lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = createLogger({ level: 'debug', transports: [new winston.transports.Stream({ stream })] });
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger, lines };
}
