/**
 * The webhook's flags, in the conventions both services share (@kubeplus-isolation/service
 * flags.ts): each with an environment variable fallback (flag > variable > default), durations
 * written as Go writes them (`10s`, `500ms`), --help and --version. A variable is only read when
 * its flag is absent, so a chart that passes flags is immune to stray variables (e.g. Kubernetes
 * service links injecting METRICS_PORT=tcp://...). Parsing is pure: the bootstrap prints the
 * message and exits 2 on an error.
 */
import {
  boolean,
  duration,
  usage as flagUsage,
  integer,
  LOG_LEVELS,
  type LogLevel,
  oneOf,
  parseFlags,
  port,
  type Flag as SharedFlag,
  text,
} from '@kubeplus-isolation/service';
import { defaultBodyBudget, READ_COST_PER_BYTE } from './http/body-budget.js';
import { DEFAULT_API_SERVER_MAX_REQUEST_BODY_BYTES, reviewBodyLimit } from './http/body-limit.js';

export interface Config {
  port: number;
  metricsPort: number;
  metricsSecure: boolean;
  bindAddress: string | undefined;
  tlsCertFile: string;
  tlsKeyFile: string;
  tlsReloadIntervalMs: number;
  kubeconfig: string | undefined;
  liveLookupTimeoutMs: number;
  maxLiveLookups: number;
  /** The API server's `--max-request-body-bytes`, from which maxBodyBytes is derived unless set. */
  apiServerMaxRequestBodyBytes: number;
  maxBodyBytes: number;
  /** The body budget (http/body-budget.ts). */
  smallReviewBytes: number;
  smallReviewsMemoryBytes: number;
  largeReviewsMemoryBytes: number;
  largeReviewQueue: number;
  largeReviewWaitMs: number;
  bodyReadTimeoutMs: number;
  maxConnections: number;
  maxInformerStalenessMs: number;
  /** The hold (hold/holder.ts): 0 turns it off (/hold then answers at once). */
  holdTimeoutMs: number;
  holdWindowMs: number;
  maxHeldRequests: number;
  shutdownDelayMs: number;
  shutdownTimeoutMs: number;
  logLevel: LogLevel;
}

type Flag = SharedFlag<keyof Config>;

const MiB = 1024 * 1024;

