/**
 * The webhook's reads of Namespaces: the informer's list and watch (see informer.ts) and the live
 * GET on a cache miss. Nothing here writes. (Its only other API calls are secure metrics'
 * reviews, kube/access-review.ts.)
 */
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { NamespaceLike } from './namespace-cache.js';
import type { NamespaceReader } from './resolver.js';

export const NAMESPACES_PATH = '/api/v1/namespaces';

/** GET /api/v1/namespaces/{name}; 404 is "does not exist", anything else rejects; aborted with `signal`. */
export class KubeNamespaceReader implements NamespaceReader {
  readonly #client: KubeClient;

  constructor(client: KubeClient) {
    this.#client = client;
  }

  async read(name: string, signal: AbortSignal): Promise<NamespaceLike | undefined> {
    try {
      return (await this.#client.getJson(
        `${NAMESPACES_PATH}/${encodeURIComponent(name)}`,
        {},
        signal,
      )) as NamespaceLike;
    } catch (e) {
      if (e instanceof KubeApiError && e.statusCode === 404) return undefined;
      throw e;
    }
  }
}
