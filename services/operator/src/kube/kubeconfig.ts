/**
 * The kubeconfig every API client of the operator shares: loaded from --kubeconfig, $KUBECONFIG
 * or the in-cluster ServiceAccount, with one keep-alive connection pool (`PooledKubeConfig`),
 * through which every API request can be observed (api-requests.ts).
 */
import type { AgentOptions } from 'node:https';
import { type Cluster, KubeConfig } from '@kubernetes/client-node';
import {
  type ApiRequestObserver,
  type ApiRequestRecord,
  type ComposableDispatcher,
  observeRequests,
} from './api-requests.js';

/** How many requests made before an observer is set are kept for it. */
const EARLY_REQUESTS = 1000;

interface Closable {
  close(): Promise<void>;
}

type DispatcherFactory = (cluster: Cluster | null, agentOptions: AgentOptions) => Closable | undefined;

/**
 * A KubeConfig whose API requests share one connection pool.
 *
 * client-node 2.0.1 builds a new undici Agent for every request (`applySecurityAuthentication`
 * → `createDispatcher`, uncached, unlike the https.Agent of its older path), so every API call
 * opened a new TCP connection and did a full TLS handshake (measured: 50 sequential reads = 50
 * TLS connections), costing both the operator and the API server a handshake per request and
 * leaving each socket open for its keep-alive timeout. Here the Agent is kept and reused while
 * the TLS material is unchanged (ca/cert/key are re-read per request by client-node, so a
 * rotated file yields a new Agent; the old one is closed once its requests, e.g. a watch, end).
 * client-go likewise caches its transport per TLS config.
 *
 * `createDispatcher` is private in client-node's typings; `test/kube/kubeconfig.test.ts` checks the
 * reuse against a real server, so an upgrade that changes it fails there.
 */
export class PooledKubeConfig extends KubeConfig {
  #observer: ApiRequestObserver | undefined;
  /** Requests that ended before an observer was set (start-up discovery), for the first one. */
  #early: ApiRequestRecord[] = [];

  /**
   * Reports every API request sent through this kubeconfig's pool to `observer` (api-requests.ts):
   * at once those that ended before this call (the first EARLY_REQUESTS of them), then each as it
   * ends.
   */
  observeApiRequests(observer: ApiRequestObserver): void {
    this.#observer = observer;
    const early = this.#early;
    this.#early = [];
    for (const r of early) observer(r);
  }

  #deliver(record: ApiRequestRecord): void {
    if (this.#observer !== undefined) this.#observer(record);
    else if (this.#early.length < EARLY_REQUESTS) this.#early.push(record);
  }

  constructor() {
    super();
    const self = this as unknown as { createDispatcher?: DispatcherFactory };
    const create = self.createDispatcher;
    if (typeof create !== 'function') return;
    const pools = new Map<string, { options: string; dispatcher: Closable | undefined }>();
    self.createDispatcher = (cluster, agentOptions) => {
      const identity = JSON.stringify([cluster?.name ?? '', cluster?.server ?? '', this.getCurrentUser()?.name ?? '']);
      const options = JSON.stringify(this.createDispatcherOptions(cluster, agentOptions));
      const pooled = pools.get(identity);
      if (pooled?.options === options) return pooled.dispatcher;
      const made = create.call(this, cluster, agentOptions);
      const dispatcher = isComposable(made) ? observeRequests(made, (r) => this.#deliver(r)) : made;
      pools.set(identity, { options, dispatcher });
      pooled?.dispatcher?.close().catch(() => {});
      return dispatcher;
    };
  }
}

function isComposable(d: Closable | undefined): d is Closable & ComposableDispatcher {
  return typeof (d as Partial<ComposableDispatcher> | undefined)?.compose === 'function';
}

/** `path` (a kubeconfig file) or, without it, the in-cluster service account. */
export function loadKubeConfig(path: string | undefined, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kc = new PooledKubeConfig();
  if (path !== undefined) {
    kc.loadFromFile(path);
  } else if (env.KUBERNETES_SERVICE_HOST !== undefined) {
    kc.loadFromCluster();
  } else {
    throw new Error('not running in a cluster (KUBERNETES_SERVICE_HOST unset): pass --kubeconfig');
  }
  return kc;
}