export const FLAGS: readonly Flag[] = [
  {
    key: 'port',
    name: 'port',
    env: 'PORT',
    placeholder: '<port>',
    parse: port,
    default: '8443',
    help: 'HTTPS port serving POST /mutate/pods, GET /healthz and GET /readyz.',
  },
  {
    key: 'metricsPort',
    name: 'metrics-port',
    env: 'METRICS_PORT',
    placeholder: '<port>',
    parse: port,
    default: '8080',
    help: 'Port serving GET /metrics (Prometheus text format): HTTPS with --metrics-secure, else plain HTTP.',
  },
  {
    key: 'metricsSecure',
    name: 'metrics-secure',
    env: 'METRICS_SECURE',
    placeholder: '<true|false>',
    parse: boolean,
    default: 'true',
    help: 'Serve --metrics-port over HTTPS (TLS 1.2+, the --tls-cert-file pair, reloaded with it) and GET /metrics only to a bearer token a TokenReview authenticates and whose user a SubjectAccessReview allows to get the non-resource URL /metrics: 401 without or with an invalid token, 403 when not allowed (cached 1m allowed, 10s denied). Needs create on tokenreviews and subjectaccessreviews. false: plain HTTP, open to whoever reaches the port.',
  },
  {
    key: 'bindAddress',
    name: 'bind-address',
    env: 'BIND_ADDRESS',
    placeholder: '<address>',
    parse: text,
    default: undefined,
    help: 'Address both ports listen on; unset means every address (IPv6 and IPv4 where available).',
  },
  {
    key: 'tlsCertFile',
    name: 'tls-cert-file',
    env: 'TLS_CERT_FILE',
    placeholder: '<path>',
    parse: text,
    default: '/etc/webhook/tls/tls.crt',
    help: 'PEM serving certificate (chain). Reloaded without restart when it changes.',
  },
  {
    key: 'tlsKeyFile',
    name: 'tls-key-file',
    env: 'TLS_KEY_FILE',
    placeholder: '<path>',
    parse: text,
    default: '/etc/webhook/tls/tls.key',
    help: 'PEM private key of the serving certificate. Reloaded with it.',
  },
  {
    key: 'tlsReloadIntervalMs',
    name: 'tls-reload-interval',
    env: 'TLS_RELOAD_INTERVAL',
    placeholder: '<duration>',
    parse: duration(0, 3_600_000),
    default: '10s',
    help: 'How often the certificate files are also checked by stat, besides watching them (0: watch only).',
  },
  {
    key: 'kubeconfig',
    name: 'kubeconfig',
    env: 'KUBECONFIG',
    placeholder: '<path>',
    parse: text,
    default: undefined,
    help: 'Kubeconfig file to reach the API server (its current context; a token, tokenFile or client-certificate user: exec and auth-provider plugins are not supported). Without it the in-cluster service account is used, its token re-read every minute.',
  },
  {
    key: 'liveLookupTimeoutMs',
    name: 'live-lookup-timeout',
    env: 'LIVE_LOOKUP_TIMEOUT',
    placeholder: '<duration>',
    parse: duration(1, 10_000),
    default: '1s',
    help: 'Bound on the live GET of a namespace missing from the cache, after which the Pod is admitted unchanged (fail open). Keep well below the webhook timeoutSeconds.',
  },
  {
    key: 'maxLiveLookups',
    name: 'max-live-lookups',
    env: 'MAX_LIVE_LOOKUPS',
    placeholder: '<count>',
    parse: integer(1, 1_000, 'a whole number'),
    default: '8',
    help: 'Live GETs of distinct namespaces in flight at once; a cache miss beyond it fails open at once (lookup_throttled) instead of costing the API server another GET.',
  },
  {
    key: 'apiServerMaxRequestBodyBytes',
    name: 'api-server-max-request-body-bytes',
    env: 'API_SERVER_MAX_REQUEST_BODY_BYTES',
    placeholder: '<bytes>',
    parse: integer(1024, 16 * MiB, 'a whole number of bytes'),
    default: String(DEFAULT_API_SERVER_MAX_REQUEST_BODY_BYTES),
    help: "The API server's --max-request-body-bytes (its default 3 MiB): the largest Pod it accepts, from which the default --max-body-bytes is derived.",
  },
  {
    key: 'maxBodyBytes',
    name: 'max-body-bytes',
    env: 'MAX_BODY_BYTES',
    placeholder: '<bytes>',
    parse: integer(1024, 128 * MiB, 'a whole number of bytes'),
    default: undefined,
    defaultHelp: `6 × --api-server-max-request-body-bytes + 1 MiB (${reviewBodyLimit(DEFAULT_API_SERVER_MAX_REQUEST_BODY_BYTES)})`,
    help: "Largest AdmissionReview accepted; larger requests get 413, counted as a fail-open. The default answers every Pod the API server accepts: Go's JSON encoder writes each byte of the request as at most 6 (`<` as \\u003c), plus room for the review's other fields.",
  },
  {
    key: 'smallReviewBytes',
    name: 'small-review-bytes',
    env: 'SMALL_REVIEW_BYTES',
    placeholder: '<bytes>',
    parse: integer(1024, 16 * MiB, 'a whole number of bytes'),
    default: String(defaultBodyBudget(0).smallReviewBytes),
    help: 'Reviews of at most this many bytes are small (a real Pod makes a few KiB): they are read at once, never behind larger ones.',
  },
  {
    key: 'smallReviewsMemoryBytes',
    name: 'small-reviews-memory-bytes',
    env: 'SMALL_REVIEWS_MEMORY_BYTES',
    placeholder: '<bytes>',
    parse: integer(64 * 1024, 1024 * MiB, 'a whole number of bytes'),
    default: String(defaultBodyBudget(0).smallBudgetBytes),
    help: 'Memory small reviews may take at once (estimated from their bytes and shape: read, parsed, being answered); a small review beyond it is answered 503 (a fail-open).',
  },
  {
    key: 'largeReviewsMemoryBytes',
    name: 'large-reviews-memory-bytes',
    env: 'LARGE_REVIEWS_MEMORY_BYTES',
    placeholder: '<bytes>',
    parse: integer(1024, 1024 * MiB, 'a whole number of bytes'),
    default: undefined,
    defaultHelp: `the larger of 64 MiB and ${READ_COST_PER_BYTE} × --max-body-bytes`,
    help: `Memory larger reviews may take at once (estimated as above), and the most one review may take (more: 413); the rest wait their turn in arrival order. At least ${READ_COST_PER_BYTE} × --max-body-bytes.`,
  },
  {
    key: 'largeReviewQueue',
    name: 'large-review-queue',
    env: 'LARGE_REVIEW_QUEUE',
    placeholder: '<count>',
    parse: integer(0, 10_000, 'a whole number'),
    default: String(defaultBodyBudget(0).maxQueued),
    help: 'Large reviews that may wait for their turn at once; one more is answered 503 (a fail-open).',
  },
  {
    key: 'largeReviewWaitMs',
    name: 'large-review-wait',
    env: 'LARGE_REVIEW_WAIT',
    placeholder: '<duration>',
    parse: duration(0, 30_000),
    default: '5s',
    help: 'How long a large review may wait for its turn before it is answered 503 (a fail-open). Keep below the webhook timeoutSeconds.',
  },
  {
    key: 'bodyReadTimeoutMs',
    name: 'body-read-timeout',
    env: 'BODY_READ_TIMEOUT',
    placeholder: '<duration>',
    parse: duration(100, 30_000),
    default: '5s',
    help: 'A review body not all received this long after its reading began is cut off (408, a fail-open): the API server sends its body at once.',
  },
  {
    key: 'maxConnections',
    name: 'max-connections',
    env: 'MAX_CONNECTIONS',
    placeholder: '<count>',
    parse: integer(1, 1_000_000, 'a whole number'),
    default: '1024',
    help: 'Connections the HTTPS port holds at once; one more is closed at once.',
  },
  {
    key: 'maxInformerStalenessMs',
    name: 'max-informer-staleness',
    env: 'MAX_INFORMER_STALENESS',
    placeholder: '<duration>',
    parse: duration(1_000, 3_600_000),
    default: '60s',
    help: "How long either namespace watch (the isolated namespaces; KubePlus's, for the hold) may stay disconnected before /readyz fails and traffic moves to other replicas.",
  },
  {
    key: 'holdTimeoutMs',
    name: 'hold-timeout',
    env: 'HOLD_TIMEOUT',
    placeholder: '<duration>',
    parse: duration(0, 29_000),
    default: '25s',
    help: 'The hold (POST /hold, the chart\'s settle-hold.kubeplus.io entry): how long a Pod or Agent Sandbox CREATE in a namespace KubePlus just created waits for kubeplus-isolation to settle it (label kubeplus.io/isolation-settled) before it is refused with "namespace <ns> is not yet settled by kubeplus-isolation (its isolation is not yet in effect); the request can be retried". Keep it below the hold entry\'s timeoutSeconds: past that the API server would admit the request unheld (failurePolicy Ignore). 0: never hold (POST /hold answers at once).',
  },
  {
    key: 'holdWindowMs',
    name: 'hold-window',
    env: 'HOLD_WINDOW',
    placeholder: '<duration>',
    parse: duration(1_000, 86_400_000),
    default: '5m',
    help: 'Only namespaces younger than this (by creationTimestamp) that carry meta.helm.sh/release-name are held: a namespace KubePlus merely stamped later in its life, or one the operator never settles, is not held past it.',
  },
  {
    key: 'maxHeldRequests',
    name: 'max-held-requests',
    env: 'MAX_HELD_REQUESTS',
    placeholder: '<count>',
    parse: integer(1, 100_000, 'a whole number'),
    default: '256',
    help: 'Requests held at once; one more is refused at once (retryable). Each holds its review in memory while it waits.',
  },
  {
    key: 'shutdownDelayMs',
    name: 'shutdown-delay',
    env: 'SHUTDOWN_DELAY',
    placeholder: '<duration>',
    parse: duration(0, 300_000),
    default: '5s',
    help: 'After SIGTERM/SIGINT, keep serving (with /readyz failing) this long, so endpoints drop this replica before it stops accepting.',
  },
  {
    key: 'shutdownTimeoutMs',
    name: 'shutdown-timeout',
    env: 'SHUTDOWN_TIMEOUT',
    placeholder: '<duration>',
    parse: duration(0, 300_000),
    default: '10s',
    help: 'Then, how long in-flight requests may take to finish before remaining connections are cut.',
  },
  {
    key: 'logLevel',
    name: 'log-level',
    env: 'LOG_LEVEL',
    placeholder: '<level>',
    parse: oneOf(LOG_LEVELS),
    default: 'info',
    help: `Least severe level logged: ${LOG_LEVELS.join(', ')}.`,
  },
];

