/**
 * The audit's paged Pod LISTs on @kubernetes/client-node: one namespace's unfinished Pods (the
 * audit, and the reports' Sandbox Pods), and — for the Pod watch's catch-up, kube/pod-watch.ts —
 * every Pod of the cluster. Finished Pods are filtered out by the API server where asked
 * (`status.phase` is a supported Pod field selector), so they are neither sent nor decoded. Needs
 * `list` on `pods`, nothing else.
 *
 * The audit's pages are bounded by bytes as well as by count (controllers/audit/page-budget.ts):
 * a page's limit comes from its lister's estimate of a Pod's bytes, at most the caller's, and its
 * response body is measured into the estimate (a client-node response middleware that notes the
 * length of the text it hands to the JSON parser: no extra copy, no re-serialization). Each lister
 * learns on its own (no state shared across the process).
 */
import {
  type ConfigurationOptions,
  type CoreV1Api,
  Observable,
  type RequestContext,
  type ResponseContext,
  type V1Pod,
} from '@kubernetes/client-node';
import type { PodLister } from '../controllers/audit/auditor.js';
import { PodPageSizer } from '../controllers/audit/page-budget.js';

export const UNFINISHED_PODS_FIELD_SELECTOR = 'status.phase!=Succeeded,status.phase!=Failed';

/** ConfigurationOptions whose response middleware measures the body's bytes (UTF-8, as sent). */
function measuredBody(): { options: ConfigurationOptions; bytes(): number | undefined } {
  let bytes: number | undefined;
  return {
    options: {
      middleware: [
        {
          pre: (context: RequestContext) => new Observable(Promise.resolve(context)),
          post(context: ResponseContext): Observable<ResponseContext> {
            const body = context.body;
            context.body = {
              text: async () => {
                const text = await body.text();
                bytes = Buffer.byteLength(text);
                return text;
              },
              binary: () => body.binary(),
              stream: () => body.stream(),
            };
            return new Observable(Promise.resolve(context));
          },
        },
      ],
      middlewareMergeStrategy: 'append',
    },
    bytes: () => bytes,
  };
}

/**
 * One page of a Pod LIST sized by `pages`: `list` is called with the limit to ask for (at most
 * `max`) and the options that measure the response, which then teaches `pages`.
 */
export async function sizedPodPage<L extends { items: readonly unknown[] }>(
  pages: PodPageSizer,
  max: number,
  list: (limit: number, options: ConfigurationOptions) => Promise<L>,
): Promise<L> {
  const measured = measuredBody();
  const page = await list(pages.limit(max), measured.options);
  const bytes = measured.bytes();
  if (bytes !== undefined) pages.observe(page.items.length, bytes);
  return page;
}

/**
 * One page of `namespace`'s unfinished Pods (`labelSelector`: only those it selects), as the API
 * sends them: at most `limit`; with `pages`, fewer when Pods are large.
 */
export async function listUnfinishedPods(
  api: CoreV1Api,
  namespace: string,
  { limit, continueToken }: { limit: number; continueToken?: string | undefined },
  labelSelector?: string,
  pages?: PodPageSizer,
): Promise<{ items: V1Pod[]; continueToken: string | undefined }> {
  const list = (sized: number, options?: ConfigurationOptions) =>
    api.listNamespacedPod(
      {
        namespace,
        limit: sized,
        _continue: continueToken,
        ...(labelSelector === undefined ? {} : { labelSelector }),
        fieldSelector: UNFINISHED_PODS_FIELD_SELECTOR,
      },
      options,
    );
  const page = pages === undefined ? await list(limit) : await sizedPodPage(pages, limit, list);
  return { items: page.items, continueToken: page.metadata?._continue };
}

/**
 * One page of the unfinished Pods bound to `node`, in every namespace (the foreign-Pod search of a
 * pool's nodes): `spec.nodeName` is a Pod field selector the API server's watch cache indexes, so
 * the server reads only that node's Pods (at most the kubelet's maxPods, 110 by default).
 */
export async function listUnfinishedPodsOnNode(
  api: CoreV1Api,
  node: string,
  { limit, continueToken }: { limit: number; continueToken?: string | undefined },
  pages?: PodPageSizer,
): Promise<{ items: V1Pod[]; continueToken: string | undefined }> {
  const list = (sized: number, options?: ConfigurationOptions) =>
    api.listPodForAllNamespaces(
      {
        limit: sized,
        _continue: continueToken,
        fieldSelector: `spec.nodeName=${node},${UNFINISHED_PODS_FIELD_SELECTOR}`,
      },
      options,
    );
  const page = pages === undefined ? await list(limit) : await sizedPodPage(pages, limit, list);
  return { items: page.items, continueToken: page.metadata?._continue };
}

/** The audit's lister: its pages sized by bytes (`pages`, its own by default). */
export function kubePodLister(api: CoreV1Api, pages: PodPageSizer = new PodPageSizer()): PodLister {
  return {
    listPods: (namespace, page) => listUnfinishedPods(api, namespace, page, undefined, pages),
    listPodsOnNode: (node, page) => listUnfinishedPodsOnNode(api, node, page, pages),
  };
}
