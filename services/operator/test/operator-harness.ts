/**
 * What the whole-operator tests (operator.test.ts, controllers/audit/operator-audit.test.ts,
 * controllers/compliance/operator-reports.test.ts) share: a Config from flags with an ephemeral
 * loopback HTTP port, letting the fake clock's timers and the promises they start run out, and
 * reading a running operator's /metrics.
 */
import { type Config, parseConfig } from '../src/config.js';
import type { Operator } from '../src/operator.js';
import type { FakeClock } from './runtime/fakes.js';

/**
 * The operator's Config for `argv`, serving /metrics on a free loopback port, over plain HTTP and
 * unauthenticated (secure metrics: operator.test.ts, 'secure metrics').
 */
export function testConfig(...argv: string[]): Config {
  const r = parseConfig(['--metrics-port=0', '--bind-address=127.0.0.1', '--metrics-secure=false', ...argv], {
    env: {},
  });
  if (r.kind !== 'config') throw new Error(JSON.stringify(r));
  return r.config;
}

/** Advances the fake clock in small steps (then by `ms`, then again) so chained timers and promises settle. */
export async function settle(clock: FakeClock, ms = 0): Promise<void> {
  for (let i = 0; i < 10; i++) await clock.advance(10);
  if (ms > 0) await clock.advance(ms);
  for (let i = 0; i < 10; i++) await clock.advance(10);
}

/**
 * Settles (above) until `done()` holds, letting real time pass between rounds, for work that runs
 * off the fake clock (key generation on libuv's thread pool: slower under load, as on a 2-core CI
 * machine). Gives up after `limitMs` of real time; the caller's assertion then says what is missing.
 */
export async function settleUntil(clock: FakeClock, done: () => boolean, limitMs = 30_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  await settle(clock);
  while (!done() && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    await settle(clock);
  }
}

/** The text a running operator serves at /metrics. */
export async function operatorMetrics(operator: Operator): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${operator.server()?.port}/metrics`);
  return res.text();
}