export const PROGRAM = 'kubeplus-node-isolation-webhook';

export function usage(): string {
  return flagUsage({
    program: PROGRAM,
    summary: [
      "Mutating admission webhook applying a tenant namespace's mandated nodeSelector and tolerations",
      '(annotation kubeplus.io/node-isolation-resolved) to every Pod created in it; and holding Pod and',
      'Agent Sandbox CREATEs in a namespace KubePlus just created until kubeplus-isolation has settled it.',
    ],
    flags: FLAGS,
    exitStatus:
      '0 after a clean shutdown, 1 when the webhook cannot start (or a second signal cuts the shutdown short), 2 for invalid flags.',
  });
}

export type ConfigResult =
  | { kind: 'config'; config: Config }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'error'; message: string };

export function parseConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ConfigResult {
  const parsed = parseFlags(FLAGS, argv, { env });
  if (parsed.kind !== 'values') return parsed;
  const values = parsed.values as unknown as Omit<Config, 'maxBodyBytes' | 'largeReviewsMemoryBytes'> & {
    maxBodyBytes: number | undefined;
    largeReviewsMemoryBytes: number | undefined;
  };
  const maxBodyBytes = values.maxBodyBytes ?? reviewBodyLimit(values.apiServerMaxRequestBodyBytes);
  const config: Config = {
    ...values,
    maxBodyBytes,
    largeReviewsMemoryBytes: values.largeReviewsMemoryBytes ?? defaultBodyBudget(maxBodyBytes).largeBudgetBytes,
  };
  if (config.largeReviewsMemoryBytes < READ_COST_PER_BYTE * config.maxBodyBytes) {
    return {
      kind: 'error',
      message: `--large-reviews-memory-bytes (${config.largeReviewsMemoryBytes}) must be at least ${READ_COST_PER_BYTE} × --max-body-bytes (${READ_COST_PER_BYTE * config.maxBodyBytes}), so the largest review can be read`,
    };
  }
  if (READ_COST_PER_BYTE * config.smallReviewBytes > config.smallReviewsMemoryBytes) {
    return {
      kind: 'error',
      message: `--small-reviews-memory-bytes (${config.smallReviewsMemoryBytes}) must be at least ${READ_COST_PER_BYTE} × --small-review-bytes (${READ_COST_PER_BYTE * config.smallReviewBytes}), so a small review can be read`,
    };
  }
  if (config.holdTimeoutMs >= config.holdWindowMs) {
    return {
      kind: 'error',
      message: `--hold-timeout (${config.holdTimeoutMs} ms) must be shorter than --hold-window (${config.holdWindowMs} ms)`,
    };
  }
  if (config.port !== 0 && config.port === config.metricsPort) {
    return { kind: 'error', message: `--port and --metrics-port must differ (both ${config.port})` };
  }
  return { kind: 'config', config };
}
