/**
 * Per-request options for client-node 2.x API calls: cancellation by AbortSignal and the
 * Content-Type of PATCH bodies. client-node has no per-call signal parameter; a request
 * middleware sets it on the RequestContext, which its fetch layer passes to `fetch`.
 */
import {
  type ConfigurationOptions,
  Observable,
  type PatchStrategy,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

interface RequestOptions {
  signal?: AbortSignal;
  contentType?: PatchStrategy;
}

/** ConfigurationOptions for one call; appends to (never replaces) the client's middleware. */
export function requestOptions({ signal, contentType }: RequestOptions): ConfigurationOptions {
  return {
    middleware: [
      {
        pre(context: RequestContext): Observable<RequestContext> {
          if (signal) context.setSignal(signal);
          if (contentType) context.setHeaderParam('Content-Type', contentType);
          return new Observable(Promise.resolve(context));
        },
        post(context: ResponseContext): Observable<ResponseContext> {
          return new Observable(Promise.resolve(context));
        },
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}
