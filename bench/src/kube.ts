/**
 * A lean HTTPS client for the API server (node:https, keep-alive, the kubeconfig's client
 * certificate): client-side overhead stays small and equal across the compared setups, so the
 * measured latency is the API server's. @kubernetes/client-node is used for everything untimed.
 */
import https from 'node:https';
import { waitFor } from '@kubeplus-isolation/e2e';
import { canonicalNodeIsolation, type NodeIsolationSpec } from '@kubeplus-isolation/spec';
import { type KubeConfig, type KubernetesObject, KubernetesObjectApi } from '@kubernetes/client-node';

export interface ApiResponse {
  status: number;
  body: string;
}

export class RawApi {
  private constructor(
    private readonly base: URL,
    private readonly options: https.RequestOptions,
    private readonly agent: https.Agent,
  ) {}

  static async connect(kc: KubeConfig, maxSockets: number): Promise<RawApi> {
    const server = kc.getCurrentCluster()?.server;
    if (!server) throw new Error('kubeconfig has no current cluster');
    const options: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(options);
    const agent = new https.Agent({
      keepAlive: true,
      maxSockets,
      ca: options.ca,
      cert: options.cert,
      key: options.key,
    });
    return new RawApi(new URL(server), { ca: options.ca, cert: options.cert, key: options.key }, agent);
  }

  request(method: string, path: string, body?: unknown): Promise<ApiResponse> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          ...this.options,
          agent: this.agent,
          host: this.base.hostname,
          port: this.base.port,
          method,
          path,
          headers: {
            accept: 'application/json',
            ...(payload !== undefined && {
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(payload),
            }),
          },
          timeout: 60_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no response within 60s`)));
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** POST that must succeed (2xx); returns the parsed body. */
  async create<T = unknown>(path: string, body: unknown): Promise<T> {
    const res = await this.request('POST', path, body);
    if (res.status < 200 || res.status >= 300) {
      throw new Error(`POST ${path}: HTTP ${res.status}: ${res.body.slice(0, 300)}`);
    }
    return JSON.parse(res.body) as T;
  }

  /**
   * Streams a watch (`path` without `watch=1`: added here) on its own connection, calling
   * `onEvent` for every event (`ADDED` for each object that exists when it starts). Returns the
   * function that ends it. A watch the server ends or that fails calls `onEnd`.
   */
  watch(
    path: string,
    onEvent: (type: string, object: KubernetesObject) => void,
    onEnd: (error?: Error) => void = () => undefined,
  ): () => void {
    const sep = path.includes('?') ? '&' : '?';
    let buffered = '';
    let ended = false;
    const end = (error?: Error): void => {
      if (ended) return;
      ended = true;
      onEnd(error);
    };
    const req = https.request(
      {
        ...this.options,
        agent: false,
        host: this.base.hostname,
        port: this.base.port,
        method: 'GET',
        path: `${path}${sep}watch=1`,
        headers: { accept: 'application/json' },
      },
      (res) => {
        if (res.statusCode !== 200) end(new Error(`watch ${path}: HTTP ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffered += chunk;
          for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
            const line = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (line === '') continue;
            const event = JSON.parse(line) as { type: string; object: KubernetesObject };
            onEvent(event.type, event.object);
          }
        });
        res.on('end', () => end());
        res.on('error', end);
      },
    );
    req.on('error', end);
    req.end();
    return () => {
      ended = true;
      req.destroy();
    };
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Runs `task(i)` for i in [0, count) with at most `concurrency` in flight. */
export async function forEachConcurrent(
  count: number,
  concurrency: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/** Creates the RuntimeClass `name` with `handler`, as a platform team would. */
export async function createRuntimeClass(kc: KubeConfig, rc: { name: string; handler: string }): Promise<void> {
  await KubernetesObjectApi.makeApiClient(kc).create({
    apiVersion: 'node.k8s.io/v1',
    kind: 'RuntimeClass',
    metadata: { name: rc.name },
    handler: rc.handler,
  } as KubernetesObject);
}

/**
 * Creates the admission-policy engine's parameter `NodeIsolation/node-isolation` in `namespace`
 * with the operator's canonical spec of `mandate`, retrying while the CRD's endpoint is not served
 * yet (a moment after the CRD is created); an existing one is kept.
 */
export async function createNodeIsolationParam(
  api: RawApi,
  namespace: string,
  mandate: NodeIsolationSpec,
): Promise<void> {
  const body = {
    apiVersion: 'isolation.kubeplus.io/v1alpha1',
    kind: 'NodeIsolation',
    metadata: { name: 'node-isolation' },
    spec: JSON.parse(canonicalNodeIsolation(mandate)) as unknown,
  };
  await waitFor(
    `NodeIsolation ${namespace}/node-isolation to be created`,
    async (observe) => {
      const res = await api.request(
        'POST',
        `/apis/isolation.kubeplus.io/v1alpha1/namespaces/${namespace}/nodeisolations`,
        body,
      );
      observe(`HTTP ${res.status}: ${res.body.slice(0, 200)}`);
      if (res.status === 201 || res.status === 409) return true;
      if (res.status === 404) return false;
      throw new Error(
        `create NodeIsolation ${namespace}/node-isolation: HTTP ${res.status}: ${res.body.slice(0, 300)}`,
      );
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}
