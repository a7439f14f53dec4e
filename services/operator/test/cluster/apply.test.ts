import { describe, expect, it } from '@jest/globals';
import { settleAll } from '../../src/cluster/apply.js';

describe('settleAll', () => {
  it('resolves the values in order', async () => {
    await expect(settleAll([Promise.resolve(1), 'two', Promise.resolve(undefined)] as const)).resolves.toEqual([
      1,
      'two',
      undefined,
    ]);
  });

  it('rejects with the first failure only once every promise has settled (no write left in flight)', async () => {
    let slowDone = false;
    const slow = new Promise<void>((resolve) =>
      setTimeout(() => {
        slowDone = true;
        resolve();
      }, 20),
    );
    const err = await settleAll([Promise.reject(new Error('first')), slow, Promise.reject(new Error('second'))]).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as Error).message).toBe('first');
    expect(slowDone).toBe(true);
  });
});
