/**
 * Command-line flags, each with an environment variable fallback (flag > variable > default).
 * A variable is only read when its flag is absent, so a chart that passes flags is immune to
 * stray variables (e.g. Kubernetes service links injecting METRICS_PORT=tcp://...).
 * Parsing is pure: main.ts prints the message and exits 2 on an error.
 */
import { parseArgs } from 'node:util';
import { LOG_LEVELS, type LogLevel } from './log.js';

export interface Config {
  port: number;
  metricsPort: number;
  bindAddress: string | undefined;
  tlsCertFile: string;
  tlsKeyFile: string;
  tlsReloadIntervalMs: number;
  kubeconfig: string | undefined;
  liveLookupTimeoutMs: number;
  maxBodyBytes: number;
  maxInformerStalenessMs: number;
  shutdownDelayMs: number;
  shutdownTimeoutMs: number;
  logLevel: LogLevel;
}

type Kind =
  | { type: 'int'; min: number; max: number; unit: 'port' | 'ms' | 'bytes' }
  | { type: 'string'; optional?: boolean }
  | { type: 'enum'; values: readonly string[] };

interface Flag {
  key: keyof Config;
  name: string;
  env: string;
  kind: Kind;
  default: string | undefined;
  help: string;
}

const MiB = 1024 * 1024;
/** Port 0 lets the OS pick a free port (tests); a deployment names its ports. */
const port = (): Kind => ({ type: 'int', min: 0, max: 65535, unit: 'port' });
const ms = (min: number, max: number): Kind => ({ type: 'int', min, max, unit: 'ms' });

export const FLAGS: readonly Flag[] = [
  {
    key: 'port',
    name: 'port',
    env: 'PORT',
    kind: port(),
    default: '8443',
    help: 'HTTPS port serving POST /mutate/pods, GET /healthz and GET /readyz.',
  },
  {
    key: 'metricsPort',
    name: 'metrics-port',
    env: 'METRICS_PORT',
    kind: port(),
    default: '8080',
    help: 'Plain-HTTP port serving GET /metrics (Prometheus text format).',
  },
  {
    key: 'bindAddress',
    name: 'bind-address',
    env: 'BIND_ADDRESS',
    kind: { type: 'string', optional: true },
    default: undefined,
    help: 'Address both ports listen on; unset means every address (IPv6 and IPv4 where available).',
  },
  {
    key: 'tlsCertFile',
    name: 'tls-cert-file',
    env: 'TLS_CERT_FILE',
    kind: { type: 'string' },
    default: '/etc/webhook/tls/tls.crt',
    help: 'PEM serving certificate (chain). Reloaded without restart when it changes.',
  },
  {
    key: 'tlsKeyFile',
    name: 'tls-key-file',
    env: 'TLS_KEY_FILE',
    kind: { type: 'string' },
    default: '/etc/webhook/tls/tls.key',
    help: 'PEM private key of the serving certificate. Reloaded with it.',
  },
  {
    key: 'tlsReloadIntervalMs',
    name: 'tls-reload-interval-ms',
    env: 'TLS_RELOAD_INTERVAL_MS',
    kind: ms(0, 3_600_000),
    default: '10000',
    help: 'How often the certificate files are also checked by stat, besides watching them (0: watch only).',
  },
  {
    key: 'kubeconfig',
    name: 'kubeconfig',
    env: 'KUBECONFIG',
    kind: { type: 'string', optional: true },
    default: undefined,
    help: 'Kubeconfig file to reach the API server (its current context; a token, tokenFile or client-certificate user: exec and auth-provider plugins are not supported). Without it the in-cluster service account is used, its token re-read every minute.',
  },
  {
    key: 'liveLookupTimeoutMs',
    name: 'live-lookup-timeout-ms',
    env: 'LIVE_LOOKUP_TIMEOUT_MS',
    kind: ms(1, 10_000),
    default: '1000',
    help: 'Bound on the live GET of a namespace missing from the cache, after which the Pod is admitted unchanged (fail open). Keep well below the webhook timeoutSeconds.',
  },
  {
    key: 'maxBodyBytes',
    name: 'max-body-bytes',
    env: 'MAX_BODY_BYTES',
    kind: { type: 'int', min: 1024, max: 64 * MiB, unit: 'bytes' },
    default: String(4 * MiB),
    help: 'Largest AdmissionReview accepted; larger requests get 413. The API server caps a request at 3 MiB, plus the review envelope.',
  },
  {
    key: 'maxInformerStalenessMs',
    name: 'max-informer-staleness-ms',
    env: 'MAX_INFORMER_STALENESS_MS',
    kind: ms(1_000, 3_600_000),
    default: '60000',
    help: 'How long the namespace watch may stay disconnected before /readyz fails and traffic moves to other replicas.',
  },
  {
    key: 'shutdownDelayMs',
    name: 'shutdown-delay-ms',
    env: 'SHUTDOWN_DELAY_MS',
    kind: ms(0, 300_000),
    default: '5000',
    help: 'After SIGTERM/SIGINT, keep serving (with /readyz failing) this long, so endpoints drop this replica before it stops accepting.',
  },
  {
    key: 'shutdownTimeoutMs',
    name: 'shutdown-timeout-ms',
    env: 'SHUTDOWN_TIMEOUT_MS',
    kind: ms(0, 300_000),
    default: '10000',
    help: 'Then, how long in-flight requests may take to finish before remaining connections are cut.',
  },
  {
    key: 'logLevel',
    name: 'log-level',
    env: 'LOG_LEVEL',
    kind: { type: 'enum', values: LOG_LEVELS },
    default: 'info',
    help: `Least severe level logged: ${LOG_LEVELS.join(', ')}.`,
  },
];

