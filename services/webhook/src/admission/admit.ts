/**
 * Admission of one Pod: the decision, read like the kube-apiserver's in-tree PodNodeSelector
 * plugin (plugin/pkg/admission/podnodeselector/admission.go: Admit → the namespace's selector →
 * merge). The path of one request, in the order it runs:
 *
 *   route    http/app.ts            reads the body, decodes the AdmissionReview (review.ts),
 *                                   calls `admit`, encodes the answer; counts and logs it
 *   admit    admission/admit.ts     this file: Pod CREATE? → resolve → patch → check → answer
 *   resolve  cache/resolver.ts      the namespace's mandate from the informer's cache
 *                                   (namespace-cache.ts), a live GET on a miss (namespace-reader.ts)
 *   patch    admission/patch.ts     the JSON Patch merging the mandate into the Pod (pure),
 *            admission/patch-check.ts  checked to apply before it is sent
 *
 * Never rejects a Pod and never throws: whatever goes wrong, the answer is `allowed: true`
 * without a patch, with the reason recorded (fail open, as the webhook's `failurePolicy: Ignore`
 * would do anyway — but visibly).
 */

import { describeError, MAX_ERROR_DETAIL } from '@kubeplus-isolation/service';
import type { Operation } from 'fast-json-patch';
import type { Resolution } from '../cache/resolver.js';
import type { AdmissionResult, FailOpenReason } from './metric-labels.js';
import { buildNodeIsolationPatch } from './patch.js';
import { patchProblem } from './patch-check.js';
import { type AdmissionRequest, type AdmissionReviewResponse, buildReviewResponse, isPodCreate } from './review.js';

export interface AdmissionOutcome {
  result: AdmissionResult;
  review: AdmissionReviewResponse;
  patch: Operation[];
  /** Set when result is failopen or error. */
  reason?: FailOpenReason;
  detail?: string;
}

/**
 * The namespace's mandate: the Resolution itself on a cache hit (the hot path stays synchronous,
 * no Promise or microtask per admission), a Promise of it when a live GET is needed. Throwing or
 * rejecting is an internal error (the Pod is admitted unpatched).
 */
export type ResolveNamespace = (namespace: string) => Resolution | Promise<Resolution>;

/**
 * The decision for one request: synchronous when the namespace's mandate is at hand (a cache
 * hit), a Promise only when `resolve` has to ask the API server. Never throws or rejects.
 */
export function admit(req: AdmissionRequest, resolve: ResolveNamespace): AdmissionOutcome | Promise<AdmissionOutcome> {
  if (!isPodCreate(req)) return { result: 'skipped', patch: [], review: buildReviewResponse(req.uid) };
  let resolution: Resolution | Promise<Resolution>;
  try {
    if (req.namespace === undefined) throw new Error('Pod CREATE without request.namespace');
    resolution = resolve(req.namespace);
  } catch (e) {
    return internalError(req.uid, e);
  }
  if (resolution instanceof Promise) {
    return resolution.then(
      (r) => decide(req, r),
      (e: unknown) => internalError(req.uid, e),
    );
  }
  return decide(req, resolution);
}

/** The outcome for a Pod CREATE once its namespace's mandate is known. Pure; never throws. */
export function decide(req: AdmissionRequest, resolution: Resolution): AdmissionOutcome {
  try {
    if (!resolution.ok) return failOpen(req.uid, 'failopen', resolution.reason, resolution.detail);
    const patch = buildNodeIsolationPatch(req.object, resolution.spec);
    // A patch the API server cannot apply would make it reject the Pod (patch errors are not
    // covered by failurePolicy: Ignore). Check it against the fields it touches first.
    const problem = patchProblem(req.object, patch);
    if (problem !== undefined) throw new Error(`generated patch does not apply: ${problem}`);
    if (patch.length === 0) return { result: 'unchanged', patch, review: buildReviewResponse(req.uid) };
    return { result: 'patched', patch, review: buildReviewResponse(req.uid, patch) };
  } catch (e) {
    return internalError(req.uid, e);
  }
}

/** Shown to whoever created the Pod (kubectl prints it); kept short, no internals. */
export function failOpenWarning(reason: FailOpenReason): string {
  return `kubeplus node isolation was not applied (${reason}): this Pod may be scheduled outside its dedicated nodes`;
}

function failOpen(uid: string, result: 'failopen' | 'error', reason: FailOpenReason, detail: string): AdmissionOutcome {
  return { result, reason, detail, patch: [], review: buildReviewResponse(uid, [], [failOpenWarning(reason)]) };
}

function internalError(uid: string, e: unknown): AdmissionOutcome {
  return failOpen(uid, 'error', 'internal_error', describeError(e, MAX_ERROR_DETAIL));
}
