import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { formatDuration, parseDuration } from '@kubeplus-isolation/service';
import { DEFAULT_HANDLER_LEVELS, DEFAULT_LEVEL_HANDLERS, levelOfHandler } from '@kubeplus-isolation/spec';
import {
  type Config,
  type ConfigSources,
  FLAGS,
  parseConfig,
  usage,
  writesNodeIsolationParams,
} from '../src/config.js';

function sources(env: Record<string, string> = {}, inCluster?: string): ConfigSources {
  return { env, inClusterNamespace: () => inCluster };
}

function ok(argv: string[], src: ConfigSources = sources()): Config {
  const r = parseConfig(argv, src);
  if (r.kind !== 'config') throw new Error(`expected a config, got ${JSON.stringify(r)}`);
  return r.config;
}

function error(argv: string[], src: ConfigSources = sources()): string {
  const r = parseConfig(argv, src);
  if (r.kind !== 'error') throw new Error(`expected an error, got ${JSON.stringify(r)}`);
  return r.message;
}

describe('parseConfig', () => {
  it('has documented defaults', () => {
    expect(ok([])).toEqual({
      kubeconfig: undefined,
      platformNamespace: '',
      poolExemptNamespaces: [],
      instanceKinds: { groups: [], kinds: [] },
      leaderElect: true,
      leaderElectionNamespace: 'kubeplus-isolation',
      leaderElectionId: 'kubeplus-isolation-operator',
      leaderElectionIdentity: undefined,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      concurrency: 8,
      metricsPort: 8080,
      metricsSecure: true,
      metricsTlsCertFile: undefined,
      metricsTlsKeyFile: undefined,
      bindAddress: undefined,
      handlerLevels: DEFAULT_HANDLER_LEVELS,
      levelHandlers: DEFAULT_LEVEL_HANDLERS,
      logLevel: 'info',
      drainTimeoutMs: 10_000,
      sandboxPolicyLayout: 'per-instance',
      shutdownTimeoutMs: 25_000,
      auditIntervalMs: 300_000,
      reports: true,
      reportMaxResults: 100,
      unisolatedNamespacesMetricLimit: 20,
      nodeIsolationEngine: 'webhook',
      nodeIsolationRefusal: false,
      exclusivePools: false,
      webhookCertificates: true,
      webhookCaValidityMs: 43_800 * 3_600_000,
      webhookCertValidityMs: 2_160 * 3_600_000,
      webhookCertPropagationDelayMs: 120_000,
    });
  });

  it('secure metrics: on by default, off by flag or variable, a provided pair given whole', () => {
    expect(ok([]).metricsSecure).toBe(true);
    expect(ok(['--metrics-secure']).metricsSecure).toBe(true);
    expect(ok(['--metrics-secure=false']).metricsSecure).toBe(false);
    expect(ok([], sources({ METRICS_SECURE: 'false' })).metricsSecure).toBe(false);
    expect(ok(['--metrics-tls-cert-file=/tls/tls.crt', '--metrics-tls-key-file=/tls/tls.key'])).toMatchObject({
      metricsSecure: true,
      metricsTlsCertFile: '/tls/tls.crt',
      metricsTlsKeyFile: '/tls/tls.key',
    });
    expect(error(['--metrics-tls-cert-file=/tls/tls.crt'])).toBe(
      '--metrics-tls-cert-file and --metrics-tls-key-file go together: give both or neither',
    );
    expect(error(['--metrics-tls-key-file=/tls/tls.key'])).toBe(
      '--metrics-tls-cert-file and --metrics-tls-key-file go together: give both or neither',
    );
    expect(
      error(['--metrics-secure=false', '--metrics-tls-cert-file=/tls/tls.crt', '--metrics-tls-key-file=/tls/tls.key']),
    ).toBe('--metrics-tls-cert-file is only meaningful with --metrics-secure=true');
    expect(error(['--metrics-secure=maybe'])).toMatch(/^--metrics-secure: must be true or false/);
  });

  it('refuses webhook certificate lifetimes that leave no room for a rotation', () => {
    expect(parseConfig(['--webhook-cert-validity=5m', '--webhook-cert-propagation-delay=2m'], { env: {} })).toEqual({
      kind: 'error',
      message:
        '--webhook-cert-validity (5m) must be at least 4 × --webhook-cert-propagation-delay (2m): a certificate is renewed with a third of its lifetime left, and every webhook Pod must load the new one before the old one expires',
    });
    expect(parseConfig(['--webhook-ca-validity=100h', '--webhook-cert-validity=60h'], { env: {} })).toEqual({
      kind: 'error',
      message: '--webhook-ca-validity (100h) must be at least 2 × --webhook-cert-validity (60h)',
    });
    // Not checked when the operator issues no certificates.
    expect(parseConfig(['--webhook-certificates=false', '--webhook-cert-validity=5m'], { env: {} }).kind).toBe(
      'config',
    );
  });

  it('reads every flag, in both --flag value and --flag=value forms', () => {
    const c = ok([
      '--kubeconfig=/home/me/.kube/config',
      '--platform-namespace',
      'platform',
      '--instance-kinds=cloudark.io/v1/Agent,platformapi.kubeplus',
      '--leader-elect=false',
      '--leader-election-namespace=ops',
      '--leader-election-id=my-lease',
      '--leader-election-identity=pod-a',
      '--lease-duration=1m',
      '--renew-deadline=40s',
      '--retry-period=1.5s',
      '--concurrency=8',
      '--metrics-port=9090',
      '--bind-address=127.0.0.1',
      '--runtime-handler-levels=my-vm=kata,sbx-*=runsc',
      '--level-handlers=kata=my-vm,runsc=sbx-fast',
      '--log-level=DEBUG',
      '--drain-timeout=500ms',
      '--shutdown-timeout=2m',
      '--audit-interval=90s',
      '--reports=false',
      '--report-max-results=7',
      '--unisolated-namespaces-metric-limit=0',
      '--node-isolation-engine=both',
    ]);
    expect(c).toMatchObject({
      kubeconfig: '/home/me/.kube/config',
      platformNamespace: 'platform',
      instanceKinds: {
        groups: ['platformapi.kubeplus'],
        kinds: [{ group: 'cloudark.io', version: 'v1', kind: 'Agent' }],
      },
      leaderElect: false,
      leaderElectionNamespace: 'ops',
      leaderElectionId: 'my-lease',
      leaderElectionIdentity: 'pod-a',
      leaseDurationMs: 60_000,
      renewDeadlineMs: 40_000,
      retryPeriodMs: 1_500,
      concurrency: 8,
      metricsPort: 9090,
      bindAddress: '127.0.0.1',
      levelHandlers: { runc: 'runc', runsc: 'sbx-fast', kata: 'my-vm' },
      logLevel: 'debug',
      drainTimeoutMs: 500,
      shutdownTimeoutMs: 120_000,
      auditIntervalMs: 90_000,
      reports: false,
      reportMaxResults: 7,
      unisolatedNamespacesMetricLimit: 0,
      nodeIsolationEngine: 'both',
    });
    expect(levelOfHandler('my-vm', c.handlerLevels)).toBe('kata');
    expect(levelOfHandler('sbx-fast', c.handlerLevels)).toBe('runsc');
    expect(levelOfHandler('kata-qemu', c.handlerLevels)).toBe('kata'); // built-ins stay
  });

  it('falls back to environment variables, and a flag wins over its variable', () => {
    const env = {
      KUBECONFIG: '/kc',
      PLATFORM_NAMESPACE: 'from-env',
      INSTANCE_KINDS: 'cloudark.io',
      LEADER_ELECT: 'false',
      LEASE_DURATION: '30s',
      CONCURRENCY: '3',
      LOG_LEVEL: 'warn',
    };
    expect(ok([], sources(env))).toMatchObject({
      kubeconfig: '/kc',
      platformNamespace: 'from-env',
      instanceKinds: { groups: ['cloudark.io'], kinds: [] },
      leaderElect: false,
      leaseDurationMs: 30_000,
      concurrency: 3,
      logLevel: 'warn',
    });
    expect(
      ok(['--platform-namespace=from-flag', '--leader-elect=true', '--concurrency=5'], sources(env)),
    ).toMatchObject({ platformNamespace: 'from-flag', leaderElect: true, concurrency: 5 });
  });

  it('never reads a variable whose flag is given, and names the variable a bad value came from', () => {
    expect(ok(['--metrics-port=8080'], sources({ METRICS_PORT: 'tcp://10.96.0.12:8080' })).metricsPort).toBe(8080);
    expect(error([], sources({ METRICS_PORT: 'tcp://10.96.0.12:8080' }))).toBe(
      '--metrics-port: must be a port number from 0 to 65535, got "tcp://10.96.0.12:8080" (from METRICS_PORT)',
    );
  });

  it('takes the Lease namespace from the flag, its variable, POD_NAMESPACE, the in-cluster namespace, then the default', () => {
    const all = sources({ LEADER_ELECTION_NAMESPACE: 'var', POD_NAMESPACE: 'pod' }, 'mounted\n');
    expect(ok(['--leader-election-namespace=flag'], all).leaderElectionNamespace).toBe('flag');
    expect(ok([], all).leaderElectionNamespace).toBe('var');
    expect(ok([], sources({ POD_NAMESPACE: 'pod' }, 'mounted\n')).leaderElectionNamespace).toBe('pod');
    expect(ok([], sources({}, 'mounted\n')).leaderElectionNamespace).toBe('mounted');
    expect(ok([], sources({}, undefined)).leaderElectionNamespace).toBe('kubeplus-isolation');
    expect(error([], sources({ POD_NAMESPACE: 'Not_A_Namespace' }))).toMatch(
      /^--leader-election-namespace: the default "Not_A_Namespace"/,
    );
  });

  it('accepts a bare --leader-elect as true, as Go flags do', () => {
    expect(ok(['--leader-elect'], sources({ LEADER_ELECT: 'false' })).leaderElect).toBe(true);
  });

  it.each([
    [['--metrics-port=http'], /^--metrics-port: must be a port number from 0 to 65535, got "http"$/],
    [['--metrics-port=70000'], /^--metrics-port: must be a port number/],
    [['--concurrency=0'], /^--concurrency: must be a whole number from 1 to 64, got "0"$/],
    [['--concurrency=2.5'], /^--concurrency/],
    [['--lease-duration=15'], /^--lease-duration: must be a duration such as 15s, 1m30s or 500ms .*got "15"$/],
    [['--lease-duration=500ms'], /^--lease-duration: must be from 1s to 1h, got "500ms"$/],
    [['--retry-period=2 s'], /^--retry-period: must be a duration/],
    [['--leader-elect=yes'], /^--leader-elect: must be true or false, got "yes"$/],
    [['--platform-namespace=Kube_Plus'], /^--platform-namespace: must be a namespace name/],
    [['--leader-election-id=UPPER'], /^--leader-election-id: must be a Lease name/],
    [['--leader-election-identity='], /^--leader-election-identity: must not be empty$/],
    [['--kubeconfig='], /^--kubeconfig: must not be empty$/],
    [['--instance-kinds=cloudark.io/v1'], /^--instance-kinds: "cloudark.io\/v1": expected group\/version\/Kind/],
    [
      ['--runtime-handler-levels=kata=strong'],
      /^--runtime-handler-levels: "kata=strong": level must be one of runc, runsc, kata$/,
    ],
    [
      ['--level-handlers=vm=kata'],
      /^--level-handlers: "vm=kata": expected level=handler with level one of runc, runsc, kata$/,
    ],
    [['--level-handlers=kata=Kata_QEMU'], /^--level-handlers: "kata=Kata_QEMU": the handler must be a DNS label/],
    [
      ['--level-handlers=kata=kata-qemu,runsc=my-sandbox'],
      /^--level-handlers: runsc=my-sandbox: handler "my-sandbox" is not known to isolate at level runsc; declare it with --runtime-handler-levels=my-sandbox=runsc$/,
    ],
    [['--log-level=verbose'], /^--log-level: must be one of error, warn, info, debug, got "verbose"$/],
    [['--lease-duration=10s'], /^--lease-duration \(10s\) must be greater than --renew-deadline \(10s\)$/],
    [
      ['--renew-deadline=4s', '--retry-period=4s', '--lease-duration=15s'],
      /^--renew-deadline \(4s\) must be greater than 1.2 × --retry-period \(4s\)$/,
    ],
    [
      ['--shutdown-timeout=20s'],
      /^--shutdown-timeout \(20s\) must be greater than --drain-timeout \+ --renew-deadline \(20s\)/,
    ],
    [
      ['--leader-elect=false', '--shutdown-timeout=10s'],
      /^--shutdown-timeout \(10s\) must be greater than --drain-timeout \(10s\)$/,
    ],
    [['--no-such-flag'], /Unknown option '--no-such-flag'/],
    [['stray-positional'], /positional/],
    [['--metrics-port'], /--metrics-port/],
  ])('rejects %j with a clear message', (argv, message) => {
    expect(error(argv)).toMatch(message);
  });

  it('checks timing relations only when electing a leader', () => {
    expect(ok(['--leader-elect=false', '--lease-duration=5s']).leaseDurationMs).toBe(5_000);
  });

  it('takes --audit-interval 0 as off, else from 1s to 24h', () => {
    expect(ok(['--audit-interval=0']).auditIntervalMs).toBe(0);
    expect(ok(['--audit-interval=1s']).auditIntervalMs).toBe(1_000);
    expect(ok(['--audit-interval=24h']).auditIntervalMs).toBe(86_400_000);
    expect(ok([], sources({ AUDIT_INTERVAL: '10m' })).auditIntervalMs).toBe(600_000);
    expect(error(['--audit-interval=500ms'])).toBe(
      '--audit-interval: must be 0 (no audit) or from 1s to 24h, got "500ms"',
    );
    expect(error(['--audit-interval=25h'])).toBe('--audit-interval: must be from 0s to 24h, got "25h"');
    expect(error([], sources({ AUDIT_INTERVAL: '5' }))).toMatch(
      /^--audit-interval: must be a duration .* \(from AUDIT_INTERVAL\)$/,
    );
  });

  it('takes --node-isolation-refusal (the refusal policy reads the parameter under every engine)', () => {
    expect(ok([]).nodeIsolationRefusal).toBe(false);
    expect(ok(['--node-isolation-refusal=true']).nodeIsolationRefusal).toBe(true);
    expect(ok([], sources({ NODE_ISOLATION_REFUSAL: 'true' })).nodeIsolationRefusal).toBe(true);
  });

  it('takes --node-isolation-engine webhook, admission-policy or both, and says which it expects', () => {
    expect(ok(['--node-isolation-engine=admission-policy']).nodeIsolationEngine).toBe('admission-policy');
    expect(ok([], sources({ NODE_ISOLATION_ENGINE: 'both' })).nodeIsolationEngine).toBe('both');
    expect(error(['--node-isolation-engine=admissionPolicy'])).toBe(
      '--node-isolation-engine: must be one of webhook, admission-policy, both, got "admissionPolicy"',
    );
    expect(writesNodeIsolationParams('webhook')).toBe(false);
    expect(writesNodeIsolationParams('admission-policy')).toBe(true);
    expect(writesNodeIsolationParams('both')).toBe(true);
  });

  it('recognizes --help and -h', () => {
    expect(parseConfig(['--help'], sources()).kind).toBe('help');
    expect(parseConfig(['-h'], sources()).kind).toBe('help');
  });
});

