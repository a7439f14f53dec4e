/**
 * Every request the operator sends to the API server, observed where they all pass: the undici
 * dispatcher the kubeconfig's connection pool shares (kubeconfig.ts). An interceptor (undici's
 * `compose`) notes when a request is dispatched and reports it once its response has ended or
 * failed: method, path, status, duration, and whether it was a watch (whose duration is how long
 * it stayed open, not a latency). What is done with a record (metrics, the slow-request log) is
 * runtime/api-request-metrics.ts's.
 */

/** What this file uses of an undici dispatcher and its handlers (client-node's undici; no import of our own). */
interface DispatchOptions {
  method?: string;
  path?: string;
}
type DispatchHandler = object;
type Dispatch = (opts: DispatchOptions, handler: DispatchHandler) => boolean;
export interface ComposableDispatcher {
  compose(interceptor: (dispatch: Dispatch) => Dispatch): unknown;
}

export interface ApiRequestRecord {
  method: string;
  /** The path without its query string. */
  path: string;
  watch: boolean;
  /** The response status; undefined when the request failed without one. */
  status: number | undefined;
  seconds: number;
  /** Why it failed, when it did (a network error, an abort). */
  error?: string;
}

export type ApiRequestObserver = (record: ApiRequestRecord) => void;

/** True for a watch request: `watch=true` or `watch=1` in the query (the only forms the API server takes). */
export function isWatchRequest(path: string): boolean {
  const q = path.indexOf('?');
  if (q < 0) return false;
  return new URLSearchParams(path.slice(q + 1)).getAll('watch').some((v) => v === 'true' || v === '1');
}

/**
 * `dispatcher` with every request reported to `observe` once it has ended. The caller's handler is
 * wrapped in a Proxy: every other method and property reaches it unchanged.
 */
export function observeRequests<D extends ComposableDispatcher>(dispatcher: D, observe: ApiRequestObserver): D {
  const interceptor =
    (dispatch: Dispatch): Dispatch =>
    (opts, handler) => {
      const started = performance.now();
      const rawPath = opts.path ?? '';
      const q = rawPath.indexOf('?');
      let status: number | undefined;
      let reported = false;
      const report = (error?: unknown): void => {
        if (reported) return;
        reported = true;
        const record: ApiRequestRecord = {
          method: String(opts.method ?? 'GET'),
          path: q < 0 ? rawPath : rawPath.slice(0, q),
          watch: isWatchRequest(rawPath),
          status,
          seconds: (performance.now() - started) / 1e3,
        };
        if (error !== undefined) record.error = error instanceof Error ? error.message : String(error);
        try {
          observe(record);
        } catch {
          // An observer's failure is never the request's.
        }
      };
      const wrapped = new Proxy(handler, {
        get(target, key, receiver) {
          const value = Reflect.get(target, key, receiver);
          if (typeof value !== 'function') return value;
          if (key === 'onResponseStart') {
            return function (this: unknown, ...args: unknown[]) {
              const code = args[1];
              if (typeof code === 'number' && code >= 200) status = code;
              return Reflect.apply(value, this, args);
            };
          }
          if (key === 'onResponseEnd') {
            return function (this: unknown, ...args: unknown[]) {
              report();
              return Reflect.apply(value, this, args);
            };
          }
          if (key === 'onResponseError') {
            return function (this: unknown, ...args: unknown[]) {
              report(args[1]);
              return Reflect.apply(value, this, args);
            };
          }
          return value;
        },
      });
      return dispatch(opts, wrapped);
    };
  return dispatcher.compose(interceptor) as D;
}
