/**
 * The webhook's only API-server calls, all reads of Namespaces: the informer's list (see
 * informer.ts) and the live GET on a cache miss. Nothing here writes.
 */
import {
  ApiException,
  type ConfigurationOptions,
  type CoreV1Api,
  Observable,
  type ObservableMiddleware,
} from '@kubernetes/client-node';
import type { NamespaceLike } from './namespace-cache.js';
import type { NamespaceReader } from './resolver.js';

/** Request options that abort the HTTP request when `signal` does (the generated client has no timeout option). */
export function abortOptions(signal: AbortSignal): ConfigurationOptions<ObservableMiddleware> {
  const middleware: ObservableMiddleware = {
    pre: (ctx) => {
      ctx.setSignal(signal);
      return new Observable(Promise.resolve(ctx));
    },
    post: (res) => new Observable(Promise.resolve(res)),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}

/** GET /api/v1/namespaces/{name}; 404 is "does not exist", anything else rejects. */
export class KubeNamespaceReader implements NamespaceReader {
  readonly #api: CoreV1Api;

  constructor(api: CoreV1Api) {
    this.#api = api;
  }

  async read(name: string, signal: AbortSignal): Promise<NamespaceLike | undefined> {
    try {
      return await this.#api.readNamespace({ name }, abortOptions(signal));
    } catch (e) {
      if (e instanceof ApiException && e.code === 404) return undefined;
      throw e;
    }
  }
}