export const PROGRAM = 'kubeplus-node-isolation-webhook';

export function usage(): string {
  const lines = [
    `Usage: ${PROGRAM} [flags]`,
    '',
    "Mutating admission webhook applying a tenant namespace's mandated nodeSelector and tolerations",
    '(annotation kubeplus.io/node-isolation-resolved) to every Pod created in it.',
    '',
    'Flags (each also read from the environment variable shown; a flag wins over its variable):',
  ];
  for (const f of FLAGS) {
    const value = f.kind.type === 'int' ? `<${f.kind.unit}>` : f.kind.type === 'enum' ? '<level>' : '<value>';
    const dflt = f.default === undefined ? 'none' : JSON.stringify(f.default);
    lines.push(`  --${f.name} ${value}`, `      ${f.help}`, `      env ${f.env}; default ${dflt}`);
  }
  lines.push('  -h, --help', '      Print this help and exit.');
  return `${lines.join('\n')}\n`;
}

export type ConfigResult = { kind: 'config'; config: Config } | { kind: 'help' } | { kind: 'error'; message: string };

function convert(
  f: Flag,
  raw: string,
  source: string,
): { ok: true; value: string | number } | { ok: false; message: string } {
  const k = f.kind;
  if (k.type === 'int') {
    const n = /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < k.min || n > k.max) {
      const what = { port: 'a port number', ms: 'a whole number of milliseconds', bytes: 'a whole number of bytes' }[
        k.unit
      ];
      return {
        ok: false,
        message: `--${f.name}: must be ${what} from ${k.min} to ${k.max}, got ${JSON.stringify(raw)}${source}`,
      };
    }
    return { ok: true, value: n };
  }
  if (k.type === 'enum') {
    if (!k.values.includes(raw)) {
      return {
        ok: false,
        message: `--${f.name}: must be one of ${k.values.join(', ')}, got ${JSON.stringify(raw)}${source}`,
      };
    }
    return { ok: true, value: raw };
  }
  if (raw.trim() === '') return { ok: false, message: `--${f.name}: must not be empty${source}` };
  return { ok: true, value: raw };
}

export function parseConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ConfigResult {
  let values: Record<string, string | boolean | undefined>;
  try {
    const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
      help: { type: 'boolean', short: 'h' },
    };
    for (const f of FLAGS) options[f.name] = { type: 'string' };
    ({ values } = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }));
  } catch (e) {
    return { kind: 'error', message: (e as Error).message };
  }
  if (values.help === true) return { kind: 'help' };

  const out: Record<string, string | number | undefined> = {};
  for (const f of FLAGS) {
    const fromFlag = values[f.name];
    const fromEnv = env[f.env];
    let raw: string | undefined;
    let source = '';
    if (typeof fromFlag === 'string') {
      raw = fromFlag;
    } else if (fromEnv !== undefined && fromEnv !== '') {
      raw = fromEnv;
      source = ` (from ${f.env})`;
    } else {
      raw = f.default;
    }
    if (raw === undefined) {
      out[f.key] = undefined;
      continue;
    }
    const converted = convert(f, raw, source);
    if (!converted.ok) return { kind: 'error', message: converted.message };
    out[f.key] = converted.value;
  }
  const config = out as unknown as Config;
  if (config.port !== 0 && config.port === config.metricsPort) {
    return { kind: 'error', message: `--port and --metrics-port must differ (both ${config.port})` };
  }
  return { kind: 'config', config };
}
