/**
 * Command-line flags, the same conventions in both services: every flag also has an environment
 * variable (flag > variable > default; an empty variable counts as unset), durations are written
 * as Go writes them (`15s`, `1m30s`, `500ms`, as client-go and controller-runtime flags are),
 * `-h`/`--help` and `--version` answer at once. Parsing is pure: a table of flags in, values or an
 * error message out; the bootstrap prints and exits.
 */
import { parseArgs } from 'node:util';
import { formatDuration, parseDuration } from './duration.js';

export type Parsed<T = unknown> = { ok: true; value: T } | { ok: false; error: string };

export interface Flag<K extends string = string> {
  /** Field of the parsed values. */
  key: K;
  name: string;
  env: string;
  placeholder: string;
  /** Text parsed when neither flag nor variable is given; `undefined`: the value is undefined. */
  default: string | undefined;
  /** Shown instead of the default text (e.g. a fallback chain). */
  defaultHelp?: string;
  help: string;
  parse(raw: string): Parsed;
}

export const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
export const fail = (error: string): Parsed<never> => ({ ok: false, error });

export function text(raw: string): Parsed<string> {
  return raw.trim() === '' ? fail('must not be empty') : ok(raw);
}

export function integer(min: number, max: number, what: string): (raw: string) => Parsed<number> {
  return (raw) => {
    const n = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
    return Number.isSafeInteger(n) && n >= min && n <= max
      ? ok(n)
      : fail(`must be ${what} from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  };
}

export const port = integer(0, 65535, 'a port number');

/** A Go-style duration, as whole milliseconds within [minMs, maxMs]. */
export function duration(minMs: number, maxMs: number): (raw: string) => Parsed<number> {
  return (raw) => {
    const ms = parseDuration(raw);
    if (ms === undefined) {
      return fail(`must be a duration such as 15s, 1m30s or 500ms (units h, m, s, ms), got ${JSON.stringify(raw)}`);
    }
    if (ms < minMs || ms > maxMs) {
      return fail(`must be from ${formatDuration(minMs)} to ${formatDuration(maxMs)}, got ${JSON.stringify(raw)}`);
    }
    return ok(ms);
  };
}

export function boolean(raw: string): Parsed<boolean> {
  const v = raw.trim().toLowerCase();
  if (v === 'true') return ok(true);
  if (v === 'false') return ok(false);
  return fail(`must be true or false, got ${JSON.stringify(raw)}`);
}

export function oneOf<T extends string>(values: readonly T[]): (raw: string) => Parsed<T> {
  return (raw) =>
    (values as readonly string[]).includes(raw)
      ? ok(raw as T)
      : fail(`must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
}

export type FlagsResult =
  | { kind: 'values'; values: Record<string, unknown> }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

export interface ParseFlagsOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** Boolean flags written alone (`--leader-elect`) that mean `=true`. */
  bareBooleans?: readonly string[];
}

/** Parses `argv` against `flags`: flag > environment variable > default. */
export function parseFlags(flags: readonly Flag[], argv: readonly string[], options: ParseFlagsOptions): FlagsResult {
  let values: Record<string, string | boolean | undefined>;
  const bare = new Set((options.bareBooleans ?? []).map((name) => `--${name}`));
  try {
    const spec: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
    };
    for (const f of flags) spec[f.name] = { type: 'string' };
    const args = argv.map((arg) => (bare.has(arg) ? `${arg}=true` : arg));
    ({ values } = parseArgs({ args, options: spec, strict: true, allowPositionals: false }));
  } catch (e) {
    return { kind: 'error', message: (e as Error).message };
  }
  if (values.help === true) return { kind: 'help' };
  if (values.version === true) return { kind: 'version' };

  const out: Record<string, unknown> = {};
  for (const f of flags) {
    const fromFlag = values[f.name];
    const fromEnv = options.env[f.env];
    let raw: string | undefined;
    let from = '';
    if (typeof fromFlag === 'string') {
      raw = fromFlag;
    } else if (fromEnv !== undefined && fromEnv !== '') {
      raw = fromEnv;
      from = ` (from ${f.env})`;
    } else {
      raw = f.default;
    }
    if (raw === undefined) {
      out[f.key] = undefined;
      continue;
    }
    const parsed = f.parse(raw);
    if (!parsed.ok) return { kind: 'error', message: `--${f.name}: ${parsed.error}${from}` };
    out[f.key] = parsed.value;
  }
  return { kind: 'values', values: out };
}

export interface UsageText {
  program: string;
  /** What the program does, one line each. */
  summary: readonly string[];
  flags: readonly Flag[];
  /** The exit statuses, one line. */
  exitStatus: string;
}

export function usage({ program, summary, flags, exitStatus }: UsageText): string {
  const lines = [
    `Usage: ${program} [flags]`,
    '',
    ...summary,
    '',
    'Flags (each also read from the environment variable shown; a flag wins over its variable;',
    'durations are written like 15s, 1m30s or 500ms):',
  ];
  for (const f of flags) {
    const dflt = f.defaultHelp ?? (f.default === undefined ? 'none' : JSON.stringify(f.default));
    lines.push(`  --${f.name} ${f.placeholder}`, `      ${f.help}`, `      env ${f.env}; default ${dflt}`);
  }
  lines.push('  -h, --help', '      Print this help and exit.', '  --version', '      Print the version and exit.');
  lines.push('', `Exit status: ${exitStatus}`);
  return `${lines.join('\n')}\n`;
}
