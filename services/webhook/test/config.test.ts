import { describe, expect, it } from '@jest/globals';
import { type Config, FLAGS, parseConfig, usage } from '../src/config.js';

function ok(argv: string[], env: Record<string, string> = {}): Config {
  const r = parseConfig(argv, env);
  if (r.kind !== 'config') throw new Error(`expected a config, got ${JSON.stringify(r)}`);
  return r.config;
}

function error(argv: string[], env: Record<string, string> = {}): string {
  const r = parseConfig(argv, env);
  if (r.kind !== 'error') throw new Error(`expected an error, got ${JSON.stringify(r)}`);
  return r.message;
}

describe('parseConfig', () => {
  it('has documented defaults', () => {
    expect(ok([])).toEqual({
      port: 8443,
      metricsPort: 8080,
      metricsSecure: true,
      bindAddress: undefined,
      tlsCertFile: '/etc/webhook/tls/tls.crt',
      tlsKeyFile: '/etc/webhook/tls/tls.key',
      tlsReloadIntervalMs: 10_000,
      kubeconfig: undefined,
      liveLookupTimeoutMs: 1_000,
      maxLiveLookups: 8,
      apiServerMaxRequestBodyBytes: 3 * 1024 * 1024,
      // 6 × the API server's 3 MiB + 1 MiB of envelope (http/body-limit.ts).
      maxBodyBytes: 19 * 1024 * 1024,
      // The memory budget of reviews (http/body-budget.ts): small ones ≤ 256 KiB take at most
      // 32 MiB at once; larger ones 64 MiB (3 × 19 MiB, the largest, fits), 16 waiting at most 5 s;
      // bodies read within 5 s.
      smallReviewBytes: 256 * 1024,
      smallReviewsMemoryBytes: 32 * 1024 * 1024,
      largeReviewsMemoryBytes: 64 * 1024 * 1024,
      largeReviewQueue: 16,
      largeReviewWaitMs: 5_000,
      bodyReadTimeoutMs: 5_000,
      maxConnections: 1024,
      maxInformerStalenessMs: 60_000,
      // The hold (hold/holder.ts): 25 s at most, below the chart's 30 s timeoutSeconds; only
      // namespaces younger than 5 minutes; 256 held at once.
      holdTimeoutMs: 25_000,
      holdWindowMs: 300_000,
      maxHeldRequests: 256,
      shutdownDelayMs: 5_000,
      shutdownTimeoutMs: 10_000,
      logLevel: 'info',
    });
  });

  it('reads flags, in both --flag value and --flag=value forms', () => {
    const c = ok([
      '--port',
      '9443',
      '--metrics-port=9090',
      '--tls-cert-file=/certs/c.pem',
      '--tls-key-file',
      '/certs/k.pem',
      '--kubeconfig=/home/me/.kube/config',
      '--live-lookup-timeout=250ms',
      '--max-body-bytes=1048576',
      '--log-level=debug',
      '--bind-address=127.0.0.1',
    ]);
    expect(c).toMatchObject({
      port: 9443,
      metricsPort: 9090,
      tlsCertFile: '/certs/c.pem',
      tlsKeyFile: '/certs/k.pem',
      kubeconfig: '/home/me/.kube/config',
      liveLookupTimeoutMs: 250,
      maxBodyBytes: 1_048_576,
      logLevel: 'debug',
      bindAddress: '127.0.0.1',
    });
  });

  it('sizes the large reviews memory to read the largest review, and refuses one that cannot', () => {
    expect(ok(['--max-body-bytes=1048576']).largeReviewsMemoryBytes).toBe(64 * 1024 * 1024);
    // 3 × 32 MiB: the largest review is held at 3 × its bytes while it is read.
    expect(ok(['--max-body-bytes=33554432']).largeReviewsMemoryBytes).toBe(96 * 1024 * 1024);
    expect(ok(['--max-body-bytes=1048576', '--large-reviews-memory-bytes=4194304']).largeReviewsMemoryBytes).toBe(
      4_194_304,
    );
    expect(error(['--max-body-bytes=1048576', '--large-reviews-memory-bytes=65536'])).toBe(
      '--large-reviews-memory-bytes (65536) must be at least 3 × --max-body-bytes (3145728), so the largest review can be read',
    );
    expect(error(['--small-review-bytes=1048576', '--small-reviews-memory-bytes=65536'])).toMatch(
      /--small-reviews-memory-bytes \(65536\) must be at least 3 × --small-review-bytes \(3145728\)/,
    );
    expect(ok(['--large-review-wait=250ms', '--body-read-timeout=2s', '--large-review-queue=0'])).toMatchObject({
      largeReviewWaitMs: 250,
      bodyReadTimeoutMs: 2_000,
      largeReviewQueue: 0,
    });
  });

  it('derives --max-body-bytes from --api-server-max-request-body-bytes unless it is given', () => {
    expect(ok(['--api-server-max-request-body-bytes=1048576']).maxBodyBytes).toBe(7 * 1024 * 1024);
    expect(ok([], { API_SERVER_MAX_REQUEST_BODY_BYTES: '2097152' }).maxBodyBytes).toBe(13 * 1024 * 1024);
    expect(ok(['--api-server-max-request-body-bytes=1048576', '--max-body-bytes=65536']).maxBodyBytes).toBe(65_536);
    expect(error(['--api-server-max-request-body-bytes=100'])).toMatch(
      /--api-server-max-request-body-bytes: must be a whole number of bytes from 1024/,
    );
    expect(usage()).toMatch(
      /--max-body-bytes <bytes>[\s\S]*default 6 × --api-server-max-request-body-bytes \+ 1 MiB \(19922944\)/,
    );
  });

  it('falls back to environment variables, and a flag wins over its variable', () => {
    expect(ok([], { PORT: '7443', LOG_LEVEL: 'warn', KUBECONFIG: '/kc' })).toMatchObject({
      port: 7443,
      logLevel: 'warn',
      kubeconfig: '/kc',
    });
    expect(ok(['--port=6443'], { PORT: '7443' }).port).toBe(6443);
  });

  it('never reads a variable whose flag is given (stray service-link variables are harmless)', () => {
    expect(ok(['--metrics-port=8080'], { METRICS_PORT: 'tcp://10.96.0.12:8080' }).metricsPort).toBe(8080);
    expect(error([], { METRICS_PORT: 'tcp://10.96.0.12:8080' })).toMatch(/--metrics-port.*from METRICS_PORT/);
  });

  it.each([
    [['--port=http'], /^--port: must be a port number from 0 to 65535, got "http"$/],
    [['--port=70000'], /--port: must be a port number from 0 to 65535/],
    [['--port=-1'], /--port/],
    [['--live-lookup-timeout=0'], /^--live-lookup-timeout: must be from 1ms to 10s, got "0"$/],
    [['--live-lookup-timeout=1000'], /^--live-lookup-timeout: must be a duration such as 15s, 1m30s or 500ms/],
    [['--shutdown-delay=5m1s'], /^--shutdown-delay: must be from 0s to 5m, got "5m1s"$/],
    [['--max-body-bytes=10'], /--max-body-bytes: must be a whole number of bytes from 1024/],
    [['--log-level=verbose'], /--log-level: must be one of error, warn, info, debug, got "verbose"/],
    [['--tls-cert-file='], /--tls-cert-file: must not be empty/],
    [['--port=8080', '--metrics-port=8080'], /--port and --metrics-port must differ/],
    [['--no-such-flag'], /Unknown option '--no-such-flag'/],
    [['stray-positional'], /positional/],
    [['--port'], /--port/],
  ])('rejects %j with a clear message', (argv, message) => {
    expect(error(argv)).toMatch(message);
  });

  it('recognizes --help, -h and --version', () => {
    expect(parseConfig(['--help'], {}).kind).toBe('help');
    expect(parseConfig(['-h'], {}).kind).toBe('help');
    expect(parseConfig(['--version'], {}).kind).toBe('version');
  });

  it('reads durations as the operator does (Go syntax), from flags and variables', () => {
    expect(ok(['--shutdown-delay=1m30s'], { MAX_INFORMER_STALENESS: '2m' })).toMatchObject({
      shutdownDelayMs: 90_000,
      maxInformerStalenessMs: 120_000,
    });
  });
});

describe('usage', () => {
  it('documents every flag with its environment variable and default', () => {
    const text = usage();
    for (const f of FLAGS) {
      expect(text).toContain(`--${f.name} `);
      expect(text).toContain(`env ${f.env};`);
      expect(text).toContain(f.default === undefined ? 'default none' : `default "${f.default}"`);
    }
    expect(text).toContain('--help');
    expect(text).toContain('--version');
  });
});
