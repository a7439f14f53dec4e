/**
 * Every bounded label value the webhook's metrics use, in one place: a metric is
 * pre-initialized with each (so rates start at zero) and nothing else can appear.
 */

/** What happened to one admission request. */
export const ADMISSION_RESULTS = ['patched', 'unchanged', 'failopen', 'error', 'skipped', 'refused'] as const;
export type AdmissionResult = (typeof ADMISSION_RESULTS)[number];

/** Why a Pod was admitted without the isolation it should have had. */
export const FAIL_OPEN_REASONS = [
  'annotation_missing',
  'annotation_invalid',
  'namespace_not_found',
  'namespace_not_labeled',
  'lookup_timeout',
  'lookup_failed',
  // Too many live GETs of other namespaces in flight (--max-live-lookups).
  'lookup_throttled',
  'internal_error',
  // A request to /mutate/pods answered with a 4xx (e.g. 413 over --max-body-bytes): the API
  // server then admits the Pod unpatched (failurePolicy Ignore). Which 4xx: bad_requests_total.
  'bad_request',
  // Answered 503 by the body budget (http/body-budget.ts): too many bytes of reviews were being
  // read already. The API server admits the Pod unpatched; by lane: overloaded_total.
  'overloaded',
] as const;
export type FailOpenReason = (typeof FAIL_OPEN_REASONS)[number];

/** Outcome of a live GET of a namespace missing from the cache. */
export const LIVE_LOOKUP_RESULTS = ['found', 'not_found', 'not_labeled', 'timeout', 'error', 'throttled'] as const;
export type LiveLookupResult = (typeof LIVE_LOOKUP_RESULTS)[number];

/** Why a decoded body is not an acceptable AdmissionReview (admission/review.ts): a 400. */
export const INVALID_REVIEW_REASONS = [
  'not_an_object',
  'invalid_api_version',
  'invalid_kind',
  'missing_request',
  'invalid_uid',
  'invalid_operation',
  'invalid_request_kind',
  'missing_object',
  'missing_namespace',
] as const;
export type InvalidReviewReason = (typeof INVALID_REVIEW_REASONS)[number];

/** Why a request to /mutate/pods was answered with a 4xx instead of an AdmissionReview. */
export const BAD_REQUEST_REASONS = [
  'missing_body',
  'invalid_json',
  'unsupported_media_type',
  'unsupported_encoding',
  'length_required',
  'body_too_large',
  'too_complex',
  'body_timeout',
  'aborted',
  ...INVALID_REVIEW_REASONS,
] as const;
export type BadRequestReason = (typeof BAD_REQUEST_REASONS)[number];

/** What the hold (hold/holder.ts) did with one request: kubeplus_webhook_hold_outcomes_total. */
export const HOLD_OUTCOMES = [
  // Answered at once: not held (--hold-timeout=0, a dry run, settled, not stamped by KubePlus, too old).
  'disabled',
  'dry_run',
  'settled',
  'not_release',
  'too_old',
  // Held, then answered as usual.
  'released',
  'released_not_held',
  'namespace_gone',
  // Refused (the request can be retried).
  'timeout',
  'over_capacity',
  'shutdown',
] as const;
export type HoldOutcome = (typeof HOLD_OUTCOMES)[number];
