/**
 * How many Pods to ask for in the next page of a paged Pod LIST, so that a page stays under a
 * byte budget as well as under the caller's count (issue 34). The API server's `limit` is a
 * count, and a Pod's JSON ranges from ~2 KiB to the ~1.5 MiB etcd stores at most (large
 * annotations, long env or command lists): 500 of the largest would be ~750 MiB in one response,
 * decoded all at once, past the chart's 1792Mi memory limit. So each page's bytes are measured
 * (kube/pod-lister.ts: the length of the response body) and the next page is sized by the bytes
 * per Pod of the last one: the budget divided by them, between 1 and the caller's limit (500).
 *
 * The budget, 8 MiB: a page in memory costs its JSON text, the parsed tree and client-node's typed
 * copy of it, a few times its bytes — a few tens of MiB at 8 MiB, small beside the operator's
 * measured 809 MiB at 10,000 tenants and its 1792Mi limit. And 500 ordinary Pods (up to 16 KiB
 * each) fit in it, so in a cluster of ordinary Pods the pages stay 500 (the audit's cost, one LIST
 * per namespace of under 500 Pods, is unchanged); only large Pods make pages smaller.
 *
 * What is not bounded: a page whose Pods are larger on average than the last page's (the first
 * large Pods after small ones) carries more than the budget, at most its limit × its largest Pod;
 * the page after it is sized by it at once. The first page the process ever lists assumes the
 * largest Pods (5 a page), so nothing comes unmeasured.
 */

/** Bytes of Pod JSON one page of a LIST may carry. */
export const POD_PAGE_BUDGET_BYTES = 8 * 1024 * 1024;

/** The largest Pod etcd stores by default (its --max-request-bytes, 1.5 MiB): an unmeasured Pod's assumed size. */
export const LARGEST_POD_BYTES = 1.5 * 1024 * 1024;

/** How many Pods of `bytesPerPod` fit in `budgetBytes`: at least 1 (a Pod larger than the budget still comes), at most `max`. Pure. */
export function podsPerPage(bytesPerPod: number, budgetBytes: number, max: number): number {
  const fit = Math.floor(budgetBytes / Math.max(1, bytesPerPod));
  if (!Number.isFinite(fit)) return 1;
  return Math.max(1, Math.min(max, fit));
}

export interface PodPageSizerOptions {
  /** Default POD_PAGE_BUDGET_BYTES. */
  budgetBytes?: number;
  /** The size of a Pod before any was measured. Default LARGEST_POD_BYTES. */
  initialBytesPerPod?: number;
}

/**
 * The bytes per Pod the next page is sized by: learned from every page served (its body's bytes
 * over its Pods), across listings and namespaces — one estimate of this cluster's Pods.
 */
export class PodPageSizer {
  readonly budgetBytes: number;
  private bytesPerPod: number;

  constructor(options: PodPageSizerOptions = {}) {
    this.budgetBytes = options.budgetBytes ?? POD_PAGE_BUDGET_BYTES;
    this.bytesPerPod = options.initialBytesPerPod ?? LARGEST_POD_BYTES;
  }

  /** The next page's limit: at most `max` (the caller's), fewer while the last Pods measured were large. */
  limit(max: number): number {
    return podsPerPage(this.bytesPerPod, this.budgetBytes, max);
  }

  /** A page of `items` Pods came in `bytes` bytes. An empty page tells nothing. */
  observe(items: number, bytes: number): void {
    if (items > 0 && Number.isFinite(bytes) && bytes >= 0) this.bytesPerPod = bytes / items;
  }
}
