/**
 * Durations as Go's `time.ParseDuration` writes them (the syntax of client-go/controller-runtime
 * flags such as `--leader-elect-lease-duration=15s`): a sequence of decimal numbers, each with a
 * unit `h`, `m`, `s` or `ms`, e.g. `15s`, `1m30s`, `1.5s`, `500ms`; `0` alone needs no unit.
 * Results are whole milliseconds.
 */

const UNIT_MS: Readonly<Record<string, number>> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };
const TERM = /(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)/y;

/** Milliseconds, or `undefined` when `text` is not a duration. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (t === '0') return 0;
  if (t === '') return undefined;
  let total = 0;
  TERM.lastIndex = 0;
  while (TERM.lastIndex < t.length) {
    const at = TERM.lastIndex;
    const match = TERM.exec(t);
    if (match === null || match.index !== at) return undefined;
    const [, amount = '', unit = ''] = match;
    const factor = UNIT_MS[unit];
    if (factor === undefined) return undefined;
    total += Number(amount) * factor;
  }
  const ms = Math.round(total);
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** The shortest Go-style text for a whole number of milliseconds: 15000 → `15s`, 90000 → `1m30s`. */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  let rest = ms;
  let out = '';
  for (const [unit, factor] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
    ['ms', 1],
  ] as const) {
    const n = Math.floor(rest / factor);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * factor;
    }
  }
  return out;
}
