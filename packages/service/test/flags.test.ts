import { describe, expect, it } from '@jest/globals';
import { Registry } from 'prom-client';
import {
  boolean,
  duration,
  type Flag,
  formatDuration,
  oneOf,
  parseDuration,
  parseFlags,
  port,
  registerBuildInfo,
  text,
  usage,
} from '../src/index.js';

const FLAGS: Flag[] = [
  {
    key: 'timeoutMs',
    name: 'timeout',
    env: 'TIMEOUT',
    placeholder: '<duration>',
    default: '10s',
    help: 'A bound.',
    parse: duration(0, 60_000),
  },
  { key: 'port', name: 'port', env: 'PORT', placeholder: '<port>', default: '8443', help: 'Port.', parse: port },
  {
    key: 'elect',
    name: 'leader-elect',
    env: 'LEADER_ELECT',
    placeholder: '<bool>',
    default: 'false',
    help: 'Elect.',
    parse: boolean,
  },
  {
    key: 'level',
    name: 'log-level',
    env: 'LOG_LEVEL',
    placeholder: '<level>',
    default: 'info',
    help: 'Level.',
    parse: oneOf(['info', 'debug']),
  },
  {
    key: 'path',
    name: 'kubeconfig',
    env: 'KUBECONFIG',
    placeholder: '<path>',
    default: undefined,
    help: 'Path.',
    parse: text,
  },
];

describe('durations', () => {
  it('reads and writes Go-style durations', () => {
    expect(parseDuration('1m30s')).toBe(90_000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('0')).toBe(0);
    expect(parseDuration('15')).toBeUndefined();
    expect(formatDuration(90_000)).toBe('1m30s');
  });
});

describe('parseFlags', () => {
  it('a flag wins over its variable, a variable over the default; empty variables count as unset', () => {
    expect(parseFlags(FLAGS, ['--timeout=2s'], { env: { TIMEOUT: '5s', PORT: '', LOG_LEVEL: 'debug' } })).toEqual({
      kind: 'values',
      values: { timeoutMs: 2_000, port: 8443, elect: false, level: 'debug', path: undefined },
    });
  });

  it('answers --help and --version, and names the flag and the variable in errors', () => {
    expect(parseFlags(FLAGS, ['-h'], { env: {} })).toEqual({ kind: 'help' });
    expect(parseFlags(FLAGS, ['--version'], { env: {} })).toEqual({ kind: 'version' });
    expect(parseFlags(FLAGS, [], { env: { TIMEOUT: '2' } })).toEqual({
      kind: 'error',
      message: '--timeout: must be a duration such as 15s, 1m30s or 500ms (units h, m, s, ms), got "2" (from TIMEOUT)',
    });
    expect(parseFlags(FLAGS, ['--timeout=2m'], { env: {} })).toEqual({
      kind: 'error',
      message: '--timeout: must be from 0s to 1m, got "2m"',
    });
    expect(parseFlags(FLAGS, ['--nope'], { env: {} }).kind).toBe('error');
  });

  it('takes a bare boolean flag as true when told to', () => {
    const r = parseFlags(FLAGS, ['--leader-elect'], { env: {}, bareBooleans: ['leader-elect'] });
    expect(r.kind === 'values' && r.values.elect).toBe(true);
  });

  it('lists every flag with its variable and default, --help, --version and the exit statuses', () => {
    const text = usage({ program: 'p', summary: ['Does things.'], flags: FLAGS, exitStatus: '0 ok, 2 bad flags.' });
    expect(text).toContain('  --timeout <duration>\n      A bound.\n      env TIMEOUT; default "10s"');
    expect(text).toContain('  --kubeconfig <path>\n      Path.\n      env KUBECONFIG; default none');
    expect(text).toContain('  --version\n      Print the version and exit.');
    expect(text.trimEnd().endsWith('Exit status: 0 ok, 2 bad flags.')).toBe(true);
  });
});

describe('registerBuildInfo', () => {
  it('exposes <prefix>_build_info 1 with the version and the Node.js version', async () => {
    const registry = new Registry();
    registerBuildInfo(registry, 'kubeplus_test', '1.2.3');
    expect(await registry.metrics()).toContain(
      `kubeplus_test_build_info{version="1.2.3",nodejs_version="${process.versions.node}"} 1`,
    );
  });
});