describe('--uninstall', () => {
  it('parses the mode and the Deployment to stop', () => {
    const result = parseConfig(['--uninstall=finalizers', '--uninstall-stop-deployment=kpi-operator'], sources());
    expect(result).toMatchObject({
      kind: 'config',
      config: { uninstall: 'finalizers', uninstallStopDeployment: 'kpi-operator' },
    });
    expect(parseConfig([], sources())).toMatchObject({ kind: 'config', config: { uninstall: undefined } });
  });

  it('refuses an unknown mode, and a Deployment to stop without --uninstall', () => {
    expect(parseConfig(['--uninstall=everything'], sources())).toMatchObject({
      kind: 'error',
      message: expect.stringContaining('must be one of all, finalizers'),
    });
    expect(parseConfig(['--uninstall-stop-deployment=kpi-operator'], sources())).toEqual({
      kind: 'error',
      message: '--uninstall-stop-deployment is only meaningful with --uninstall',
    });
  });
});

describe('usage', () => {
  it('documents every flag with its environment variable and default', () => {
    const text = usage();
    expect(FLAGS.map((f) => f.name).sort()).toEqual(
      [
        'audit-interval',
        'bind-address',
        'concurrency',
        'drain-timeout',
        'exclusive-pools',
        'instance-kinds',
        'kubeconfig',
        'lease-duration',
        'leader-elect',
        'leader-election-id',
        'leader-election-identity',
        'leader-election-namespace',
        'level-handlers',
        'log-level',
        'metrics-port',
        'metrics-secure',
        'metrics-tls-cert-file',
        'metrics-tls-key-file',
        'node-isolation-engine',
        'node-isolation-refusal',
        'platform-namespace',
        'pool-exempt-namespaces',
        'renew-deadline',
        'report-max-results',
        'reports',
        'retry-period',
        'runtime-handler-levels',
        'sandbox-policy-layout',
        'shutdown-timeout',
        'unisolated-namespaces-metric-limit',
        'uninstall',
        'uninstall-stop-deployment',
        'webhook-ca-validity',
        'webhook-cert-propagation-delay',
        'webhook-cert-validity',
        'webhook-certificates',
      ].sort(),
    );
    for (const f of FLAGS) {
      expect(text).toContain(`  --${f.name} ${f.placeholder}\n`);
      expect(text).toContain(
        `env ${f.env}; default ${f.defaultHelp ?? (f.default === undefined ? 'none' : `"${f.default}"`)}\n`,
      );
    }
    expect(text).toContain('--help');
    expect(text).toContain('POD_NAMESPACE');
  });

  it('is mirrored by the README flags table', () => {
    const readme = readFileSync(join(import.meta.dirname, '../README.md'), 'utf8');
    for (const f of FLAGS) expect(readme).toMatch(new RegExp(`^\\| \`--${f.name}\` +\\| \`${f.env}\` +\\|`, 'm'));
  });

  it('shows defaults that parse to the configured defaults', () => {
    for (const f of FLAGS) {
      if (f.default !== undefined) expect(f.parse(f.default).ok).toBe(true);
    }
  });
});

describe('parseDuration', () => {
  it.each([
    ['15s', 15_000],
    ['1m30s', 90_000],
    ['1.5s', 1_500],
    ['500ms', 500],
    ['1h', 3_600_000],
    ['2m0.5s', 120_500],
    ['0', 0],
    [' 10s ', 10_000],
  ])('%j is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '15', 's', '15x', '1s2', '-1s', '1 s', '1e3ms', 'ms'])('rejects %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });

  it('formats whole milliseconds back', () => {
    expect([0, 500, 15_000, 90_000, 3_723_004].map(formatDuration)).toEqual([
      '0s',
      '500ms',
      '15s',
      '1m30s',
      '1h2m3s4ms',
    ]);
    for (const ms of [1, 999, 61_001, 7_200_000]) expect(parseDuration(formatDuration(ms))).toBe(ms);
  });
});
